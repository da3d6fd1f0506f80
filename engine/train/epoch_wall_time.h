// The wall-clock time of an epoch: the wall time of its last training step (validation comes after it). The report's
// time-to-accuracy chart (analysis/run_report.cpp) and the GUI's wall-clock axis both use it, so they agree.
#pragma once

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include "train/events.h"

namespace ampwb {

// `steps` in step order (as stored and as reported); NaN when `epoch` has no step there.
inline double epoch_end_wall_seconds(const std::vector<StepReport>& steps, int epoch) {
  const auto after =
      std::partition_point(steps.begin(), steps.end(), [&](const StepReport& s) { return s.epoch <= epoch; });
  if (after == steps.begin() || std::prev(after)->epoch != epoch) return std::nan("");
  return std::prev(after)->wall_seconds;
}

}  // namespace ampwb
