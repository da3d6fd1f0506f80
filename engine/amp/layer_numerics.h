// Per-layer numerics a run records (for the heat map and the diagnosis): for each convolution, linear and batch-norm
// layer, the range of its output and of its gradients against what FP16 can hold, and the precision it ran in.
// Plain values; the field lists are in train/run_details.h.
#pragma once

#include <cstdint>
#include <string>

namespace ampwb {

// A tensor's values against FP16's range: the largest magnitude, and the fractions that FP16 storage would flush
// to zero (nonzero, below 2^-24), turn into inf (above 65504), that are exactly zero, or already inf/NaN.
// A tensor already stored in FP16 has no value below 2^-24 left (those became zeros): what it shows is the
// fraction below FP16's smallest normal, 2^-14, where its values hold fewer bits and sit at the edge of underflow.
struct ValueRange {
  int64_t count = 0;
  double max_abs = 0;  // of the finite values
  double underflow_fraction = 0, overflow_fraction = 0, zero_fraction = 0, nonfinite_fraction = 0;
  double below_normal_fraction = 0;  // nonzero and below 2^-14: includes the underflow fraction
};

// What the cast of one of a layer's FP8 tensors did on the probed step (amp-fp8's convolutions and linear layers;
// count 0 where the layer has no FP8). The scale came from the amaxes of the steps before (delayed scaling): where
// this step's amax times it passes the format's largest value, values saturate.
struct Fp8TensorNumerics {
  double scale = 0;       // what the cast multiplied by
  double amax = 0;        // max |x| before scaling
  double format_max = 0;  // 448 (E4M3) or 57344 (E5M2)
  int64_t count = 0;
  double saturated_fraction = 0;  // clipped to +-format_max
  double underflow_fraction = 0;  // nonzero, made zero
};

struct LayerNumerics {
  int epoch = 0;
  int64_t step = 0;            // the global step it was measured on
  std::string layer;           // torchvision-style, "layer1.0.conv1"
  std::string kind;            // "conv", "linear" or "batch_norm"
  int64_t in_channels = 0;     // input channels (features for linear)
  int64_t out_channels = 0;    // output channels (features for linear)
  std::string forward_dtype;   // what the op computed in: "f32", "bf16", "f16"
  std::string backward_dtype;  // likewise for its backward
  int64_t casts = 0;           // casts the layer made for this step, forward and backward (a weight copy once the
                               // optimizer writes it in its update's pass is the optimizer's, not counted here)
  double loss_scale = 1;       // the step's loss scale: gradients are as stored, multiplied by it
  ValueRange activation;       // the layer's output
  ValueRange activation_grad;  // the gradient of the loss with respect to that output, as backward received it
  ValueRange weight_grad;      // the gradient of its weight (batch norm: of gamma)
  Fp8TensorNumerics fp8_input, fp8_weight, fp8_output_grad;  // E4M3, E4M3, E5M2
};

}  // namespace ampwb
