// The loss scaler's state machine.
#include "amp/loss_scaler.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace ampwb {

namespace {
// PyTorch keeps the scale in an FP32 tensor: every update's product (computed in double) is stored rounded to FP32.
double as_float32(double scale) { return static_cast<float>(scale); }
}  // namespace

LossScaler::LossScaler(const LossScaleConfig& config)
    : config_(config), scale_(as_float32(config.init_scale)), hysteresis_left_(config.hysteresis) {}

LossScaler::Unscaled LossScaler::unscale(Backend& backend, const std::vector<Tensor*>& grads) {
  AMPWB_CHECK(stage_ != Stage::Unscaled, "unscale() was already called since the last update()");
  AMPWB_CHECK(stage_ != Stage::Stepped, "unscale() is being called after step(); call update() first");
  const double inv_scale = 1.0 / scale();  // as PyTorch: reciprocal in double, then float
  backend.scale_and_check(grads, static_cast<float>(inv_scale));
  read_check(backend);
  stage_ = Stage::Unscaled;
  return unscaled_;
}

void LossScaler::read_check(Backend& backend) {
  const StepScalars check = backend.read_scalars();
  found_nonfinite_ = check.nonfinite;
  unscaled_ = {check.nonfinite, static_cast<float>(std::sqrt(check.sum_of_squares)), check};
  if (check.nonfinite) unscaled_.grad_norm = std::numeric_limits<float>::infinity();
}

LossScaler::Unscaled LossScaler::step_checked(Backend& backend, const std::function<void()>& checking_step) {
  AMPWB_CHECK(stage_ == Stage::Ready, "step_checked() after unscale() or step(); call update() first");
  AMPWB_CHECK(checks_in_step(), "step_checked() with a scale to take off the gradients or a step to skip");
  checking_step();
  read_check(backend);
  last_skipped_ = false;
  stage_ = Stage::Stepped;
  return unscaled_;
}

bool LossScaler::step(Backend& backend, const std::vector<Tensor*>& grads,
                      const std::function<void()>& optimizer_step) {
  AMPWB_CHECK(stage_ != Stage::Stepped, "step() was already called since the last update()");
  if (stage_ == Stage::Ready) unscale(backend, grads);
  // Dynamic scaling skips steps with inf/NaN gradients; static and off apply them as they are.
  last_skipped_ = dynamic() && found_nonfinite_;
  if (!last_skipped_) optimizer_step();
  stage_ = Stage::Stepped;
  return !last_skipped_;
}

void LossScaler::update() {
  AMPWB_CHECK(stage_ == Stage::Stepped, "update() needs a step() first");
  stage_ = Stage::Ready;
  if (!dynamic()) return;
  if (found_nonfinite_) {
    if (hysteresis_left_ > 1) {
      --hysteresis_left_;  // DeepSpeed/Megatron: tolerate a few overflows before backing off
    } else {
      const double backed_off = as_float32(scale_ * config_.backoff_factor), min_scale = as_float32(config_.min_scale);
      if (min_scale > 0 && backed_off < min_scale) {
        collapsed_ = scale_ <= min_scale;
        scale_ = min_scale;
      } else {
        scale_ = backed_off;
      }
    }
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == config_.growth_interval) {
    const double grown = as_float32(scale_ * config_.growth_factor);
    if (std::isfinite(grown))  // PyTorch: grow only to a finite float
      scale_ = config_.max_scale > 0 ? std::min(grown, as_float32(config_.max_scale)) : grown;
    growth_tracker_ = 0;
    hysteresis_left_ = config_.hysteresis;
  }
}

void LossScaler::record_device_step(bool found_nonfinite, const LossScaleState* before_update) {
  AMPWB_CHECK(stage_ == Stage::Ready, "a device step recorded between unscale() and update()");
  if (before_update) {
    AMPWB_CHECK(dynamic() && fits_device(), "a device loss-scale state for a scaler the device cannot keep");
    scale_ = before_update->scale;
    growth_tracker_ = before_update->growth_tracker;
  }
  found_nonfinite_ = found_nonfinite;
  last_skipped_ = dynamic() && found_nonfinite;
  stage_ = Stage::Stepped;
  update();
}

bool LossScaler::fits_device() const {
  return config_.hysteresis <= 1 && config_.min_scale <= 0 && config_.max_scale <= 0 &&
         config_.growth_interval <= std::numeric_limits<int32_t>::max();
}

LossScaleState LossScaler::device_state() const {
  LossScaleState s;
  s.scale = static_cast<float>(scale_);
  s.growth_tracker = static_cast<int32_t>(growth_tracker_);
  return s;
}

LossScaleGrowth LossScaler::device_growth() const {
  return {config_.growth_factor, config_.backoff_factor, static_cast<int32_t>(config_.growth_interval)};
}

void LossScaler::load_state(const State& s) {
  scale_ = as_float32(s.scale);
  growth_tracker_ = s.growth_tracker;
  hysteresis_left_ = s.hysteresis_left;
  stage_ = Stage::Ready;
}

LossScaleConfig loss_scale_preset(const std::string& framework) {
  LossScaleConfig c;                                              // PyTorch GradScaler: 2^16, x2 every 2000, x0.5
  if (framework == "pytorch" || framework == "paddle") return c;  // Paddle >= 2.5 shares PyTorch's defaults
  if (framework == "apex") {
    c.max_scale = 16777216.0;  // 2^24
    return c;
  }
  if (framework == "paddle-2.2") {
    c.init_scale = 32768.0;
    c.growth_interval = 1000;
    c.hysteresis = 2;
    return c;
  }
  if (framework == "deepspeed") {
    c.growth_interval = 1000;
    c.hysteresis = 2;
    c.min_scale = 1.0;
    return c;
  }
  if (framework == "megatron") {
    c.init_scale = 4294967296.0;  // 2^32
    c.growth_interval = 1000;
    c.hysteresis = 2;
    c.min_scale = 1.0;
    return c;
  }
  if (framework == "tensorflow") {
    c.init_scale = 32768.0;  // 2^15
    return c;
  }
  throw Error("unknown scaler preset '" + framework +
              "' (expected pytorch, apex, paddle, paddle-2.2, deepspeed, megatron or tensorflow)");
}

}  // namespace ampwb
