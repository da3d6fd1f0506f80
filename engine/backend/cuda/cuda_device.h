// CUDA device discovery (the training backend for CUDA is its own issue). Without a driver or GPU every query
// reports zero devices rather than failing: cudaGetDeviceCount returns cudaErrorInsufficientDriver (35) there.
#pragma once

#include <string>
#include <vector>

namespace ampwb {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  size_t total_memory_bytes = 0;
  int compute_capability_major = 0, compute_capability_minor = 0;
};

// The oldest GPUs the CUDA backend trains on (its kernels are built for sm_80 and sm_90).
inline constexpr int kMinComputeCapabilityMajor = 8;

int cuda_device_count();                     // 0 when no usable GPU or driver
std::vector<CudaDeviceInfo> cuda_devices();  // empty likewise
std::string cuda_runtime_version();          // e.g. "13.0"

}  // namespace ampwb
