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

Fp8LayerScaling* Linear::fp8_scaling() {
  if (!policy().fp8_layer(network_edge_)) return nullptr;
  if (!fp8_)
    fp8_ = std::make_unique<Fp8LayerScaling>(backend_, policy().config().fp8, backend_.capabilities().fp8.native);
  return fp8_.get();
}

Tensor Linear::forward(const Tensor& input, Mode mode) {
  if (Fp8LayerScaling* fp8 = fp8_scaling()) return forward_fp8(*fp8, input, mode);
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
  if (fp8_weight_.defined()) return backward_fp8(*fp8_, output_grad);
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

Tensor Linear::forward_fp8(Fp8LayerScaling& fp8, const Tensor& input, Mode mode) {
  const bool train = mode == Mode::Train;
  const DType dtype = policy().compute_dtype(OpClass::Linear, input.dtype());
  const Tensor x = fp8.input.cast(backend_, input, train);           // (N,I) E4M3 values
  const Tensor w = fp8.weight.cast(backend_, weight_.value, train);  // (O,I) E4M3 values
  count_cast();
  count_cast();
  const Fp8Factor factor = Fp8Factor::inverses_of(fp8.input.state(), &fp8.weight.state());
  // The bias joins the FP32 accumulator divided by the factor the sum is then multiplied by: y = (x w' + b / f) f,
  // the bias in FP32 where Transformer Engine adds it after the scaling (one FP32 rounding more).
  Fp8Factor reciprocal = factor;
  reciprocal.reciprocal = true;
  Tensor b = Tensor::empty(bias_.value.shape(), DType::F32, Layout::NCHW, x.device()), none;
  backend_.scaled_cast(bias_.value, b, {reciprocal}, none);
  Tensor y32 = Tensor::empty({x.dim(0), w.dim(0)}, DType::F32, Layout::NCHW, x.device());
  backend_.linear_forward(x, w, b, y32);
  Tensor y = Tensor::empty(y32.shape(), dtype, Layout::NCHW, x.device());
  backend_.scaled_cast(y32, y, {factor}, none);
  probe_forward("linear", weight_, x.dim(1), w.dim(0), dtype, y, "e4m3");
  input_ = train ? x : Tensor();
  fp8_weight_ = train ? w : Tensor();
  input_dtype_ = input.dtype();
  output_dtype_ = dtype;
  return y;
}

Tensor Linear::backward_fp8(Fp8LayerScaling& fp8, const Tensor& output_grad) {
  const Tensor dy = fp8.output_grad.cast(backend_, output_grad, true);  // (N,O) E5M2 (or E4M3) values
  count_cast();
  Tensor dx32 = Tensor::empty(input_.shape(), DType::F32, Layout::NCHW, input_.device()), none;
  Tensor &dw = weight_.fp32_grad(), &db = bias_.fp32_grad();
  // The bias gradient is summed from the FP8 values (Transformer Engine sums the BF16 gradient): one rounding of
  // each term more, 2^-3 relative at most.
  backend_.linear_backward(dy, input_, fp8_weight_, dx32, dw, db);
  // The input's and weight's scale-inverses are still the forward's: the scalings are updated at the step's end.
  backend_.scaled_cast(dw, dw, {Fp8Factor::inverses_of(fp8.input.state(), &fp8.output_grad.state())}, none);
  backend_.scaled_cast(db, db, {Fp8Factor::inverses_of(fp8.output_grad.state())}, none);
  Tensor dx = Tensor::empty(dx32.shape(), input_dtype_, Layout::NCHW, dx32.device());
  backend_.scaled_cast(dx32, dx, {Fp8Factor::inverses_of(fp8.output_grad.state(), &fp8.weight.state())}, none);
  probe_backward(output_dtype_, output_grad, weight_.grad, fp8_format_name(fp8.output_grad.format()));
  input_ = Tensor();
  fp8_weight_ = Tensor();
  return dx;
}

void Linear::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight_);
  out.push_back(&bias_);
}

}  // namespace ampwb
