// A training-throughput benchmark on synthetic data: warm-up steps, then timed steps; the median step time.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "amp/precision.h"
#include "backend/profiled_backend.h"
#include "models/resnet.h"
#include "train/machine_load.h"
#include "train/step_settings.h"

namespace ampwb {

struct BenchConfig {
  int depth = 18;
  int image_size = 224;
  int batch_size = 16;
  int num_classes = 1000;
  PrecisionMode precision = PrecisionMode::Fp32;
  int steps = 20;
  int warmup = 3;
  DeviceChoice device;
  int threads = 0;
  uint64_t seed = 0;
  Stem stem = Stem::Auto;
  bool profile = false;  // time every op by class (backend/profiled_backend.h): on the host clock on a CPU, between
                         // device events on a GPU
  ConvAlgorithm conv_algorithm = ConvAlgorithm::Auto;  // CPU: FP32 3x3 convolutions (backend/make_backend.h)
  bool deterministic = false;                          // CUDA: deterministic convolutions only (ditto)
  HostSync host_sync = HostSync::Auto;                 // as TrainConfig::host_sync
  CudaGraphs cuda_graphs = CudaGraphs::Auto;           // as TrainConfig::cuda_graphs

  bool operator==(const BenchConfig&) const = default;
};

struct BenchResult {
  std::string backend_description, model_summary;
  std::string compute;             // what computes the mode's low-precision ops (precision_support.h)
  std::string memory;              // the memory estimate against what was available (train/memory_estimate.h)
  std::vector<std::string> notes;  // advice, as `ampwb train` prints it
  std::vector<double> step_ms;     // every timed step
  // From building the model to the end of the warm-up steps, the device finished: the cost before full speed
  // (cuDNN's timing of its engines for each new shape, capture, the first allocations).
  double warmup_seconds = 0;
  double step_ms_median = 0, images_per_second = 0;
  double step_ms_q1 = 0, step_ms_q3 = 0;  // the timed steps' interquartile range
  MachineLoad load;                       // the machine's other work during the timed steps
  size_t peak_bytes = 0;           // tensor bytes held at once during the timed steps (weights and state included)
  size_t max_rss_bytes = 0;        // the process's maximum resident set
  bool deferred = false;           // the steps ran without waiting for the device (MixedPrecisionStep::run_deferred)
  double host_waits_per_step = 0;  // over the timed steps (ProfiledBackend::host_waits)
  bool captured = false;           // capture was asked of the steps (BenchConfig::cuda_graphs, plan_steps)
  int64_t replayed_steps = 0;      // of the timed steps, those replayed as captured work
  std::string why_not_captured;    // why a GPU's steps ran op by op with CUDA graphs on or auto, where they did
  // With BenchConfig::profile: the timed steps' op time by class, and their whole wall time. On a CPU the rest is
  // the host's own work between ops (the layers' bookkeeping, allocation, the policy's decisions); on a GPU, where
  // each op is timed between device events (profile_device_timed), it is the time the device spent between ops.
  OpTimes profile;
  double profiled_seconds = 0;
  bool profile_device_timed = false;
};

BenchResult run_benchmark(const BenchConfig& config);

}  // namespace ampwb
