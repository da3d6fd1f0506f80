// The clock of the GPU a run trains on and the other processes using it, read from NVML: the driver's management
// library, opened at run time so that the workbench builds and runs where there is no driver. A GPU that clocked
// down or that another process shared times a configuration slower than it is; MachineLoad records both.
#pragma once

#include <optional>
#include <string>

namespace ampwb {

struct GpuState {
  double sm_mhz = 0;         // the streaming multiprocessors' clock now
  double max_sm_mhz = 0;     // the most it can run at
  int other_processes = -1;  // processes other than this one with a context on it; -1 unreadable
};

// The GPU a device setting names ("cuda", "cuda:1"), counted as CUDA counts them (CUDA_VISIBLE_DEVICES); nothing for
// a CPU device or where NVML cannot be opened or does not know the GPU.
std::optional<GpuState> read_gpu_state(const std::string& device);

}  // namespace ampwb
