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

// A sweep's run names, by what varies between its runs and what they share: "<variant> · seed <seed>" ("fp32 · seed
// 0"). Where one of them is taken (an earlier sweep on the same seed), all get " (2)", " (3)", ... (up to 99).
std::vector<std::string> sweep_run_names(const std::vector<SweepVariant>& variants, uint64_t seed,
                                         const std::function<bool(const std::string& name)>& taken);

class Sweep {
 public:
  // Queues base x variants, named `names` (one per variant, sweep_run_names) and all tagged `tag` ("sweep
  // 1201-135804"), which finds them together in the runs view.
  void plan(const TrainConfig& base, const std::vector<SweepVariant>& variants, const std::vector<std::string>& names,
            const std::string& tag);
  bool active() const { return next_ < planned_.size() || running_; }
  // The next run's configuration, or none when the sweep is over.
  std::optional<TrainConfig> next();
  void finished(int64_t run_id);  // the run next() gave has ended (recorded as run_id; 0 when not recorded)
  void cancel();                  // no further runs: those left are not_started()

  int index() const { return static_cast<int>(next_); }  // 1-based number of the run last started
  int count() const { return static_cast<int>(planned_.size()); }
  const std::string& current_label() const { return current_label_; }
  const std::string& tag() const { return tag_; }
  const std::vector<int64_t>& run_ids() const { return run_ids_; }
  // The keys of the variants cancel() dropped ("amp-fp16-noscale", as their runs would be named: labels hold commas).
  const std::vector<std::string>& not_started() const { return not_started_; }
  bool stopped() const { return stopped_; }  // cancel()ed while a run trained or waited

 private:
  struct Planned {
    std::string label, key;  // the variant's: "amp-fp16, no loss scaling", "amp-fp16-noscale"
    TrainConfig config;
  };
  std::vector<Planned> planned_;
  size_t next_ = 0;
  bool running_ = false;
  std::string current_label_, tag_;
  std::vector<int64_t> run_ids_;
  std::vector<std::string> not_started_;
  bool stopped_ = false;
};

}  // namespace ampwb::ui
