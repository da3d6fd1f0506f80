// What a captured step's private pool holds (Allocator::new_pool, a CUDA graph's memory) against what the same step
// run op by op holds from the device, measured on the CPU allocator, which shares the caching logic with the CUDA
// one (core/allocator.h): one ResNet step at 64 px, batch 8, amp-bf16, after two warm-up steps.
//   ampwb_capture_pool [DEPTH...]   (default: 18 50)
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/allocator.h"
#include "core/rng.h"
#include "models/resnet.h"
#include "optim/optimizer.h"
#include "train/mixed_precision_step.h"

namespace {
double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
}  // namespace

int main(int argc, char** argv) {
  using namespace ampwb;
  std::vector<int> depths;
  for (int i = 1; i < argc; ++i) depths.push_back(std::atoi(argv[i]));
  if (depths.empty()) depths = {18, 50};
  CpuBackend cpu{BackendOptions{2}};
  Allocator& allocator = allocator_for(Device::cpu());
  for (const int depth : depths) {
    allocator.empty_cache();  // each model from an empty cache: what it reserves is its own
    Rng rng(5);
    ResNet model(cpu, {depth, 10, 3, 64, Stem::Auto}, rng);
    auto optimizer = make_optimizer(cpu, {OptimizerKind::Sgd, 0.9f});
    const PrecisionConfig config = precision_preset("amp-bf16");
    const PrecisionPolicy policy(config);
    LossScaler scaler(config.loss_scale);
    MixedPrecisionStep step(cpu, model, *optimizer, policy, scaler, 0.0f, 0.0f);
    Tensor images = Tensor::empty({8, 3, 64, 64}, DType::F32, Layout::NHWC);
    for (int64_t i = 0; i < images.numel(); ++i) images.data_as<float>()[i] = static_cast<float>(rng.normal());
    Tensor labels = Tensor::empty({8}, DType::I32);
    for (int n = 0; n < 8; ++n) labels.data_as<int32_t>()[n] = n % 10;
    auto run_step = [&] {
      step.run_deferred(images, labels, 0.01f);
      step.finish_deferred();
    };
    run_step();
    run_step();
    allocator.reset_peak();
    const size_t persistent = allocator.stats().live_bytes;
    run_step();
    const MemoryStats eager = allocator.stats();
    const int pool = allocator.new_pool();
    allocator.begin_pool(pool);
    step.run_deferred(images, labels, 0.01f);
    allocator.end_pool();
    step.finish_deferred();
    const size_t pooled = allocator.stats().live_bytes - persistent;
    std::printf(
        "ResNet-%d: weights and state %.1f MiB; a step op by op: tensors at their peak %.1f MiB, held from the "
        "device (tensors and cache) %.1f MiB; the same step in a pool: %.1f MiB\n",
        depth, mib(persistent), mib(eager.peak_live_bytes - persistent),
        mib(eager.live_bytes + eager.cached_bytes - persistent), mib(pooled));
    allocator.release_pool(pool);
  }
  return 0;
}
