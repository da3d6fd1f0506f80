// Gradient histograms.
#include "amp/grad_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/convert16.h"
#include "core/half.h"

namespace ampwb {
namespace {
GradientHistogram empty_histogram(const char* kind) {
  GradientHistogram h;
  h.kind = kind;
  h.counts.assign(static_cast<size_t>(h.max_log2 - h.min_log2 + 1), 0);
  return h;
}

// A host tensor's values as floats in storage order (the histogram does not depend on the order).
std::vector<float> storage_floats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::F32)
    std::memcpy(out.data(), t.data(), out.size() * sizeof(float));
  else if (t.dtype() == DType::F16)
    f16_to_f32(t.data_as<uint16_t>(), out.data(), t.numel());
  else if (t.dtype() == DType::BF16)
    bf16_to_f32(t.data_as<uint16_t>(), out.data(), t.numel());
  else
    out = to_float_vector(t);
  return out;
}
}  // namespace

GradientProbe::GradientProbe(bool histograms)
    : histograms_(histograms), activation_(empty_histogram("activation")), weight_(empty_histogram("weight")) {}

void GradientProbe::add(const Tensor& g, GradientHistogram& h) {
  const std::vector<float> values = storage_floats(g);
  const int bins = static_cast<int>(h.counts.size());
  int64_t under = 0, over = 0;
  for (float v : values) {
    ++h.total;
    if (v == 0.0f) {
      ++h.zeros;
      continue;
    }
    if (std::isnan(v)) {
      ++h.nonfinite;
      continue;
    }
    const float magnitude = std::fabs(v);
    if (std::isinf(magnitude)) {
      ++h.nonfinite;
      ++over;
      continue;
    }
    if (magnitude < kHalfMinSubnormal) ++under;
    if (magnitude > kHalfMax) ++over;
    // The float's exponent is ilogb for normal floats; FP32 subnormals (below 2^-126) land in the first bin anyway.
    const int exponent = static_cast<int>((std::bit_cast<uint32_t>(magnitude) >> 23) & 0xff) - 127;
    const int bin = std::clamp(exponent - h.min_log2, 0, bins - 1);
    ++h.counts[static_cast<size_t>(bin)];
  }
  // Fractions are kept as running counts until take() divides them.
  h.underflow_fraction += static_cast<double>(under);
  h.overflow_fraction += static_cast<double>(over);
}

void GradientProbe::record_weight_gradients(Backend& backend, const std::vector<Tensor*>& grads) {
  if (!histograms_) return;
  for (const Tensor* g : grads) add(on_host(backend, *g), weight_);
}

std::vector<GradientHistogram> GradientProbe::take(int epoch, double loss_scale) {
  std::vector<GradientHistogram> out;
  for (GradientHistogram* h : {&activation_, &weight_}) {
    if (h->total == 0) continue;
    h->epoch = epoch;
    h->loss_scale = loss_scale;
    h->underflow_fraction /= static_cast<double>(h->total);
    h->overflow_fraction /= static_cast<double>(h->total);
    out.push_back(*h);
    *h = empty_histogram(h->kind.c_str());
  }
  return out;
}

}  // namespace ampwb
