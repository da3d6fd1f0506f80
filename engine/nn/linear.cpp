// Linear forward and backward.
#include "nn/linear.h"

#include <cmath>

#include "amp/policy.h"

namespace ampwb {

Linear::Linear(Backend& backend, const std::string& name, int in_features, int out_features, Rng& rng)
    : Layer(backend) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
  auto init = [&](Parameter& p, const std::string& suffix, Shape shape) {
    p.name = name + suffix;
    Tensor initial = Tensor::empty(shape, DType::F32);
    float* v = initial.data_as<float>();
    for (int64_t i = 0; i < initial.numel(); ++i) v[i] = rng.uniform(-bound, bound);
    p.value = on_device(backend, initial);
    p.grad = on_device(backend, Tensor::zeros(shape, DType::F32));
  };
  init(weight_, ".weight", {out_features, in_features});
  init(bias_, ".bias", {out_features});
}

Tensor Linear::forward(const Tensor& input, Mode mode) {
  const DType dtype = policy().compute_dtype(OpClass::Linear, input.dtype());
  const Tensor x = cast_counted(input, dtype);
  Tensor y = Tensor::empty({x.dim(0), weight_.value.dim(0)}, dtype, Layout::NCHW, x.device());
  backend_.linear_forward(x, weight_as(weight_, dtype), weight_as(bias_, dtype), y);
  probe_forward("linear", weight_, x.dim(1), weight_.value.dim(0), dtype, y);
  input_ = mode == Mode::Train ? x : Tensor();
  input_dtype_ = input.dtype();
  output_dtype_ = dtype;
  return y;
}

Tensor Linear::backward(const Tensor& output_grad) {
  const DType dtype = output_dtype_;
  // The loss gradient arrives in FP32 (scaled); casting it to FP16 is where a too-large scale overflows.
  const Tensor dy = cast_counted(output_grad, dtype);
  Tensor dx = empty_like(input_);
  if (dtype == DType::F32) {
    backend_.linear_backward(dy, input_, weight_.value, dx, weight_.fp32_grad(), bias_.fp32_grad());
  } else {
    const Device device = weight_.value.device();
    Tensor dw = Tensor::empty(weight_.value.shape(), dtype, Layout::NCHW, device);
    Tensor db = Tensor::empty(bias_.value.shape(), dtype, Layout::NCHW, device);
    backend_.linear_backward(dy, input_, weight_as(weight_, dtype), dx, dw, db);
    widen_grad(dw, weight_);
    widen_grad(db, bias_);
  }
  input_ = Tensor();
  dx = cast_counted(dx, input_dtype_);
  probe_backward(dtype, dy, weight_.grad);
  return dx;
}

void Linear::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight_);
  out.push_back(&bias_);
}

}  // namespace ampwb
