// BatchNorm2d: per-channel normalisation with batch statistics in training and running statistics in evaluation.
// The statistics, scale and shift are FP32 whatever the activations' dtype.
#pragma once

#include "nn/layer.h"

namespace ampwb {

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(Backend& backend, const std::string& name, int channels, float momentum = 0.1f, float eps = 1e-5f);

  Tensor forward(const Tensor& x, Mode mode) override;
  Tensor backward(const Tensor& dy) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  void collect_buffers(std::vector<Buffer*>& out) override;

  Parameter& gamma() { return gamma_; }
  Buffer& running_mean() { return running_mean_; }
  Buffer& running_var() { return running_var_; }

 private:
  Parameter gamma_, beta_;             // (C): scale 1 and shift 0 at start, as torchvision
  Buffer running_mean_, running_var_;  // (C): 0 and 1 at start; the variance unbiased, as PyTorch
  float momentum_, eps_;
  // Kept by forward for backward:
  Tensor input_;                   // (N,C,H,W)
  Tensor batch_mean_, batch_var_;  // (C), the biased batch variance
};

}  // namespace ampwb
