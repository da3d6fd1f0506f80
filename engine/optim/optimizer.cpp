// SGD and Adam/AdamW steps.
#include "optim/optimizer.h"

#include "core/error.h"

namespace ampwb {

namespace {
// The gradient as backward left it: 16-bit where the update is to widen it.
const Tensor& gradient(const Parameter& p) { return p.low_grad.defined() ? p.low_grad : p.grad; }
}  // namespace

Tensor& Optimizer::state_for(Backend& backend, const std::string& key, const Tensor& like) {
  auto it = state_.find(key);
  if (it == state_.end()) it = state_.emplace(key, on_device(backend, Tensor::zeros(like.shape(), DType::F32))).first;
  return it->second;
}

std::vector<Tensor*> Optimizer::state_of(const Parameter& p) {
  std::vector<Tensor*> out;
  for (auto& [key, tensor] : state_)
    if (key.size() > p.name.size() && key.starts_with(p.name) && key[p.name.size()] == '.') out.push_back(&tensor);
  return out;
}

void Sgd::update(const std::vector<Parameter*>& params, float lr, const Tensor* skip_if_found_inf,
                 const Tensor* step_values, bool check_gradients) {
  const bool first = steps_ == 0;
  std::vector<ParamUpdate> updates;
  for (Parameter* p : params) {
    const Tensor buffer =
        config_.momentum != 0.0f ? state_for(backend_, p->name + ".momentum_buffer", p->value) : Tensor();
    updates.push_back({p->value, p->copy_to_update(), gradient(*p), buffer, {}});
  }
  backend_.sgd_update(updates, {lr, config_.momentum, config_.weight_decay, config_.nesterov, first, skip_if_found_inf,
                                step_values, check_gradients});
  for (Parameter* p : params) p->changed_with_copy();
  ++steps_;
}

void Adam::update(const std::vector<Parameter*>& params, float lr, const Tensor* skip_if_found_inf,
                  const Tensor* step_values, bool check_gradients) {
  const int64_t step = queued_step(skip_if_found_inf != nullptr);
  ++steps_;
  const bool decoupled = config_.kind == OptimizerKind::AdamW;
  std::vector<ParamUpdate> updates;
  for (Parameter* p : params) {
    updates.push_back({p->value, p->copy_to_update(), gradient(*p), state_for(backend_, p->name + ".exp_avg", p->value),
                       state_for(backend_, p->name + ".exp_avg_sq", p->value)});
  }
  backend_.adam_update(updates, {lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, decoupled, step,
                                 skip_if_found_inf, step_values, check_gradients});
  for (Parameter* p : params) p->changed_with_copy();
}

std::unique_ptr<Optimizer> make_optimizer(Backend& backend, const OptimizerConfig& config) {
  if (config.kind == OptimizerKind::Sgd) return std::make_unique<Sgd>(backend, config);
  return std::make_unique<Adam>(backend, config);  // Adam or AdamW
}

}  // namespace ampwb
