// The CUDA caching allocator (see cuda_allocator.h).
#include "backend/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include <array>
#include <sstream>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"

namespace ampwb {
namespace {
size_t round_up(size_t bytes) {
  const size_t a = CudaCachingAllocator::kAlignment;
  return (bytes == 0 ? a : (bytes + a - 1) / a * a);
}

std::string mib(size_t bytes) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return out.str();
}

}  // namespace

CudaCachingAllocator::CudaCachingAllocator(int device_index) : device_(device_index) {}

CudaCachingAllocator::~CudaCachingAllocator() {
  std::lock_guard lock(mutex_);
  free_cached_locked();
}

void* CudaCachingAllocator::allocate(size_t bytes) {
  const size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  void* ptr = nullptr;
  auto it = free_blocks_.find(size);
  if (it != free_blocks_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= size;
  } else {
    cuda::DeviceScope scope(device_);
    cudaError_t status = cudaMalloc(&ptr, size);
    if (status == cudaErrorMemoryAllocation && stats_.cached_bytes > 0) {
      cudaGetLastError();    // not sticky, but clear it: later launch checks read the last error
      free_cached_locked();  // blocks of other sizes may make room
      status = cudaMalloc(&ptr, size);
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaGetLastError();
      std::ostringstream out;
      if (status == cudaErrorMemoryAllocation) {
        out << "out of GPU memory on cuda:" << device_ << ": cannot allocate " << mib(size) << " (tensors hold "
            << mib(stats_.live_bytes) << ", " << mib(free_bytes) << " free of " << mib(total_bytes) << "); "
            << cuda::kOutOfMemoryHint;
      } else {
        out << "cudaMalloc of " << mib(size) << " on cuda:" << device_ << " failed: " << cudaGetErrorName(status)
            << " (" << cudaGetErrorString(status) << ")";
      }
      throw Error(out.str());
    }
  }
  stats_.live_bytes += size;
  if (stats_.live_bytes > stats_.peak_live_bytes) stats_.peak_live_bytes = stats_.live_bytes;
  return ptr;
}

void CudaCachingAllocator::release(void* ptr, size_t bytes) {
  if (!ptr) return;
  const size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  free_blocks_[size].push_back(ptr);
  stats_.live_bytes -= size;
  stats_.cached_bytes += size;
}

MemoryStats CudaCachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CudaCachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_live_bytes = stats_.live_bytes;
}

void CudaCachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  free_cached_locked();
}

void CudaCachingAllocator::free_cached_locked() {
  if (free_blocks_.empty()) return;
  cuda::DeviceScope scope(device_);
  for (auto& [size, blocks] : free_blocks_)
    for (void* p : blocks) cudaFree(p);  // implicitly synchronizes: queued work that used the block is done
  cudaGetLastError();
  free_blocks_.clear();
  stats_.cached_bytes = 0;
}

Allocator& cuda_allocator(int index) {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static std::array<CudaCachingAllocator*, kMaxDevices> allocators{};  // never destroyed (see the header)
  AMPWB_CHECK(index >= 0 && index < kMaxDevices, "cuda:" << index << " is not a CUDA device index");
  std::lock_guard lock(mutex);
  if (!allocators[index]) {
    const int count = cuda_device_count();
    AMPWB_CHECK(index < count, "cuda:" << index << " is not a usable CUDA device (" << count << " found)");
    allocators[index] = new CudaCachingAllocator(index);
  }
  return *allocators[index];
}

}  // namespace ampwb
