// The precision divergence of a run (after Paddle's compare_accuracy): from the same weights and batch,
// one training step in the run's precision mode against one in FP32, compared layer by layer, so that the first
// layer where the mode departs from FP32 is named. Plain values and the rule that names the layers; the two steps
// themselves are taken by train/divergence_step.h. The field lists are in train/run_details.h.
//
// The rule. Let u be the unit roundoff of the mode's low-precision format (BF16 2^-8, FP16 and TF32 2^-11): one
// rounding to that format moves a value by at most u relatively, and a layer that only rounds its inputs and its
// output stays within about one u of FP32 (relative L2 error of the whole activation). Errors then accumulate
// through depth.
//   - The first departing layer is the first layer in forward order whose output activation's relative error
//     exceeds kDepartureUnits * u, or whose output holds inf/NaN where FP32 does not: from there on, the mode
//     computes something measurably other than FP32, not FP32 plus rounding.
//   - The layer of largest growth is the one whose activation error is the largest multiple of its input's, taken
//     as the error of the layer before it in forward order (relu, residual adds and pooling between them are not
//     measured), and at least u: the stem's input is exact in FP32 and only rounded on the way in. It names where
//     the error is amplified rather than where it crosses the line.
// An FP32 run has no divergence: it is its own reference (nothing is measured, no zero is made up).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "amp/precision.h"

namespace ampwb {

// A few roundings: the line between "FP32 plus rounding" and "departed".
inline constexpr double kDepartureUnits = 4;

// The unit roundoff of a mode's low-precision format: BF16 2^-8, FP16 and TF32 2^-11; 0 for FP32 (no rounding).
double unit_roundoff(NumberFormat format);

// One tensor of the mode's step against the same tensor of the FP32 step, gradients unscaled on both sides.
struct TensorDivergence {
  double relative_error = 0;  // ||mode - fp32|| / ||fp32|| (L2, in double); 0 when not measured
  double reference_norm = 0;  // ||fp32||: when 0 the relative error is not defined
  int64_t nonfinite = 0;      // inf/NaN values in the mode's tensor where FP32's are finite: then not measured
  double norm = -1;           // ||mode|| over its finite values (all zero: 0); -1: not recorded

  bool measured() const { return nonfinite == 0 && reference_norm > 0; }
};

// Relative error of `values` against `reference` (same length, same order), values divided by `scale` first (a
// loss scale), the norms accumulated in double.
TensorDivergence compare_values(const float* values, double scale, const float* reference, int64_t count);

struct LayerDivergence {
  std::string layer;                 // torchvision-style, "layer1.0.conv1"
  std::string kind;                  // "conv", "linear" or "batch_norm"
  std::string forward_dtype;         // what the mode computed its output in
  TensorDivergence activation;       // its output
  TensorDivergence activation_grad;  // the gradient of the loss with respect to its output, as backward received it
  TensorDivergence weight_grad;      // of its weight (batch norm: gamma)
};

struct PrecisionDivergence {
  int epoch = 0;                        // measured after this epoch
  int64_t step = 0;                     // from the weights after this many steps
  std::string mode;                     // the run's precision mode, "amp-bf16"
  std::string format;                   // its low-precision format, "bf16"
  int64_t samples = 0;                  // images in the batch both steps computed on
  double loss_scale = 1;                // the mode's step's loss scale (its gradients divided by it)
  double unit_roundoff = 0;             // u of the format
  double threshold = 0;                 // kDepartureUnits * u
  TensorDivergence loss;                // the mode's loss against FP32's (one value)
  std::vector<LayerDivergence> layers;  // every conv, linear and batch-norm layer, in forward order
  // Named by find_departures (the rule above); empty when no layer qualifies.
  std::string first_departing;
  std::string largest_growth;
  double largest_growth_factor = 0;  // its activation error over its input's
};

// Fills first_departing, largest_growth and largest_growth_factor from the layers (the rule above).
void find_departures(PrecisionDivergence& d);

// One sentence naming where the mode departs: "amp-bf16 departs from FP32 first at layer2.0.conv1 (...)".
std::string divergence_sentence(const PrecisionDivergence& d);

// "2.3e-03", or what stands in for a value not measured ("inf/NaN", "-" for a zero reference): tables and reports.
std::string relative_error_text(const TensorDivergence& t);

}  // namespace ampwb
