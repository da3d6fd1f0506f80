// The caching allocator and its CPU device.
#include "core/allocator.h"

#include <cstdlib>
#include <iterator>
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
  const int pool_id = filling == filling_.end() ? 0 : filling->second;
  if (pool_id) {  // a pool's free blocks and arenas count as live already
    Pool& pool = pools_[pool_id];
    void* ptr = planned_block(pool, size);
    if (!ptr) {
      if (auto it = pool.unused.lower_bound(size); it != pool.unused.end() && it->first <= kPoolFitFactor * size) {
        ptr = it->second.back();
        if (it->first != size) larger_[ptr] = it->first;
        it->second.pop_back();
        if (it->second.empty()) pool.unused.erase(it);
      } else {
        ptr = device_allocate_or_empty_cache(size);
        pool_of_[ptr] = pool_id;
        count_live(size);
      }
    }
    trace_allocation(pool, ptr, size);
    return ptr;
  }
  if (auto it = free_blocks_.find(size); it != free_blocks_.end() && !it->second.empty()) {
    void* ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= size;
    count_live(size);
    return ptr;
  }
  void* ptr = device_allocate_or_empty_cache(size);
  count_live(size);
  return ptr;
}

void* CachingAllocator::device_allocate_or_empty_cache(size_t size) {
  void* ptr = device_allocate(size);
  // Blocks of other sizes may make room, but not while a pool fills: that is a GPU's graph capture, during which
  // the device cannot free memory (cudaFree would end the capture), so the capture fails as out of memory.
  if (!ptr && stats_.cached_bytes > 0 && filling_.empty()) {
    empty_cache_locked();
    ptr = device_allocate(size);
  }
  if (!ptr) out_of_memory(size, stats_);
  return ptr;
}

void* CachingAllocator::planned_block(Pool& pool, size_t size) {
  if (!pool.arena) return nullptr;
  const size_t k = pool.next++;
  if (k < pool.plan.blocks.size() && pool.plan.blocks[k].bytes == size) {
    Arena& arena = arenas_.at(pool.arena);
    char* begin = pool.arena + pool.offsets[k];
    char* end = begin + size;
    // Clear of every planned block held now: the first that ends after begin must start at or after end.
    auto after = arena.held.upper_bound(begin);
    const bool clear = (after == arena.held.begin() || std::prev(after)->second <= begin) &&
                       (after == arena.held.end() || after->first >= end);
    if (clear) {
      arena.held.emplace(begin, end);
      return begin;
    }
  }
  pool.arena = nullptr;  // the filling went another way than the trace: the rest from the pool's blocks
  return nullptr;
}

void CachingAllocator::trace_allocation(Pool& pool, void* ptr, size_t size) {
  pool.traced[ptr] = pool.trace.blocks.size();
  pool.trace.blocks.push_back({size, MemoryTrace::kHeld});
}

void CachingAllocator::trace_release(int pool_id, void* ptr) {
  const auto pool = pools_.find(pool_id);
  if (pool == pools_.end()) return;
  if (const auto traced = pool->second.traced.find(ptr); traced != pool->second.traced.end()) {
    pool->second.trace.blocks[traced->second].freed_after = pool->second.trace.blocks.size();
    pool->second.traced.erase(traced);
  }
}

void CachingAllocator::count_live(size_t size) {
  stats_.live_bytes += size;
  if (stats_.live_bytes > stats_.peak_live_bytes) stats_.peak_live_bytes = stats_.live_bytes;
}

bool CachingAllocator::release_planned(void* ptr) {
  char* p = static_cast<char*>(ptr);
  auto arena = arenas_.upper_bound(p);
  if (arena == arenas_.begin()) return false;
  --arena;
  if (p >= arena->first + arena->second.bytes) return false;
  arena->second.held.erase(p);
  trace_release(arena->second.pool, ptr);
  if (arena->second.pool == 0 && arena->second.held.empty()) arena_to_cache(arena);
  return true;
}

void CachingAllocator::arena_to_cache(std::map<char*, Arena>::iterator arena) {
  free_blocks_[arena->second.bytes].push_back(arena->first);
  stats_.live_bytes -= arena->second.bytes;
  stats_.cached_bytes += arena->second.bytes;
  arenas_.erase(arena);
}

void CachingAllocator::release(void* ptr, size_t bytes) {
  if (!ptr) return;
  size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  if (release_planned(ptr)) return;
  if (const auto larger = larger_.find(ptr); larger != larger_.end()) {
    size = larger->second;
    larger_.erase(larger);
  }
  if (const auto owner = pool_of_.find(ptr); owner != pool_of_.end()) {
    trace_release(owner->second, ptr);
    pools_[owner->second].unused[size].push_back(ptr);  // still the replays'
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

MemoryTrace CachingAllocator::pool_trace(int pool) const {
  std::lock_guard lock(mutex_);
  const auto it = pools_.find(pool);
  return it == pools_.end() ? MemoryTrace{} : it->second.trace;
}

void CachingAllocator::plan_pool(int pool_id, const MemoryTrace& trace) {
  std::lock_guard lock(mutex_);
  const auto it = pools_.find(pool_id);
  if (it == pools_.end()) throw std::logic_error("plan_pool: no pool " + std::to_string(pool_id));
  Pool& pool = it->second;
  size_t bytes = 0;
  pool.offsets = plan_offsets(trace, bytes);
  pool.plan = trace;
  pool.next = 0;
  pool.arena = nullptr;
  if (bytes == 0) return;
  // The pool's smallest arena that holds the plan and no block now, else a new one.
  size_t best = 0;
  for (const auto& [begin, arena] : arenas_)
    if (arena.pool == pool_id && arena.held.empty() && arena.bytes >= bytes && (!pool.arena || arena.bytes < best))
      pool.arena = begin, best = arena.bytes;
  if (pool.arena) return;
  const size_t size = round_up(bytes);
  pool.arena = static_cast<char*>(device_allocate_or_empty_cache(size));
  arenas_[pool.arena] = {size, pool_id, {}};
  count_live(size);
}

void CachingAllocator::release_pool(int pool) {
  std::lock_guard lock(mutex_);
  const auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  for (auto& [size, blocks] : it->second.unused) {  // free in the pool: the shared cache's now
    for (void* ptr : blocks) {
      pool_of_.erase(ptr);
      free_blocks_[size].push_back(ptr);
      stats_.live_bytes -= size;
      stats_.cached_bytes += size;
    }
  }
  pools_.erase(it);
  // Blocks still held by tensors go to the shared cache when those are freed: as any other live block. An arena
  // goes there once its last planned block is freed.
  std::erase_if(pool_of_, [pool](const auto& entry) { return entry.second == pool; });
  std::erase_if(filling_, [pool](const auto& entry) { return entry.second == pool; });
  for (auto arena = arenas_.begin(); arena != arenas_.end();) {
    auto next = std::next(arena);
    if (arena->second.pool == pool) {
      arena->second.pool = 0;
      if (arena->second.held.empty()) arena_to_cache(arena);
    }
    arena = next;
  }
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
