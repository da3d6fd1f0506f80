// ScaleCollapseWatch and the naming of the layers where overflows started.
#include "train/scale_collapse.h"

#include <algorithm>
#include <cstdio>
#include <map>

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

bool ScaleCollapseWatch::step(const StepReport& step) {
  if (!step.skipped) {
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
  char head[256];
  // The scale after the last skipped step is half the one it used.
  std::snprintf(head, sizeof head,
                "the loss scale collapsed: %lld consecutive steps skipped (%lld to %lld), the scale fell from %g to %g",
                static_cast<long long>(r.length), static_cast<long long>(r.first_step),
                static_cast<long long>(r.last_step), r.first_scale, r.last_scale / 2);
  std::string line = head;
  const std::string origins = overflow_origins(r.overflows);
  if (!origins.empty()) line += "; inf/NaN gradients started in " + origins;
  return line + ". Try: " + kScaleCollapseAdvice;
}

}  // namespace ampwb
