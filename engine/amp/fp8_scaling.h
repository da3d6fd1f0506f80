// FP8 training's per-tensor scaling in a layer (amp-fp8): for each of a convolution's or linear layer's three FP8
// tensors (its input and weight in E4M3, its output gradient in E5M2) a delayed scaling (core/delayed_scaling.h) and
// the cast that uses it, through the backend's scaled_cast. The cast's FP8 values are held in FP8 storage where the
// backend computes in FP8 (Capabilities::fp8.native: a GPU's FP8 tensor cores), else in FP32, where the layer's FP32
// convolution or product multiplies them exactly; either way the products accumulate in FP32, and the result times
// the two scale-inverses is Transformer Engine's FP8 GEMM.
//
// The scaling lives where the backend computes (its state, core/delayed_scaling.h's device layout), as Transformer
// Engine keeps it on the GPU: a cast reads its scale there, the layers' ops read the scale-inverses there
// (Fp8Factor), and the step's end updates every scaling in one op (update_fp8_scalings), so that no step waits for
// the host and a GPU's steps can be captured. Each training cast records its amax; its update comes before the
// tensor's next recorded cast at the latest, so the next step's cast uses the scale it gave (Transformer Engine's
// update after the step, there being one cast of each tensor per step). Casts in evaluation record nothing and
// queue nothing: between a layer's forward and its backward only the layer's next training forward, which the
// backward then belongs to, can change the scale-inverses the backward reads. The host reads the scaling (the
// numerics records, checkpoints) with fetch(), which waits for the device.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

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
  // fp8_storage: the casts' values in the format's own dtype (F8E4M3, F8E5M2), else in FP32. The state starts on
  // the backend's device at scale 1 with an empty history, as DelayedScaling does.
  Fp8TensorScaling(Backend& backend, Fp8Format format, const DelayedScalingSettings& settings, bool fp8_storage);

  // x (any floating dtype) times the scale, rounded to the format with saturation, as a tensor of x's shape and
  // layout in the storage dtype. record: a training step's cast, whose amax joins the history and updates the scale
  // for the next when its update is queued; a recorded cast still waiting for its update has it queued first, so
  // that this one uses the scale it gave.
  Tensor cast(Backend& backend, const Tensor& x, bool record);
  // The update a recorded cast waits for, for Backend::update_fp8_scalings, and from then on none waits; nothing
  // where none waits.
  std::optional<Fp8ScalingUpdate> take_update();
  // The recorded cast waiting for its update never ran (a step's capture that failed: its recordings ran nothing).
  void forget_update() { pending_ = false; }
  // The state where the backend computes (F32, core/delayed_scaling.h's layout): what the layers' ops read the
  // scale-inverses from (Fp8Factor::inverses_of), as they are when the ops run.
  const Tensor& state() const { return state_; }
  Fp8Format format() const { return format_; }

  // The host's copy of the state and of the last recorded cast's statistics, read back (waits for the device),
  // whether or not the cast's update has come (a probe reads a cast in the middle of its step).
  void fetch(Backend& backend) { fetch_all(backend, {this}); }
  static void fetch_all(Backend& backend, const std::vector<Fp8TensorScaling*>& scalings);  // with one wait
  // As of the last fetch() (or restore()); scaling() throws where a recorded cast's update waits.
  const Fp8CastReport& last() const { return last_; }
  const DelayedScaling& scaling() const;
  // Continues from a checkpoint's state (its history and scale): written to the backend's device.
  void restore(Backend& backend, const DelayedScalingState& state);

 private:
  Fp8Format format_;
  DelayedScalingSettings settings_;
  DType storage_;
  Tensor state_;  // F32 on the backend's device
  Tensor stats_;  // kFp8CastStatsBytes U8 on the backend's device, made by the first recorded cast
  bool cast_recorded_ = false;  // stats_ holds a recorded cast's statistics (none since the start or a restore)
  bool pending_ = false;        // a recorded cast whose update is not queued yet
  DelayedScaling host_;         // as last fetched
  Fp8CastReport last_;
  std::vector<Tensor> fetch_tensors() const;
  void fetched(const Tensor* host_state, const Tensor* host_stats);
};

// A layer's three FP8 tensors: the output gradient in E5M2, or E4M3 as the others where the settings say; in FP8
// storage where the backend computes in FP8.
struct Fp8LayerScaling {
  Fp8LayerScaling(Backend& backend, const Fp8Config& config, bool fp8_storage)
      : input(backend, Fp8Format::E4M3, config.scaling, fp8_storage),
        weight(backend, Fp8Format::E4M3, config.scaling, fp8_storage),
        output_grad(backend, config.gradient_format(), config.scaling, fp8_storage) {}
  // The three fetched with one wait.
  void fetch(Backend& backend) { Fp8TensorScaling::fetch_all(backend, {&input, &weight, &output_grad}); }
  std::array<Fp8TensorScaling*, 3> tensors() { return {&input, &weight, &output_grad}; }
  Fp8TensorScaling input, weight, output_grad;
};

}  // namespace ampwb
