// One mixed-precision training step of a fresh ResNet on a given backend, from a seed: what tests compare across
// backends (native against emulated BF16, the GPU against the CPU).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "train/config.h"
#include "train/mixed_precision_step.h"

namespace ampwb::testing {

struct StepOutcome {
  float loss = 0;
  bool skipped = false;
  std::vector<std::vector<float>> grads, weights;  // per parameter, after the step, on the host
};

// A fresh ResNet of `model_config` shape drawn from `rng`, SGD with momentum and the step of `mode`, its loss scale
// starting at 1024 so that the first step is taken, not skipped: the training the step tests share.
struct StepRig {
  StepRig(Backend& backend, const std::string& mode, const ResNetConfig& model_config, Rng& rng)
      : model(backend, model_config, rng),
        sgd(backend, {OptimizerKind::Sgd, 0.9f}),
        config(starting_at_1024(precision_preset(mode))),
        policy(config),
        scaler(config.loss_scale),
        step(backend, model, sgd, policy, scaler, 0.0f, 0.0f) {}

  static PrecisionConfig starting_at_1024(PrecisionConfig c) {
    c.loss_scale.init_scale = 1024;
    return c;
  }

  ResNet model;
  Sgd sgd;
  PrecisionConfig config;
  PrecisionPolicy policy;
  LossScaler scaler;
  MixedPrecisionStep step;
};

// A ResNet of `model` shape, SGD with momentum, a random NHWC batch of `batch` images with random labels, one step
// at lr 0.1 in `mode`; the loss scale starts at 1024 so that the first step is taken, not skipped.
inline StepOutcome one_training_step(Backend& backend, const std::string& mode, const ResNetConfig& model_config,
                                     int batch, uint64_t seed) {
  Rng rng(seed);
  StepRig rig(backend, mode, model_config, rng);
  ResNet& model = rig.model;
  MixedPrecisionStep& step = rig.step;
  const int64_t size = model_config.image_size;
  const Tensor images = random_tensor({batch, model_config.in_channels, size, size}, rng, Layout::NHWC);
  Tensor labels = Tensor::empty({batch}, DType::I32);
  for (int n = 0; n < batch; ++n)
    labels.data_as<int32_t>()[n] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(model_config.num_classes)));
  StepOutcome o;
  const StepResult r = step.run(images, labels, 0.1f);
  o.loss = r.loss;
  o.skipped = r.skipped;
  for (Parameter* p : model.parameters()) {
    o.grads.push_back(to_float_vector(on_host(backend, fp32_gradient(backend, *p))));
    o.weights.push_back(to_float_vector(on_host(backend, p->value)));
  }
  return o;
}

// ||a - b|| / ||b|| over all the tensors together.
inline double relative_l2(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double diff = 0, norm = 0;
  for (size_t t = 0; t < a.size() && t < b.size(); ++t)
    for (size_t i = 0; i < a[t].size() && i < b[t].size(); ++i) {
      const double d = static_cast<double>(a[t][i]) - b[t][i];
      diff += d * d;
      norm += static_cast<double>(b[t][i]) * b[t][i];
    }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

}  // namespace ampwb::testing
