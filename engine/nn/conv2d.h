// Conv2d without bias (every ResNet convolution is followed by batch norm). Computes in the policy's type for
// convolutions: the input is cast, the weights come from the FP32 master copy, and the weight gradient is
// produced in the compute type (where FP16 underflows) before it is widened into the FP32 gradient.
#pragma once

#include <memory>

#include "amp/fp8_scaling.h"
#include "core/rng.h"
#include "nn/layer.h"

namespace ampwb {

class Conv2d : public Layer {
 public:
  // Weights initialised as torchvision does: Kaiming normal, fan_out, ReLU gain.
  Conv2d(Backend& backend, const std::string& name, int in_channels, int out_channels, int kernel, int stride,
         int padding, Rng& rng);

  Tensor forward(const Tensor& x, Mode mode) override;  // x (N,C,H,W) -> (N,K,P,Q)
  Tensor backward(const Tensor& dy) override;           // undefined if the input needs no gradient
  void collect_parameters(std::vector<Parameter*>& out) override { out.push_back(&weight_); }

  // The first layer's input is data: its gradient is never needed, so skip that convolution.
  void set_input_needs_grad(bool needed) { input_needs_grad_ = needed; }
  // Its output gradient may arrive wide from the batch norm after it (BatchNorm2d::set_input_grad_wide): FP32
  // holding the 16-bit gradient's values. Where the backend emulates the compute type, both convolutions then read
  // it as it is, instead of a 16-bit gradient widened here (the same values, one pass less).
  void set_output_grad_wide(bool wide) { output_grad_wide_ = wide; }
  Parameter& weight() { return weight_; }
  ConvParams params() const { return params_; }
  Fp8LayerScaling* fp8_scaling() override;

 private:
  // amp-fp8: the convolutions on E4M3 input and weight and E5M2 output gradient values (FP32 arithmetic), their
  // results times the scale-inverses, handed on in the policy's type (BF16).
  Tensor forward_fp8(Fp8LayerScaling& fp8, const Tensor& input, Mode mode);
  Tensor backward_fp8(Fp8LayerScaling& fp8, const Tensor& output_grad);

  Parameter weight_;  // (K,C,R,S)
  ConvParams params_;
  bool input_needs_grad_ = true;
  bool output_grad_wide_ = false;
  Tensor input_;                    // (N,C,H,W) in the compute dtype, kept for the weight gradient
  DType input_dtype_ = DType::F32;  // before the cast: the input gradient goes back in this type
  std::unique_ptr<Fp8LayerScaling> fp8_;
  Tensor fp8_weight_;  // (K,C,R,S) the weight's E4M3 values (Fp8TensorScaling::cast), kept for the input gradient
};

}  // namespace ampwb
