// Measures a run's precision divergence (amp/precision_divergence.h): from one model's weights and buffers and one
// batch, a training step's forward, loss and backward in the run's precision policy and one in FP32, each on its
// own copy of the model, compared layer by layer. The run's model (weights, batch-norm running statistics, its
// low-precision weight copies) and its optimizer are not touched: no update is applied.
#pragma once

#include <cstdint>

#include "amp/policy.h"
#include "amp/precision_divergence.h"
#include "backend/backend.h"
#include "models/resnet.h"

namespace ampwb {

struct DivergenceOptions {
  float loss_scale = 1;       // the mode's step's loss scale (the run's current one); FP32's step uses none
  float label_smoothing = 0;  // the run's
  // Both steps compute on the batch's first max_samples images: the FP32 step's activations and gradients are kept
  // on the host until the mode's step has been compared with them, about twice the activations of a training step
  // of that many images.
  int64_t max_samples = 16;
};

// The mode's step against FP32's. images (N,C,H,W) and labels (N) anywhere (host or the backend's device), N >= 2.
// An FP32 policy compares FP32 with itself: every error is 0 and no layer is named (unit_roundoff is 0). The TF32
// mode is refused: it differs from FP32 in the backend's math, not in the policy's dtypes, so both steps here would
// compute alike.
PrecisionDivergence measure_divergence(Backend& backend, ResNet& model, const PrecisionPolicy& policy,
                                       const Tensor& images, const Tensor& labels, const DivergenceOptions& options);

}  // namespace ampwb
