// RunProgress: fraction done and ETA from the step reports.
#include "train/run_progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ampwb {

void RunProgress::start(const RunInfo& info, int epochs, int batch_size) {
  *this = RunProgress{};
  steps_per_epoch_ = std::max<int64_t>(1, info.steps_per_epoch);
  epochs_ = epochs;
  epoch_ = info.first_epoch;
  total_steps_ = steps_per_epoch_ * std::max(1, epochs);
  // A resumed run's steps before its checkpoint: its earlier epochs, and those of an epoch stopped part-way.
  done_steps_ = std::max(info.first_step, steps_per_epoch_ * std::max(0, info.first_epoch - 1));
  images_per_step_ =
      batch_size > 0 ? batch_size : static_cast<double>(info.train_images) / static_cast<double>(steps_per_epoch_);
  validation_images_ = info.validation_images;
}

void RunProgress::step(const StepReport& s) {
  if (!started()) return;
  const double clock = s.wall_seconds - paused_;  // training time: earlier pauses, the user's and epochs', left out
  if (last_clock_ >= 0 && s.epoch != last_epoch_) {
    // The first step of an epoch, seen by its epoch number whatever order its report came in: the time since the
    // last epoch's last step, less one step's own, is its validation and checkpoint, measured on the steps' own clock
    // (so that the host's work between steps, already in the rate, is not counted again).
    const double per_step = seconds_per_step();
    const double pause = per_step >= 0 ? std::max(0.0, clock - last_clock_ - per_step) : first_eval_guess_;
    if (pause >= 0) {
      eval_seconds_ = (eval_seconds_ * evals_seen_ + pause) / (evals_seen_ + 1);
      ++evals_seen_;
      paused_ += pause;
    }
  }
  last_clock_ = s.wall_seconds - paused_;
  last_epoch_ = s.epoch;
  epoch_ = s.epoch;
  done_steps_ = s.step + 1;  // global: a resumed run's steps go on from its checkpoint's
  validating_ = false;
  recent_.emplace_back(s.step, last_clock_);
  // About the last 10 seconds of steps: adapts to a rate that changes (warm-up, another job on the machine).
  while (recent_.size() > 2 && recent_.back().second - recent_.front().second > 10.0) recent_.pop_front();
}

void RunProgress::resumed(double paused_seconds) { paused_ += std::max(0.0, paused_seconds); }

void RunProgress::validation(const ValidationProgress& v) {
  if (!started()) return;
  validating_ = true;
  epoch_ = v.epoch;
  validated_ = v.images_done;
  validation_images_ = v.images;
  validation_seconds_ = v.seconds;
}

void RunProgress::epoch(const EpochReport& e) {
  // Until the next epoch's first step measures the pause: the epoch's time outside its steps' arithmetic and data
  // waits, which is mostly its validation (and a little more: the host's work between steps).
  first_eval_guess_ = std::max(0.0, e.seconds - e.compute_seconds - e.data_wait_seconds);
  validating_ = false;
  validated_ = 0;
  validation_seconds_ = 0;
  done_steps_ = std::max(done_steps_, steps_per_epoch_ * e.epoch);  // an epoch that ended a step early is done
  epoch_ = std::min(epochs_, e.epoch + 1);
}

int64_t RunProgress::step_in_epoch() const {
  if (!started()) return 0;
  // Of the epoch under way: 0 once an epoch has ended and the next has taken no step yet (as a pause there shows).
  return std::clamp<int64_t>(done_steps_ - steps_per_epoch_ * (epoch_ - 1), 0, steps_per_epoch_);
}

double RunProgress::fraction() const {
  if (!started()) return 0;
  return std::clamp(static_cast<double>(done_steps_) / static_cast<double>(total_steps_), 0.0, 1.0);
}

double RunProgress::seconds_per_step() const {
  if (recent_.size() < 2) return -1;
  const double dt = recent_.back().second - recent_.front().second;
  const double ds = static_cast<double>(recent_.back().first - recent_.front().first);
  return dt > 0 && ds > 0 ? dt / ds : -1;
}

double RunProgress::validation_estimate() const {
  if (evals_seen_ > 0) return eval_seconds_;
  if (first_eval_guess_ >= 0) return first_eval_guess_;
  if (validation_images_ == 0) return 0;
  if (validating_ && validated_ > 0 && validation_seconds_ > 0)
    return validation_seconds_ * static_cast<double>(validation_images_) / static_cast<double>(validated_);
  const double per_step = seconds_per_step();
  if (per_step < 0 || images_per_step_ <= 0) return -1;
  return static_cast<double>(validation_images_) * per_step / images_per_step_ / kValidationSpeedup;
}

double RunProgress::validation_eta_seconds() const {
  if (!validating_ || validated_ <= 0 || validation_seconds_ <= 0) return -1;
  return validation_seconds_ * static_cast<double>(validation_images_ - validated_) / static_cast<double>(validated_);
}

double RunProgress::eta_seconds() const {
  if (!started()) return -1;
  const double per_step = seconds_per_step(), per_validation = validation_estimate();
  if (per_step < 0 || per_validation < 0) return -1;
  const double steps_left = static_cast<double>(std::max<int64_t>(0, total_steps_ - done_steps_));
  if (validating_) {
    // This validation's time left, then the epochs after it.
    const double this_one = std::max(0.0, per_validation - validation_seconds_);
    return this_one + steps_left * per_step + std::max(0, epochs_ - epoch_) * per_validation;
  }
  return steps_left * per_step + std::max(0, epochs_ - epoch_ + 1) * per_validation;
}

std::string time_left_text(double seconds) {
  char text[64];
  const long s = std::lround(std::max(0.0, seconds));
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%ld h %02ld min", s / 3600, s % 3600 / 60);
  else if (s >= 60)
    std::snprintf(text, sizeof text, "%ld min %02ld s", s / 60, s % 60);
  else if (seconds < 10 && seconds > 0)
    std::snprintf(text, sizeof text, "%.1f s", seconds);
  else
    std::snprintf(text, sizeof text, "%ld s", s);
  return text;
}

}  // namespace ampwb
