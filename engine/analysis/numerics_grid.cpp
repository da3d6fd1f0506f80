// The layers x epochs grid of per-layer numerics and the precision-per-op totals.
#include "analysis/numerics_grid.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/half.h"

namespace ampwb {

NumericsGrid numerics_grid(const std::vector<LayerNumerics>& records) {
  NumericsGrid g;
  std::map<int, int64_t> last_step;  // epoch -> its last probed step
  for (const LayerNumerics& n : records) {
    auto [it, added] = last_step.emplace(n.epoch, n.step);
    if (!added) it->second = std::max(it->second, n.step);
  }
  for (const auto& [epoch, step] : last_step) {
    g.epochs.push_back(epoch);
    g.steps.push_back(step);
  }
  std::map<std::string, size_t> row;
  for (const LayerNumerics& n : records) {  // each step's records are in model order: the first seen sets the rows
    if (row.contains(n.layer)) continue;
    row.emplace(n.layer, g.layers.size());
    g.layers.push_back(n.layer);
  }
  g.cells.assign(g.layers.size(), std::vector<std::optional<LayerNumerics>>(g.epochs.size()));
  for (const LayerNumerics& n : records) {
    const size_t e = static_cast<size_t>(std::find(g.epochs.begin(), g.epochs.end(), n.epoch) - g.epochs.begin());
    if (n.step == g.steps[e]) g.cells[row.at(n.layer)][e] = n;
  }
  return g;
}

const char* numerics_measure_name(NumericsMeasure m) {
  switch (m) {
    case NumericsMeasure::ActivationHeadroom:
      return "activation headroom";
    case NumericsMeasure::ActivationGradUnderflow:
      return "activation-gradient underflow";
    case NumericsMeasure::ActivationGradBelowNormal:
      return "activation gradients below 2^-14";
    case NumericsMeasure::WeightGradUnderflow:
      return "weight-gradient underflow";
    case NumericsMeasure::Fp8Saturated:
      return "FP8 clipped";
    case NumericsMeasure::Fp8Underflow:
      return "FP8 made zero";
  }
  return "?";
}

double numerics_measure(const LayerNumerics& n, NumericsMeasure m) {
  switch (m) {
    case NumericsMeasure::ActivationHeadroom:
      return n.activation.max_abs > 0 ? std::log2(kHalfMax / n.activation.max_abs)
                                      : std::numeric_limits<double>::infinity();
    case NumericsMeasure::ActivationGradUnderflow:
      return n.activation_grad.underflow_fraction;
    case NumericsMeasure::ActivationGradBelowNormal:
      return n.activation_grad.below_normal_fraction;
    case NumericsMeasure::WeightGradUnderflow:
      return n.weight_grad.underflow_fraction;
    case NumericsMeasure::Fp8Saturated:
    case NumericsMeasure::Fp8Underflow: {
      const double Fp8TensorNumerics::*share = m == NumericsMeasure::Fp8Saturated
                                                   ? &Fp8TensorNumerics::saturated_fraction
                                                   : &Fp8TensorNumerics::underflow_fraction;
      double worst = std::numeric_limits<double>::quiet_NaN();
      for (const Fp8TensorNumerics* t : {&n.fp8_input, &n.fp8_weight, &n.fp8_output_grad})
        if (t->count > 0) worst = std::isnan(worst) ? t->*share : std::max(worst, t->*share);
      return worst;
    }
  }
  return 0;
}

std::map<std::string, OpPrecision> precision_per_op(const std::vector<LayerNumerics>& step_records) {
  std::map<std::string, OpPrecision> out;
  for (const LayerNumerics& n : step_records) {
    OpPrecision& p = out[n.kind];
    ++p.layers;
    ++p.forward[n.forward_dtype];
    ++p.backward[n.backward_dtype];
    p.casts += n.casts;
  }
  return out;
}

bool gradients_stored_in_fp16(const std::vector<LayerNumerics>& records) {
  return std::any_of(records.begin(), records.end(), [](const LayerNumerics& n) { return n.backward_dtype == "f16"; });
}

std::vector<const LayerNumerics*> last_probed_layers(const std::vector<LayerNumerics>& records) {
  std::vector<const LayerNumerics*> out;
  for (const LayerNumerics& n : records)
    if (n.step == records.back().step) out.push_back(&n);
  return out;
}

bool has_fp8_layers(const std::vector<LayerNumerics>& records) {
  return std::any_of(records.begin(), records.end(), [](const LayerNumerics& n) {
    return n.fp8_input.count > 0 || n.fp8_weight.count > 0 || n.fp8_output_grad.count > 0;
  });
}

std::vector<Fp8TensorRow> fp8_tensor_rows(const std::vector<LayerNumerics>& step_records) {
  std::vector<Fp8TensorRow> rows;
  for (const LayerNumerics& n : step_records)
    for (const auto& [tensor, numbers] : {std::pair{"input", &n.fp8_input}, std::pair{"weight", &n.fp8_weight},
                                          std::pair{"output gradient", &n.fp8_output_grad}})
      if (numbers->count > 0) rows.push_back({n.layer, tensor, *numbers});
  return rows;
}

}  // namespace ampwb
