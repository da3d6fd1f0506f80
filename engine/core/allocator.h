// Device memory allocators that account for live and peak bytes.
//
// The CPU allocator caches freed blocks by size: a training step allocates the same sizes every time, so after the
// first step no memory comes from the system (no page faults, no zeroing) and the working set stays flat.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ampwb {

struct MemoryStats {
  size_t live_bytes = 0;       // held by tensors now
  size_t peak_live_bytes = 0;  // the most held at once since the last reset_peak()
  size_t cached_bytes = 0;     // freed by tensors, kept for reuse
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr, size_t bytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() = 0;  // returns cached blocks to the system
};

class CpuCachingAllocator final : public Allocator {
 public:
  ~CpuCachingAllocator() override;
  void* allocate(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;  // rounded size -> blocks
  MemoryStats stats_;
};

Allocator& cpu_allocator();

}  // namespace ampwb
