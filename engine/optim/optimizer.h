// Optimizers over FP32 parameters, with PyTorch's update rules: SGD (momentum, Nesterov, L2 weight decay),
// Adam (L2 weight decay) and AdamW (decoupled weight decay). The arithmetic runs in the backend; the pass that
// updates a master weight also writes its low-precision compute copy, when a layer keeps one.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/choices.h"
#include "nn/layer.h"

namespace ampwb {

enum class OptimizerKind : uint8_t { Sgd, Adam, AdamW };

template <>
struct ChoiceTable<OptimizerKind> {
  static constexpr const char* what = "optimizer";
  static constexpr std::array<Choice<OptimizerKind>, 3> rows = {{
      {OptimizerKind::Sgd, "sgd", "SGD with momentum",
       "stochastic gradient descent, with momentum and optional Nesterov"},
      {OptimizerKind::Adam, "adam", "Adam", "Adam, its weight decay added to the gradient (L2)"},
      {OptimizerKind::AdamW, "adamw", "AdamW", "Adam with decoupled weight decay"},
  }};
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Sgd;
  float momentum = 0.9f;  // sgd
  bool nesterov = false;  // sgd
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter from its gradient, at learning rate lr. Given a LossScaleState, every update
  // leaves its parameter untouched where the state's found_inf is set, decided on the device; steps_taken() counts
  // the step all the same until the host learns it was skipped (skipped_on_device()). Given step values (an
  // OptimizerStep on the device, holding step_values(lr, ...)), the updates read lr and the step there. With
  // check_gradients the updates also check the gradients (SgdParams::check_gradients) for read_scalars().
  void step(const std::vector<Parameter*>& params, float lr, const Tensor* skip_if_found_inf = nullptr,
            const Tensor* step_values = nullptr, bool check_gradients = false) {
    update(params, lr, skip_if_found_inf, step_values, check_gradients);
  }
  // What the next step's updates read from their step values.
  OptimizerStep step_values(float lr, bool with_loss_scale_state) const {
    return {lr, 0, queued_step(with_loss_scale_state)};
  }
  // A captured step was replayed: counted as step() counts one.
  void count_replayed_step() { ++steps_; }
  int64_t steps_taken() const { return steps_; }
  // A step queued with a state was skipped there: not taken. The count is kept for Adam's, whose update reads the
  // state's count of skips; new_device_state() starts it again for a new state.
  void skipped_on_device() { --steps_, ++device_skips_seen_; }
  void new_device_state() { device_skips_seen_ = 0; }

  // Per-parameter state (momentum buffers, moments) by parameter name, for checkpoints.
  std::map<std::string, Tensor>& state() { return state_; }
  // The state tensors of one parameter.
  std::vector<Tensor*> state_of(const Parameter& p);
  void set_steps_taken(int64_t steps) { steps_ = steps; }

 protected:
  virtual void update(const std::vector<Parameter*>& params, float lr, const Tensor* skip_if_found_inf,
                      const Tensor* step_values, bool check_gradients) = 0;
  // The next step's number as Adam counts it (1 on the first): with a state, the steps queued since it was made
  // (the skipped ones the host knows of are out of steps_); the update takes the state's skips off on the device.
  int64_t queued_step(bool with_loss_scale_state) const {
    return steps_ + 1 + (with_loss_scale_state ? device_skips_seen_ : 0);
  }
  Tensor& state_for(Backend& backend, const std::string& key, const Tensor& like);  // zeros on like's device
  std::map<std::string, Tensor> state_;
  int64_t steps_ = 0;
  int64_t device_skips_seen_ = 0;  // skipped_on_device() since new_device_state()
};

class Sgd final : public Optimizer {
 public:
  Sgd(Backend& backend, const OptimizerConfig& config) : backend_(backend), config_(config) {}

 private:
  void update(const std::vector<Parameter*>& params, float lr, const Tensor* skip_if_found_inf,
              const Tensor* step_values, bool check_gradients) override;
  Backend& backend_;
  OptimizerConfig config_;
};

class Adam final : public Optimizer {
 public:
  Adam(Backend& backend, const OptimizerConfig& config) : backend_(backend), config_(config) {}

 private:
  void update(const std::vector<Parameter*>& params, float lr, const Tensor* skip_if_found_inf,
              const Tensor* step_values, bool check_gradients) override;
  Backend& backend_;
  OptimizerConfig config_;
};

std::unique_ptr<Optimizer> make_optimizer(Backend& backend, const OptimizerConfig& config);

}  // namespace ampwb
