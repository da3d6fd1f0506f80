// RunSeries: live appends, loading from the store, and the "differ only by seed" test for mean ± std bands.
#include "run_series.h"

#include <algorithm>
#include <regex>

namespace ampwb::ui {

void RunSeries::append(const EventBatch& batch) {
  if (batch.run_id != 0) run_id = batch.run_id;
  if (batch.started) {
    steps_per_epoch = batch.started->steps_per_epoch;
    first_epoch = batch.started->first_epoch;
    notes = batch.started->notes;
    classes = static_cast<int64_t>(batch.started->class_names.size());
    std::erase_if(epochs, [&](const EpochReport& e) { return e.epoch >= first_epoch; });
    std::erase_if(histograms, [&](const GradientHistogram& h) { return h.epoch >= first_epoch; });
    std::erase_if(layer_numerics, [&](const LayerNumerics& n) { return n.epoch >= first_epoch; });
    divergence.reset();  // measured again at the end
  }
  if (!batch.steps.empty()) {
    const int64_t first = batch.steps.front().step;
    if (!steps.empty() && steps.back().step >= first)
      std::erase_if(steps, [&](const StepReport& s) { return s.step >= first; });
    steps.insert(steps.end(), batch.steps.begin(), batch.steps.end());
  }
  epochs.insert(epochs.end(), batch.epochs.begin(), batch.epochs.end());
  histograms.insert(histograms.end(), batch.histograms.begin(), batch.histograms.end());
  layer_numerics.insert(layer_numerics.end(), batch.layer_numerics.begin(), batch.layer_numerics.end());
  if (batch.divergence) divergence = batch.divergence;
  if (batch.ended) status = batch.ended->status;
  if (!batch.nothing_but_progress()) ++revision;  // validation progress is not drawn: no chart redraws for it
  if (batch.started || !batch.epochs.empty() || !batch.histograms.empty() || !batch.layer_numerics.empty() ||
      batch.divergence || batch.ended)
    ++epoch_revision;
}

void RunSeries::replace_with(RunSeries other) {
  other.revision = std::max(other.revision, revision) + 1;
  other.epoch_revision = std::max(other.epoch_revision, epoch_revision) + 1;
  *this = std::move(other);
}

double RunSeries::epoch_end_step(int epoch) const {
  if (steps_per_epoch > 0) return static_cast<double>(epoch) * steps_per_epoch - 1;
  // Without RunInfo (an old store row): the last step reported in that epoch.
  double last = 0;
  for (const StepReport& s : steps)
    if (s.epoch == epoch) last = static_cast<double>(s.step);
  return last;
}

std::string run_label(const RunRecord& r) {
  std::string label = std::to_string(r.id) + " · ";
  // Sweeps before runs were named by what varies: "sweep 1201-135804 fp32" says when, not what.
  static const std::regex old_sweep("sweep \\d{4}-\\d{6}(-\\d+)? (\\S+)");
  if (std::smatch m; std::regex_match(r.name, m, old_sweep))
    return label + m[2].str() + " · seed " + std::to_string(r.config.seed);
  if (r.name.empty() || r.name == r.precision_name())
    label += r.precision_name();
  else if (r.name.find(r.precision_name()) != std::string::npos)
    label += r.name;
  else
    label += r.name + " (" + r.precision_name() + ")";
  return label;
}

RunSeries load_run_series(const RunStore& store, int64_t id) { return run_series(load_charted_evidence(store, id)); }

RunSeries run_series(const RunEvidence& run) {
  RunSeries s;
  s.run_id = run.run.id;
  s.label = run_label(run.run);
  s.status = run.run.status;
  s.config = run.run.config;  // an unreadable row has its defaults here: its curves still draw
  s.steps_per_epoch = run.run.info.steps_per_epoch;
  s.first_epoch = run.run.info.first_epoch;
  s.notes = run.run.info.notes;
  s.classes = static_cast<int64_t>(run.run.info.class_names.size());
  s.steps = run.steps;
  s.epochs = run.epochs;
  s.histograms = run.histograms;
  s.layer_numerics = run.layers;
  s.divergence = run.divergence;
  s.revision = s.epoch_revision = 1;
  return s;
}

bool differ_only_by_seed(const std::vector<TrainConfig>& configs) {
  if (configs.size() < 2) return false;
  // The settings that do not change the curves (or are the seed itself) are set equal before comparing.
  auto normalized = [](TrainConfig c) {
    c.name.clear();
    c.seed = 0;
    c.checkpoint_dir.clear();
    c.resume_from.clear();
    c.threads = 0;
    c.data.cache_budget_mb = 0;
    c.data.loader_threads = 0;
    return config_settings(c);
  };
  const auto first = normalized(configs[0]);
  bool seeds_differ = false;
  for (size_t i = 1; i < configs.size(); ++i) {
    if (normalized(configs[i]) != first) return false;
    if (configs[i].seed != configs[0].seed) seeds_differ = true;
  }
  return seeds_differ;
}

}  // namespace ampwb::ui
