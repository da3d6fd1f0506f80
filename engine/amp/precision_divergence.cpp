// Relative errors of one tensor against its FP32 reference, and the rule that names where a mode departs.
#include "amp/precision_divergence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ampwb {

double unit_roundoff(NumberFormat format) {
  switch (format) {
    case NumberFormat::Bf16:
      return std::ldexp(1.0, -8);  // 8 significand bits
    case NumberFormat::Fp8:
      return std::ldexp(1.0, -4);  // E4M3's 4 significand bits (E5M2's gradients: 2^-3)
    case NumberFormat::Fp16:
    case NumberFormat::Tf32:
      return std::ldexp(1.0, -11);  // 11 significand bits
    case NumberFormat::Fp32:
      break;
  }
  return 0;
}

TensorDivergence compare_values(const float* values, double scale, const float* reference, int64_t count) {
  TensorDivergence t;
  double difference = 0, norm = 0, own_norm = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double r = reference[i];
    const double v = static_cast<double>(values[i]) / scale;
    if (!std::isfinite(v) && std::isfinite(r)) {
      ++t.nonfinite;
      continue;
    }
    norm += r * r;
    own_norm += v * v;
    difference += (v - r) * (v - r);
  }
  t.reference_norm = std::sqrt(norm);
  t.norm = std::sqrt(own_norm);
  if (t.measured()) t.relative_error = std::sqrt(difference) / t.reference_norm;
  return t;
}

void find_departures(PrecisionDivergence& d) {
  d.first_departing.clear();
  d.largest_growth.clear();
  d.largest_growth_factor = 0;
  if (d.unit_roundoff <= 0) return;
  double input_error = 0;  // the stem's input: the batch, exact in FP32
  for (const LayerDivergence& l : d.layers) {
    const TensorDivergence& a = l.activation;
    const bool departs = a.nonfinite > 0 || (a.measured() && a.relative_error > d.threshold);
    if (departs && d.first_departing.empty()) d.first_departing = l.layer;
    if (!a.measured()) continue;
    const double growth = a.relative_error / std::max(input_error, d.unit_roundoff);
    if (growth > d.largest_growth_factor) {
      d.largest_growth_factor = growth;
      d.largest_growth = l.layer;
    }
    input_error = a.relative_error;
  }
}

namespace {
std::string number(double v, const char* format = "%.2g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

const LayerDivergence* find_layer(const PrecisionDivergence& d, const std::string& name) {
  for (const LayerDivergence& l : d.layers)
    if (l.layer == name) return &l;
  return nullptr;
}

std::string format_upper(const std::string& format) {
  std::string out = format;
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}
}  // namespace

std::string relative_error_text(const TensorDivergence& t) {
  if (t.nonfinite > 0) return "inf/NaN";
  if (t.reference_norm <= 0) return "-";
  return number(t.relative_error, "%.2e");
}

std::string divergence_sentence(const PrecisionDivergence& d) {
  if (d.unit_roundoff <= 0) return d.mode + " computes in FP32: it is its own reference, nothing to compare";
  if (d.layers.empty()) return d.mode + ": no layer was compared";
  const std::string u = format_upper(d.format) + " rounding (u = 2^" +
                        std::to_string(static_cast<int>(std::lround(std::log2(d.unit_roundoff)))) + ")";
  std::string s;
  if (const LayerDivergence* first = find_layer(d, d.first_departing)) {
    s = d.mode + " departs from FP32 first at " + first->layer + ": its activation's relative error is " +
        (first->activation.nonfinite > 0
             ? std::string("inf/NaN")
             : number(first->activation.relative_error / d.unit_roundoff, "%.1f") + " units of " + u) +
        ", over the line of " + number(kDepartureUnits, "%.0f") + " units";
  } else {
    const auto worst = std::max_element(d.layers.begin(), d.layers.end(), [](const auto& a, const auto& b) {
      return a.activation.relative_error < b.activation.relative_error;
    });
    s = d.mode + "'s activations stay within " + number(kDepartureUnits, "%.0f") + " units of " + u +
        " of FP32 at every layer (largest: " + number(worst->activation.relative_error / d.unit_roundoff, "%.1f") +
        " units at " + worst->layer + ")";
  }
  if (!d.largest_growth.empty())
    s += "; " + d.largest_growth + " grows the error most (" + number(d.largest_growth_factor, "%.1f") +
         " times its input's)";
  // The line is the activations': the gradients, which carry back every later layer's difference, are said apart.
  const TensorDivergence* largest_grad = nullptr;
  std::string grad_where;
  double largest_activation = 0;
  for (const LayerDivergence& l : d.layers) {
    if (l.activation.measured()) largest_activation = std::max(largest_activation, l.activation.relative_error);
    for (const auto& [t, what] :
         {std::pair{&l.activation_grad, "'s output gradient"}, {&l.weight_grad, "'s weight gradient"}}) {
      const bool worse =
          !largest_grad || (t->nonfinite > 0 && largest_grad->nonfinite == 0) ||
          (t->measured() && largest_grad->nonfinite == 0 && t->relative_error > largest_grad->relative_error);
      if ((t->measured() || t->nonfinite > 0) && worse) {
        largest_grad = t;
        grad_where = l.layer + what;
      }
    }
  }
  // Gradients all zero where FP32's are not: underflow, which no rounding of later layers explains.
  int gradients = 0, vanished = 0;
  std::string first_vanished;
  for (const LayerDivergence& l : d.layers)
    for (const auto& [t, what] :
         {std::pair{&l.activation_grad, "'s output gradient"}, {&l.weight_grad, "'s weight gradient"}}) {
      if (!t->measured()) continue;
      ++gradients;
      if (t->norm != 0) continue;
      if (vanished++ == 0) first_vanished = l.layer + what;
    }
  if (largest_grad && largest_grad->nonfinite > 0)
    s += "; its gradients hold inf/NaN where FP32's are finite (" + grad_where + " among them)";
  else if (vanished > 0)
    s += "; its gradients vanish: " + std::to_string(vanished) + " of " + std::to_string(gradients) +
         " are all zero where FP32's are not (" + first_vanished + " among them), their values under " +
         format_upper(d.format) + "'s smallest" +
         (d.loss_scale > 1   ? std::string(" even scaled")
          : d.loss_scale < 1 ? std::string(", a loss scale under 1 shrinking them further")
                             : std::string(", with no loss scale to lift them"));
  else if (largest_grad && largest_grad->relative_error > d.threshold)
    s += std::string(largest_grad->relative_error > largest_activation ? "; its gradients differ more"
                                                                       : "; its gradients are over the line too") +
         " (up to " + relative_error_text(*largest_grad) + ", " + grad_where +
         "): each carries back the differences of every later layer, ReLU's zeros moved by rounding among them";
  s += "; the loss's relative error is " + relative_error_text(d.loss) + ".";
  return s;
}

}  // namespace ampwb
