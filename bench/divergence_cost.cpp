// What measuring the precision divergence costs against a training step: ResNet-20 on 32x32 images, batches of 128
// (random values: the time does not depend on them), one amp-bf16 training step against one measure_divergence on
// the batch's first 16 images (two forward and backward passes and the comparison), alternated, medians.
// usage: ampwb_divergence_cost [MODE] [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/rng.h"
#include "optim/optimizer.h"
#include "train/divergence_step.h"
#include "train/mixed_precision_step.h"

namespace ampwb {
namespace {

using bench::Clock;
using bench::median;
using bench::seconds_since;

int run(const std::string& mode, int rounds) {
  const std::unique_ptr<Backend> backend = make_backend(DeviceChoice::cpu());
  Rng rng(1);
  ResNet model(*backend, {20, 10, 3, 32, Stem::Auto}, rng);
  const PrecisionPolicy policy(precision_preset(mode));
  LossScaler scaler(policy.config().loss_scale);
  auto optimizer = make_optimizer(*backend, OptimizerConfig{});
  MixedPrecisionStep step(*backend, model, *optimizer, policy, scaler, 0.0f, 0.0f);
  constexpr int kBatch = 128;
  Tensor images = Tensor::empty({kBatch, 3, 32, 32}, DType::F32, Layout::NHWC);
  for (int64_t i = 0; i < images.numel(); ++i) images.data_as<float>()[i] = static_cast<float>(rng.normal());
  Tensor labels = Tensor::empty({kBatch}, DType::I32);
  for (int n = 0; n < kBatch; ++n) labels.data_as<int32_t>()[n] = n % 10;

  std::vector<double> steps, divergences;
  for (int r = 0; r < rounds + 1; ++r) {  // the first round warms up
    auto start = Clock::now();
    step.run(images, labels, 0.01f);
    const double s = seconds_since(start);
    start = Clock::now();
    const PrecisionDivergence d = measure_divergence(*backend, model, policy, images, labels, {scaler.scale(), 0});
    const double m = seconds_since(start);
    if (r == 0) continue;
    steps.push_back(s);
    divergences.push_back(m);
    if (r == rounds) std::printf("%s\n", divergence_sentence(d).c_str());
  }
  std::printf("%s on %s: training step (batch %d) %.1f ms, precision divergence (%d images) %.1f ms = %.2f steps\n",
              mode.c_str(), backend->description().c_str(), kBatch, 1e3 * median(steps),
              static_cast<int>(DivergenceOptions{}.max_samples), 1e3 * median(divergences),
              median(divergences) / median(steps));
  return 0;
}

}  // namespace
}  // namespace ampwb

int main(int argc, char** argv) {
  return ampwb::run(argc > 1 ? argv[1] : "amp-bf16", argc > 2 ? std::atoi(argv[2]) : 5);
}
