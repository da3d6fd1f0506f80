// The mixed-precision training step.
#include "train/mixed_precision_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "amp/fp8_scaling.h"
#include "core/setting_error.h"
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
      grad_clip_norm_(grad_clip_norm),
      updates_read_16bit_gradients_(backend.capabilities().updates_read_16bit_gradients) {
  model_.visit([&](Layer& layer) { layer.set_policy(policy); });
  if (policy.everything_low()) {  // fp16-pure: the model starts in FP16 too
    for (Parameter* p : model_.parameters()) round_to_dtype(backend_, p->value, policy.low());
    std::vector<Buffer*> buffers;
    model_.collect_buffers(buffers);
    for (Buffer* b : buffers) round_to_dtype(backend_, b->value, policy.low());
  }
}

StepResult MixedPrecisionStep::run(const Tensor& images, const Tensor& labels, float lr, GradientProbe* probe) {
  AMPWB_CHECK(posted_ == 0, "run() while a deferred step's result waits: finish_deferred() first");
  state_current_ = false;  // the host's scaler moves on: a later run_deferred() starts from its state
  if (probe) model_.visit([&](Layer& layer) { layer.set_probe(probe); });
  StepResult r;
  // The batch goes up to the backend's device (already there when the caller uploaded it ahead).
  const Tensor logits = model_.forward(on_device(backend_, images), Mode::Train);
  // Loss scaling: d(S * loss) = S * d(loss), applied to the FP32 loss gradient in the loss's own pass.
  r.loss_scale = scaler_.scale();
  loss_.forward(logits, on_device(backend_, labels), r.loss_scale);
  const std::vector<Parameter*> params = model_.parameters();
  // Nothing waits on the gradients' check (no scale to take off, no step to skip, no clipping): the update makes
  // it in its own pass over the gradients, one read of them less, and where the backend can, reads 16-bit
  // gradients as backward left them, one pass less (only a probed step looks at them before; captured steps
  // replay with the FP32 gradients where they were captured).
  const bool check_in_update = scaler_.checks_in_step() && grad_clip_norm_ <= 0;
  backward_gradients(check_in_update && !probe && updates_read_16bit_gradients_ && captures_.empty() && !reducer_);

  std::vector<Tensor*> grads;
  for (Parameter* p : params) grads.push_back(&p->grad);
  if (probe) {
    probe->record_weight_gradients(backend_, grads);
    model_.visit([](Layer& layer) { layer.set_probe(nullptr); });
  }
  // The step's one wait for the device: the gradients' check, with the loss and the top-1 count.
  LossScaler::Unscaled unscaled;
  if (check_in_update) {
    unscaled = scaler_.step_checked(backend_, [&] { optimizer_.step(params, lr, nullptr, nullptr, true); });
    r.skipped = false;
  } else {
    unscaled = scaler_.unscale(backend_, grads);
    // Clipping acts on unscaled gradients, between unscale and step.
    if (grad_clip_norm_ > 0 && !unscaled.found_nonfinite && unscaled.grad_norm > grad_clip_norm_)
      backend_.scale_and_check(grads, grad_clip_norm_ / (unscaled.grad_norm + 1e-6f));
    r.skipped = !scaler_.step(backend_, grads, [&] { optimizer_.step(params, lr); });
  }
  r.loss = static_cast<float>(unscaled.device.loss);
  r.correct = unscaled.device.correct;
  r.grad_norm = unscaled.grad_norm;
  if (r.skipped) r.overflow = find_nonfinite_gradients(backend_, params);
  if (!r.skipped && !policy_.is_fp32() && !policy_.master_weights()) store_in_low_precision(params);
  scaler_.update();
  update_fp8_scalings();
  return r;
}

std::vector<Fp8TensorScaling*> MixedPrecisionStep::fp8_tensors() {
  std::vector<Fp8TensorScaling*> out;
  model_.visit([&](Layer& layer) {
    if (Fp8LayerScaling* fp8 = layer.fp8_scaling())
      for (Fp8TensorScaling* t : fp8->tensors()) out.push_back(t);
  });
  return out;
}

void MixedPrecisionStep::update_fp8_scalings() {
  if (!policy_.fp8()) return;
  std::vector<Fp8ScalingUpdate> updates;
  for (Fp8TensorScaling* t : fp8_tensors())
    if (std::optional<Fp8ScalingUpdate> u = t->take_update()) updates.push_back(*u);
  if (!updates.empty()) backend_.update_fp8_scalings(updates);
}

void MixedPrecisionStep::set_gradient_reducer(GradientReducer* reducer, bool overlap) {
  if (reducer && reducer->precision() == GradientAllReduce::F16 && !scaler_.dynamic())
    throw SettingError("data_parallel.gradient_allreduce",
                       "an FP16 gradient all-reduce needs a dynamic loss scale: a gradient past FP16's 65504 becomes "
                       "inf, and only a dynamic scale skips that step and backs off (BF16 has FP32's range)");
  reducer_ = reducer;
  overlap_ = overlap;
}

void MixedPrecisionStep::backward_gradients(bool low_grads_for_update) {
  for (Parameter* p : model_.parameters()) p->low_grad = Tensor();  // the last step's: grad is written anew
  if (low_grads_for_update) model_.visit([](Layer& layer) { layer.set_low_grads_for_update(true); });
  if (reducer_) {
    reducer_->begin();
    if (overlap_) model_.set_gradients_final([this](Layer& layer) { reducer_->gradients_final(layer); });
  }
  try {
    model_.backward(loss_.backward());
  } catch (...) {
    if (reducer_) {  // no bucket may outlive the step: the next collective must find the communicator idle
      model_.set_gradients_final(nullptr);
      reducer_->abandon();
    }
    throw;
  }
  if (low_grads_for_update) model_.visit([](Layer& layer) { layer.set_low_grads_for_update(false); });
  if (reducer_) {
    model_.set_gradients_final(nullptr);
    // Waits for every bucket before the step goes on: the trainer's other collectives (validation's counts, the
    // stop agreement) come after the step, so they never run while a bucket is in flight.
    reducer_->finish();
  }
}

std::string MixedPrecisionStep::why_not_deferred() const {
  if (reducer_) return "data-parallel steps average their gradients over the ranks on the host";
  if (grad_clip_norm_ > 0) return "gradient clipping scales the update by the gradients' norm, which the host reads";
  if (!policy_.is_fp32() && !policy_.master_weights())
    return "without FP32 master weights the host rounds the weights after each step taken";
  if (scaler_.dynamic() && !scaler_.fits_device())
    return "the device keeps PyTorch's loss-scale rules only (no hysteresis, minimum or maximum scale)";
  return "";
}

StepPlan plan_steps(const MixedPrecisionStep& step, const Device& device, HostSync host_sync, CudaGraphs cuda_graphs) {
  const std::string why_every_step = step.why_not_deferred();
  if (host_sync == HostSync::Deferred && !why_every_step.empty())
    throw SettingError("host_sync", "the host sync deferred is not possible here: " + why_every_step);
  StepPlan plan;
  plan.deferred =
      host_sync == HostSync::Deferred || (host_sync == HostSync::Auto && !device.is_cpu() && why_every_step.empty());
  if (cuda_graphs == CudaGraphs::On && !plan.deferred)
    throw SettingError("cuda_graphs",
                       "CUDA graphs on captures deferred steps, and these run every-step: " +
                           (why_every_step.empty() ? std::string("the CPU's steps wait for nothing") : why_every_step));
  plan.captured =
      cuda_graphs == CudaGraphs::On || (cuda_graphs == CudaGraphs::Auto && plan.deferred && !device.is_cpu());
  return plan;
}

std::optional<StepResult> MixedPrecisionStep::run_deferred(const Tensor& images, const Tensor& labels, float lr) {
  const std::string why_not = why_not_deferred();
  AMPWB_CHECK(why_not.empty(), "a step without host waits is not possible here: " << why_not);
  const bool device_scale = scaler_.dynamic();
  if (device_scale && !state_current_) {  // from the host scaler's state (a checkpoint's, when resumed)
    Tensor state = Tensor::empty({kLossScaleStateBytes}, DType::U8);
    const LossScaleState from = scaler_.device_state();
    std::memcpy(state.data(), &from, sizeof from);
    if (!loss_scale_state_.defined()) {
      loss_scale_state_ = Tensor::empty(state.shape(), DType::U8, Layout::NCHW, backend_.device());
      posted_state_ = Tensor::empty(state.shape(), DType::U8, Layout::NCHW, backend_.device());
    }
    backend_.convert(state, loss_scale_state_);  // in place: captured steps read it where it is
    state_current_ = true;
    optimizer_.new_device_state();
  }
  if (!replay_deferred(images, labels, lr))
    queue_deferred(on_device(backend_, images), on_device(backend_, labels), lr, nullptr);
  backend_.post_scalars(device_scale ? &posted_state_ : nullptr);  // the scale used, and found_inf
  ++posted_;
  if (posted_ < 2) return std::nullopt;
  return collect_deferred();
}

void MixedPrecisionStep::queue_deferred(const Tensor& images, const Tensor& labels, float lr,
                                        const Tensor* step_values) {
  const bool device_scale = scaler_.dynamic();
  const Tensor logits = model_.forward(images, Mode::Train);
  loss_.forward(logits, labels, device_scale ? GradScale(loss_scale_state_) : GradScale(scaler_.scale()));
  backward_gradients(false);
  const std::vector<Parameter*> params = model_.parameters();
  std::vector<Tensor*> grads;
  for (Parameter* p : params) grads.push_back(&p->grad);
  if (device_scale)
    backend_.unscale_and_check(grads, loss_scale_state_);
  else  // a static scale (or none) is the host's: the reciprocal as LossScaler::unscale takes it
    backend_.scale_and_check(grads, static_cast<float>(1.0 / scaler_.scale()));
  optimizer_.step(params, lr, device_scale ? &loss_scale_state_ : nullptr, step_values);
  if (device_scale) {
    backend_.convert(loss_scale_state_, posted_state_);
    backend_.update_loss_scale(loss_scale_state_, scaler_.device_growth());
  }
  update_fp8_scalings();
}

bool MixedPrecisionStep::replay_deferred(const Tensor& images, const Tensor& labels, float lr) {
  if (!capture_) return false;
  auto captured = std::find_if(captures_.begin(), captures_.end(), [&](const Captured& c) {
    return c.images.shape() == images.shape() && c.labels.shape() == labels.shape();
  });
  if (captured == captures_.end()) {
    auto seen = std::find_if(eager_steps_.begin(), eager_steps_.end(),
                             [&](const auto& shape_steps) { return shape_steps.first == images.shape(); });
    if (seen == eager_steps_.end()) seen = eager_steps_.insert(eager_steps_.end(), {images.shape(), 0});
    // Not before the optimizer's first step: it is decided on the host (SGD's momentum buffer starts as the
    // gradient), and a graph would replay it as the first every time.
    if (seen->second < kEagerSteps || captures_.size() >= kMaxCaptures || !why_not_captured_.empty() ||
        optimizer_.steps_taken() == 0) {
      ++seen->second;
      return false;
    }
  }
  // The values of this step where the captured updates read them.
  const bool device_scale = scaler_.dynamic();
  Tensor values = Tensor::empty({kOptimizerStepBytes}, DType::U8);
  const OptimizerStep now = optimizer_.step_values(lr, device_scale);
  std::memcpy(values.data(), &now, sizeof now);
  if (!step_values_.defined()) step_values_ = Tensor::empty(values.shape(), DType::U8, Layout::NCHW, backend_.device());
  backend_.convert(values, step_values_);
  if (captured != captures_.end()) {
    backend_.convert(images, captured->images);
    backend_.convert(labels, captured->labels);
    captured->work->replay();
    optimizer_.count_replayed_step();
    ++replayed_;
    return true;
  }
  Captured c{Tensor::empty(images.shape(), images.dtype(), images.layout(), backend_.device()),
             Tensor::empty(labels.shape(), labels.dtype(), labels.layout(), backend_.device()), nullptr};
  backend_.convert(images, c.images);
  backend_.convert(labels, c.labels);
  const int64_t steps_before = optimizer_.steps_taken();
  c.work = backend_.capture(
      [&] {
        optimizer_.set_steps_taken(steps_before);  // each recording queues the same step
        queue_deferred(c.images, c.labels, lr, &step_values_);
      },
      why_not_captured_);
  if (!c.work) {
    optimizer_.set_steps_taken(steps_before);                      // the recording ran nothing,
    for (Fp8TensorScaling* t : fp8_tensors()) t->forget_update();  // nor the FP8 casts it recorded
    if (why_not_captured_.empty()) why_not_captured_ = "the backend gave no reason";
    return false;
  }
  c.work->replay();
  ++replayed_;
  captures_.push_back(std::move(c));
  return true;
}

std::optional<StepResult> MixedPrecisionStep::finish_deferred() {
  if (posted_ == 0) return std::nullopt;
  return collect_deferred();
}

StepResult MixedPrecisionStep::collect_deferred() {
  const PostedScalars posted = backend_.collect_scalars();
  --posted_;
  StepResult r;
  r.loss = static_cast<float>(posted.scalars.loss);
  r.correct = posted.scalars.correct;
  r.loss_scale = posted.has_loss_scale ? posted.loss_scale.scale : scaler_.scale();
  const bool found = posted.has_loss_scale ? posted.loss_scale.found_inf != 0.0f : posted.scalars.nonfinite;
  r.grad_norm =
      found ? std::numeric_limits<float>::infinity() : static_cast<float>(std::sqrt(posted.scalars.sum_of_squares));
  scaler_.record_device_step(found, posted.has_loss_scale ? &posted.loss_scale : nullptr);
  r.skipped = scaler_.last_step_skipped();
  if (r.skipped) optimizer_.skipped_on_device();  // counted as taken when it was queued
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
