// The comparison's groups of runs for mean ± std bands: the engine's grouping by a configuration key
// (analysis/run_groups.h: the keys that vary, kAllButSeed, the labels), over the runs a chart draws. Plain C++, no Qt.
#pragma once

#include <string>
#include <vector>

#include "analysis/run_groups.h"
#include "run_series.h"

namespace ampwb::ui {

struct RunGroup {
  std::string value;                   // the key's value its runs share ("amp-bf16")
  std::vector<const RunSeries*> runs;  // in the order given
};

// The runs grouped by `key`'s value (a configuration key or kAllButSeed), groups in order of their first run.
std::vector<RunGroup> group_runs(const std::vector<const RunSeries*>& runs, const std::string& key);

// "precision = amp-bf16 (3 runs)", "all runs (2 runs)".
std::string group_label(const std::string& key, const RunGroup& group);

// A group's result as its tables show it: "91.20 ± 0.45"; "91.20" for a single run; "—" when nothing was measured.
std::string mean_std_text(const GroupMetric& metric, int decimals);

}  // namespace ampwb::ui
