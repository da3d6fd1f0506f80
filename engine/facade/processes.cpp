// process_offer: the cores, the GPUs, MPI and NCCL in this build, and mpirun found on PATH.
#include "facade/processes.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "backend/make_backend.h"
#include "dist/make_communicator.h"

namespace ampwb {
namespace {

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

bool ProcessOffer::on_cpu(DeviceChoice device) const {
  return device.is_cpu() || (device.kind == DeviceChoice::Kind::Auto && gpus == 0);
}

int ProcessOffer::max_processes(DeviceChoice device) const {
  if (!why_one(device).empty()) return 1;
  return on_cpu(device) ? cores : gpus;
}

std::string ProcessOffer::why_one(DeviceChoice device) const {
  if (!mpi_built) return "this build has no MPI (Open MPI's libopenmpi-dev), which starts the processes";
  if (mpirun.empty()) return "Open MPI's mpirun is not on PATH (Debian: openmpi-bin)";
  if (on_cpu(device)) return cores > 1 ? "" : "this machine has one core";
  if (!nccl_built) return "this build has no NCCL, which GPUs' processes share gradients through";
  return gpus > 1 ? "" : "this machine has one GPU";
}

ProcessOffer process_offer() {
  ProcessOffer offer;
  offer.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (const DeviceInfo& d : list_devices())
    if (!d.id.is_cpu()) ++offer.gpus;
  offer.mpi_built = have_mpi();
#ifdef AMPWB_HAVE_NCCL
  offer.nccl_built = true;
#endif
  offer.mpirun = find_on_path("mpirun");
  return offer;
}

}  // namespace ampwb
