// Where a training epoch's step time goes (EpochTimes): the backend's own timers by op class (ProfiledBackend), the
// wait for the loader, and each timed step's wall time, as per-step means.
//
// A step's time runs from asking the loader for a batch (the next step's, sent up ahead) to the step's result, so
// step time = data wait + ops + waiting for communication + the host's own work; over an epoch the timed steps add
// up to its training time. On many processes the gradients' all-reduce runs on a communication thread beside
// backward (train/gradient_reducer.h): its time ("communication") is not a part of the step's but overlaps it, and
// only what the trainer's thread waited for it after backward ("waiting for communication") adds to the step.
// What happens between steps (the observers, checkpoints, the evaluation) is not timed: the backend's timers are
// off outside begin()...end().
#pragma once

#include <chrono>
#include <cstdint>

#include "backend/profiled_backend.h"
#include "train/gradient_reducer.h"
#include "train/run_details.h"

namespace ampwb {

class StepTimer {
 public:
  // Step 0 of an epoch is not timed: it waits for the loader to start and, in a run's first epoch, does the run's
  // one-time work (the first touch of new buffers, oneDNN's primitives: 18 ms of host work beside 130 ms of ops for a
  // ResNet-18 at 32 px on a Zen 4). On the CPU every other step is timed, and step 0 too when the epoch has fewer
  // than three. On another device, where the ops are timed by marks on its clock (two per op, read later), one in
  // `sample_every`: steps 1, 1 + sample_every, ... of each epoch, step 0 when an epoch has only one. A probed step
  // (the gradient histograms: host work over every gradient, a large share of a step) is not timed unless it is the
  // epoch's only step.
  explicit StepTimer(ProfiledBackend& backend, int64_t sample_every = 10);

  // A step starts; `data_wait_seconds` is the loader's wait so far. Returns whether this step is timed.
  bool begin(int64_t step_in_epoch, int64_t steps_per_epoch, bool probed, double data_wait_seconds);
  void end(double data_wait_seconds);  // the step's result is in
  void discard();                      // the step begun did not run
  // A data-parallel run's reducer, whose communication the timed steps split out (nullptr: one process).
  void set_gradient_reducer(const GradientReducer* reducer) { reducer_ = reducer; }
  // The epoch's per-step means over its timed steps (steps = 0 when none was); starts the next epoch.
  EpochTimes take(int epoch);

 private:
  using Clock = std::chrono::steady_clock;
  void read_op_times();  // adds the last timed step's op times, once

  ProfiledBackend& backend_;
  int64_t sample_every_;
  bool timing_ = false;
  Clock::time_point start_;
  double wait_at_start_ = 0;
  const GradientReducer* reducer_ = nullptr;
  double communication_at_start_ = 0, communication_wait_at_start_ = 0;
  EpochTimes sum_;                                // sums, divided by the steps in take()
  int64_t waits_at_start_ = 0, steps_begun_ = 0;  // host waits are counted over every step
  bool unread_ = false;  // the last timed step's op times are not in sum_ yet (on a GPU, read a step or more later)
};

}  // namespace ampwb
