// What this machine offers for one run on many processes (docs/distributed.md): its cores and GPUs, and whether
// this build and this machine can start the processes (MPI built in, Open MPI's mpirun on PATH; NCCL for GPUs).
// `ampwb devices` says it; the GUI's "Processes" choice takes its limits and its reasons from it.
#pragma once

#include <string>

#include "core/device_choice.h"

namespace ampwb {

struct ProcessOffer {
  int cores = 1;            // what the OS reports (std::thread::hardware_concurrency)
  int gpus = 0;             // usable CUDA GPUs
  bool mpi_built = false;   // this build carries the MPI communicator
  std::string mpirun;       // mpirun's path on PATH, "" where there is none
  bool nccl_built = false;  // this build carries the NCCL communicator (GPU collectives)

  // The most processes one run on `device` can use here: the cores (CPU) or the GPUs, and 1 where processes cannot
  // be started (why_one says why).
  int max_processes(DeviceChoice device) const;
  // Why one run on `device` gets one process only here ("" where it can have more).
  std::string why_one(DeviceChoice device) const;
  bool on_cpu(DeviceChoice device) const;  // the CPU, or auto where there is no GPU
};

// Looks at this build and this machine (it starts nothing).
ProcessOffer process_offer();

}  // namespace ampwb
