// The caching allocator and its CPU device.
#include "core/allocator.h"

#include <cstdlib>
#include <new>

namespace ampwb {

size_t CachingAllocator::round_up(size_t bytes) const {
  return (bytes == 0 ? alignment_ : (bytes + alignment_ - 1) / alignment_ * alignment_);
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  void* ptr = nullptr;
  auto it = free_blocks_.find(size);
  if (it != free_blocks_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= size;
  } else {
    ptr = device_allocate(size);
    if (!ptr && stats_.cached_bytes > 0) {
      empty_cache_locked();  // blocks of other sizes may make room
      ptr = device_allocate(size);
    }
    if (!ptr) out_of_memory(size, stats_);
  }
  stats_.live_bytes += size;
  if (stats_.live_bytes > stats_.peak_live_bytes) stats_.peak_live_bytes = stats_.live_bytes;
  return ptr;
}

void CachingAllocator::release(void* ptr, size_t bytes) {
  if (!ptr) return;
  const size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  free_blocks_[size].push_back(ptr);
  stats_.live_bytes -= size;
  stats_.cached_bytes += size;
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
