// NVML through dlopen, declared here with the few types its C interface fixes (nvml.h is not in every toolkit).
#include "train/gpu_load.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

namespace ampwb {
namespace {

using NvmlReturn = int;  // nvmlReturn_t
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInsufficientSize = 7;
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

struct NvmlProcessInfo {  // nvmlProcessInfo_t, as the _v3 process queries fill it
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

struct Nvml {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*by_uuid)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*compute_processes)(NvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
  NvmlReturn (*graphics_processes)(NvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
  bool ready = false;
};

template <class F>
void bind(void* library, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(library, name));
}

// Opened and initialised once per process, and kept: NVML's own start-up takes tens of milliseconds.
const Nvml& nvml() {
  static Nvml n;
  static std::once_flag opened;
  std::call_once(opened, [] {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
    bind(library, "nvmlInit_v2", n.init);
    bind(library, "nvmlDeviceGetHandleByIndex_v2", n.by_index);
    bind(library, "nvmlDeviceGetHandleByUUID", n.by_uuid);
    bind(library, "nvmlDeviceGetClockInfo", n.clock);
    bind(library, "nvmlDeviceGetMaxClockInfo", n.max_clock);
    bind(library, "nvmlDeviceGetComputeRunningProcesses_v3", n.compute_processes);
    bind(library, "nvmlDeviceGetGraphicsRunningProcesses_v3", n.graphics_processes);
    n.ready = n.init && n.by_index && n.by_uuid && n.clock && n.max_clock && n.compute_processes &&
              n.graphics_processes && n.init() == kNvmlSuccess;
  });
  return n;
}

// CUDA's ordinal `ordinal` as NVML names it: CUDA_VISIBLE_DEVICES lists indices or UUIDs of the visible GPUs.
std::optional<NvmlDevice> device_for(const Nvml& n, int ordinal) {
  std::string visible_id = std::to_string(ordinal);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {  // set but empty: no GPU is visible
    std::istringstream list(visible);
    std::string id;
    bool listed = false;
    for (int i = 0; !listed && std::getline(list, id, ','); ++i) listed = i == ordinal;
    if (!listed || id.empty()) return std::nullopt;
    visible_id = id;
  }
  NvmlDevice device = nullptr;
  const bool by_uuid = visible_id.rfind("GPU-", 0) == 0 || visible_id.rfind("MIG-", 0) == 0;
  const NvmlReturn found = by_uuid ? n.by_uuid(visible_id.c_str(), &device)
                                   : n.by_index(static_cast<unsigned int>(std::atoi(visible_id.c_str())), &device);
  if (found != kNvmlSuccess) return std::nullopt;
  return device;
}

// Adds the processes other than this one from a list NVML fills; false where it cannot be read.
bool add_others(NvmlReturn (*query)(NvmlDevice, unsigned int*, NvmlProcessInfo*), NvmlDevice device,
                std::set<unsigned int>& others) {
  std::vector<NvmlProcessInfo> processes(16);
  for (int attempt = 0; attempt < 3; ++attempt) {
    unsigned int count = static_cast<unsigned int>(processes.size());
    const NvmlReturn r = query(device, &count, processes.data());
    if (r == kNvmlInsufficientSize) {
      processes.resize(count + 16);
      continue;
    }
    if (r != kNvmlSuccess) return false;
    for (unsigned int i = 0; i < count; ++i)
      if (processes[i].pid != static_cast<unsigned int>(getpid())) others.insert(processes[i].pid);
    return true;
  }
  return false;
}

}  // namespace

std::optional<GpuState> read_gpu_state(const std::string& device) {
  if (device.rfind("cuda", 0) != 0) return std::nullopt;
  const int ordinal = device.size() > 5 && device[4] == ':' ? std::atoi(device.c_str() + 5) : 0;
  const Nvml& n = nvml();
  if (!n.ready) return std::nullopt;
  const std::optional<NvmlDevice> gpu = device_for(n, ordinal);
  if (!gpu) return std::nullopt;
  unsigned int mhz = 0, max_mhz = 0;
  if (n.clock(*gpu, kNvmlClockSm, &mhz) != kNvmlSuccess) return std::nullopt;
  GpuState state;
  state.sm_mhz = mhz;
  if (n.max_clock(*gpu, kNvmlClockSm, &max_mhz) == kNvmlSuccess) state.max_sm_mhz = max_mhz;
  std::set<unsigned int> others;  // a process can hold both kinds of context
  const bool listed = add_others(n.compute_processes, *gpu, others) && add_others(n.graphics_processes, *gpu, others);
  state.other_processes = listed ? static_cast<int>(others.size()) : -1;
  return state;
}

}  // namespace ampwb
