// Two runs' training step time side by side by class (EpochTimes, train/run_details.h): each class's ms per step in
// each run, the speed-up, its share of the step, and a sentence that says what changed and what it did to the whole
// step, e.g. "convolutions 1.9× faster, batch norm unchanged, data wait 38% of the step, so end to end 1.10× (95%
// interval 1.04–1.17)". The rows split each run's median steady step (analysis/run_speed.h) by the shares the
// backend's timers measured, so they add up to it and the step row's figure is the one speed-up every view shows.
// `ampwb compare` prints it under its table; `ampwb show` prints one run's breakdown from the same rows.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "analysis/run_speed.h"
#include "train/run_details.h"

namespace ampwb {

// The mean over a run's epochs, weighted by their timed steps; the first epoch is left out when there are more
// (it warms caches and the loader). steps = 0 when nothing was timed. The machine's load is the mean of every
// epoch that recorded it, the first's included, as the run's epoch times include it.
EpochTimes mean_epoch_times(const std::vector<EpochTimes>& epochs);

// What compare_times reads of a run.
struct RunTiming {
  std::vector<EpochTimes> epochs;
  RunSpeed speed;
};

// mean_epoch_times with every time scaled so that its step is the run's median steady step: the figures every view
// gives (where the speed is unknown, the timed steps' own).
EpochTimes split_median_step(const RunTiming& run);

struct TimeRow {
  // A class ("conv forward"), "data wait", "waiting for communication", "other" (the host's own work), "step";
  // after the step, "communication (beside backward)": the all-reduce's own time, not a part of the step's.
  std::string label;
  std::array<double, 2> ms{};     // per step, in each run
  std::array<double, 2> share{};  // of each run's step
  double speedup = 0;             // ms[0] / ms[1]: above 1 when the second run is faster; 0 when either is 0
};

// One run's rows: every class, data wait, other, step, and on many processes the communication (ms[1] and share[1]
// unused).
std::vector<TimeRow> time_rows(const RunTiming& run);

struct TimeComparison {
  bool available = false;           // both runs timed some steps and have a steady speed
  std::array<EpochTimes, 2> means;  // mean_epoch_times of each, split over its median steady step
  std::array<bool, 2> steady{};     // each has a steady speed (RunSpeed::known)
  SpeedUp speedup;                  // the second run's over the first's: the end-to-end figure
  std::vector<TimeRow> rows;        // every class, data wait, other, step
  std::string sentence;             // the second run against the first, by groups of classes; empty if unavailable
  // Why not available: "not recorded for the baseline", "too few steps for a steady speed in the run".
  std::string unavailable() const;
};

TimeComparison compare_times(const RunTiming& baseline, const RunTiming& other);

// The sentence of compare_times from two mean EpochTimes and the speed-up. Groups: convolutions (the three conv
// classes), batch norm, elementwise (relu + add), pooling, linear, loss, optimizer, scale check, conversions, host
// waits; those holding 5% of either step, the baseline's largest first; "unchanged" within ±5%; then the data
// wait's share of the second run's step when it holds 5% of either, then the speed-up end to end. Without a known
// speed-up, the ratio of the two steps, without an interval.
std::string time_sentence(const EpochTimes& baseline, const EpochTimes& other, const SpeedUp& end_to_end = {});

}  // namespace ampwb
