// ValueRange statistics and the per-layer records of a probed step.
#include "amp/layer_probe.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/half.h"

namespace ampwb {

ValueRange value_range(const Tensor& host) {
  ValueRange r;
  if (!host.defined()) return r;
  const std::vector<float> values = to_float_vector(host);  // once per probed step: clarity over speed
  int64_t under = 0, over = 0, zeros = 0, nonfinite = 0;
  float max_abs = 0;
  for (float v : values) {
    if (!std::isfinite(v)) {
      ++nonfinite;
      continue;
    }
    const float magnitude = std::fabs(v);
    max_abs = std::max(max_abs, magnitude);
    if (magnitude == 0.0f)
      ++zeros;
    else if (magnitude < kHalfMinSubnormal)
      ++under;
    else if (magnitude > kHalfMax)
      ++over;
  }
  r.count = static_cast<int64_t>(values.size());
  r.max_abs = max_abs;
  if (r.count == 0) return r;  // 0/0 would be NaN, which JSON cannot hold
  const auto fraction = [&](int64_t n) { return static_cast<double>(n) / static_cast<double>(r.count); };
  r.underflow_fraction = fraction(under);
  r.overflow_fraction = fraction(over);
  r.zero_fraction = fraction(zeros);
  r.nonfinite_fraction = fraction(nonfinite);
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
