// The per-epoch time breakdown of training steps.
#include "train/step_timer.h"

namespace ampwb {

StepTimer::StepTimer(ProfiledBackend& backend, int64_t sample_every)
    : backend_(backend), sample_every_(sample_every > 0 ? sample_every : 1) {
  backend_.set_enabled(false);
}

bool StepTimer::begin(int64_t step_in_epoch, int64_t steps_per_epoch, bool probed, double data_wait_seconds) {
  waits_at_start_ = backend_.host_waits();
  ++steps_begun_;
  const bool only = steps_per_epoch == 1;
  const bool sampled = backend_.device().is_cpu() ? step_in_epoch > 0 || steps_per_epoch < 3
                                                  : step_in_epoch % sample_every_ == (only ? 0 : 1);
  timing_ = sampled && (!probed || only);
  if (!timing_) return false;
  read_op_times();
  backend_.reset();
  backend_.set_enabled(true);
  wait_at_start_ = data_wait_seconds;
  if (reducer_) {
    communication_at_start_ = reducer_->communication_seconds();
    communication_wait_at_start_ = reducer_->waiting_seconds();
  }
  start_ = Clock::now();
  return true;
}

void StepTimer::end(double data_wait_seconds) {
  sum_.host_waits += static_cast<double>(backend_.host_waits() - waits_at_start_);
  if (!timing_) return;
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  backend_.set_enabled(false);
  timing_ = false;
  ++sum_.steps;
  sum_.step_seconds += seconds;
  sum_.data_wait_seconds += data_wait_seconds - wait_at_start_;
  if (reducer_) {  // the step waited for every bucket: none of its communication is still under way
    sum_.communication_seconds += reducer_->communication_seconds() - communication_at_start_;
    sum_.communication_wait_seconds += reducer_->waiting_seconds() - communication_wait_at_start_;
  }
  unread_ = true;  // read at the next timed step or the epoch's end: on a GPU its marks are passed by then
}

void StepTimer::read_op_times() {
  if (!unread_) return;
  const OpTimes& times = backend_.times();
  for (size_t c = 0; c < kTimeClassCount; ++c) sum_.op_seconds[c] += times.seconds[c];
  unread_ = false;
}

void StepTimer::discard() {
  --steps_begun_;
  backend_.set_enabled(false);
  timing_ = false;
}

EpochTimes StepTimer::take(int epoch) {
  read_op_times();
  EpochTimes t = sum_;
  t.epoch = epoch;
  t.divide_by_steps();
  t.host_waits = steps_begun_ > 0 ? sum_.host_waits / static_cast<double>(steps_begun_) : 0;
  sum_ = {};
  steps_begun_ = 0;
  return t;
}

}  // namespace ampwb
