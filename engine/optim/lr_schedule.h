// Learning-rate schedules, evaluated per optimizer step: constant, step decay, cosine decay to zero, each with an
// optional linear warm-up from zero.
#pragma once

#include <cstdint>
#include <string>

namespace ampwb {

struct LrScheduleConfig {
  std::string kind = "cosine";  // constant, step, cosine
  float base_lr = 0.1f;
  int64_t total_steps = 1;   // of the whole run
  int64_t warmup_steps = 0;  // linear from 0 to base_lr, then the schedule over the remaining steps
  int64_t step_every = 1;    // step: multiply by gamma every step_every steps
  float gamma = 0.1f;        // step
};

class LrSchedule {
 public:
  explicit LrSchedule(const LrScheduleConfig& config);
  float at(int64_t step) const;  // the rate for the step'th update (0-based)

 private:
  LrScheduleConfig config_;
};

}  // namespace ampwb
