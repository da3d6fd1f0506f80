// The backend factory and the device list.
#include "backend/make_backend.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/profiled_backend.h"
#include "core/error.h"
#ifdef AMPWB_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#endif

namespace ampwb {

std::unique_ptr<Backend> make_backend(DeviceChoice device, const BackendOptions& options) {
  if (device.kind == DeviceChoice::Kind::Cpu) return std::make_unique<CpuBackend>(options);
  if (device.kind == DeviceChoice::Kind::Auto) {
#ifdef AMPWB_HAVE_CUDA
    if (cuda_device_count() > 0) {
      try {
        CudaBackendOptions cuda_options;
        cuda_options.allow_tf32 = options.tf32;
        cuda_options.deterministic = options.deterministic;
        return std::make_unique<CudaBackend>(cuda_options);
      } catch (const Error& e) {
        throw Error(std::string("device auto: a CUDA GPU was found but cannot be used (") + e.what() +
                    "); choose the CPU as the device");
      }
    }
#endif
    return std::make_unique<CpuBackend>(options);
  }
#ifdef AMPWB_HAVE_CUDA
  const int count = cuda_device_count();
  if (count == 0)
    throw Error("device " + device.name() + ": no usable CUDA GPU on this machine (no GPU, or no driver)");
  if (device.index >= count)
    throw Error("device " + device.name() + ": no such GPU (" + std::to_string(count) + " CUDA device" +
                (count == 1 ? "" : "s") + ", cuda:0 to cuda:" + std::to_string(count - 1) + ")");
  CudaBackendOptions cuda_options;
  cuda_options.device_index = device.index;
  cuda_options.allow_tf32 = options.tf32;
  cuda_options.deterministic = options.deterministic;
  return std::make_unique<CudaBackend>(cuda_options);
#else
  throw Error("device " + device.name() + ": this build has no CUDA support (nvcc was not found at configure time)");
#endif
}

void* cuda_stream_of(Backend& backend) {
  if (auto* profiled = dynamic_cast<ProfiledBackend*>(&backend)) return cuda_stream_of(profiled->inner());
#ifdef AMPWB_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) return cuda->compute_stream();
#endif
  return nullptr;
}

std::vector<DeviceInfo> list_devices() {
  const CpuBackend cpu;
  const Capabilities caps = cpu.capabilities();
  std::vector<DeviceInfo> devices = {
      {DeviceChoice::cpu(), caps.device_name, caps.isa, caps.memory_bytes, cpu.description()}};
#ifdef AMPWB_HAVE_CUDA
  for (const CudaDeviceInfo& gpu : cuda_devices())
    if (gpu.compute_capability_major >= kMinComputeCapabilityMajor)  // only GPUs that can train are listed
      devices.push_back(
          {DeviceChoice::cuda(gpu.index), gpu.name,
           "sm_" + std::to_string(gpu.compute_capability_major) + std::to_string(gpu.compute_capability_minor),
           gpu.total_memory_bytes, "CUDA runtime " + cuda_runtime_version()});
#endif
  return devices;
}

std::string gpu_absence_reason() {
#ifdef AMPWB_HAVE_CUDA
  return cuda_device_count() > 0 ? std::string() : "none found (CUDA runtime " + cuda_runtime_version() + ")";
#else
  return "this build has no CUDA backend";
#endif
}

}  // namespace ampwb
