// Helpers for tests that compare with the float64 reference outside the op harness (layers, models, AMP); their
// bounds come from the one tolerance table, op_tolerances.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/rng.h"
#include "op_tolerances.h"
#include "reference/reference_ops.h"

namespace ampwb::testing {

inline Tensor random_tensor(Shape shape, Rng& rng, Layout layout = Layout::NCHW, double scale = 1.0) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = static_cast<float>(rng.normal() * scale);
  return tensor_from_floats(v, std::move(shape), DType::F32, layout);
}

// An output tensor filled with NaN, so an op that leaves any element unwritten fails its comparison.
inline Tensor empty_f32(Shape shape, Layout layout = Layout::NCHW) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32, layout);
  std::fill_n(t.data_as<float>(), t.numel(), std::numeric_limits<float>::quiet_NaN());
  return t;
}

// max |actual - expected| / max |expected|: a relative error that near-zero entries cannot inflate.
inline double relative_error(const ref::Array& actual, const ref::Array& expected) {
  EXPECT_EQ(actual.shape, expected.shape);
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < expected.v.size(); ++i) {
    const double d = std::fabs(actual.v[i] - expected.v[i]);
    diff = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(diff, d);
    scale = std::max(scale, std::fabs(expected.v[i]));
  }
  return diff / scale;
}

inline double relative_error(const Tensor& actual, const ref::Array& expected) {
  return relative_error(ref::from_tensor(actual), expected);
}

}  // namespace ampwb::testing
