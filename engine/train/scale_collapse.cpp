// ScaleCollapseWatch and the naming of the layers where overflows started.
#include "train/scale_collapse.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "amp/precision.h"

namespace ampwb {

std::string overflow_origins(const std::vector<OverflowReport>& overflows, size_t at_most) {
  std::map<std::string, int> first;
  for (const OverflowReport& o : overflows)
    if (!o.layers.empty()) ++first[o.layers.front()];
  std::vector<std::pair<std::string, int>> sorted(first.begin(), first.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::string out;
  for (size_t i = 0; i < sorted.size() && i < at_most; ++i)
    out += (i ? ", " : "") + sorted[i].first + " (" + std::to_string(sorted[i].second) +
           (sorted[i].second == 1 ? " step)" : " steps)");
  return out;
}

std::vector<SkippedRun> skipped_runs(const std::vector<StepReport>& steps) {
  std::vector<SkippedRun> runs;
  bool open = false;  // the last step was skipped, and the next one may go on its run
  for (const StepReport& s : steps) {
    if (!s.skipped) {
      if (open) runs.back().trained_scale = s.loss_scale;
      open = false;
      continue;
    }
    if (!open || s.step != runs.back().last_step + 1)  // a resumed run's record may leave out steps
      runs.push_back({s.step, s.step, 0, s.loss_scale, s.loss_scale, 0, {}});
    open = true;
    SkippedRun& r = runs.back();
    r.last_step = s.step;
    r.last_scale = s.loss_scale;
    ++r.length;
  }
  return runs;
}

bool SkippedRun::from_initial_scale() const {
  return first_step == 0 && (ended() || last_scale >= LossScaleConfig{}.init_scale);
}

std::string initial_scale_too_high(const SkippedRun& run) {
  char text[256];
  if (run.ended())
    std::snprintf(text, sizeof text,
                  "the initial loss scale %g was too high: the first %lld steps were skipped, lowering it to %g, at "
                  "which the gradients were finite",
                  run.first_scale, static_cast<long long>(run.length), run.trained_scale);
  else
    std::snprintf(text, sizeof text,
                  "the initial loss scale %g was too high: all %lld steps were skipped, the last at a scale of %g, "
                  "still too high for finite gradients",
                  run.first_scale, static_cast<long long>(run.length), run.last_scale);
  return text;
}

std::string initial_scale_advice(const SkippedRun& run) {
  const double start = run.ended() ? run.trained_scale : LossScaleConfig{}.init_scale;
  char text[256];
  std::snprintf(text, sizeof text,
                "those steps trained nothing: start the scale at %g or lower (PyTorch's GradScaler starts at %g)",
                start, LossScaleConfig{}.init_scale);
  return text;
}

bool ScaleCollapseWatch::step(const StepReport& step) {
  if (!step.skipped) {
    if (latest_ && current_.length >= run_length_) latest_->trained_scale = step.loss_scale;
    current_ = SkippedRun{};
    return false;
  }
  if (current_.length == 0 || step.step != current_.last_step + 1) {
    current_ = SkippedRun{};
    current_.first_step = step.step;
    current_.first_scale = step.loss_scale;
  }
  current_.last_step = step.step;
  current_.last_scale = step.loss_scale;
  ++current_.length;
  if (current_.length < run_length_) return false;
  latest_ = current_;
  if (current_.length > run_length_) return false;
  ++collapses_;
  return true;
}

void ScaleCollapseWatch::overflow(const OverflowReport& overflow) {
  for (SkippedRun* run : {&current_, latest_ ? &*latest_ : nullptr})
    if (run && run->length > 0 && overflow.step >= run->first_step && overflow.step <= run->last_step)
      run->overflows.push_back(overflow);
}

std::string ScaleCollapseWatch::warning() const {
  if (!latest_) return {};
  const SkippedRun& r = *latest_;
  if (r.found_initial_level()) return initial_scale_too_high(r) + ". Try: " + initial_scale_advice(r);
  char head[256];
  if (r.first_step == 0)
    std::snprintf(head, sizeof head, "the first %lld steps were all skipped, the loss scale falling from %g to %g",
                  static_cast<long long>(r.length), r.first_scale, r.reached_scale());
  else
    std::snprintf(head, sizeof head,
                  "the loss scale collapsed: %lld consecutive steps skipped (%lld to %lld), the scale fell from %g to "
                  "%g",
                  static_cast<long long>(r.length), static_cast<long long>(r.first_step),
                  static_cast<long long>(r.last_step), r.first_scale, r.reached_scale());
  std::string line = head;
  const std::string origins = overflow_origins(r.overflows);
  if (!origins.empty()) line += "; inf/NaN gradients started in " + origins;
  if (r.first_step == 0)
    return line + ". If steps train again, the initial scale was too high; if not, " + kScaleCollapseAdvice;
  return line + ". Try: " + kScaleCollapseAdvice;
}

}  // namespace ampwb
