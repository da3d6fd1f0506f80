// One mixed-precision training step, the three mechanisms of Micikevicius et al. (2018) together: the per-op
// policy inside the layers, loss scaling around backward, and FP32 master weights around the optimizer.
#pragma once

#include <string>
#include <vector>

#include "amp/grad_stats.h"
#include "amp/loss_scaler.h"
#include "amp/policy.h"
#include "models/resnet.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "train/overflow_forensics.h"

namespace ampwb {

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

 private:
  // Without FP32 master weights, what the optimizer wrote is stored in the low-precision type: round it there.
  void store_in_low_precision(const std::vector<Parameter*>& params);

  Backend& backend_;
  ResNet& model_;
  Optimizer& optimizer_;
  const PrecisionPolicy& policy_;
  LossScaler& scaler_;
  SoftmaxCrossEntropy loss_;
  float grad_clip_norm_;
};

// Rounds an FP32 tensor in place to the values dtype can hold.
void round_to_dtype(Backend& backend, Tensor& t, DType dtype);

}  // namespace ampwb
