// A precision sweep: one run per chosen precision variant on the same data, seed and settings, run one after
// the other; the comparison of all of them opens when the last ends. Plain C++: the main window starts each run.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "precision_modes.h"
#include "train/config.h"

namespace ampwb::ui {

// The prefix for a sweep's run names ("<prefix> <variant>"): `stamp`, or where one of those names is taken (a
// sweep started in the same second as the last), `stamp` with "-2", "-3", ... (up to "-99").
std::string free_sweep_prefix(const std::string& stamp, const std::vector<SweepVariant>& variants,
                              const std::function<bool(const std::string& name)>& taken);

class Sweep {
 public:
  // Queues base x variants; each run is named "<prefix> <variant>" so the runs view groups them.
  void plan(const TrainConfig& base, const std::vector<SweepVariant>& variants, const std::string& prefix);
  bool active() const { return next_ < planned_.size() || running_; }
  // The next run's configuration, or none when the sweep is over.
  std::optional<TrainConfig> next();
  void finished(int64_t run_id);  // the run next() gave has ended (recorded as run_id; 0 when not recorded)
  void cancel();                  // no further runs

  int index() const { return static_cast<int>(next_); }  // 1-based number of the run last started
  int count() const { return static_cast<int>(planned_.size()); }
  const std::string& current_label() const { return current_label_; }
  const std::vector<int64_t>& run_ids() const { return run_ids_; }

 private:
  std::vector<std::pair<std::string, TrainConfig>> planned_;
  size_t next_ = 0;
  bool running_ = false;
  std::string current_label_;
  std::vector<int64_t> run_ids_;
};

}  // namespace ampwb::ui
