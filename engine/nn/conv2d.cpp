// Conv2d forward and backward.
#include "nn/conv2d.h"

#include <cmath>

#include "amp/grad_stats.h"
#include "amp/policy.h"

namespace ampwb {

Conv2d::Conv2d(Backend& backend, const std::string& name, int in_channels, int out_channels, int kernel, int stride,
               int padding, Rng& rng)
    : Layer(backend), params_{stride, padding} {
  weight_.name = name + ".weight";
  Tensor initial = Tensor::empty({out_channels, in_channels, kernel, kernel}, DType::F32);
  const double stddev = std::sqrt(2.0 / (out_channels * kernel * kernel));
  float* w = initial.data_as<float>();
  for (int64_t i = 0; i < initial.numel(); ++i) w[i] = static_cast<float>(rng.normal() * stddev);
  weight_.value = on_device(backend, initial);
  weight_.grad = on_device(backend, Tensor::zeros(initial.shape(), DType::F32));
}

Fp8LayerScaling* Conv2d::fp8_scaling() {
  if (!policy().fp8_layer(network_edge_)) return nullptr;
  if (!fp8_)
    fp8_ = std::make_unique<Fp8LayerScaling>(backend_, policy().config().fp8, backend_.capabilities().fp8.native);
  return fp8_.get();
}

Tensor Conv2d::forward(const Tensor& input, Mode mode) {
  if (Fp8LayerScaling* fp8 = fp8_scaling()) return forward_fp8(*fp8, input, mode);
  const DType dtype = policy().compute_dtype(OpClass::Conv, input.dtype());
  const Tensor x = cast_counted(input, dtype);
  const int64_t K = weight_.value.n(), R = weight_.value.h(), S = weight_.value.w();
  const int64_t P = (x.h() + 2 * params_.padding - R) / params_.stride + 1;
  const int64_t Q = (x.w() + 2 * params_.padding - S) / params_.stride + 1;
  Tensor y = Tensor::empty({x.n(), K, P, Q}, dtype, x.layout(), x.device());
  backend_.conv2d_forward(x, weight_as(weight_, dtype), y, params_);
  probe_forward("conv", weight_, x.c(), K, dtype, y);
  input_ = mode == Mode::Train ? x : Tensor();
  input_dtype_ = input.dtype();
  return y;
}

Tensor Conv2d::backward(const Tensor& output_grad) {
  if (fp8_weight_.defined()) return backward_fp8(*fp8_, output_grad);
  const DType dtype = input_.dtype();
  const bool emulated = emulates(dtype);
  // A wide gradient holds dtype's values already (a probed step gets none: see BatchNorm2d::set_input_grad_wide).
  const bool arrived_wide = output_grad_wide_ && emulated && !probe_ && output_grad.dtype() == DType::F32;
  const Tensor dy = arrived_wide ? output_grad : cast_counted(output_grad, dtype);
  if (probe_) probe_->record_activation_gradient(on_host(backend_, dy));
  Tensor conv_dy = dy;  // dy as the two convolutions read it
  if (dtype == DType::F32) {
    backend_.conv2d_backward_weights(input_, dy, weight_.fp32_grad(), params_);
  } else {
    // Where the backend emulates this dtype (FP32 arithmetic on its values, rounded), each op below would widen dy
    // again: widened once here for both (unless it arrived wide), the same arithmetic (the ops round their results
    // as before).
    if (emulated && !arrived_wide) conv_dy = cast(backend_, dy, DType::F32);
    if (emulated) {  // the 16-bit gradient's values written wide, straight into the FP32 gradient: one pass fewer
      backend_.conv2d_backward_weights(input_, conv_dy, weight_.fp32_grad(), params_);
      count_cast();  // its rounding to dtype: the cast widen_grad would count
    } else {
      Tensor dw = Tensor::empty(weight_.value.shape(), dtype, Layout::NCHW, weight_.value.device());
      backend_.conv2d_backward_weights(input_, conv_dy, dw, params_);
      widen_grad(dw, weight_);
    }
  }
  Tensor dx;
  if (input_needs_grad_) {
    dx = empty_like(input_);
    backend_.conv2d_backward_data(conv_dy, weight_as(weight_, dtype), dx, params_);
    dx = cast_counted(dx, input_dtype_);
  }
  probe_backward(dtype, dy, weight_.grad);
  input_ = Tensor();  // free the activation as soon as it is used
  return dx;
}

Tensor Conv2d::forward_fp8(Fp8LayerScaling& fp8, const Tensor& input, Mode mode) {
  const bool train = mode == Mode::Train;
  const DType dtype = policy().compute_dtype(OpClass::Conv, input.dtype());
  const Tensor x = fp8.input.cast(backend_, input, train);           // (N,C,H,W) E4M3 values
  const Tensor w = fp8.weight.cast(backend_, weight_.value, train);  // (K,C,R,S) E4M3 values
  count_cast();
  count_cast();
  const int64_t K = w.n(), R = w.h(), S = w.w();
  const int64_t P = (x.h() + 2 * params_.padding - R) / params_.stride + 1;
  const int64_t Q = (x.w() + 2 * params_.padding - S) / params_.stride + 1;
  // Products of FP8 values are exact in FP32: FP32 accumulation, then the scale-inverses, then y's rounding.
  Tensor y = Tensor::empty({x.n(), K, P, Q}, dtype, x.layout(), x.device());
  backend_.conv2d_forward_scaled(x, w, y, params_, Fp8Factor::inverses_of(fp8.input.state(), &fp8.weight.state()));
  probe_forward("conv", weight_, x.c(), K, dtype, y, "e4m3");
  input_ = train ? x : Tensor();
  fp8_weight_ = train ? w : Tensor();
  input_dtype_ = input.dtype();
  return y;
}

Tensor Conv2d::backward_fp8(Fp8LayerScaling& fp8, const Tensor& output_grad) {
  if (probe_) probe_->record_activation_gradient(on_host(backend_, output_grad));
  const Tensor dy = fp8.output_grad.cast(backend_, output_grad, true);  // (N,K,P,Q) E5M2 (or E4M3) values
  count_cast();
  // The input's and weight's scale-inverses are still the forward's: the scalings are updated at the step's end.
  Tensor none;
  Tensor& dw = weight_.fp32_grad();
  backend_.conv2d_backward_weights(input_, dy, dw, params_);
  backend_.scaled_cast(dw, dw, {Fp8Factor::inverses_of(fp8.input.state(), &fp8.output_grad.state())}, none);
  Tensor dx;
  if (input_needs_grad_) {
    dx = Tensor::empty(input_.shape(), input_dtype_, input_.layout(), input_.device());
    backend_.conv2d_backward_data_scaled(dy, fp8_weight_, dx, params_,
                                         Fp8Factor::inverses_of(fp8.output_grad.state(), &fp8.weight.state()));
  }
  probe_backward(policy().compute_dtype(OpClass::Conv, input_dtype_), output_grad, weight_.grad,
                 fp8_format_name(fp8.output_grad.format()));
  input_ = Tensor();
  fp8_weight_ = Tensor();
  return dx;
}

}  // namespace ampwb
