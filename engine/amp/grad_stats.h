// Gradient statistics for the paper's histogram (Micikevicius et al., Fig. 3), measured on the user's own run:
// log2 magnitudes of activation and weight gradients against FP16's representable range (2^-24 ... 65504).
#pragma once

#include <vector>

#include "amp/gradient_histogram.h"
#include "amp/layer_probe.h"
#include "backend/backend.h"
#include "core/tensor.h"

namespace ampwb {

class GradientProbe {
 public:
  // Without histograms: only the per-layer numerics (a step probed for them alone).
  explicit GradientProbe(bool histograms = true);
  void record_activation_gradient(const Tensor& g) {
    if (histograms_) add(g, activation_);
  }
  void record_weight_gradients(Backend& backend, const std::vector<Tensor*>& grads);  // on any device
  // The two histograms gathered since the last take(), with their fractions; resets.
  std::vector<GradientHistogram> take(int epoch, double loss_scale);
  // The per-layer numerics the convolution, linear and batch-norm layers record on the same step.
  LayerProbe& layers() { return layers_; }

 private:
  static void add(const Tensor& g, GradientHistogram& into);
  bool histograms_;
  GradientHistogram activation_, weight_;
  LayerProbe layers_;
};

}  // namespace ampwb
