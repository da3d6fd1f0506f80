// Sweep: the queue of a precision sweep.
#include "sweep.h"

namespace ampwb::ui {

std::string free_sweep_prefix(const std::string& stamp, const std::vector<SweepVariant>& variants,
                              const std::function<bool(const std::string& name)>& taken) {
  auto free = [&](const std::string& prefix) {
    for (const SweepVariant& v : variants)
      if (taken(prefix + " " + v.key)) return false;
    return true;
  };
  std::string prefix = stamp;
  for (int k = 2; k < 100 && !free(prefix); ++k) prefix = stamp + "-" + std::to_string(k);
  return prefix;
}

void Sweep::plan(const TrainConfig& base, const std::vector<SweepVariant>& variants, const std::string& prefix) {
  planned_.clear();
  run_ids_.clear();
  next_ = 0;
  running_ = false;
  for (const SweepVariant& v : variants) {
    TrainConfig c = apply_variant(base, v);
    c.name = prefix + " " + v.key;
    planned_.emplace_back(v.label, c);
  }
}

std::optional<TrainConfig> Sweep::next() {
  if (next_ >= planned_.size()) return std::nullopt;
  current_label_ = planned_[next_].first;
  running_ = true;
  return planned_[next_++].second;
}

void Sweep::finished(int64_t run_id) {
  running_ = false;
  if (run_id != 0) run_ids_.push_back(run_id);
}

void Sweep::cancel() { next_ = planned_.size(); }

}  // namespace ampwb::ui
