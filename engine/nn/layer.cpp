// Sequential composition of layers.
#include "nn/layer.h"

#include "amp/fp8_scaling.h"
#include "amp/grad_stats.h"
#include "amp/policy.h"

namespace ampwb {

const PrecisionPolicy& fp32_policy() {
  static const PrecisionPolicy policy;
  return policy;
}

Tensor cast(Backend& backend, const Tensor& t, DType dtype) {
  if (!t.defined() || t.dtype() == dtype) return t;
  Tensor out = Tensor::empty(t.shape(), dtype, t.layout(), t.device());
  backend.convert(t, out);
  return out;
}

Tensor fp32_gradient(Backend& backend, const Parameter& p) {
  return p.low_grad.defined() ? cast(backend, p.low_grad, DType::F32) : p.grad;
}

const Tensor& Parameter::value_as(Backend& backend, DType dtype) {
  if (dtype == value.dtype()) return value;
  if (!compute.defined() || compute.dtype() != dtype) {
    compute = Tensor::empty(value.shape(), dtype, value.layout(), value.device());
    compute_version = ~version;
  }
  if (compute_version != version) {  // the master weights changed since the last copy
    backend.convert(value, compute);
    compute_version = version;
  }
  return compute;
}

Tensor Layer::cast_counted(const Tensor& t, DType dtype) {
  if (probe_ && t.defined() && t.dtype() != dtype) ++probe_casts_;
  return cast(backend_, t, dtype);
}

const Tensor& Layer::weight_as(Parameter& p, DType dtype) {
  const uint64_t copied = p.compute_version;
  const Tensor& value = p.value_as(backend_, dtype);
  if (probe_ && p.compute_version != copied) ++probe_casts_;
  return value;
}

bool Layer::emulates(DType dtype) {
  if (dtype != DType::F16 && dtype != DType::BF16) return false;
  if (!capabilities_) capabilities_ = backend_.capabilities();
  return dtype == DType::F16 ? !capabilities_->fp16.native : !capabilities_->bf16.native;
}

void Layer::widen_grad(const Tensor& low_grad, Parameter& p) {
  count_cast();
  if (low_grads_for_update_) {  // the update widens it: no FP32 copy is kept beside it
    p.low_grad = low_grad;
    p.grad = Tensor();
    return;
  }
  backend_.convert(low_grad, p.fp32_grad());
}

namespace {
Fp8TensorNumerics fp8_numerics(const Fp8TensorScaling& t) {
  const Fp8CastReport& r = t.last();
  return {r.scale, r.amax, fp8_max(t.format()), r.count, r.saturated_share(), r.underflowed_share()};
}
}  // namespace

void Layer::probe_forward(const char* kind, const Parameter& weight, int64_t in_channels, int64_t out_channels,
                          DType dtype, const Tensor& y, const char* format) {
  if (!probe_) return;
  LayerNumerics n;
  // The parameter is named "<layer>.weight", as torchvision names it.
  const std::string suffix = ".weight";
  n.layer = weight.name.ends_with(suffix) ? weight.name.substr(0, weight.name.size() - suffix.size()) : weight.name;
  n.kind = kind;
  n.in_channels = in_channels;
  n.out_channels = out_channels;
  n.forward_dtype = format ? format : dtype_name(dtype);
  n.activation = value_range(on_host(backend_, y));
  if (Fp8LayerScaling* fp8 = fp8_scaling()) {
    fp8->fetch(backend_);
    n.fp8_input = fp8_numerics(fp8->input);
    n.fp8_weight = fp8_numerics(fp8->weight);
  }
  probe_record_ = probe_->layers().open(std::move(n));
  probe_opened_ = true;
  probe_->layers().hand_over(probe_record_, ProbedTensor::Activation, y);
}

void Layer::probe_backward(DType dtype, const Tensor& dy, const Tensor& weight_grad, const char* format) {
  if (!probe_ || !probe_opened_) return;
  LayerNumerics& n = probe_->layers().at(probe_record_);
  n.backward_dtype = format ? format : dtype_name(dtype);
  n.activation_grad = value_range(on_host(backend_, dy));
  n.weight_grad = value_range(on_host(backend_, weight_grad));
  n.casts = probe_casts_;
  if (Fp8LayerScaling* fp8 = fp8_scaling()) {
    fp8->fetch(backend_);
    n.fp8_output_grad = fp8_numerics(fp8->output_grad);
  }
  probe_->layers().hand_over(probe_record_, ProbedTensor::ActivationGrad, dy);
  probe_->layers().hand_over(probe_record_, ProbedTensor::WeightGrad, weight_grad);
  probe_casts_ = 0;
  probe_opened_ = false;
}

Tensor Sequential::forward(const Tensor& x, Mode mode) { return forward_first(x, mode, layers_.size()); }

Tensor Sequential::forward_first(const Tensor& x, Mode mode, size_t count) {
  Tensor out = x;
  for (size_t i = 0; i < count && i < layers_.size(); ++i) out = layers_[i]->forward(out, mode);
  return out;
}

Tensor Sequential::backward(const Tensor& dy) { return backward(dy, nullptr); }

Tensor Sequential::backward(const Tensor& dy, const std::function<void(Layer&)>& done) {
  Tensor grad = dy;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    grad = (*it)->backward(grad);
    if (done) done(**it);
  }
  return grad;
}

void Sequential::collect_parameters(std::vector<Parameter*>& out) {
  for (auto& layer : layers_) layer->collect_parameters(out);
}

void Sequential::collect_buffers(std::vector<Buffer*>& out) {
  for (auto& layer : layers_) layer->collect_buffers(out);
}

void Sequential::visit(const std::function<void(Layer&)>& fn) {
  fn(*this);
  for (auto& layer : layers_) layer->visit(fn);
}

}  // namespace ampwb
