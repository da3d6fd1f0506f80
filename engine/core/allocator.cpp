// The caching allocator and its CPU device.
#include "core/allocator.h"

#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

namespace ampwb {

size_t CachingAllocator::round_up(size_t bytes) const {
  return (bytes == 0 ? alignment_ : (bytes + alignment_ - 1) / alignment_ * alignment_);
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  const auto filling = filling_.find(std::this_thread::get_id());
  const int pool = filling == filling_.end() ? 0 : filling->second;
  if (pool) {  // a pool's free blocks count as live already
    PoolBlocks& unused = pools_[pool];
    if (auto it = unused.lower_bound(size); it != unused.end() && it->first <= kPoolFitFactor * size) {
      void* ptr = it->second.back();
      if (it->first != size) larger_[ptr] = it->first;
      it->second.pop_back();
      if (it->second.empty()) unused.erase(it);
      return ptr;
    }
  } else if (auto it = free_blocks_.find(size); it != free_blocks_.end() && !it->second.empty()) {
    void* ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= size;
    count_live(size);
    return ptr;
  }
  void* ptr = device_allocate(size);
  // Blocks of other sizes may make room, but not while a pool fills: that is a GPU's graph capture, during which
  // the device cannot free memory (cudaFree would end the capture), so the capture fails as out of memory.
  if (!ptr && stats_.cached_bytes > 0 && filling_.empty()) {
    empty_cache_locked();
    ptr = device_allocate(size);
  }
  if (!ptr) out_of_memory(size, stats_);
  if (pool) pool_of_[ptr] = pool;
  count_live(size);
  return ptr;
}

void CachingAllocator::count_live(size_t size) {
  stats_.live_bytes += size;
  if (stats_.live_bytes > stats_.peak_live_bytes) stats_.peak_live_bytes = stats_.live_bytes;
}

void CachingAllocator::release(void* ptr, size_t bytes) {
  if (!ptr) return;
  size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  if (const auto larger = larger_.find(ptr); larger != larger_.end()) {
    size = larger->second;
    larger_.erase(larger);
  }
  if (const auto owner = pool_of_.find(ptr); owner != pool_of_.end()) {
    pools_[owner->second][size].push_back(ptr);  // still the replays'
    return;
  }
  free_blocks_[size].push_back(ptr);
  stats_.live_bytes -= size;
  stats_.cached_bytes += size;
}

int CachingAllocator::new_pool() {
  std::lock_guard lock(mutex_);
  pools_[next_pool_];
  return next_pool_++;
}

void CachingAllocator::begin_pool(int pool) {
  std::lock_guard lock(mutex_);
  if (!pools_.count(pool)) throw std::logic_error("begin_pool: no pool " + std::to_string(pool));
  filling_[std::this_thread::get_id()] = pool;
}

void CachingAllocator::end_pool() {
  std::lock_guard lock(mutex_);
  filling_.erase(std::this_thread::get_id());
}

void CachingAllocator::release_pool(int pool) {
  std::lock_guard lock(mutex_);
  const auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  for (auto& [size, blocks] : it->second) {  // free in the pool: the shared cache's now
    for (void* ptr : blocks) {
      pool_of_.erase(ptr);
      free_blocks_[size].push_back(ptr);
      stats_.live_bytes -= size;
      stats_.cached_bytes += size;
    }
  }
  pools_.erase(it);
  // Blocks still held by tensors go to the shared cache when those are freed: as any other live block.
  std::erase_if(pool_of_, [pool](const auto& entry) { return entry.second == pool; });
  std::erase_if(filling_, [pool](const auto& entry) { return entry.second == pool; });
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_live_bytes = stats_.live_bytes;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  empty_cache_locked();
}

void CachingAllocator::empty_cache_locked() {
  std::vector<void*> blocks;
  for (auto& [size, sized] : free_blocks_) blocks.insert(blocks.end(), sized.begin(), sized.end());
  if (!blocks.empty()) device_free(blocks);
  free_blocks_.clear();
  stats_.cached_bytes = 0;
}

void* CpuCachingAllocator::device_allocate(size_t bytes) { return std::aligned_alloc(64, bytes); }

void CpuCachingAllocator::device_free(const std::vector<void*>& blocks) {
  for (void* p : blocks) std::free(p);
}

void CpuCachingAllocator::out_of_memory(size_t, const MemoryStats&) { throw std::bad_alloc(); }

Allocator& cpu_allocator() {
  static CpuCachingAllocator* allocator = new CpuCachingAllocator();  // never destroyed: tensors may outlive main
  return *allocator;
}

}  // namespace ampwb
