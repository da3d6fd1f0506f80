// BatchNorm2d forward and backward.
#include "nn/batchnorm2d.h"

#include <algorithm>

namespace ampwb {
namespace {
Tensor filled(Backend& backend, int channels, float value) {
  Tensor t = Tensor::empty({channels}, DType::F32);
  std::fill_n(t.data_as<float>(), channels, value);
  return on_device(backend, t);
}
}  // namespace

BatchNorm2d::BatchNorm2d(Backend& backend, const std::string& name, int channels, float momentum, float eps)
    : Layer(backend), momentum_(momentum), eps_(eps) {
  gamma_ = {name + ".weight", filled(backend, channels, 1.0f), filled(backend, channels, 0.0f)};
  beta_ = {name + ".bias", filled(backend, channels, 0.0f), filled(backend, channels, 0.0f)};
  running_mean_ = {name + ".running_mean", filled(backend, channels, 0.0f)};
  running_var_ = {name + ".running_var", filled(backend, channels, 1.0f)};
}

Tensor BatchNorm2d::forward(const Tensor& x, Mode mode) {
  Tensor y = empty_like(x);
  if (mode == Mode::Eval) {
    backend_.batchnorm_forward_inference(x, gamma_.value, beta_.value, y, running_mean_.value, running_var_.value,
                                         eps_);
    return y;
  }
  const int64_t C = x.c();
  batch_mean_ = Tensor::empty({C}, DType::F32, Layout::NCHW, x.device());
  batch_var_ = Tensor::empty({C}, DType::F32, Layout::NCHW, x.device());
  backend_.batchnorm_forward_training(x, gamma_.value, beta_.value, y, batch_mean_, batch_var_, running_mean_.value,
                                      running_var_.value, momentum_, eps_);
  input_ = x;
  // Statistics, scale and shift are FP32 (gamma's dtype) whatever the activations' dtype.
  probe_forward("batch_norm", gamma_, C, C, gamma_.value.dtype(), y);
  return y;
}

Tensor BatchNorm2d::backward(const Tensor& output_grad) {
  const Tensor dy = cast_counted(output_grad, input_.dtype());
  Tensor dx = empty_like(input_);
  backend_.batchnorm_backward(input_, dy, gamma_.value, batch_mean_, batch_var_, dx, gamma_.grad, beta_.grad, eps_);
  input_ = Tensor();
  probe_backward(gamma_.value.dtype(), dy, gamma_.grad);
  return dx;
}

void BatchNorm2d::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&gamma_);
  out.push_back(&beta_);
}

void BatchNorm2d::collect_buffers(std::vector<Buffer*>& out) {
  out.push_back(&running_mean_);
  out.push_back(&running_var_);
}

}  // namespace ampwb
