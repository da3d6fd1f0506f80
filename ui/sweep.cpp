// Sweep: the queue of a precision sweep.
#include "sweep.h"

#include <algorithm>

namespace ampwb::ui {

std::vector<std::string> sweep_run_names(const std::vector<SweepVariant>& variants, uint64_t seed,
                                         const std::function<bool(const std::string& name)>& taken) {
  const auto names = [&](const std::string& suffix) {
    std::vector<std::string> out;
    for (const SweepVariant& v : variants) out.push_back(v.key + " · seed " + std::to_string(seed) + suffix);
    return out;
  };
  std::vector<std::string> out = names("");
  for (int k = 2; k < 100 && std::any_of(out.begin(), out.end(), taken); ++k)
    out = names(" (" + std::to_string(k) + ")");
  return out;
}

void Sweep::plan(const TrainConfig& base, const std::vector<SweepVariant>& variants,
                 const std::vector<std::string>& names, const std::string& tag) {
  planned_.clear();
  run_ids_.clear();
  not_started_.clear();
  stopped_ = false;
  next_ = 0;
  running_ = false;
  tag_ = tag;
  for (size_t i = 0; i < variants.size(); ++i) {
    TrainConfig c = apply_variant(base, variants[i]);
    c.name = names.at(i);
    planned_.push_back({variants[i].label, variants[i].key, c});
  }
}

std::optional<TrainConfig> Sweep::next() {
  if (next_ >= planned_.size()) return std::nullopt;
  current_label_ = planned_[next_].label;
  running_ = true;
  return planned_[next_++].config;
}

void Sweep::finished(int64_t run_id) {
  running_ = false;
  if (run_id != 0) run_ids_.push_back(run_id);
}

void Sweep::cancel() {
  stopped_ |= active();
  for (; next_ < planned_.size(); ++next_) not_started_.push_back(planned_[next_].key);
}

}  // namespace ampwb::ui
