// Learning-rate schedules.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace ampwb {

LrSchedule::LrSchedule(const LrScheduleConfig& config) : config_(config) {
  AMPWB_CHECK(config.base_lr > 0 && std::isfinite(config.base_lr), "the learning rate must be positive");
  AMPWB_CHECK(config.total_steps >= 1 && config.warmup_steps >= 0 && config.step_every >= 1,
              "learning-rate schedule lengths must be positive");
}

float LrSchedule::at(int64_t step) const {
  if (step < config_.warmup_steps)
    return config_.base_lr * static_cast<float>(step + 1) / static_cast<float>(config_.warmup_steps);
  const int64_t t = step - config_.warmup_steps;
  const int64_t span = std::max<int64_t>(1, config_.total_steps - config_.warmup_steps);
  if (config_.kind == Schedule::Step)
    return config_.base_lr * std::pow(config_.gamma, static_cast<float>(t / config_.step_every));
  if (config_.kind == Schedule::Cosine) {
    const double progress = std::min(1.0, static_cast<double>(t) / static_cast<double>(span));
    return static_cast<float>(config_.base_lr * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
  }
  return config_.base_lr;
}

}  // namespace ampwb
