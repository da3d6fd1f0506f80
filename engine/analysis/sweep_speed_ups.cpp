#include "analysis/sweep_speed_ups.h"

#include <algorithm>

namespace ampwb {

SpeedUp SweepSpeedUps::of(int64_t run) const {
  return timed && baseline ? alternating_speed_up(*timed, run, baseline->run_id) : SpeedUp{};
}

SweepSpeedUps sweep_speed_ups(const RunStore& store, const std::vector<SweepPoint>& points) {
  SweepSpeedUps out;
  const auto first = std::find_if(points.begin(), points.end(), [](const SweepPoint& p) { return p.run_id != 0; });
  if (first == points.end()) return out;
  out.timed = store.alternating_speed(first->run_id);
  if (!out.timed) return out;
  out.baseline = *first;
  out.warning = alternation_warning(*out.timed);
  // Runs of one configuration share their rounds: the first of them stands for it.
  std::vector<std::vector<double>> seen;
  for (const SweepPoint& p : points) {
    const auto at = std::find(out.timed->runs.begin(), out.timed->runs.end(), p.run_id);
    if (p.run_id == 0 || at == out.timed->runs.end()) continue;
    const std::vector<double>& rounds =
        out.timed->images_per_second.at(static_cast<size_t>(at - out.timed->runs.begin()));
    if (std::find(seen.begin(), seen.end(), rounds) != seen.end()) continue;
    seen.push_back(rounds);
    if (p.index != first->index) out.others.push_back({p, out.of(p.run_id)});
  }
  return out;
}

}  // namespace ampwb
