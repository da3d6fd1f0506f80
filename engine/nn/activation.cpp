// Forward and backward of the layers without parameters.
#include "nn/activation.h"

namespace ampwb {

Tensor ReLU::forward(const Tensor& x, Mode mode) {
  Tensor y = empty_like(x);
  backend_.relu_forward(x, y);
  output_ = mode == Mode::Train ? y : Tensor();
  return y;
}

Tensor ReLU::backward(const Tensor& output_grad) {
  const Tensor dy = cast(backend_, output_grad, output_.dtype());
  Tensor dx = empty_like(dy);
  backend_.relu_backward(output_, dy, dx);
  output_ = Tensor();
  return dx;
}

Tensor MaxPool2d::forward(const Tensor& x, Mode mode) {
  const int64_t P = (x.h() + 2 * params_.padding - params_.kernel) / params_.stride + 1;
  const int64_t Q = (x.w() + 2 * params_.padding - params_.kernel) / params_.stride + 1;
  Tensor y = Tensor::empty({x.n(), x.c(), P, Q}, x.dtype(), x.layout(), x.device());
  Tensor workspace;
  backend_.maxpool_forward(x, y, workspace, params_);
  if (mode == Mode::Train) {
    workspace_ = workspace;
    input_like_ = x;
  }
  return y;
}

Tensor MaxPool2d::backward(const Tensor& output_grad) {
  const Tensor dy = cast(backend_, output_grad, input_like_.dtype());
  Tensor dx = empty_like(input_like_);
  backend_.maxpool_backward(dy, workspace_, dx, params_);
  workspace_ = Tensor();
  input_like_ = Tensor();
  return dx;
}

Tensor GlobalAvgPool::forward(const Tensor& x, Mode /*mode*/) {
  input_shape_ = x.shape();
  input_dtype_ = x.dtype();
  input_layout_ = x.layout();
  Tensor y = Tensor::empty({x.n(), x.c()}, x.dtype(), Layout::NCHW, x.device());
  backend_.global_avgpool_forward(x, y);
  return y;
}

Tensor GlobalAvgPool::backward(const Tensor& output_grad) {
  const Tensor dy = cast(backend_, output_grad, input_dtype_);
  Tensor dx = Tensor::empty(input_shape_, input_dtype_, input_layout_, dy.device());
  backend_.global_avgpool_backward(dy, dx);
  return dx;
}

namespace {
DType wider(DType a, DType b) { return a == b ? a : DType::F32; }  // F16 + BF16 promote to F32 as well
}  // namespace

Tensor ResidualAddReLU::forward(const Tensor& a, const Tensor& b, Mode mode) {
  const DType dtype = wider(a.dtype(), b.dtype());
  const Tensor a_cast = cast(backend_, a, dtype), b_cast = cast(backend_, b, dtype);
  Tensor y = empty_like(a_cast);
  backend_.add_relu(a_cast, b_cast, y);
  return adopt(y, a.dtype(), b.dtype(), mode);
}

Tensor ResidualAddReLU::adopt(const Tensor& y, DType a_dtype, DType b_dtype, Mode mode) {
  a_dtype_ = a_dtype;
  b_dtype_ = b_dtype;
  output_dtype_ = y.dtype();
  output_ = mode == Mode::Train && !gradient_arrives_masked_ ? y : Tensor();
  return y;
}

std::pair<Tensor, Tensor> ResidualAddReLU::backward(const Tensor& output_grad) {
  Tensor d_sum = cast(backend_, output_grad, output_dtype_);
  if (!gradient_arrives_masked_) {
    Tensor masked = empty_like(d_sum);
    backend_.relu_backward(output_, d_sum, masked);
    d_sum = masked;
  }
  output_ = Tensor();
  return {cast(backend_, d_sum, a_dtype_), cast(backend_, d_sum, b_dtype_)};
}

}  // namespace ampwb
