// The CPU caching allocator.
#include "core/allocator.h"

#include <cstdlib>
#include <new>

namespace ampwb {
namespace {
constexpr size_t kAlignment = 64;  // a cache line; what AVX-512 loads like
size_t round_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }
}  // namespace

CpuCachingAllocator::~CpuCachingAllocator() { empty_cache(); }

void* CpuCachingAllocator::allocate(size_t bytes) {
  const size_t size = round_up(bytes == 0 ? 1 : bytes);
  std::lock_guard lock(mutex_);
  void* ptr = nullptr;
  auto it = free_blocks_.find(size);
  if (it != free_blocks_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= size;
  } else {
    ptr = std::aligned_alloc(kAlignment, size);
    if (!ptr) throw std::bad_alloc();
  }
  stats_.live_bytes += size;
  if (stats_.live_bytes > stats_.peak_live_bytes) stats_.peak_live_bytes = stats_.live_bytes;
  return ptr;
}

void CpuCachingAllocator::release(void* ptr, size_t bytes) {
  if (!ptr) return;
  const size_t size = round_up(bytes == 0 ? 1 : bytes);
  std::lock_guard lock(mutex_);
  free_blocks_[size].push_back(ptr);
  stats_.live_bytes -= size;
  stats_.cached_bytes += size;
}

MemoryStats CpuCachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CpuCachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_live_bytes = stats_.live_bytes;
}

void CpuCachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  for (auto& [size, blocks] : free_blocks_)
    for (void* p : blocks) std::free(p);
  free_blocks_.clear();
  stats_.cached_bytes = 0;
}

Allocator& cpu_allocator() {
  static CpuCachingAllocator* allocator = new CpuCachingAllocator();  // never destroyed: tensors may outlive main
  return *allocator;
}

}  // namespace ampwb
