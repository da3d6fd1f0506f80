// RunProgress: fraction done and ETA from the step reports.
#include "run_progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ampwb::ui {

void RunProgress::start(const RunInfo& info, int epochs) {
  *this = RunProgress{};
  steps_per_epoch_ = std::max<int64_t>(1, info.steps_per_epoch);
  epochs_ = epochs;
  epoch_ = info.first_epoch;
  total_steps_ = steps_per_epoch_ * std::max(1, epochs - info.first_epoch + 1);
  first_step_ = -1;
}

void RunProgress::step(const StepReport& s) {
  if (!started()) return;
  if (first_step_ < 0) first_step_ = (s.epoch - 1) * steps_per_epoch_;  // a resumed run starts mid-way
  epoch_ = s.epoch;
  last_step_ = s.step;
  done_steps_ = s.step - first_step_ + 1;
  recent_.emplace_back(s.step, s.wall_seconds - paused_);
  // About the last 10 seconds of steps: adapts to a rate that changes (warm-up, another job on the machine).
  while (recent_.size() > 2 && recent_.back().second - recent_.front().second > 10.0) recent_.pop_front();
}

void RunProgress::epoch(const EpochReport& e) {
  // The part of the epoch not spent in steps is evaluation (and checkpointing): the ETA adds it per epoch left.
  const double step_seconds = e.compute_seconds + e.data_wait_seconds;
  if (e.seconds > step_seconds) {
    eval_seconds_ = (eval_seconds_ * evals_seen_ + (e.seconds - step_seconds)) / (evals_seen_ + 1);
    ++evals_seen_;
    paused_ += e.seconds - step_seconds;  // the next step's clock resumes after the evaluation
  }
  epoch_ = std::min(epochs_, e.epoch + 1);
}

int64_t RunProgress::step_in_epoch() const {
  if (last_step_ < 0 || steps_per_epoch_ == 0) return 0;
  return last_step_ % steps_per_epoch_ + 1;
}

double RunProgress::fraction() const {
  if (!started()) return 0;
  return std::clamp(static_cast<double>(done_steps_) / static_cast<double>(total_steps_), 0.0, 1.0);
}

double RunProgress::eta_seconds() const {
  if (!started() || recent_.size() < 2) return -1;
  const double dt = recent_.back().second - recent_.front().second;
  const double ds = static_cast<double>(recent_.back().first - recent_.front().first);
  if (dt <= 0 || ds <= 0) return -1;
  const double steps_left = static_cast<double>(total_steps_ - done_steps_);
  const int evaluations_left = std::max(0, epochs_ - epoch_ + 1);
  return steps_left * dt / ds + evaluations_left * eval_seconds_;
}

std::string format_duration(double seconds) {
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

}  // namespace ampwb::ui
