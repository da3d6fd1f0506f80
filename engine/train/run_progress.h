// Progress and ETA of a live run, from its steps and validations (plain C++). The fraction counts the whole run's
// steps, a resumed run's earlier ones included. The ETA is the recent training rate applied to the steps left, plus
// one validation per epoch left: measured once an epoch has ended, estimated before that from the validation
// under way, and before any validation from the training images/s (a forward pass costs about a third of a
// training step). The rate counts training time only: the pause between epochs, measured when the next epoch's first
// step arrives, and the user's pauses are taken out of the step clock, so the ETA does not jump after either.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "train/events.h"

namespace ampwb {

class RunProgress {
 public:
  // How many times faster than training an image a validation goes before one has been timed: a forward pass
  // without the backward pass and the optimizer.
  static constexpr double kValidationSpeedup = 3.0;

  // `batch_size`: images per training step (0: the training images over the steps per epoch).
  void start(const RunInfo& info, int epochs, int batch_size = 0);
  void step(const StepReport& step);
  void resumed(double paused_seconds);  // the user's pause, which neither the rate nor the ETA counts
  void validation(const ValidationProgress& validation);
  void epoch(const EpochReport& epoch);

  bool started() const { return total_steps_ > 0; }
  double fraction() const;     // [0, 1] of the run's steps
  double eta_seconds() const;  // the run's time left; < 0 while unknown
  int current_epoch() const { return epoch_; }
  int epochs() const { return epochs_; }
  int64_t step_in_epoch() const;
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

  // Between an epoch's last step and its report: the validation's images done of its images, and its own time
  // left (< 0 while unknown).
  bool validating() const { return validating_; }
  int64_t validated_images() const { return validated_; }
  int64_t validation_images() const { return validation_images_; }
  double validation_eta_seconds() const;

 private:
  double seconds_per_step() const;     // the recent training rate; < 0 while unknown
  double validation_estimate() const;  // one epoch's validation and end-of-epoch work; < 0 while unknown
  int64_t steps_per_epoch_ = 0, total_steps_ = 0, done_steps_ = 0;
  double images_per_step_ = 0;
  int64_t validation_images_ = 0, validated_ = 0;
  double validation_seconds_ = 0;  // of the validation under way, so far
  bool validating_ = false;
  int epochs_ = 0, epoch_ = 0;
  double eval_seconds_ = 0;       // mean pause between epochs (validation, checkpoint), measured at the next step
  double paused_ = 0;             // those pauses and the user's so far, taken out of the steps' wall clock
  int evals_seen_ = 0;            // pauses measured
  double first_eval_guess_ = -1;  // the last epoch's end-of-epoch time from its report, until a pause is measured
  double last_clock_ = -1;        // the last step's training time (its wall clock less paused_)
  int last_epoch_ = 0;
  std::deque<std::pair<int64_t, double>> recent_;  // (step, training seconds) for the recent rate
};

// A time left, to the second: "1 h 02 min", "3 min 05 s", "12 s" (the GUI's ETA, `ampwb train`'s).
std::string time_left_text(double seconds);

}  // namespace ampwb
