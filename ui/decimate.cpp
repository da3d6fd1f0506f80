// Smoothing for the per-step curves (decimation itself is the template in the header).
#include "decimate.h"

#include <cmath>

namespace ampwb::ui {

void extend_smoothed(const std::vector<double>& values, double weight, std::vector<double>& smoothed, double& state,
                     double& debias) {
  for (size_t i = smoothed.size(); i < values.size(); ++i) {
    const double v = values[i];
    if (!std::isfinite(v)) {  // a skipped step's inf/NaN loss must not poison the rest of the curve
      smoothed.push_back(smoothed.empty() ? v : smoothed.back());
      continue;
    }
    state = state * weight + (1 - weight) * v;
    debias = debias * weight + (1 - weight);
    smoothed.push_back(debias > 0 ? state / debias : v);
  }
}

}  // namespace ampwb::ui
