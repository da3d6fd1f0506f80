// Learning-rate schedules, evaluated per optimizer step: constant, step decay, cosine decay to zero, each with an
// optional linear warm-up from zero.
#pragma once

#include <array>
#include <cstdint>

#include "core/choices.h"

namespace ampwb {

enum class Schedule : uint8_t { Constant, Step, Cosine };

template <>
struct ChoiceTable<Schedule> {
  static constexpr const char* what = "schedule";
  static constexpr std::array<Choice<Schedule>, 3> rows = {{
      {Schedule::Cosine, "cosine", "cosine decay", "from the peak rate down to zero along a half cosine"},
      {Schedule::Step, "step", "step decay (x0.1 every 30 epochs)", "the rate times 0.1 every 30 epochs"},
      {Schedule::Constant, "constant", "constant", "the peak rate throughout"},
  }};
};

struct LrScheduleConfig {
  Schedule kind = Schedule::Cosine;
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
