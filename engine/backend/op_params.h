// The parameters and results of the backend's ops (backend_ops.def): convolution and pooling geometry, the
// optimizers' updates, the loss scaler's state where the step runs, and the few scalars a step hands the host.
#pragma once

#include <cstdint>
#include <vector>

#include "core/delayed_scaling.h"
#include "core/fp8.h"
#include "core/tensor.h"

namespace ampwb {

struct ConvParams {
  int stride = 1, padding = 0;
};
struct PoolParams {
  int kernel = 3, stride = 2, padding = 1;
};
// What an optimizer's update changes from one step to the next, where the step runs (a backend tensor of
// kOptimizerStepBytes U8 holding this struct): given one, an update reads lr and Adam's step there, not from its
// parameters, so that a captured step (Backend::capture) replays with the values of each step, not of its capture.
struct OptimizerStep {
  float lr = 0;
  int32_t unused = 0;
  int64_t step = 0;  // AdamParams::step
};
inline constexpr int64_t kOptimizerStepBytes = sizeof(OptimizerStep);

struct SgdParams {
  float lr, momentum, weight_decay;
  bool nesterov, first_step;
  const Tensor* skip_if_found_inf = nullptr;  // a LossScaleState: its found_inf set, the update changes nothing
  const Tensor* step_values = nullptr;        // an OptimizerStep: lr from there
  bool check_gradients = false;               // also what scale_and_check(grads, 1) finds, in the same pass
};
// One parameter's tensors for an update: param FP32, the master weights; copy undefined, or param's FP16/BF16
// compute copy (same shape and layout), written from the updated param in the same pass, bit for bit as convert()
// would; grad FP32, or FP16/BF16 where Capabilities::updates_read_16bit_gradients (its values, widened as read);
// state1, state2: the optimizer's state (SGD: the momentum buffer, undefined without momentum; Adam: the first and
// second moments).
struct ParamUpdate {
  Tensor param, copy, grad, state1, state2;
};
struct AdamParams {
  float lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;
  // PyTorch's Adam counts only the steps it takes (1 on the first). With skip_if_found_inf the host cannot know
  // which were: step then counts the steps queued since the state was made, taken or not, plus those taken before,
  // and the update's count is step less the state's skipped_steps.
  int64_t step;
  const Tensor* skip_if_found_inf = nullptr;  // as SgdParams'
  const Tensor* step_values = nullptr;        // an OptimizerStep: lr and step from there
  bool check_gradients = false;               // as SgdParams'
};
// The few numbers the host needs from a training step, left on the device by the ops that make them and read back
// together (Backend::read_scalars), so a step waits for its device at most once.
struct StepScalars {
  double loss = 0;            // softmax_cross_entropy: the mean loss over the batch
  int64_t correct = 0;        // softmax_cross_entropy: samples whose label has the largest logit (ties count against)
  bool nonfinite = false;     // scale_and_check: an inf/NaN among its inputs
  double sum_of_squares = 0;  // scale_and_check: of the results
};

// The dynamic loss scaler's state where the step runs, so that skipping a step and updating the scale need no
// host round trip on a GPU: PyTorch GradScaler's FP32 scale and int32 growth tracker, and the step's
// found-inf flag. A backend tensor of kLossScaleStateBytes U8 holding this struct (a copy to the host reads it).
struct LossScaleState {
  float scale = 65536.0f;
  int32_t growth_tracker = 0;
  float found_inf = 0.0f;     // 1: unscale_and_check saw an inf/NaN; an update given this state then skips
  int32_t skipped_steps = 0;  // counted by update_loss_scale: the steps found_inf skipped (Adam's count)
};
inline constexpr int64_t kLossScaleStateBytes = sizeof(LossScaleState);
struct LossScaleGrowth {  // GradScaler's defaults
  double growth_factor = 2.0, backoff_factor = 0.5;
  int32_t growth_interval = 2000;
};
// What a loss gradient is multiplied by (loss scaling): factor, times the scale of a LossScaleState where one is
// given, read where the state lives (no host round trip for a scale that changes on the device).
struct GradScale {
  GradScale(float f = 1.0f) : factor(f) {}                                 // NOLINT: a plain factor converts
  GradScale(const Tensor& loss_scale_state) : state(&loss_scale_state) {}  // NOLINT
  float factor = 1.0f;
  const Tensor* state = nullptr;
};
// A step's scalars on their way to the host (Backend::post_scalars): what read_scalars() would have returned then,
// and the loss-scale state as it was, where one was posted.
struct PostedScalars {
  StepScalars scalars;
  LossScaleState loss_scale;
  bool has_loss_scale = false;
};

// A factor of amp-fp8's ops: value, or a product read from FP8 scalings' states (F32 on the op's device, laid out as
// core/delayed_scaling.h's kFp8State*) where the op runs, so that a captured step replays with each step's scales:
// ((value * the scale-inverse of inverses[0]) * that of inverses[1]) * the scale of `scale`, over those given, in
// FP32 in that order; its reciprocal where `reciprocal`.
struct Fp8Factor {
  Fp8Factor(float v = 1.0f) : value(v) {}  // NOLINT: a plain factor converts
  static Fp8Factor scale_of(const Tensor& state);
  static Fp8Factor inverses_of(const Tensor& a, const Tensor* b = nullptr);
  float value = 1.0f;
  const Tensor* inverses[2] = {nullptr, nullptr};
  const Tensor* scale = nullptr;
  bool reciprocal = false;
  bool by_value() const { return !inverses[0] && !inverses[1] && !scale; }
  // Its value, the states read where they are: host memory (a CPU backend's, or a copy).
  float on_host() const;
};

// scaled_cast's parameters: y = x * scale (one FP32 product), rounded to `format` (saturating, nearest even) where
// to_fp8 is set and held in y's dtype (every FP8 value is exact in FP32, FP16 and BF16), else rounded to y's dtype
// alone (an FP8 product's scale-inverses applied on its way out).
struct ScaledCast {
  Fp8Factor scale;
  bool to_fp8 = false;
  Fp8Format format = Fp8Format::E4M3;
};

// One FP8 tensor's delayed scaling at the end of a step (update_fp8_scalings): the amax its recorded cast left in
// stats (kFp8CastStatsBytes U8) joins the history in state, which gives the next scale (update_device_state).
struct Fp8ScalingUpdate {
  Tensor* state = nullptr;
  const Tensor* stats = nullptr;
  float scaled_max = 448.0f;  // the format's largest value times 2^-margin
  AmaxRule rule = AmaxRule::Max;
};
// What scaled_cast saw of x, where it was given a stats tensor (kFp8CastStatsBytes U8 holding this struct, read on
// the host with a copy): Transformer Engine's amax, and the shares FP8 lost at either end.
struct Fp8CastStats {
  float amax = 0;  // max |x| before scaling (NaN passed over, as fmaxf does; an inf kept)
  int32_t unused = 0;
  int64_t count = 0;        // elements cast
  int64_t saturated = 0;    // |x * scale| rounding past the format's max (inf included): clipped (fp8_clips)
  int64_t underflowed = 0;  // x nonzero and its FP8 value zero
};
inline constexpr int64_t kFp8CastStatsBytes = sizeof(Fp8CastStats);

}  // namespace ampwb
