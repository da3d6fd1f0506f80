// Conv2d forward and backward.
#include "nn/conv2d.h"

#include <cmath>

namespace ampwb {

Conv2d::Conv2d(Backend& backend, const std::string& name, int in_channels, int out_channels, int kernel,
               int stride, int padding, Rng& rng)
    : Layer(backend), params_{stride, padding} {
  weight_.name = name + ".weight";
  weight_.value = Tensor::empty({out_channels, in_channels, kernel, kernel}, DType::F32);
  weight_.grad = Tensor::zeros(weight_.value.shape(), DType::F32);
  const double stddev = std::sqrt(2.0 / (out_channels * kernel * kernel));
  float* w = weight_.value.data_as<float>();
  for (int64_t i = 0; i < weight_.value.numel(); ++i) w[i] = static_cast<float>(rng.normal() * stddev);
}

Tensor Conv2d::forward(const Tensor& x, Mode mode) {
  const int64_t K = weight_.value.n(), R = weight_.value.h(), S = weight_.value.w();
  const int64_t P = (x.h() + 2 * params_.padding - R) / params_.stride + 1;
  const int64_t Q = (x.w() + 2 * params_.padding - S) / params_.stride + 1;
  Tensor y = Tensor::empty({x.n(), K, P, Q}, x.dtype(), x.layout(), x.device());
  backend_.conv2d_forward(x, weight_.value, y, params_);
  input_ = mode == Mode::Train ? x : Tensor();
  return y;
}

Tensor Conv2d::backward(const Tensor& dy) {
  backend_.conv2d_backward_weights(input_, dy, weight_.grad, params_);
  Tensor dx;
  if (input_needs_grad_) {
    dx = empty_like(input_);
    backend_.conv2d_backward_data(dy, weight_.value, dx, params_);
  }
  input_ = Tensor();  // free the activation as soon as it is used
  return dx;
}

}  // namespace ampwb
