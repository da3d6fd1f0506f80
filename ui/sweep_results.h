// A stored sweep as its view shows it: each point with its grid values, state, run and result, and the finished
// points grouped by every varying setting but the seed, with the mean ± std over their seeds of the final validation
// accuracy and loss and of the training speed (the engine's group_metrics, as `ampwb compare --group-by` computes
// them), and each group's speed-up where the sweep was timed in alternation. Read from the run store at once, whoever
// writes it (this process, `ampwb sweep`, Slurm tasks). Plain C++.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/run_groups.h"
#include "store/run_record.h"
#include "store/sweep_record.h"

namespace ampwb::ui {

struct SweepPointResult {
  SweepPoint point;
  std::vector<std::pair<std::string, std::string>> values;  // the point's value of each dimension, grid order
  RunSummary summary;                                       // of its run, when it has one
  RunSpeed speed;                                           // its run's steady speed, when it has finished
  int epochs_planned = 0;                                   // its run's, when it has one
  RunStatus run_status = RunStatus::Running;                // its run's, when it has one
  std::string end_reason;                                   // why its run failed, was cancelled or interrupted
  bool has_run = false;                                     // its run is in the store
};

struct SweepGroupResult {
  std::string value;  // "precision = amp-bf16, depth = 20"; "all points" when only the seed varies
  std::vector<int64_t> run_ids;
  GroupMetric final_accuracy, final_loss, images_per_second;  // accuracy in %
  // Over the sweep's first point, from its timing in alternation (sweep_speed_ups): "1.36× (97% interval …)",
  // "baseline" for that point's group; empty where the sweep was not timed so.
  std::string speed_up;
};

struct SweepResults {
  SweepRecord sweep;
  std::vector<std::string> dimensions;  // the settings that vary, grid order ("precision", "seed")
  std::vector<SweepPointResult> points;
  std::vector<SweepGroupResult> groups;  // of the finished points, in order of their first point
  std::map<SweepPointState, int> counts;
  std::string timing_warning;  // alternation_warning of that timing: other work shared its turns

  std::vector<int64_t> finished_runs() const;
};

// Throws naming the sweep when it is not in the store.
SweepResults read_sweep_results(const RunStore& store, int64_t sweep);

// "6 points: 2 finished, 1 running, 3 queued".
std::string sweep_counts_text(const SweepResults& results);

}  // namespace ampwb::ui
