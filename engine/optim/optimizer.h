// Optimizers over FP32 parameters, with PyTorch's update rules: SGD (momentum, Nesterov, L2 weight decay),
// Adam (L2 weight decay) and AdamW (decoupled weight decay). The arithmetic runs in the backend; the pass that
// updates a master weight also writes its low-precision compute copy, when a layer keeps one.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "nn/layer.h"

namespace ampwb {

struct OptimizerConfig {
  std::string kind = "sgd";  // sgd, adam, adamw
  float momentum = 0.9f;     // sgd
  bool nesterov = false;     // sgd
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter from its gradient, at learning rate lr.
  virtual void step(const std::vector<Parameter*>& params, float lr) = 0;
  int64_t steps_taken() const { return steps_; }

  // Per-parameter state (momentum buffers, moments) by parameter name, for checkpoints.
  std::map<std::string, Tensor>& state() { return state_; }
  // The state tensors of one parameter.
  std::vector<Tensor*> state_of(const Parameter& p);
  void set_steps_taken(int64_t steps) { steps_ = steps; }

 protected:
  Tensor& state_for(Backend& backend, const std::string& key, const Tensor& like);  // zeros on like's device
  std::map<std::string, Tensor> state_;
  int64_t steps_ = 0;
};

class Sgd final : public Optimizer {
 public:
  Sgd(Backend& backend, const OptimizerConfig& config) : backend_(backend), config_(config) {}
  void step(const std::vector<Parameter*>& params, float lr) override;

 private:
  Backend& backend_;
  OptimizerConfig config_;
};

class Adam final : public Optimizer {
 public:
  Adam(Backend& backend, const OptimizerConfig& config) : backend_(backend), config_(config) {}
  void step(const std::vector<Parameter*>& params, float lr) override;

 private:
  Backend& backend_;
  OptimizerConfig config_;
};

std::unique_ptr<Optimizer> make_optimizer(Backend& backend, const OptimizerConfig& config);

}  // namespace ampwb
