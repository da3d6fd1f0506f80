// The op harness's plumbing: the backends under test and what each says it can do, inputs made on the host in a
// case's type, results brought back and compared with the float64 reference through the one tolerance table
// (op_tolerances.h). Set AMPWB_OP_ERRORS=1 to print every comparison's error beside its bound.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "core/half.h"
#include "core/rng.h"
#include "op_tolerances.h"
#include "reference/reference_ops.h"
#ifdef AMPWB_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace ampwb::testing {

// ---- Backends ---------------------------------------------------------------------------------------------------

// The backends this build can test: "cpu" always, "cuda" in a CUDA build (whether or not this machine has a GPU).
inline std::vector<std::string> backend_names() {
#ifdef AMPWB_HAVE_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

// The backend of that name, made once for the whole program (a CUDA backend's caching allocator reuses blocks in
// its own stream's order: one backend per device), or nullptr with the backend's own reason it cannot run here.
inline Backend* backend_for(const std::string& name, std::string& why) {
  struct Made {
    std::unique_ptr<Backend> backend;
    std::string why;
  };
  static std::map<std::string, Made> made;
  auto it = made.find(name);
  if (it == made.end()) {
    Made m;
    try {
      m.backend = make_backend(parse_device(name), {2});  // two threads on the CPU, as the whole suite
    } catch (const Error& e) {
      m.why = e.what();
    }
    it = made.emplace(name, std::move(m)).first;
  }
  why = it->second.why;
  return it->second.backend.get();
}

// What a backend says about computing in p; nullptr for FP32, which every backend computes.
inline const ComputeSupport* compute_support(const Capabilities& caps, Precision p) {
  switch (p) {
    case Precision::TF32:
      return &caps.tf32;
    case Precision::FP16:
      return &caps.fp16;
    case Precision::BF16:
      return &caps.bf16;
    case Precision::FP8:
      return &caps.fp8;
    default:
      return nullptr;
  }
}

// TF32 products on for a scope where the backend has them (CUDA); nothing elsewhere, where the case was skipped.
class Tf32Scope {
 public:
  Tf32Scope(Backend& backend, bool on) {
#ifdef AMPWB_HAVE_CUDA
    cuda_ = on ? dynamic_cast<CudaBackend*>(&backend) : nullptr;
    if (cuda_) cuda_->set_allow_tf32(true);
#else
    (void)backend;
    (void)on;
#endif
  }
  ~Tf32Scope() {
#ifdef AMPWB_HAVE_CUDA
    if (cuda_) cuda_->set_allow_tf32(false);
#endif
  }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
#ifdef AMPWB_HAVE_CUDA
  CudaBackend* cuda_ = nullptr;
#endif
};

// ---- Inputs and outputs ---------------------------------------------------------------------------------------

// v rounded (to nearest even) to a value dtype holds, as a float.
inline float round_to(DType dtype, double v) {
  const float f = static_cast<float>(v);
  return dtype == DType::F16 ? round_to_half(f) : dtype == DType::BF16 ? round_to_bfloat16(f) : f;
}

// A host tensor of normal values (times scale) that dtype holds exactly.
inline Tensor host_random(Shape shape, Rng& rng, DType dtype, Layout layout = Layout::NCHW, double scale = 1.0) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = round_to(dtype, rng.normal() * scale);
  return tensor_from_floats(v, std::move(shape), dtype, layout);
}

// An output on the backend's device filled with NaN, so that an element the op leaves unwritten fails.
inline Tensor device_nan(Backend& backend, Shape shape, DType dtype, Layout layout = Layout::NCHW) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)), std::numeric_limits<float>::quiet_NaN());
  return on_device(backend, tensor_from_floats(v, std::move(shape), dtype, layout));
}

// t's bytes as the backend holds them, brought to the host: for results that must match bit for bit.
inline std::vector<unsigned char> bytes_of(Backend& b, const Tensor& t) {
  const Tensor host = on_host(b, t);
  const auto* p = static_cast<const unsigned char*>(host.data());
  return std::vector<unsigned char>(p, p + host.nbytes());
}

// ---- Comparison -------------------------------------------------------------------------------------------------

struct Comparison {
  double error = 0;   // max|got - want| / max|want| (infinite when an infinity or NaN differs)
  int64_t worst = 0;  // the element of the largest difference
};

// got against want (both logical row-major); exact compares bits, so signed zeros count.
inline Comparison compare(const std::vector<float>& got, const std::vector<float>& want, bool exact) {
  Comparison c;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    double d = 0;
    if (exact) {
      d = std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]) ? 0
                                                                              : std::numeric_limits<double>::infinity();
    } else if (std::isinf(w) || std::isinf(g) || std::isnan(g)) {
      d = g == w ? 0 : std::numeric_limits<double>::infinity();
    } else {
      d = std::fabs(g - w);
      scale = std::max(scale, std::fabs(w));
    }
    if (d > diff || (i == 0 && d == diff)) {
      diff = d;
      c.worst = static_cast<int64_t>(i);
    }
  }
  c.error = diff == 0 ? 0 : std::isinf(diff) ? diff : diff / std::max(scale, 1e-30);
  return c;
}

// The table's row, or a failure saying that a bound is missing.
inline const Tolerance& tolerance_row(Kernel kernel, Precision precision, Result result) {
  const Tolerance* t = find_tolerance(kernel, precision, result);
  if (!t)
    throw std::logic_error(std::string("op_tolerances.h has no row for ") + kernel_name(kernel) + " in " +
                           precision_name(precision) + ": add one, with its reason");
  return *t;
}

inline bool print_errors() {
  static const bool on = std::getenv("AMPWB_OP_ERRORS") != nullptr;
  return on;
}

// A result of the backend (on its device) against the float64 reference rounded to the result's type, within the
// table's bound for (kernel, precision, result).
inline void expect_matches(Backend& backend, const std::string& what, const Tensor& got, const ref::Array& want,
                           Kernel kernel, Precision precision, Result result) {
  const Tolerance& tol = tolerance_row(kernel, precision, result);
  const Tensor host = on_host(backend, got);
  ASSERT_EQ(host.shape(), want.shape) << what;
  const std::vector<float> values = to_float_vector(host);
  std::vector<float> rounded(want.v.size());
  for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = round_to(got.dtype(), want.v[i]);
  const Comparison c = compare(values, rounded, tol.bound == 0);
  if (print_errors())
    std::printf("  %-34s %-5s error %.3g  bound %.3g\n", what.c_str(), dtype_name(got.dtype()), c.error, tol.bound);
  EXPECT_LE(c.error, tol.bound) << what << " (" << kernel_name(kernel) << ", " << precision_name(precision)
                                << ", result " << dtype_name(got.dtype()) << "): element " << c.worst << " is "
                                << values[c.worst] << ", the reference " << want.v[c.worst] << " (rounded "
                                << rounded[c.worst] << "); the bound's reason: " << tol.why;
}

// A number read back through read_scalars(), relative to the reference's magnitude.
inline void expect_scalar(const std::string& what, double got, double want, Kernel kernel, Precision precision) {
  const Tolerance& tol = tolerance_row(kernel, precision, Result::Scalar);
  const double error = std::fabs(got - want) / std::max(std::fabs(want), 1e-300);
  if (print_errors()) std::printf("  %-34s       error %.3g  bound %.3g\n", what.c_str(), error, tol.bound);
  EXPECT_LE(error, tol.bound) << what << ": " << got << " against the reference " << want
                              << "; the bound's reason: " << tol.why;
}

}  // namespace ampwb::testing
