// CUDA device discovery through the runtime API.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_device.h"

namespace ampwb {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  return count;
}

std::vector<CudaDeviceInfo> cuda_devices() {
  std::vector<CudaDeviceInfo> devices;
  for (int i = 0; i < cuda_device_count(); ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    devices.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
  }
  return devices;
}

std::string cuda_runtime_version() {
  int version = 0;
  cudaRuntimeGetVersion(&version);
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace ampwb
