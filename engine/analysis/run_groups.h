// Runs grouped by a configuration key: the keys that vary among compared runs (precision, batch size, lr, seed,
// device, ...), the groups of runs sharing a key's value, their labels, and each group's mean ± std of the results.
// `ampwb compare --group-by` prints them; the GUI's comparison draws the same groups as mean ± std bands
// (ui/run_groups.h). Grouping by "everything but the seed" gives the groups of runs that differ only by seed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analysis/run_speed.h"
#include "store/run_record.h"
#include "train/config.h"

namespace ampwb {

// The pseudo-key of the groups of runs that share every setting but the seed.
inline constexpr const char* kAllButSeed = "everything but the seed";

// The configuration keys (config_settings' dotted keys) whose values differ among `configs`, in field-list order,
// leaving out those that do not change the curves (name, folders, threads, cache).
std::vector<std::string> varying_keys(const std::vector<TrainConfig>& configs);

// "precision.mode" reads "precision"; other keys as they are.
std::string key_label(const std::string& key);

struct ConfigGroup {
  std::string value;            // the key's value its runs share ("amp-bf16")
  std::vector<size_t> members;  // indices into the configurations, in their order
};

// The configurations grouped by `key`'s value (a config_settings key, its label "precision", or kAllButSeed), groups
// in order of their first member. For kAllButSeed the value names the settings where the groups differ, or "all runs".
// Throws ampwb::Error for a key the configuration does not have.
std::vector<ConfigGroup> group_configs(const std::vector<TrainConfig>& configs, const std::string& key);

// "precision = amp-bf16 (3 runs)"; for kAllButSeed the value alone, "all runs (2 runs)".
std::string group_label(const std::string& key, const ConfigGroup& group);

// A result over a group's runs: mean and sample standard deviation (NaN for one run).
struct GroupMetric {
  std::string metric;  // "best validation accuracy (%)"
  double mean = 0, std = 0;  // over the group's runs that measured it; NaN where none (mean) or one (std) did
};
// Of the runs' summaries and their steady speeds (measure_speed: the speed every other view shows), by index.
std::vector<GroupMetric> group_metrics(const std::vector<RunSummary>& summaries, const std::vector<RunSpeed>& speeds,
                                       const ConfigGroup& group);
// "470 ± 110", "0.8123 ± 0.0042": the standard deviation to two significant digits and the mean to the same decimal
// place (as a measurement and its uncertainty are written); the mean alone for one run, "-" for none.
std::string mean_std_text(const GroupMetric& metric);

}  // namespace ampwb
