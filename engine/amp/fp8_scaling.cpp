// FP8 tensors' casts with their delayed scaling.
#include "amp/fp8_scaling.h"

#include <cstring>

namespace ampwb {

Fp8TensorScaling::Fp8TensorScaling(Fp8Format format, const DelayedScalingSettings& settings, bool fp8_storage)
    : scaling_(format, settings),
      storage_(!fp8_storage                ? DType::F32
               : format == Fp8Format::E4M3 ? DType::F8E4M3
                                           : DType::F8E5M2) {}

Tensor Fp8TensorScaling::cast(Backend& backend, const Tensor& x, bool record) {
  Tensor q = Tensor::empty(x.shape(), storage_, x.layout(), x.device());
  const float scale = scaling_.scale();
  scale_inverse_used_ = scaling_.scale_inverse();
  Tensor none;
  if (record && !stats_.defined())
    stats_ = Tensor::empty({kFp8CastStatsBytes}, DType::U8, Layout::NCHW, backend.device());
  backend.scaled_cast(x, q, {scale, true, scaling_.format()}, record ? stats_ : none);
  if (record) {
    // On the CPU a view of host memory; on a GPU a copy that waits for the cast.
    Fp8CastStats stats;
    std::memcpy(&stats, on_host(backend, stats_).data(), sizeof stats);
    last_ = {scale, stats.amax, stats.count, stats.saturated, stats.underflowed};
    scaling_.record_amax(stats.amax);
    scaling_.update();
  }
  return q;
}

}  // namespace ampwb
