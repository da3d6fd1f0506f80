// Progress and ETA of a live run, from its steps alone (plain C++). The ETA is the recent training rate applied to
// the steps left, plus one evaluation per epoch left estimated from the epochs seen. The rate counts training
// time only: evaluation pauses are taken out of the step clock, so the ETA does not jump after an epoch ends.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "train/events.h"

namespace ampwb::ui {

class RunProgress {
 public:
  void start(const RunInfo& info, int epochs);
  void step(const StepReport& step);
  void epoch(const EpochReport& epoch);

  bool started() const { return total_steps_ > 0; }
  double fraction() const;     // [0, 1]
  double eta_seconds() const;  // < 0 while unknown
  int current_epoch() const { return epoch_; }
  int epochs() const { return epochs_; }
  int64_t step_in_epoch() const;
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  int64_t steps_per_epoch_ = 0, total_steps_ = 0, first_step_ = 0, done_steps_ = 0, last_step_ = -1;
  int epochs_ = 0, epoch_ = 0;
  double eval_seconds_ = 0;  // mean evaluation time per epoch (epoch time minus the steps' time)
  double paused_ = 0;        // evaluation time so far, taken out of the steps' wall clock
  int evals_seen_ = 0;
  std::deque<std::pair<int64_t, double>> recent_;  // (step, training seconds) for the recent rate
};

// "1 h 02 min", "3 min 05 s", "12 s".
std::string format_duration(double seconds);

}  // namespace ampwb::ui
