// The mixed-precision training step.
#include "train/mixed_precision_step.h"

#include "train/overflow_forensics.h"

namespace ampwb {

void round_to_dtype(Backend& backend, Tensor& t, DType dtype) {
  if (dtype == t.dtype()) return;
  const Tensor low = cast(backend, t, dtype);
  backend.convert(low, t);
}

MixedPrecisionStep::MixedPrecisionStep(Backend& backend, ResNet& model, Optimizer& optimizer,
                                       const PrecisionPolicy& policy, LossScaler& scaler, float label_smoothing,
                                       float grad_clip_norm)
    : backend_(backend),
      model_(model),
      optimizer_(optimizer),
      policy_(policy),
      scaler_(scaler),
      loss_(backend, label_smoothing),
      grad_clip_norm_(grad_clip_norm) {
  model_.visit([&](Layer& layer) { layer.set_policy(policy); });
  if (policy.everything_low()) {  // fp16-pure: the model starts in FP16 too
    for (Parameter* p : model_.parameters()) round_to_dtype(backend_, p->value, policy.low());
    std::vector<Buffer*> buffers;
    model_.collect_buffers(buffers);
    for (Buffer* b : buffers) round_to_dtype(backend_, b->value, policy.low());
  }
}

StepResult MixedPrecisionStep::run(const Tensor& images, const Tensor& labels, float lr, GradientProbe* probe) {
  if (probe) model_.visit([&](Layer& layer) { layer.set_probe(probe); });
  StepResult r;
  // The batch goes up to the backend's device (already there when the caller uploaded it ahead).
  const Tensor logits = model_.forward(on_device(backend_, images), Mode::Train);
  // Loss scaling: d(S * loss) = S * d(loss), applied to the FP32 loss gradient in the loss's own pass.
  r.loss_scale = scaler_.scale();
  loss_.forward(logits, on_device(backend_, labels), r.loss_scale);
  model_.backward(loss_.backward());

  const std::vector<Parameter*> params = model_.parameters();
  std::vector<Tensor*> grads;
  for (Parameter* p : params) grads.push_back(&p->grad);
  if (probe) {
    probe->record_weight_gradients(backend_, grads);
    model_.visit([](Layer& layer) { layer.set_probe(nullptr); });
  }
  // The step's one wait for the device: the gradients' check, with the loss and the top-1 count.
  const LossScaler::Unscaled unscaled = scaler_.unscale(backend_, grads);
  r.loss = static_cast<float>(unscaled.device.loss);
  r.correct = unscaled.device.correct;
  r.grad_norm = unscaled.grad_norm;
  // Clipping acts on unscaled gradients, between unscale and step.
  if (grad_clip_norm_ > 0 && !unscaled.found_nonfinite && unscaled.grad_norm > grad_clip_norm_)
    backend_.scale_and_check(grads, grad_clip_norm_ / (unscaled.grad_norm + 1e-6f));
  r.skipped = !scaler_.step(backend_, grads, [&] { optimizer_.step(params, lr); });
  if (r.skipped) r.overflow = find_nonfinite_gradients(backend_, params);
  if (!r.skipped && !policy_.is_fp32() && !policy_.master_weights()) store_in_low_precision(params);
  scaler_.update();
  return r;
}

void MixedPrecisionStep::store_in_low_precision(const std::vector<Parameter*>& params) {
  for (Parameter* p : params) {
    // Conv and linear weights have a low-precision compute copy; fp16-pure stores every parameter low.
    if (!p->compute.defined() && !policy_.everything_low()) continue;
    round_to_dtype(backend_, p->value, policy_.low());
    for (Tensor* state : optimizer_.state_of(*p)) round_to_dtype(backend_, *state, policy_.low());
  }
  if (policy_.everything_low()) {
    std::vector<Buffer*> buffers;
    model_.collect_buffers(buffers);
    for (Buffer* b : buffers) round_to_dtype(backend_, b->value, policy_.low());
  }
}

}  // namespace ampwb
