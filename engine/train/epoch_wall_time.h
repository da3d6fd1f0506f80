// The wall-clock time of an epoch's report: the wall time of its last training step, plus the epoch's time outside
// its steps' arithmetic and data waits, which is mostly its validation, after that step; so that a validation accuracy
// is drawn when it was known. (The host's work between steps is in both, which makes it a little late, never early.)
// The report's time-to-accuracy chart (analysis/run_report.cpp) and the GUI's wall-clock axis both use it, so they
// agree.
#pragma once

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include "train/events.h"

namespace ampwb {

// `steps` in step order (as stored and as reported); NaN when `epoch` has no step there.
inline double epoch_end_wall_seconds(const std::vector<StepReport>& steps, const EpochReport& epoch) {
  const auto after =
      std::partition_point(steps.begin(), steps.end(), [&](const StepReport& s) { return s.epoch <= epoch.epoch; });
  if (after == steps.begin() || std::prev(after)->epoch != epoch.epoch) return std::nan("");
  // A store from before the steps' time was recorded (compute 0) knows no time outside them.
  const double outside_steps =
      epoch.compute_seconds > 0 ? epoch.seconds - epoch.compute_seconds - epoch.data_wait_seconds : 0;
  return std::prev(after)->wall_seconds + std::max(0.0, outside_steps);
}

}  // namespace ampwb
