// A run's per-layer numerics as the layers x epochs grid that `ampwb show` prints and the GUI's heat map paints,
// and the "precision per op" totals of a step: one reading of the records for both.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "train/run_details.h"

namespace ampwb {

struct NumericsGrid {
  std::vector<std::string> layers;  // in model (forward) order
  std::vector<int> epochs;          // ascending
  std::vector<int64_t> steps;       // per epoch: its last probed step, whose records the cells hold
  std::vector<std::vector<std::optional<LayerNumerics>>> cells;  // [layer][epoch]; empty where not measured
};

// The grid of the last probed step of each epoch; records may come in any order.
NumericsGrid numerics_grid(const std::vector<LayerNumerics>& records);

// What the grid's cells can show, each a number for a colour: the heat map's selector and the CLI's tables.
enum class NumericsMeasure {
  ActivationHeadroom,
  ActivationGradUnderflow,
  ActivationGradBelowNormal,  // what a gradient stored in FP16 shows: its underflowed values are zeros already
  WeightGradUnderflow,
  Fp8Saturated,  // amp-fp8: the largest share of the layer's three FP8 tensors clipped to the format's largest value
  Fp8Underflow   // amp-fp8: the largest share of their nonzero values made zero
};
const char* numerics_measure_name(NumericsMeasure m);  // "activation headroom", ...
// Activation headroom: log2(65504 / max |activation|), the powers of two left before FP16 overflows (negative:
// beyond FP16); +inf when every value is zero. The others: fractions in [0, 1]; the FP8 ones NaN for a layer without
// FP8 tensors.
double numerics_measure(const LayerNumerics& n, NumericsMeasure m);

// "Precision per op" (Paddle's operator statistics): per layer kind, how many layers ran forward and backward in
// each dtype, and the casts they made, over one step's records.
struct OpPrecision {
  int layers = 0;
  std::map<std::string, int> forward, backward;  // dtype name -> layers
  int64_t casts = 0;
};
std::map<std::string, OpPrecision> precision_per_op(const std::vector<LayerNumerics>& step_records);

// Whether any layer's backward stored its gradients in FP16 (amp-fp16, fp16-o2, fp16-pure): those gradients lost their
// values below 2^-24 before they could be measured, so their underflow reads 0 and the below-normal share is the
// measure.
bool gradients_stored_in_fp16(const std::vector<LayerNumerics>& records);

// An FP8 tensor clipping this share of its values or more clips more than delayed scaling does on the step a new
// maximum arrives (a few values, once): its scale is behind a growing amax. The share explain warns of and the heat
// map opens on.
constexpr double kFp8ClippedShareOfNote = 1e-3;

// The records of the last probed step (records in step order, as the store gives them).
std::vector<const LayerNumerics*> last_probed_layers(const std::vector<LayerNumerics>& records);

// Whether any layer cast tensors to FP8 (amp-fp8).
bool has_fp8_layers(const std::vector<LayerNumerics>& records);

// One FP8 tensor of one probed step, as `show` and the report list them: its scale, the amax it was cast with, and
// how much of the format that filled (amax x scale / the format's max: over 1 saturates, its scale lagging its amax).
struct Fp8TensorRow {
  std::string layer;
  const char* tensor = "";  // "input", "weight" or "output gradient"
  Fp8TensorNumerics numbers;
  double filled() const { return numbers.amax * numbers.scale / numbers.format_max; }
};
// The FP8 tensors of one step's records, in the records' order.
std::vector<Fp8TensorRow> fp8_tensor_rows(const std::vector<LayerNumerics>& step_records);

}  // namespace ampwb
