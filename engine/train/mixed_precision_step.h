// One mixed-precision training step, the three mechanisms of Micikevicius et al. (2018) together: the per-op
// policy inside the layers, loss scaling around backward, and FP32 master weights around the optimizer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/grad_stats.h"
#include "amp/loss_scaler.h"
#include "amp/policy.h"
#include "models/resnet.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "train/gradient_reducer.h"
#include "train/overflow_forensics.h"
#include "train/step_settings.h"

namespace ampwb {

class Fp8TensorScaling;

struct StepResult {
  float loss = 0;        // unscaled, FP32
  int64_t correct = 0;   // top-1 in the batch
  float loss_scale = 1;  // the scale this step used
  bool skipped = false;  // inf/NaN gradients: no update
  float grad_norm = 0;   // of the unscaled gradients, before clipping
  // When skipped: the layers whose gradients held inf/NaN, nearest the loss first, and the finite values' norm
  // (train/overflow_forensics.h).
  NonfiniteGradients overflow;
};

class MixedPrecisionStep {
 public:
  MixedPrecisionStep(Backend& backend, ResNet& model, Optimizer& optimizer, const PrecisionPolicy& policy,
                     LossScaler& scaler, float label_smoothing, float grad_clip_norm);

  // Forward, loss, scaled backward, unscale and check, clip, step or skip, scale update. With a probe, the
  // step's activation and weight gradients are recorded into it. A skipped step also copies its gradients to the
  // host to name the layers that overflowed (train/overflow_forensics.h); a step taken reads the device once.
  StepResult run(const Tensor& images, const Tensor& labels, float lr, GradientProbe* probe = nullptr);

  // The same step queued without waiting for the host: a dynamic loss scale lives on the device, which
  // scales the loss gradient by it, skips the update on an overflow and updates it; the step's numbers are posted
  // (Backend::post_scalars) and read after the next step is queued. Returns the previous deferred step's result, if
  // one waits; what run() would have returned, but that a skipped step names no layers (its gradients are gone when
  // the host learns of it): bit for bit on the CPU (test_placement); on a GPU, whose weight-gradient algorithms may
  // sum with atomics, the same skips and scales and losses within 1e-3 (test_cuda_training). Not with a probe.
  std::optional<StepResult> run_deferred(const Tensor& images, const Tensor& labels, float lr);
  // The last deferred step's result, if one waits: before run(), a checkpoint, the end of an epoch.
  std::optional<StepResult> finish_deferred();
  // Why these settings need the host at every step (run_deferred() refuses them); empty when they do not.
  std::string why_not_deferred() const;

  // Deferred steps as captured work (Backend::capture, a CUDA graph): once a batch shape has run kEagerSteps
  // steps (cuDNN chooses its algorithms in the first), its step is captured and then replayed, the batch copied
  // into the capture's own input tensors and lr written where the optimizer reads it. At most kMaxCaptures shapes;
  // other shapes, and every step where the backend cannot capture, run op by op. The same steps as op by op, held as
  // run_deferred()'s are (CudaCapturedSteps: skips, scales, losses within 1e-3).
  void set_capture(bool on) { capture_ = on; }
  // Why deferred steps run op by op although capture was asked for (the backend's reason); empty when they do not.
  const std::string& why_not_captured() const { return why_not_captured_; }
  int64_t replayed_steps() const { return replayed_; }
  static constexpr int kEagerSteps = 2, kMaxCaptures = 2;

  // Data-parallel training: each step's gradients are averaged over the ranks (nullptr: one process), each bucket's
  // all-reduce started as backward leaves its last layer where `overlap` (not where the layers make collectives of
  // their own during backward, as batch norm synchronised over the ranks: every rank must call them in one order),
  // else after backward; the step waits for the last before the loss scaler's check. The steps then run
  // every-step, the gradients in FP32. Throws SettingError for an FP16 all-reduce without a dynamic loss scale,
  // which alone skips a step whose gradients overflowed FP16's range.
  void set_gradient_reducer(GradientReducer* reducer, bool overlap = true);

 private:
  // Without FP32 master weights, what the optimizer wrote is stored in the low-precision type: round it there.
  void store_in_low_precision(const std::vector<Parameter*>& params);
  StepResult collect_deferred();
  // The model's backward from the loss, and with a reducer the gradients' mean over the ranks; with
  // low_grads_for_update, 16-bit weight gradients stay 16-bit for the update to read (Parameter::low_grad). Either
  // way, no parameter keeps an earlier step's low_grad.
  void backward_gradients(bool low_grads_for_update);
  // A deferred step's device work: forward, loss, backward, unscale and check, the update (reading lr and the step
  // from step_values where given) and, with the scale on the device, its state copied for the posting and updated.
  void queue_deferred(const Tensor& images, const Tensor& labels, float lr, const Tensor* step_values);
  // The step replayed, or captured and replayed; false where it must run op by op.
  bool replay_deferred(const Tensor& images, const Tensor& labels, float lr);
  // amp-fp8: the scalings of the step's recorded FP8 casts updated where the backend computes, in one op at the
  // step's end (Backend::update_fp8_scalings).
  void update_fp8_scalings();
  std::vector<Fp8TensorScaling*> fp8_tensors();  // amp-fp8's scalings of the model's FP8 layers; none elsewhere

  Backend& backend_;
  ResNet& model_;
  Optimizer& optimizer_;
  const PrecisionPolicy& policy_;
  LossScaler& scaler_;
  SoftmaxCrossEntropy loss_;
  float grad_clip_norm_;
  bool updates_read_16bit_gradients_;  // the backend's capability, asked once
  GradientReducer* reducer_ = nullptr;
  bool overlap_ = true;
  // run_deferred() with a dynamic scale: LossScaleState on the device, at one address for every capture; and its
  // copy before the update, for the posting. state_current_: the host scaler has not moved on since (run()).
  Tensor loss_scale_state_, posted_state_;
  bool state_current_ = false;
  int posted_ = 0;  // deferred steps not yet collected

  struct Captured {
    Tensor images, labels;  // the capture's inputs on the device, each step's batch copied in
    std::unique_ptr<CapturedWork> work;
  };
  bool capture_ = false;
  std::vector<Captured> captures_;
  std::vector<std::pair<Shape, int>> eager_steps_;  // deferred steps run op by op, per batch shape
  Tensor step_values_;                              // OptimizerStep on the device, for the captures
  std::string why_not_captured_;
  int64_t replayed_ = 0;
};

// How a run's or a benchmark's steps go, from the settings --host-sync and --cuda-graphs (TrainConfig):
// deferred where asked or, with auto, on a GPU where the settings allow; captured where asked or, with auto, where
// the steps are deferred on a GPU (on a CPU there is nothing to capture). Throws, naming the reason, where the
// settings ask for what this step cannot do.
struct StepPlan {
  bool deferred = false;
  bool captured = false;
};
StepPlan plan_steps(const MixedPrecisionStep& step, const Device& device, HostSync host_sync, CudaGraphs cuda_graphs);

// Rounds an FP32 tensor in place to the values dtype can hold.
void round_to_dtype(Backend& backend, Tensor& t, DType dtype);

}  // namespace ampwb
