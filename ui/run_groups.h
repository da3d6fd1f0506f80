// Runs grouped by a configuration key for the comparison's mean ± std bands: the keys that vary among the compared
// runs (precision, batch size, lr, seed, device, ...), the groups of runs sharing a key's value, and their labels.
// Grouping by "everything but the seed" is the old seed-only band: the runs that share every other setting. Plain
// C++, no Qt.
#pragma once

#include <string>
#include <vector>

#include "run_series.h"

namespace ampwb::ui {

// The pseudo-key of the groups of runs that share every setting but the seed.
inline constexpr const char* kAllButSeed = "everything but the seed";

// The configuration keys (config_settings' dotted keys) whose values differ among `configs`, in field-list order,
// leaving out those that do not change the curves (name, folders, threads, cache).
std::vector<std::string> varying_keys(const std::vector<TrainConfig>& configs);

// "precision.mode" reads "precision"; other keys as they are.
std::string key_label(const std::string& key);

struct RunGroup {
  std::string value;                   // the key's value its runs share ("amp-bf16")
  std::vector<const RunSeries*> runs;  // in the order given
};

// The runs grouped by `key`'s value, groups in order of their first run. For kAllButSeed, by every setting that
// changes the curves except the seed; the value then names the settings where groups differ, or "all runs".
std::vector<RunGroup> group_runs(const std::vector<const RunSeries*>& runs, const std::string& key);

// "precision = amp-bf16 (3 runs)", "all runs (2 runs)".
std::string group_label(const std::string& key, const RunGroup& group);

}  // namespace ampwb::ui
