// Device memory allocators that account for live and peak bytes.
//
// The CPU allocator caches freed blocks by size: a training step allocates the same sizes every time, so after the
// first step no memory comes from the system (no page faults, no zeroing) and the working set stays flat.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/memory_plan.h"

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

  // Private pools, for work captured once and replayed (a CUDA graph): a replay writes to the addresses the capture
  // was given, so those blocks must never be handed to anyone else while the replays may run. Between
  // begin_pool(pool) and end_pool() the calling thread allocates from the pool; a block of the pool goes back to it
  // when freed, whenever and by whoever, never to the shared cache, and counts as live (the replays use it). After
  // release_pool() its blocks are the shared cache's again (the captured work is gone).
  // A pool hands a freed block to any later allocation it fits with at most kPoolFitFactor times the size, the
  // best fit: one step's tensors are of many sizes, few repeated, and a pool's blocks stay held while it lives.
  // (ResNet-50's step on the CPU: a pool of 88 MiB instead of 111, bench/capture_pool.cpp.) So a tensor that must
  // keep its value from one replay to the next may not be made for the first time while a pool fills: it would take
  // a block that kernels captured before it overwrite at every replay (the step's state is all made before its
  // capture: MixedPrecisionStep captures no step before the optimizer's first).
  virtual int new_pool() = 0;
  virtual void begin_pool(int pool) = 0;
  virtual void end_pool() = 0;
  virtual void release_pool(int pool) = 0;
  // Planned pools, for work that allocates alike each time it is recorded: pool_trace() is what a pool's fillings
  // allocated, in order, and when each block was freed; after plan_pool(pool, trace), the pool's next filling
  // places its k-th allocation at the k-th planned offset of one arena (memory_plan.h), as long as the sizes are the
  // trace's and no block it would overlap is still held. Where the filling goes another way, the rest comes from the
  // pool's blocks as above. The arena counts as live; a pool planned again reuses an arena of its own that is large
  // enough and holds no block (the pool's captured works replay one after another, never at once).
  virtual MemoryTrace pool_trace(int pool) const = 0;
  virtual void plan_pool(int pool, const MemoryTrace& trace) = 0;
};

// Caches freed blocks by rounded size and hands them out again; counts live, peak and cached bytes. A subclass says
// only how blocks come from and go back to its device. When the device is out of memory the cache is emptied and
// the allocation tried once more before the subclass reports the failure.
class CachingAllocator : public Allocator {
 public:
  explicit CachingAllocator(size_t alignment) : alignment_(alignment) {}
  static constexpr size_t kPoolFitFactor = 4;
  void* allocate(size_t bytes) final;
  void release(void* ptr, size_t bytes) final;
  MemoryStats stats() const final;
  void reset_peak() final;
  void empty_cache() final;  // subclasses call it from their destructors: live blocks belong to their tensors
  int new_pool() final;
  void begin_pool(int pool) final;
  void end_pool() final;
  void release_pool(int pool) final;
  MemoryTrace pool_trace(int pool) const final;
  void plan_pool(int pool, const MemoryTrace& trace) final;

 protected:
  virtual void* device_allocate(size_t bytes) = 0;  // nullptr when out of memory; throws on other failures
  virtual void device_free(const std::vector<void*>& blocks) = 0;
  [[noreturn]] virtual void out_of_memory(size_t bytes, const MemoryStats& stats) = 0;

 private:
  using FreeBlocks = std::unordered_map<size_t, std::vector<void*>>;  // rounded size -> blocks
  using PoolBlocks = std::map<size_t, std::vector<void*>>;            // ordered: the best fit is a lower_bound
  struct Pool {
    PoolBlocks unused;                         // its free blocks
    MemoryTrace trace;                         // what its fillings allocated
    std::unordered_map<void*, size_t> traced;  // its blocks held now -> their index in the trace
    // The plan its filling follows: the trace it came from, the offsets into the arena at `arena`, the next index.
    MemoryTrace plan;
    std::vector<size_t> offsets;
    char* arena = nullptr;
    size_t next = 0;
  };
  struct Arena {
    size_t bytes = 0;
    int pool = 0;                 // 0: its pool is released, and it goes to the shared cache when nothing is held
    std::map<char*, char*> held;  // its planned blocks held now, [begin, end), never overlapping
  };

  size_t round_up(size_t bytes) const;
  void count_live(size_t size);
  void empty_cache_locked();
  void* device_allocate_or_empty_cache(size_t size);  // device_allocate, retried once after empty_cache_locked()
  void* planned_block(Pool& pool, size_t size);       // the plan's next block, or nullptr where it cannot be
  void trace_allocation(Pool& pool, void* ptr, size_t size);
  void trace_release(int pool, void* ptr);
  bool release_planned(void* ptr);  // false: not in an arena
  void arena_to_cache(std::map<char*, Arena>::iterator arena);

  const size_t alignment_;
  mutable std::mutex mutex_;
  FreeBlocks free_blocks_;
  MemoryStats stats_;
  std::unordered_map<int, Pool> pools_;
  std::map<char*, Arena> arenas_;                     // by first byte
  std::unordered_map<void*, int> pool_of_;            // every block a pool holds, live or free (arenas aside)
  std::unordered_map<void*, size_t> larger_;          // blocks a pool handed out for a smaller size: their own size
  std::unordered_map<std::thread::id, int> filling_;  // threads between begin_pool() and end_pool()
  int next_pool_ = 1;
};

class CpuCachingAllocator final : public CachingAllocator {
 public:
  CpuCachingAllocator() : CachingAllocator(64) {}  // a cache line; what AVX-512 loads like
  ~CpuCachingAllocator() override { empty_cache(); }

 private:
  void* device_allocate(size_t bytes) override;
  void device_free(const std::vector<void*>& blocks) override;
  [[noreturn]] void out_of_memory(size_t bytes, const MemoryStats& stats) override;
};

Allocator& cpu_allocator();

}  // namespace ampwb
