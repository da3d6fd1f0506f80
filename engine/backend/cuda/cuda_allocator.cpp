// The CUDA caching allocator (see cuda_allocator.h).
#include "backend/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include <array>
#include <mutex>
#include <sstream>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "core/tensor.h"

namespace ampwb {
namespace {
std::string mib(size_t bytes) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return out.str();
}
}  // namespace

void* CudaCachingAllocator::device_allocate(size_t bytes) {
  cuda::DeviceScope scope(device_);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status == cudaSuccess) return ptr;
  cudaGetLastError();  // not sticky, but clear it: later launch checks read the last error
  if (status == cudaErrorMemoryAllocation) return nullptr;
  std::ostringstream out;
  out << "cudaMalloc of " << mib(bytes) << " on cuda:" << device_ << " failed: " << cudaGetErrorName(status) << " ("
      << cudaGetErrorString(status) << ")";
  throw Error(out.str());
}

void CudaCachingAllocator::device_free(const std::vector<void*>& blocks) {
  cuda::DeviceScope scope(device_);
  for (void* p : blocks) cudaFree(p);  // implicitly synchronizes: queued work that used the block is done
  cudaGetLastError();
}

void CudaCachingAllocator::out_of_memory(size_t bytes, const MemoryStats& stats) {
  cuda::DeviceScope scope(device_);
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaGetLastError();
  std::ostringstream out;
  out << "out of GPU memory on cuda:" << device_ << ": cannot allocate " << mib(bytes) << " (tensors hold "
      << mib(stats.live_bytes) << ", " << mib(free_bytes) << " free of " << mib(total_bytes) << "); "
      << cuda::kOutOfMemoryHint;
  throw Error(out.str());
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

namespace {
// Tensors on CUDA devices allocate here once this file is linked in (core/ knows no backend by name).
[[maybe_unused]] const bool registered = register_device_allocator(Device::Kind::CUDA, &cuda_allocator);
}  // namespace

}  // namespace ampwb
