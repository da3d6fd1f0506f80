// Linear (fully connected) layer with bias, computed in the policy's type for matrix products like Conv2d.
#pragma once

#include <memory>

#include "amp/fp8_scaling.h"
#include "core/rng.h"
#include "nn/layer.h"

namespace ampwb {

class Linear : public Layer {
 public:
  // Initialised as torch.nn.Linear: weight and bias uniform in +-1/sqrt(in_features).
  Linear(Backend& backend, const std::string& name, int in_features, int out_features, Rng& rng);

  Tensor forward(const Tensor& x, Mode mode) override;  // x (N,I) -> (N,O)
  Tensor backward(const Tensor& dy) override;
  void collect_parameters(std::vector<Parameter*>& out) override;

  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }
  Fp8LayerScaling* fp8_scaling() override;

 private:
  // amp-fp8, as Conv2d's: the product on E4M3 and E5M2 values in FP32, times the scale-inverses.
  Tensor forward_fp8(Fp8LayerScaling& fp8, const Tensor& input, Mode mode);
  Tensor backward_fp8(Fp8LayerScaling& fp8, const Tensor& output_grad);

  Parameter weight_;  // (O,I)
  Parameter bias_;    // (O)
  Tensor input_;      // (N,I) in the compute dtype
  DType input_dtype_ = DType::F32, output_dtype_ = DType::F32;
  std::unique_ptr<Fp8LayerScaling> fp8_;
  Tensor fp8_weight_;  // (O,I) the weight's E4M3 values (Fp8TensorScaling::cast), kept for the input gradient
};

}  // namespace ampwb
