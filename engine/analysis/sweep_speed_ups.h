// A sweep's speed-ups: each configuration's over its first point's, from the sweep's timing in alternation
// (train/alternating_benchmark.h), which `ampwb sweep` takes once every point finished. What `ampwb sweep status`
// prints and the workbench's Sweeps tab shows, read from one place so that both give the same figures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/run_speed.h"
#include "store/sweep_record.h"

namespace ampwb {

struct PointSpeedUp {
  SweepPoint point;
  SpeedUp speed_up;  // over the baseline point's run
};

struct SweepSpeedUps {
  std::optional<SweepPoint> baseline;  // the first point with a run; none where the sweep was not timed so
  // The first point of each other configuration, in the points' order: points that differ in their seeds alone
  // were timed once, as one configuration.
  std::vector<PointSpeedUp> others;
  std::string warning;  // alternation_warning: other work shared the turns
  std::optional<AlternatingSpeed> timed;

  // Run `run`'s speed-up over the baseline's: its configuration's; unknown where the timing does not hold it.
  SpeedUp of(int64_t run) const;
};

// From the store's record of the sweep's timing; `points` are the sweep's (sweep_points).
SweepSpeedUps sweep_speed_ups(const RunStore& store, const std::vector<SweepPoint>& points);

}  // namespace ampwb
