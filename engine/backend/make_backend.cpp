// The backend factory and the device list.
#include "backend/make_backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#ifdef AMPWB_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#endif

namespace ampwb {

namespace {
// "cuda" -> 0, "cuda:N" -> N; anything else after "cuda" is refused by name.
int cuda_index(const std::string& device) {
  if (device == "cuda") return 0;
  const std::string digits = device.size() > 5 && device[4] == ':' ? device.substr(5) : "";
  if (digits.empty() || digits.size() > 3 || digits.find_first_not_of("0123456789") != std::string::npos)
    throw Error("unknown device '" + device + "' (expected cpu, cuda, cuda:N or auto)");
  return std::stoi(digits);
}
}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& device, const BackendOptions& options) {
  if (device == "cpu") return std::make_unique<CpuBackend>(options);
  if (device == "auto") {
#ifdef AMPWB_HAVE_CUDA
    if (cuda_device_count() > 0) {
      try {
        CudaBackendOptions cuda_options;
        cuda_options.allow_tf32 = options.tf32;
        return std::make_unique<CudaBackend>(cuda_options);
      } catch (const Error& e) {
        throw Error(std::string("--device auto: a CUDA GPU was found but cannot be used (") + e.what() +
                    "); use --device cpu");
      }
    }
#endif
    return std::make_unique<CpuBackend>(options);
  }
  if (device.starts_with("cuda")) {
    const int index = cuda_index(device);
#ifdef AMPWB_HAVE_CUDA
    const int count = cuda_device_count();
    if (count == 0) throw Error("--device " + device + ": no usable CUDA GPU on this machine (no GPU, or no driver)");
    if (index >= count)
      throw Error("--device " + device + ": no such GPU (" + std::to_string(count) + " CUDA device" +
                  (count == 1 ? "" : "s") + ", cuda:0 to cuda:" + std::to_string(count - 1) + ")");
    CudaBackendOptions cuda_options;
    cuda_options.device_index = index;
    cuda_options.allow_tf32 = options.tf32;
    return std::make_unique<CudaBackend>(cuda_options);
#else
    (void)index;
    throw Error("--device " + device + ": this build has no CUDA support (nvcc was not found at configure time)");
#endif
  }
  throw Error("unknown device '" + device + "' (expected cpu, cuda, cuda:N or auto)");
}

std::vector<DeviceInfo> list_devices() {
  const CpuBackend cpu;
  const Capabilities caps = cpu.capabilities();
  std::vector<DeviceInfo> devices = {{"cpu", caps.device_name, caps.isa, caps.memory_bytes, cpu.description()}};
#ifdef AMPWB_HAVE_CUDA
  for (const CudaDeviceInfo& gpu : cuda_devices())
    if (gpu.compute_capability_major >= kMinComputeCapabilityMajor)  // only GPUs that can train are listed
      devices.push_back(
          {"cuda:" + std::to_string(gpu.index), gpu.name,
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
