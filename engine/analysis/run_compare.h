// Runs side by side, decided once for `ampwb compare` (text and --json) and the GUI's comparison table: the rows
// (results, then every setting of the configuration and where the run ran), every cell formatted here, and whether
// the runs differ on each. Both render these rows as they are, so they cannot disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/run_speed.h"
#include "analysis/time_comparison.h"
#include "store/run_record.h"
#include "store/run_store.h"

namespace ampwb {

struct ComparedRun {
  RunRecord record;
  std::vector<EpochReport> epochs;
  std::vector<GradientHistogram> histograms;  // for the FP16 underflow and overflow rows
  std::vector<StepReport> steps;              // for the speed (analysis/run_speed.h)
  std::vector<EpochTimes> times;              // for the time split and the machine's load
  std::optional<AlternatingSpeed> alternating;  // its sweep's speeds timed in alternation, if it had one
  std::vector<LayerNumerics> layers;            // for the FP8 rows: an amp-fp8 run's probed steps (others need none)
};

// The run's speed and time breakdown.
RunTiming run_timing(const RunRecord& record, const std::vector<StepReport>& steps, std::vector<EpochTimes> times);

// The runs `ids` as the store holds them (throws StoreError naming an id that is not there).
std::vector<ComparedRun> load_compared_runs(const RunStore& store, const std::vector<int64_t>& ids);

struct CompareOptions {
  size_t baseline = 0;  // the run speed-ups are measured against
  int at_epoch = 0;     // the epoch of the "at epoch" rows; 0 = the last one every run completed
};

struct CompareRow {
  std::string label;                // "best validation accuracy", "precision.loss_scale.kind", "(device)"
  std::vector<std::string> values;  // one a run, in the runs' order
  bool setting = false;             // a row of the configuration (else a result)
  bool differs = false;             // the runs do not all show the same value
  std::string note;                 // how its values were measured, where a number alone would not say
};

struct Comparison {
  std::vector<RunSummary> summaries;
  std::vector<RunTiming> timings;  // each run's speed and time breakdown
  std::vector<SpeedUp> speedups;   // over the baseline's speed
  std::vector<SpeedUp> alternating;  // over the baseline, timed in alternation after their sweep; unknown where not
  // Why the speeds cannot be compared (timing_warning(), alternation_warning()); empty when they can.
  std::string timing_warning;
  // Which runs' steps differ from the baseline's in more than precision (work_difference()), so that their
  // speed-ups are not their precision's alone; empty when none do.
  std::string work_warning;
  size_t baseline = 0;
  int at_epoch = 1;              // resolved
  std::vector<CompareRow> rows;  // the results, then the settings

  std::vector<RunSpeed> speeds() const;  // each run's steady speed, from its timing
};

Comparison compare_runs(const std::vector<ComparedRun>& runs, const CompareOptions& options = {});

}  // namespace ampwb
