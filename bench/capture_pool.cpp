// What a captured step's memory comes to (a CUDA graph's pool, Allocator::new_pool and plan_pool), measured on the
// CPU allocator, which shares the pools' logic with the CUDA one (core/allocator.h): one ResNet step at 64 px, batch 8,
// amp-bf16, after two warm-up steps. The step is filled once into a pool of its own that hands freed blocks to later
// allocations (best fit), as a first recording does, then into a pool planned from that filling's trace, as the
// second recording does, beside the most the step's tensors held at once (the trace's peak, which no plan goes below).
//   ampwb_capture_pool [DEPTH...]   (default: 18 50)
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/allocator.h"
#include "core/memory_plan.h"
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
    // One step into a pool: what it takes from the device is what the pool gains beside what the step frees.
    auto held = [&] { return allocator.stats().live_bytes + allocator.stats().cached_bytes; };
    auto pooled_step = [&](int pool) {
      allocator.begin_pool(pool);
      step.run_deferred(images, labels, 0.01f);
      allocator.end_pool();
      step.finish_deferred();
    };
    const size_t before = held();
    const int measuring = allocator.new_pool();
    pooled_step(measuring);
    const size_t best_fit = held() - before;
    const MemoryTrace trace = allocator.pool_trace(measuring);
    const int planned = allocator.new_pool();
    const size_t before_plan = allocator.stats().live_bytes;
    allocator.plan_pool(planned, trace);
    const size_t arena = allocator.stats().live_bytes - before_plan;
    pooled_step(planned);
    const size_t beyond = allocator.stats().live_bytes - before_plan - arena;
    std::printf(
        "ResNet-%d: %zu allocations; the step's tensors at their peak %.1f MiB; a best-fit pool %.1f MiB; the planned "
        "arena %.1f MiB (%.1f MiB beside it where the second filling left the plan)\n",
        depth, trace.blocks.size(), mib(trace.peak_bytes()), mib(best_fit), mib(arena), mib(beyond));
    allocator.release_pool(planned);
    allocator.release_pool(measuring);
  }
  return 0;
}
