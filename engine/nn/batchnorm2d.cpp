// BatchNorm2d forward and backward.
#include "nn/batchnorm2d.h"

#include <algorithm>

#include "core/error.h"

namespace ampwb {
namespace {
Tensor filled(Backend& backend, int channels, float value) {
  Tensor t = Tensor::empty({channels}, DType::F32);
  std::fill_n(t.data_as<float>(), channels, value);
  return on_device(backend, t);
}
}  // namespace

BatchNorm2d::BatchNorm2d(Backend& backend, const std::string& name, int channels, bool relu, float momentum, float eps)
    : Layer(backend), relu_(relu), momentum_(momentum), eps_(eps) {
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
    if (relu_) backend_.relu_forward(y, y);  // in place: elementwise
    return y;
  }
  start_training_forward(x);
  // A probed step records batch norm's own output, so there the ReLU runs as a second op (the same bits).
  fused_ = relu_ && !probe_;
  if (fused_)
    backend_.batchnorm_relu_forward_training(x, gamma_.value, beta_.value, y, batch_mean_, batch_var_,
                                             running_mean_.value, running_var_.value, momentum_, eps_);
  else
    backend_.batchnorm_forward_training(x, gamma_.value, beta_.value, y, batch_mean_, batch_var_, running_mean_.value,
                                        running_var_.value, momentum_, eps_);
  // Statistics, scale and shift are FP32 (gamma's dtype) whatever the activations' dtype.
  probe_forward("batch_norm", gamma_, x.c(), x.c(), gamma_.value.dtype(), y);
  if (relu_ && !fused_) {
    Tensor batch_norm_output = y;  // the probe may hold it: not overwritten
    y = empty_like(x);
    backend_.relu_forward(batch_norm_output, y);
  }
  if (relu_) output_ = y;
  return y;
}

void BatchNorm2d::start_training_forward(const Tensor& x) {
  batch_mean_ = Tensor::empty({x.c()}, DType::F32, Layout::NCHW, x.device());
  batch_var_ = Tensor::empty({x.c()}, DType::F32, Layout::NCHW, x.device());
  input_ = x;
}

bool BatchNorm2d::fuses_residual_end(const Tensor& x, const Tensor& residual, Mode mode) const {
  return mode == Mode::Train && !relu_ && !probe_ && residual.shape() == x.shape() && residual.dtype() == x.dtype() &&
         residual.layout() == x.layout() && residual.device() == x.device();
}

Tensor BatchNorm2d::forward_add_relu(const Tensor& x, const Tensor& residual) {
  AMPWB_CHECK(fuses_residual_end(x, residual, Mode::Train),
              "batch norm + residual add + ReLU in one op needs a batch norm without its own ReLU, no probe, and x and "
              "the residual alike: "
                  << x.describe() << " and " << residual.describe());
  start_training_forward(x);
  fused_ = false;
  Tensor y = empty_like(x);
  backend_.batchnorm_add_relu_forward_training(x, gamma_.value, beta_.value, residual, y, batch_mean_, batch_var_,
                                               running_mean_.value, running_var_.value, momentum_, eps_);
  return y;
}

Tensor BatchNorm2d::backward(const Tensor& output_grad) {
  // The ReLU's cast, where the gradient arrives in another type, is not batch norm's (as when it was a layer).
  Tensor dy = relu_ ? cast(backend_, output_grad, input_.dtype()) : cast_counted(output_grad, input_.dtype());
  const bool wide = input_grad_wide_ && !probe_ && emulates(input_.dtype());
  Tensor dx = wide ? Tensor::empty(input_.shape(), DType::F32, input_.layout(), input_.device()) : empty_like(input_);
  if (fused_) {
    backend_.batchnorm_relu_backward(input_, output_, dy, gamma_.value, beta_.value, batch_mean_, batch_var_, dx,
                                     gamma_.grad, beta_.grad, eps_);
  } else {
    if (relu_) {
      Tensor masked = empty_like(dy);
      backend_.relu_backward(output_, dy, masked);
      dy = masked;
    }
    backend_.batchnorm_backward(input_, dy, gamma_.value, batch_mean_, batch_var_, dx, gamma_.grad, beta_.grad, eps_);
  }
  input_ = output_ = Tensor();
  probe_backward(gamma_.value.dtype(), dy, gamma_.grad);  // on a probed step, dy as batch norm computes with it
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
