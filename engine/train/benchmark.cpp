// The synthetic training benchmark.
#include "train/benchmark.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/error.h"
#include "core/setting_error.h"
#include "train/config.h"
#include "train/memory_estimate.h"
#include "train/mixed_precision_step.h"
#include "train/precision_support.h"

namespace ampwb {

namespace {
// Refuses a setting before any work, in words for the user (the same bounds as training's, config.cpp), naming it
// by its BenchConfig field.
void validate(const BenchConfig& c) {
  auto require = [](bool holds, const char* setting, const std::string& message) {
    if (!holds) throw SettingError(setting, message);
  };
  const std::vector<int> depths = supported_depths();
  require(std::find(depths.begin(), depths.end(), c.depth) != depths.end(), "depth",
          "unsupported depth " + std::to_string(c.depth) + " (expected 18, 34, 50, 101, 152, 20, 32, 44, 56 or 110)");
  require(c.image_size >= 8 && c.image_size <= 1024, "image_size",
          "the image size must be between 8 and 1024, got " + std::to_string(c.image_size));
  require(c.batch_size >= 2, "batch_size",
          "the batch size must be at least 2 (batch norm needs two samples), got " + std::to_string(c.batch_size));
  require(c.num_classes >= 2, "num_classes",
          "the number of classes must be at least 2, got " + std::to_string(c.num_classes));
  require(c.steps >= 1, "steps", "the timed steps must be at least 1, got " + std::to_string(c.steps));
  require(c.warmup >= 0, "warmup", "the warm-up steps must not be negative, got " + std::to_string(c.warmup));
  require(c.threads >= 0, "threads", "the thread count must not be negative, got " + std::to_string(c.threads));
  require(c.cuda_graphs != CudaGraphs::On || !c.profile, "profile",
          "profiling times each op of every step: it needs CUDA graphs off");
  require(c.cuda_graphs != CudaGraphs::On || c.host_sync != HostSync::EveryStep, "cuda_graphs",
          "CUDA graphs on captures deferred steps: it needs the host sync auto or deferred");
}
}  // namespace

BenchResult run_benchmark(const BenchConfig& config) {
  validate(config);
  std::unique_ptr<Backend> backend =
      make_backend(config.device, {config.threads, CpuBf16::Auto, config.precision == PrecisionMode::Tf32,
                                   config.conv_algorithm, config.deterministic});
  // Timing by class only with --profile (between device events on a GPU; on a CPU each op is timed on the host
  // clock); the host waits are always counted.
  auto wrapped = std::make_unique<ProfiledBackend>(std::move(backend));
  ProfiledBackend* const profiled = wrapped.get();
  profiled->set_enabled(config.profile);
  backend = std::move(wrapped);
  Rng rng(config.seed);
  const PrecisionConfig precision = precision_preset(config.precision);
  const ModeSupport support = mode_support(config.precision, backend->capabilities());
  if (!support.supported) throw Error(support.reason);
  // Refused before anything is allocated when it cannot fit, as a training run is (the one batch is the step's).
  const OptimizerConfig sgd{OptimizerKind::Sgd, 0.9f};
  TrainConfig as_run;
  as_run.depth = config.depth;
  as_run.batch_size = config.batch_size;
  as_run.stem = config.stem;
  as_run.optimizer = sgd;
  as_run.precision = precision;
  MemoryEstimateInput memory_input =
      memory_estimate_input(as_run, config.image_size, config.num_classes, backend->capabilities());
  memory_input.extra_input_batches = 0;  // synthetic data: one batch, no loader
  const MemoryEstimate memory = estimate_training_memory(memory_input);
  const size_t available = available_memory(*backend);
  refuse_what_cannot_fit(memory_input, memory, available, "benchmark");
  const auto setup_start = std::chrono::steady_clock::now();
  ResNet model(*backend, {config.depth, config.num_classes, 3, config.image_size, config.stem}, rng);
  auto optimizer = make_optimizer(*backend, sgd);
  const PrecisionPolicy policy(precision);
  LossScaler scaler(precision.loss_scale);
  MixedPrecisionStep step(*backend, model, *optimizer, policy, scaler, 0.0f, 0.0f);
  const StepPlan plan = plan_steps(step, backend->device(), config.host_sync, config.cuda_graphs);
  const bool deferred = plan.deferred;
  const bool captured = plan.captured && !config.profile;  // a profile times the ops one by one
  step.set_capture(captured);

  const int64_t B = config.batch_size, S = config.image_size;
  std::vector<float> pixels(static_cast<size_t>(B * 3 * S * S));
  for (float& v : pixels) v = static_cast<float>(rng.normal());
  Tensor images = tensor_from_floats(pixels, {B, 3, S, S}, DType::F32, Layout::NHWC);
  Tensor labels = Tensor::empty({B}, DType::I32);
  for (int64_t i = 0; i < B; ++i) labels.data_as<int32_t>()[i] = static_cast<int32_t>(rng.below(config.num_classes));

  auto run_step = [&] {
    if (deferred)
      step.run_deferred(backend->upload(images), backend->upload(labels), 0.01f);
    else
      step.run(backend->upload(images), backend->upload(labels), 0.01f);
  };

  BenchResult result;
  result.backend_description = backend->description();
  result.model_summary = model.summary();
  result.compute = support.compute;
  result.memory = memory_summary(memory, available);
  result.notes = support.notes;
  // The host batch goes up every step, as in training (and as PyTorch's side of bench/cuda_compare.py does).
  // Deferred steps return once the step before is done: each timed call is one step of the device's time.
  for (int i = 0; i < config.warmup; ++i) run_step();
  profiled->inner().synchronize();  // deferred steps may still run: not a wait of the timed steps
  result.warmup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
  allocator_for(backend->device()).reset_peak();
  profiled->reset();
  const int64_t waits_before = profiled->host_waits(), replayed_before = step.replayed_steps();
  const auto timed_start = std::chrono::steady_clock::now();
  const MachineLoadMeter load(backend->device().str());
  for (int i = 0; i < config.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run_step();
    result.step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  result.load = load.stop();
  result.deferred = deferred;
  result.captured = captured;
  result.host_waits_per_step = static_cast<double>(profiled->host_waits() - waits_before) / config.steps;
  result.replayed_steps = step.replayed_steps() - replayed_before;
  result.why_not_captured = step.why_not_captured();
  step.finish_deferred();
  if (config.profile) {
    profiled->inner().synchronize();
    result.profile = profiled->times();
    result.profile_device_timed = profiled->device_timing();
    result.profiled_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - timed_start).count();
  }
  std::vector<double> sorted = result.step_ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const auto quantile = [&](double q) {  // linear between the two nearest steps
    const double at = q * static_cast<double>(n - 1);
    const size_t below = static_cast<size_t>(at), above = std::min(below + 1, n - 1);
    return sorted[below] + (at - static_cast<double>(below)) * (sorted[above] - sorted[below]);
  };
  result.step_ms_median = quantile(0.5);
  result.step_ms_q1 = quantile(0.25), result.step_ms_q3 = quantile(0.75);
  result.images_per_second = B / (result.step_ms_median / 1000.0);
  result.peak_bytes = allocator_for(backend->device()).stats().peak_live_bytes;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  result.max_rss_bytes = static_cast<size_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
  return result;
}

}  // namespace ampwb
