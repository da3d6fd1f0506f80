// The CUDA caching allocator: device memory for tensors on cuda:N, with the CPU allocator's accounting (live, peak
// and cached bytes) and its caching idea: freed blocks are kept by size and handed out again, so after the first
// training step no cudaMalloc (which is slow and synchronizes) happens and peak_live_bytes is the step's true peak.
//
// Stream order: every kernel of the CUDA backend runs on its one compute stream per device, so a block freed by a
// tensor and handed to the next tensor is only touched again by work queued after the earlier uses (as in
// PyTorch's allocator). Work on another stream must keep its tensors alive until it is done (the backend's
// upload does).
//
// Out of memory: the cache is emptied and the allocation retried once; if it still fails, ampwb::Error says the GPU
// is out of memory, how much was asked for, held and free, and suggests a smaller batch. Never a crash.
// Plain C++ header (no CUDA headers): tensor.cpp includes it to register the allocator for CUDA devices.
#pragma once

#include <vector>

#include "core/allocator.h"

namespace ampwb {

class CudaCachingAllocator final : public CachingAllocator {
 public:
  explicit CudaCachingAllocator(int device_index) : CachingAllocator(kAlignment), device_(device_index) {}
  ~CudaCachingAllocator() override { empty_cache(); }
  int device_index() const { return device_; }

  static constexpr size_t kAlignment = 512;  // cudaMalloc gives 256; 512 keeps every tensor vector-load aligned

 private:
  void* device_allocate(size_t bytes) override;
  void device_free(const std::vector<void*>& blocks) override;
  [[noreturn]] void out_of_memory(size_t bytes, const MemoryStats& stats) override;

  int device_;
};

// The allocator of cuda:index (created on first use, never destroyed: tensors may outlive main).
// Throws ampwb::Error when index is not a usable CUDA device.
Allocator& cuda_allocator(int index);

}  // namespace ampwb
