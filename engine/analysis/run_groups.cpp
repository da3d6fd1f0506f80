// Grouping compared runs by a configuration key: the keys that vary, the groups, their labels and statistics.
#include "analysis/run_groups.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/error.h"

namespace ampwb {
namespace {

// Settings that leave the curves alone (or only say where things are): never a reason to group.
bool ignored(const std::string& key) {
  static const std::set<std::string> keys = {"name",    "checkpoint_dir",       "keep_checkpoints",   "resume_from",
                                             "threads", "data.cache_budget_mb", "data.loader_threads"};
  return keys.count(key) > 0;
}

}  // namespace

std::vector<std::string> varying_keys(const std::vector<TrainConfig>& configs) {
  std::vector<std::string> out;
  if (configs.size() < 2) return out;
  std::vector<std::vector<std::pair<std::string, std::string>>> settings;
  for (const TrainConfig& c : configs) settings.push_back(config_settings(c));
  for (size_t k = 0; k < settings[0].size(); ++k) {
    if (ignored(settings[0][k].first)) continue;
    for (size_t i = 1; i < settings.size(); ++i)
      if (settings[i][k] != settings[0][k]) {
        out.push_back(settings[0][k].first);
        break;
      }
  }
  return out;
}

std::string key_label(const std::string& key) { return key == "precision.mode" ? "precision" : key; }

std::vector<ConfigGroup> group_configs(const std::vector<TrainConfig>& configs, const std::string& key) {
  std::vector<std::string> keys;  // what a group's members share
  if (key == kAllButSeed) {
    for (const std::string& k : varying_keys(configs))
      if (k != "seed") keys.push_back(k);
  } else {
    keys.push_back(key == key_label("precision.mode") ? "precision.mode" : key);  // as the groups' labels name it
  }
  std::vector<ConfigGroup> groups;
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto settings = config_settings(configs[i]);
    std::string value;
    for (const std::string& k : keys) {
      const auto found = std::find_if(settings.begin(), settings.end(), [&](const auto& s) { return s.first == k; });
      if (found == settings.end()) throw Error("no setting '" + k + "' to group by (see ampwb show RUN)");
      // An image size of 0 is the flag's "auto" (as run_settings shows it), whatever size each run resolved it to.
      const std::string shared = k == "image_size" && found->second == "0" ? "auto" : found->second;
      value += (value.empty() ? "" : ", ") + (key == kAllButSeed ? key_label(k) + " = " : "") + shared;
    }
    if (value.empty()) value = "all runs";
    auto group = std::find_if(groups.begin(), groups.end(), [&](const ConfigGroup& g) { return g.value == value; });
    if (group == groups.end()) group = groups.insert(groups.end(), ConfigGroup{value, {}});
    group->members.push_back(i);
  }
  return groups;
}

std::string group_label(const std::string& key, const ConfigGroup& group) {
  const size_t n = group.members.size();
  const std::string count = " (" + std::to_string(n) + (n == 1 ? " run)" : " runs)");
  return (key == kAllButSeed ? group.value : key_label(key) + " = " + group.value) + count;
}

std::vector<GroupMetric> group_metrics(const std::vector<RunSummary>& summaries, const std::vector<RunSpeed>& speeds,
                                       const ConfigGroup& group) {
  using S = const RunSummary&;
  struct Source {
    const char* name;
    double (*value)(S, const RunSpeed&);
  };
  static const Source sources[] = {
      {"best validation accuracy (%)", [](S s, const RunSpeed&) { return 100 * s.best_validation_accuracy; }},
      {"final validation accuracy (%)", [](S s, const RunSpeed&) { return 100 * s.final_validation_accuracy; }},
      {"final validation loss", [](S s, const RunSpeed&) { return s.final_validation_loss; }},
      {"training images/s (steady state)",
       [](S, const RunSpeed& v) { return v.known() ? v.images_per_second() : RunSummary::kNone; }},
      {"epoch time (s)", [](S s, const RunSpeed&) { return s.mean_epoch_seconds; }},
      {"run time (s)", [](S s, const RunSpeed&) { return s.total_seconds; }},
      {"skipped steps", [](S s, const RunSpeed&) { return static_cast<double>(s.skipped_steps); }},
  };
  std::vector<GroupMetric> out;
  for (const Source& source : sources) {
    // Over the runs that measured it: a run that completed no epoch, or had no validation images, has nothing to
    // add (its NaN or 0 would pull the mean).
    std::vector<double> values;
    for (size_t i : group.members)
      if (const double value = source.value(summaries.at(i), speeds.at(i));
          summaries.at(i).epochs_completed > 0 && std::isfinite(value))
        values.push_back(value);
    const double n = static_cast<double>(values.size());
    double sum = 0, ss = 0;
    for (double v : values) sum += v;
    const double mean = n > 0 ? sum / n : RunSummary::kNone;
    for (double v : values) ss += (v - mean) * (v - mean);
    // The sample standard deviation: one run has none (not 0, which would claim the runs agree).
    out.push_back({source.name, mean, n > 1 ? std::sqrt(ss / (n - 1)) : RunSummary::kNone});
  }
  return out;
}

std::string mean_std_text(const GroupMetric& metric) {
  char text[160];
  if (!std::isfinite(metric.mean)) return "-";
  if (!std::isfinite(metric.std)) {  // a single run
    std::snprintf(text, sizeof text, "%.6g", metric.mean);
  } else if (metric.std <= 1e-9 * std::abs(metric.mean)) {  // equal runs, their mean's rounding aside
    std::snprintf(text, sizeof text, "%.6g ± 0", metric.mean);
  } else {
    const auto magnitude_of = [](double x) { return static_cast<int>(std::floor(std::log10(x))); };
    int magnitude = magnitude_of(metric.std);
    // The standard deviation's second significant digit, once rounded to it (0.996 is 1.0, two digits from 1).
    magnitude = magnitude_of(std::round(metric.std / std::pow(10.0, magnitude - 1)) * std::pow(10.0, magnitude - 1));
    const double unit = std::pow(10.0, magnitude - 1);
    const int decimals = std::clamp(1 - magnitude, 0, 12);
    std::snprintf(text, sizeof text, "%.*f ± %.*f", decimals, std::round(metric.mean / unit) * unit, decimals,
                  std::round(metric.std / unit) * unit);
  }
  return text;
}

}  // namespace ampwb
