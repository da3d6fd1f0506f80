// ValueRange statistics and the per-layer records of a probed step.
#include "amp/layer_probe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/convert16.h"
#include "core/error.h"
#include "core/half.h"

namespace ampwb {

namespace {

struct Counts {
  int64_t under = 0, below_normal = 0, over = 0, zeros = 0, nonfinite = 0;
  float max_abs = 0;

  // Branch-free, so that the compiler vectorizes it: a probed step scans every activation and gradient.
  void add(const float* v, int64_t n) {
    int64_t u = 0, bn = 0, o = 0, z = 0, nf = 0;
    float m = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float a = std::fabs(v[i]);
      const bool finite = a <= std::numeric_limits<float>::max();  // false for inf and NaN
      nf += !finite;
      m = std::max(m, finite ? a : 0.0f);
      z += a == 0.0f;
      u += (a > 0.0f) & (a < kHalfMinSubnormal);
      bn += (a > 0.0f) & (a < kHalfMinNormal);
      o += finite & (a > kHalfMax);
    }
    under += u;
    below_normal += bn;
    over += o;
    zeros += z;
    nonfinite += nf;
    max_abs = std::max(max_abs, m);
  }
};

}  // namespace

ValueRange value_range(const Tensor& host) {
  ValueRange r;
  if (!host.defined()) return r;
  AMPWB_CHECK(host.device().is_cpu(), "value_range of a " << host.device().str() << " tensor: copy it to the host");
  // The statistics do not depend on the order: the storage is scanned as it lies, whatever the layout.
  const int64_t n = host.numel();
  Counts c;
  if (host.dtype() == DType::F32) {
    c.add(host.data_as<float>(), n);
  } else {
    AMPWB_CHECK(is_16bit(host.dtype()), "value_range of a " << dtype_name(host.dtype()) << " tensor");
    constexpr int64_t kChunk = 4096;
    std::vector<float> chunk(static_cast<size_t>(std::min(n, kChunk)));
    const uint16_t* bits = host.data_as<uint16_t>();
    for (int64_t at = 0; at < n; at += kChunk) {
      const int64_t len = std::min(kChunk, n - at);
      if (host.dtype() == DType::F16)
        f16_to_f32(bits + at, chunk.data(), len);
      else
        bf16_to_f32(bits + at, chunk.data(), len);
      c.add(chunk.data(), len);
    }
  }
  r.count = n;
  r.max_abs = c.max_abs;
  if (n == 0) return r;  // 0/0 would be NaN, which JSON cannot hold
  const auto fraction = [&](int64_t k) { return static_cast<double>(k) / static_cast<double>(n); };
  r.underflow_fraction = fraction(c.under);
  r.below_normal_fraction = fraction(c.below_normal);
  r.overflow_fraction = fraction(c.over);
  r.zero_fraction = fraction(c.zeros);
  r.nonfinite_fraction = fraction(c.nonfinite);
  return r;
}

size_t LayerProbe::open(LayerNumerics record) {
  records_.push_back(std::move(record));
  return records_.size() - 1;
}

std::vector<LayerNumerics> LayerProbe::take(int epoch, int64_t step, double loss_scale) {
  for (LayerNumerics& n : records_) {
    n.epoch = epoch;
    n.step = step;
    n.loss_scale = loss_scale;
  }
  return std::exchange(records_, {});
}

}  // namespace ampwb
