// Grouping compared runs by a configuration key: the keys that vary, the groups and their labels.
#include "run_groups.h"

#include <algorithm>
#include <set>

namespace ampwb::ui {
namespace {

// Settings that leave the curves alone (or only say where things are): never a reason to group.
bool ignored(const std::string& key) {
  static const std::set<std::string> keys = {"name",    "checkpoint_dir",       "resume_from",
                                             "threads", "data.cache_budget_mb", "data.loader_threads"};
  return keys.count(key) > 0;
}

std::string value_of(const TrainConfig& config, const std::string& key) {
  for (const auto& [k, v] : config_settings(config))
    if (k == key) return v;
  return {};
}

}  // namespace

std::vector<std::string> varying_keys(const std::vector<TrainConfig>& configs) {
  std::vector<std::string> out;
  if (configs.size() < 2) return out;
  const auto first = config_settings(configs[0]);
  std::vector<std::vector<std::pair<std::string, std::string>>> others;
  for (size_t i = 1; i < configs.size(); ++i) others.push_back(config_settings(configs[i]));
  for (size_t k = 0; k < first.size(); ++k) {
    if (ignored(first[k].first)) continue;
    for (const auto& settings : others)
      if (k >= settings.size() || settings[k] != first[k]) {
        out.push_back(first[k].first);
        break;
      }
  }
  return out;
}

std::string key_label(const std::string& key) { return key == "precision.mode" ? "precision" : key; }

std::vector<RunGroup> group_runs(const std::vector<const RunSeries*>& runs, const std::string& key) {
  std::vector<std::string> keys;  // what a group's runs share
  std::vector<TrainConfig> configs;
  for (const RunSeries* r : runs) configs.push_back(r->config);
  if (key == kAllButSeed) {
    for (const std::string& k : varying_keys(configs))
      if (k != "seed") keys.push_back(k);
  } else {
    keys.push_back(key);
  }
  std::vector<RunGroup> groups;
  for (const RunSeries* r : runs) {
    std::string value;
    for (const std::string& k : keys)
      value += (value.empty() ? "" : ", ") + (key == kAllButSeed ? key_label(k) + " = " : "") + value_of(r->config, k);
    if (value.empty()) value = "all runs";
    auto group = std::find_if(groups.begin(), groups.end(), [&](const RunGroup& g) { return g.value == value; });
    if (group == groups.end()) group = groups.insert(groups.end(), RunGroup{value, {}});
    group->runs.push_back(r);
  }
  return groups;
}

std::string group_label(const std::string& key, const RunGroup& group) {
  const std::string count = " (" + std::to_string(group.runs.size()) + (group.runs.size() == 1 ? " run)" : " runs)");
  if (key == kAllButSeed) return group.value + count;
  return key_label(key) + " = " + group.value + count;
}

}  // namespace ampwb::ui
