// FP8 tensors' casts with their delayed scaling.
#include "amp/fp8_scaling.h"

#include <cstring>

#include "core/error.h"

namespace ampwb {

Fp8TensorScaling::Fp8TensorScaling(Fp8Format format, const DelayedScalingSettings& settings, bool fp8_storage)
    : scaling_(format, settings),
      storage_(!fp8_storage                ? DType::F32
               : format == Fp8Format::E4M3 ? DType::F8E4M3
                                           : DType::F8E5M2) {}

Tensor Fp8TensorScaling::cast(Backend& backend, const Tensor& x, bool record) {
  settle(backend);
  Tensor q = Tensor::empty(x.shape(), storage_, x.layout(), x.device());
  scale_used_ = scaling_.scale();
  scale_inverse_used_ = scaling_.scale_inverse();
  Tensor none;
  if (record && !stats_.defined())
    stats_ = Tensor::empty({kFp8CastStatsBytes}, DType::U8, Layout::NCHW, backend.device());
  backend.scaled_cast(x, q, {scale_used_, true, scaling_.format()}, record ? stats_ : none);
  pending_ = record;
  return q;
}

void Fp8TensorScaling::settle(Backend& backend) {
  // On the CPU a view of host memory; on a GPU a copy that waits for the cast (and that throws while capturing).
  if (pending_) settle(on_host(backend, stats_));
}

void Fp8TensorScaling::settle(const Tensor& host_stats) {
  if (!pending_) return;
  AMPWB_CHECK(
      host_stats.device().is_cpu() && host_stats.nbytes() == sizeof(Fp8CastStats),
      "an FP8 cast's statistics are " << sizeof(Fp8CastStats) << " bytes on the host, not " << host_stats.describe());
  Fp8CastStats stats;
  std::memcpy(&stats, host_stats.data(), sizeof stats);
  pending_ = false;
  last_ = {scale_used_, stats.amax, stats.count, stats.saturated, stats.underflowed};
  scaling_.record_amax(stats.amax);
  scaling_.update();
}

void Fp8TensorScaling::check_settled() const {
  AMPWB_CHECK(!pending_, "an FP8 cast's amax is read before it is settled (Fp8TensorScaling::settle)");
}

const Fp8CastReport& Fp8TensorScaling::last() const {
  check_settled();
  return last_;
}

DelayedScaling& Fp8TensorScaling::scaling() {
  check_settled();
  return scaling_;
}

const DelayedScaling& Fp8TensorScaling::scaling() const {
  check_settled();
  return scaling_;
}

}  // namespace ampwb
