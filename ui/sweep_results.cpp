// Reading a sweep's points, their runs' summaries and the groups of its finished points.
#include "sweep_results.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "analysis/run_compare.h"
#include "analysis/sweep_speed_ups.h"

namespace ampwb::ui {
namespace {

std::string json_text(const nlohmann::ordered_json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

GroupMetric named(const std::vector<GroupMetric>& metrics, const std::string& name) {
  for (const GroupMetric& m : metrics)
    if (m.metric == name) return m;
  return {name, RunSummary::kNone, 0};
}

}  // namespace

std::vector<int64_t> SweepResults::finished_runs() const {
  std::vector<int64_t> ids;
  for (const SweepPointResult& p : points)
    if (p.point.state == SweepPointState::Finished && p.has_run) ids.push_back(p.point.run_id);
  return ids;
}

SweepResults read_sweep_results(const RunStore& store, int64_t id) {
  SweepResults out;
  out.sweep = sweep(store, id);
  const auto grid = nlohmann::ordered_json::parse(out.sweep.grid_json, nullptr, false);
  if (grid.is_object() && grid.contains("grid") && grid["grid"].is_object())
    for (const auto& [setting, values] : grid["grid"].items()) out.dimensions.push_back(setting);

  const std::vector<SweepPoint> points = sweep_points(store, id);
  for (const SweepPoint& p : points) {
    SweepPointResult r;
    r.point = p;
    const auto settings = nlohmann::ordered_json::parse(p.settings_json, nullptr, false);
    if (settings.is_object() && settings.contains("values") && settings["values"].is_object())
      for (const auto& [setting, value] : settings["values"].items()) r.values.emplace_back(setting, json_text(value));
    if (p.run_id != 0) {
      try {
        const RunRecord run = store.run(p.run_id);
        r.summary = summarize(run, store.epochs(p.run_id));
        if (p.state == SweepPointState::Finished)  // the groups' runs: a running point's steps are read when done
          r.speed = run_timing(run, store.steps(p.run_id), {}).speed;
        r.end_reason = run.end_reason;
        r.epochs_planned = run.epochs;
        r.run_status = run.status;
        r.has_run = true;
      } catch (const std::exception&) {  // its run was deleted: the point keeps its state, without a result
      }
    }
    ++out.counts[p.state];
    out.points.push_back(std::move(r));
  }

  // The finished points grouped by their values but the seed's: each group's runs differ only by seed.
  std::vector<RunSummary> summaries;
  std::vector<RunSpeed> speeds;
  std::vector<ConfigGroup> groups;
  std::vector<std::vector<int64_t>> runs;
  for (const SweepPointResult& r : out.points) {
    if (r.point.state != SweepPointState::Finished || !r.has_run) continue;
    std::string value;
    for (const auto& [setting, v] : r.values)
      if (setting != "seed") value += (value.empty() ? "" : ", ") + setting + " = " + v;
    if (value.empty()) value = "all points";
    size_t g = 0;
    while (g < groups.size() && groups[g].value != value) ++g;
    if (g == groups.size()) {
      groups.push_back({value, {}});
      runs.emplace_back();
    }
    groups[g].members.push_back(summaries.size());
    runs[g].push_back(r.point.run_id);
    summaries.push_back(r.summary);
    speeds.push_back(r.speed);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<GroupMetric> metrics = group_metrics(summaries, speeds, groups[g]);
    out.groups.push_back({groups[g].value,
                          runs[g],
                          named(metrics, "final validation accuracy (%)"),
                          named(metrics, "final validation loss"),
                          named(metrics, "training images/s (steady state)"),
                          {}});
  }
  // The groups' runs differ only by seed: each group's speed-up is its first run's, as `ampwb sweep status` gives it.
  if (out.groups.size() >= 2)
    if (const SweepSpeedUps timed = sweep_speed_ups(store, points); timed.baseline) {
      out.timing_warning = timed.warning;
      for (SweepGroupResult& g : out.groups) {
        const bool baseline = std::find(g.run_ids.begin(), g.run_ids.end(), timed.baseline->run_id) != g.run_ids.end();
        g.speed_up = baseline ? "baseline" : speed_up_text(timed.of(g.run_ids.front()));
      }
    }
  return out;
}

std::string sweep_counts_text(const SweepResults& results) {
  std::string text = std::to_string(results.points.size()) + (results.points.size() == 1 ? " point" : " points");
  std::string states;
  for (const auto& [state, n] : results.counts)
    states += (states.empty() ? "" : ", ") + std::to_string(n) + " " + sweep_point_state_name(state);
  return states.empty() ? text : text + ": " + states;
}

}  // namespace ampwb::ui
