// FP8 training's per-tensor scaling in a layer (amp-fp8): for each of a convolution's or linear layer's three FP8
// tensors (its input and weight in E4M3, its output gradient in E5M2) a delayed scaling (core/delayed_scaling.h) and
// the cast that uses it, through the backend's scaled_cast. The cast's FP8 values are held in FP8 storage where the
// backend computes in FP8 (Capabilities::fp8.native: a GPU's FP8 tensor cores), else in FP32, where the layer's FP32
// convolution or product multiplies them exactly; either way the products accumulate in FP32, and the result times
// the two scale-inverses is Transformer Engine's FP8 GEMM.
//
// The scale of a cast is the one the amaxes of the steps before gave: each training cast records its amax, and the
// scaling takes it when settled, before the tensor's next cast at the latest, so the next step's cast uses it (the
// same as Transformer Engine's update after the step, there being one cast of each tensor per step). A step settles
// its casts at its end (MixedPrecisionStep), so that on a GPU they wait for the device once there rather than each
// in the middle of the step. Casts in evaluation record nothing.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "amp/policy.h"
#include "backend/backend.h"
#include "core/delayed_scaling.h"

namespace ampwb {

// What the last cast of one FP8 tensor did, for the numerics records and charts.
struct Fp8CastReport {
  float scale = 1.0f;  // the scale the cast multiplied by
  float amax = 0.0f;   // max |x| before scaling
  int64_t count = 0;
  int64_t saturated = 0, underflowed = 0;  // elements clipped to +-max, nonzero elements made zero
  double saturated_share() const { return count ? static_cast<double>(saturated) / count : 0.0; }
  double underflowed_share() const { return count ? static_cast<double>(underflowed) / count : 0.0; }
};

class Fp8TensorScaling {
 public:
  // fp8_storage: the casts' values in the format's own dtype (F8E4M3, F8E5M2), else in FP32.
  Fp8TensorScaling(Fp8Format format, const DelayedScalingSettings& settings, bool fp8_storage);

  // x (any floating dtype) times the scale, rounded to the format with saturation, as a tensor of x's shape and
  // layout in the storage dtype. record: a training step's cast, whose amax joins the history and updates the scale
  // for the next when settled. The last recorded cast is settled first.
  Tensor cast(Backend& backend, const Tensor& x, bool record);
  // The last recorded cast's amax and counts read from the backend's device, the scaling updated with them; nothing
  // where none waits.
  void settle(Backend& backend);
  // For reading many casts' statistics with one wait (Backend::download): those of the cast waiting to be settled
  // (kFp8CastStatsBytes U8 on the device), or null; and settle() with them read.
  const Tensor* pending_stats() const { return pending_ ? &stats_ : nullptr; }
  void settle(const Tensor& host_stats);
  // The reciprocal of the scale the last cast used: what its FP8 values are multiplied by to stand for x.
  float scale_inverse_used() const { return scale_inverse_used_; }
  Fp8Format format() const { return scaling_.format(); }
  // These three throw where a recorded cast is not settled yet.
  const Fp8CastReport& last() const;
  DelayedScaling& scaling();
  const DelayedScaling& scaling() const;

 private:
  DelayedScaling scaling_;
  DType storage_;
  float scale_inverse_used_ = 1.0f;
  Fp8CastReport last_;
  Tensor stats_;  // kFp8CastStatsBytes U8 on the backend's device, made by the first recorded cast
  float scale_used_ = 1.0f;
  bool pending_ = false;  // a recorded cast whose stats_ the scaling has not taken yet
  void check_settled() const;
};

// A layer's three FP8 tensors: the output gradient in E5M2, or E4M3 as the others where the settings say; in FP8
// storage where the backend computes in FP8.
struct Fp8LayerScaling {
  Fp8LayerScaling(const Fp8Config& config, bool fp8_storage)
      : input(Fp8Format::E4M3, config.scaling, fp8_storage),
        weight(Fp8Format::E4M3, config.scaling, fp8_storage),
        output_grad(config.gradient_format(), config.scaling, fp8_storage) {}
  void settle(Backend& backend) {
    for (Fp8TensorScaling* t : tensors()) t->settle(backend);
  }
  std::array<Fp8TensorScaling*, 3> tensors() { return {&input, &weight, &output_grad}; }
  Fp8TensorScaling input, weight, output_grad;
};

}  // namespace ampwb
