// ReLU, max pooling, global average pooling and the residual add with its ReLU: the layers without parameters. Each
// runs in its input's type; gradients arriving in another type are cast to it.
#pragma once

#include "nn/layer.h"

namespace ampwb {

class ReLU : public Layer {
 public:
  using Layer::Layer;
  Tensor forward(const Tensor& x, Mode mode) override;
  Tensor backward(const Tensor& dy) override;

 private:
  Tensor output_;  // (N,C,H,W): the gradient passes where the output is positive
};

class MaxPool2d : public Layer {
 public:
  MaxPool2d(Backend& backend, PoolParams params) : Layer(backend), params_(params) {}
  Tensor forward(const Tensor& x, Mode mode) override;
  Tensor backward(const Tensor& dy) override;

 private:
  PoolParams params_;
  Tensor input_like_;  // an (N,C,H,W) tensor of the input's shape for the gradient; no data needed
  Tensor workspace_;   // backend-defined argmax record
};

class GlobalAvgPool : public Layer {
 public:
  using Layer::Layer;
  Tensor forward(const Tensor& x, Mode mode) override;  // (N,C,H,W) -> (N,C)
  Tensor backward(const Tensor& dy) override;

 private:
  Shape input_shape_;
  DType input_dtype_ = DType::F32;
  Layout input_layout_ = Layout::NCHW;
};

// The end of a residual block, relu(a + b): the two branches summed in the wider of their types (autocast's
// promotion rule), sum and ReLU in one pass (Backend::add_relu), rounded as a separate add and ReLU would be.
class ResidualAddReLU {
 public:
  explicit ResidualAddReLU(Backend& backend) : backend_(backend) {}
  Tensor forward(const Tensor& a, const Tensor& b, Mode mode);
  // The same end computed elsewhere (BatchNorm2d::forward_add_relu): y = relu(a + b) for a and b of these types,
  // kept for backward as forward keeps its own.
  Tensor adopt(const Tensor& y, DType a_dtype, DType b_dtype, Mode mode);
  // The gradient for each branch, in that branch's type.
  std::pair<Tensor, Tensor> backward(const Tensor& dy);
  // The block after this end applies its ReLU's mask, summing its own branches' gradients
  // (Backend::relu_backward_of_sum): backward takes dy as already masked, and forward keeps no output.
  void set_gradient_arrives_masked() { gradient_arrives_masked_ = true; }

 private:
  Backend& backend_;
  DType a_dtype_ = DType::F32, b_dtype_ = DType::F32, output_dtype_ = DType::F32;
  bool gradient_arrives_masked_ = false;
  Tensor output_;  // (N,C,H,W): the gradient passes where the output is positive
};

}  // namespace ampwb
