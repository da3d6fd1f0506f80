// How much memory a training run will hold, estimated from the model's structure before anything is allocated, and
// how much the machine can give it. A run whose estimate exceeds what is available is refused before it starts
// (and before it is recorded), naming the estimate and the largest batch size that fits.
//
// The estimate predicts the allocator's peak of live tensor bytes during a training step (MemoryStats::
// peak_live_bytes, what `ampwb bench` prints as "peak tensors" and a run records per epoch): every tensor the step
// holds (weights, gradients, optimizer state, saved activations, the backend's scratch), nothing the allocator
// caches or the process maps otherwise. tests/test_memory_estimate.cpp holds it within 25% of that peak.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "amp/precision.h"
#include "backend/backend.h"
#include "models/resnet.h"
#include "optim/optimizer.h"

namespace ampwb {

struct TrainConfig;

// What the estimate needs to know of a run: the model, the batch and the precision, and how the device computes.
struct MemoryEstimateInput {
  int depth = 18;
  int image_size = 224;
  int batch_size = 64;
  int num_classes = 10;
  int in_channels = 3;
  Stem stem = Stem::Auto;
  PrecisionConfig precision;
  OptimizerConfig optimizer;
  // The device widens the mode's 16-bit type to FP32 around each op (Capabilities' fp16/bf16 .native false): FP32
  // copies of the op's tensors for the op's duration.
  bool emulates_low_precision = false;
  // Backward leaves convolution and linear weight gradients in 16 bits for an update that widens them as it reads
  // them (MixedPrecisionStep::run where nothing checks the gradients before the update, on a backend whose updates
  // read 16-bit gradients and that computes the type natively).
  bool gradients_stay_16bit = false;
  // amp-fp8: bytes per value of the FP8 copies its FP8 layers keep from forward to backward (1 where the device
  // computes FP8, 4 where it emulates it and holds FP8 values in FP32).
  size_t fp8_storage_bytes = 4;
  // Batches of images held at once besides the one in the step: a training run sends the next batch up before the
  // step (Trainer), a benchmark holds one.
  int extra_input_batches = 0;
};

// The estimate's parts, in bytes.
struct MemoryEstimate {
  size_t weights = 0;  // the FP32 parameters (the master weights in modes that keep them) and their gradients
  size_t low_precision_copies = 0;  // the 16-bit copies of convolution and linear weights the ops compute with
  size_t optimizer_state = 0;       // momentum (SGD) or both moments (Adam), FP32
  size_t activations = 0;           // the input batch and what the forward pass keeps for backward, at the peak
  size_t workspace = 0;             // the gradients in flight and the ops' scratch, at the peak
  size_t total() const { return weights + low_precision_copies + optimizer_state + activations + workspace; }
};

MemoryEstimate estimate_training_memory(const MemoryEstimateInput& input);

// The estimate's input for a training run: its configuration, the image size and classes the data gives it, and
// the device's capabilities (whether it emulates the mode's 16-bit type); the loader's batches are counted.
MemoryEstimateInput memory_estimate_input(const TrainConfig& config, int image_size, int num_classes,
                                          const Capabilities& device);

// Bytes this process may still take: on the CPU the smallest of MemAvailable (/proc/meminfo), the cgroup's memory
// limit less its usage (v2 memory.max, v1 memory.limit_in_bytes) and the address-space limit (RLIMIT_AS) less the
// address space in use; 0 when none of them can be read.
size_t available_host_memory();
// The same for a backend's device: the host's for the CPU; for a GPU its free memory (Backend::free_memory_bytes)
// plus what this process's allocator holds cached for reuse.
size_t available_memory(const Backend& backend);

// The largest batch size whose estimate fits in `available` bytes (at least 2, batch norm's minimum); 0 when not
// even a batch of 2 fits.
int largest_batch_that_fits(MemoryEstimateInput input, size_t available);

// "3.1 GiB" (MiB below 1 GiB).
std::string memory_text(size_t bytes);
// "≈ 3.1 GiB estimated (weights and gradients 85.3 MiB, optimizer 42.6 MiB, activations 2.9 GiB, workspace
// 96.0 MiB) of 21.7 GiB available"; without the "of ..." when available is 0 (unknown).
std::string memory_summary(const MemoryEstimate& estimate, size_t available);
// Why a run does not fit, in the words the refusal and an allocation failure share: the estimate, what is
// available and the largest batch size that fits (or what else to change when none does).
std::string memory_advice(const MemoryEstimateInput& input, const MemoryEstimate& estimate, size_t available);
// Throws ampwb::Error "not enough memory: this WHAT needs ..." (memory_advice) when the estimate exceeds what is
// available; nothing when it fits or what is available is unknown (0). `what`: "run", "benchmark".
void refuse_what_cannot_fit(const MemoryEstimateInput& input, const MemoryEstimate& estimate, size_t available,
                            const std::string& what);

}  // namespace ampwb
