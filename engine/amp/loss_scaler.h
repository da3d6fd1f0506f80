// Loss scaling with PyTorch GradScaler semantics (torch/amp/grad_scaler.py), plus the options other frameworks
// use: hysteresis (DeepSpeed, Megatron), a minimum and a maximum scale.
//
// Per step: scale the loss gradient by scale(), backward, unscale() (one fused pass multiplies every gradient by
// 1/scale and looks for inf/NaN), optionally clip, step() (skipped when an inf/NaN was found), update().
// Dynamic: on a non-finite step the scale backs off (x0.5) and the growth tracker resets; after growth_interval
// clean steps in a row it grows (x2). Static: the scale never changes and nothing is skipped (Apex's static mode).
// Off: scale 1, pass-through.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "amp/precision.h"
#include "backend/backend.h"

namespace ampwb {

class LossScaler {
 public:
  explicit LossScaler(const LossScaleConfig& config);

  bool enabled() const { return config_.kind != LossScaleKind::Off; }
  bool dynamic() const { return config_.kind == LossScaleKind::Dynamic; }
  float scale() const { return enabled() ? static_cast<float>(scale_) : 1.0f; }

  struct Unscaled {
    bool found_nonfinite = false;
    float grad_norm = 0;  // L2 norm of the unscaled gradients (inf/NaN when found_nonfinite)
    StepScalars device;   // the same read: whatever else the step left on the device (its loss, its top-1 count)
  };
  // Multiplies every gradient by 1/scale (the reciprocal in double, then float, as PyTorch) and checks them for
  // inf/NaN, in one pass; its one read of the device is the step's. Twice before update(), or after step(), is an
  // error.
  Unscaled unscale(Backend& backend, const std::vector<Tensor*>& grads);
  // Unscales if not done; calls optimizer_step unless a gradient was inf/NaN. Returns whether it stepped.
  bool step(Backend& backend, const std::vector<Tensor*>& grads, const std::function<void()>& optimizer_step);
  // Whether this scaler has nothing to take off the gradients (off, or a static scale of 1) and skips no step, so
  // that the optimizer can check the gradients in its own pass over them (step_checked()).
  bool checks_in_step() const { return !dynamic() && scale() == 1.0f; }
  // unscale() and step() for such a scaler: calls checking_step, an optimizer step that checks the gradients as it
  // reads them (Optimizer::step's check_gradients), then reads what it found, as unscale() would have.
  Unscaled step_checked(Backend& backend, const std::function<void()>& checking_step);
  // Adjusts the scale for the next step; required after each step().
  void update();

  // A step whose scaling the device did (Backend::unscale_and_check, update_loss_scale) or, for a static scale or
  // none, the host's factor: the same bookkeeping as unscale(), step() and update(), from what the step posted.
  // `before_update`: the device's state as it was before update_loss_scale (the scale used, the tracker, found_inf).
  void record_device_step(bool found_nonfinite, const LossScaleState* before_update);
  // Whether a device can keep this scaler's state: PyTorch's rules (no hysteresis, minimum or maximum scale).
  bool fits_device() const;
  LossScaleState device_state() const;  // the state to start the device's copy from
  LossScaleGrowth device_growth() const;

  bool last_step_skipped() const { return last_skipped_; }
  // The scale sat at its minimum and gradients still overflowed: the run cannot recover.
  bool collapsed() const { return collapsed_; }

  struct State {
    double scale = 65536.0;
    int64_t growth_tracker = 0;
    int hysteresis_left = 1;
  };
  State state() const { return {scale_, growth_tracker_, hysteresis_left_}; }
  void load_state(const State& s);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  void read_check(Backend& backend);  // what the last check found, into unscaled_
  LossScaleConfig config_;
  double scale_;  // an FP32 value, as PyTorch keeps it
  int64_t growth_tracker_ = 0;
  int hysteresis_left_;
  Stage stage_ = Stage::Ready;
  bool found_nonfinite_ = false;
  bool last_skipped_ = false;
  bool collapsed_ = false;
  Unscaled unscaled_;
};

// Scaler presets: the defaults of PyTorch, Apex, Paddle, DeepSpeed, Megatron and TensorFlow (AMP-REFERENCE.md).
LossScaleConfig loss_scale_preset(const std::string& framework);

}  // namespace ampwb
