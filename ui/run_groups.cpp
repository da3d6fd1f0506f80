// The runs a chart draws, grouped by the engine's group_configs.
#include "run_groups.h"

#include <cmath>
#include <cstdio>

namespace ampwb::ui {

std::vector<RunGroup> group_runs(const std::vector<const RunSeries*>& runs, const std::string& key) {
  std::vector<TrainConfig> configs;
  for (const RunSeries* r : runs) configs.push_back(r->config);
  std::vector<RunGroup> out;
  for (const ConfigGroup& g : group_configs(configs, key)) {
    RunGroup group{g.value, {}};
    for (size_t i : g.members) group.runs.push_back(runs[i]);
    out.push_back(std::move(group));
  }
  return out;
}

std::string group_label(const std::string& key, const RunGroup& group) {
  ConfigGroup g{group.value, {}};
  g.members.resize(group.runs.size());
  return ampwb::group_label(key, g);
}

std::string mean_std_text(const GroupMetric& metric, int decimals) {
  if (!std::isfinite(metric.mean)) return "—";
  char buffer[64];
  if (!std::isfinite(metric.std))  // a single run
    std::snprintf(buffer, sizeof buffer, "%.*f", decimals, metric.mean);
  else
    std::snprintf(buffer, sizeof buffer, "%.*f ± %.*f", decimals, metric.mean, decimals, metric.std);
  return buffer;
}

}  // namespace ampwb::ui
