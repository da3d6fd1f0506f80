// Sequential composition of layers.
#include "nn/layer.h"

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

Tensor Sequential::forward(const Tensor& x, Mode mode) {
  Tensor out = x;
  for (auto& layer : layers_) out = layer->forward(out, mode);
  return out;
}

Tensor Sequential::backward(const Tensor& dy) {
  Tensor grad = dy;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) grad = (*it)->backward(grad);
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
