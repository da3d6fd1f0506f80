// Linear forward and backward.
#include "nn/linear.h"

#include <cmath>

namespace ampwb {

Linear::Linear(Backend& backend, const std::string& name, int in_features, int out_features, Rng& rng)
    : Layer(backend) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
  auto init = [&](Parameter& p, const std::string& suffix, Shape shape) {
    p.name = name + suffix;
    p.value = Tensor::empty(shape, DType::F32);
    p.grad = Tensor::zeros(shape, DType::F32);
    float* v = p.value.data_as<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i) v[i] = rng.uniform(-bound, bound);
  };
  init(weight_, ".weight", {out_features, in_features});
  init(bias_, ".bias", {out_features});
}

Tensor Linear::forward(const Tensor& x, Mode mode) {
  Tensor y = Tensor::empty({x.dim(0), weight_.value.dim(0)}, x.dtype(), Layout::NCHW, x.device());
  backend_.linear_forward(x, weight_.value, bias_.value, y);
  input_ = mode == Mode::Train ? x : Tensor();
  return y;
}

Tensor Linear::backward(const Tensor& dy) {
  Tensor dx = empty_like(input_);
  backend_.linear_backward(dy, input_, weight_.value, dx, weight_.grad, bias_.grad);
  input_ = Tensor();
  return dx;
}

void Linear::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight_);
  out.push_back(&bias_);
}

}  // namespace ampwb
