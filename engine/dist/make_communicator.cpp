// Choosing the communicator for a launch, and refusing the launches this build cannot serve, before any rank waits.
#include "dist/make_communicator.h"

#include <string>

#include "core/error.h"
#include "dist/single_process_communicator.h"
#ifdef AMPWB_HAVE_MPI
#include "dist/mpi_communicator.h"
#endif
#ifdef AMPWB_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#endif
#ifdef AMPWB_HAVE_NCCL
#include "dist/nccl_communicator.h"
#endif

namespace ampwb {

bool have_mpi() {
#ifdef AMPWB_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool have_nccl() {
#ifdef AMPWB_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

namespace {

// As make_backend decides: auto is a GPU where this build has CUDA and the machine a usable GPU.
bool trains_on_gpu(DeviceChoice device) {
  if (device.kind == DeviceChoice::Kind::Cuda) return true;
#ifdef AMPWB_HAVE_CUDA
  return device.kind == DeviceChoice::Kind::Auto && cuda_device_count() > 0;
#else
  return false;
#endif
}

// NCCL on the local rank's GPU, its unique id carried by MPI under mpirun or srun, by the TCP rendezvous otherwise.
std::unique_ptr<Communicator> make_gpu_communicator(const LaunchInfo& launch, DeviceChoice device,
                                                    std::chrono::milliseconds collective_timeout) {
#ifdef AMPWB_HAVE_NCCL
  (void)device;
  const int gpu = gpu_of_rank(launch, cuda_device_count());
  if (launch.launcher == Launcher::Torchrun)
    return std::make_unique<NcclCommunicator>(launch, gpu, nullptr, collective_timeout);
#ifdef AMPWB_HAVE_MPI
  // MPI stays started after the id has passed: mpirun and srun still end every rank when one exits abnormally.
  MpiCommunicator id_carrier(launch, collective_timeout);
  return std::make_unique<NcclCommunicator>(launch, gpu, &id_carrier, collective_timeout);
#else
  throw Error("this process is " + describe(launch) + ", to train on " + device.name() +
              ", but this build has no MPI to pass NCCL's id between the ranks: install Open MPI "
              "(scripts/install-deps.sh) and build again, or start the ranks with torchrun-style variables");
#endif
#else
  (void)collective_timeout;
  throw Error("this process is " + describe(launch) + ", to train on " + device.name() +
              ", but this build has no NCCL, which runs on several GPUs need (it comes with the CUDA installation: "
              "/usr/local/cuda/include/nccl.h at configure time)");
#endif
}

}  // namespace

std::unique_ptr<Communicator> make_communicator(const LaunchInfo& launch, std::chrono::milliseconds collective_timeout,
                                                DeviceChoice device) {
  // One rank exchanges nothing: MPI is not started, so `mpirun -np 1` runs in a build without MPI too.
  if (launch.world_size == 1) return std::make_unique<SingleProcessCommunicator>();
  if (trains_on_gpu(device)) return make_gpu_communicator(launch, device, collective_timeout);
  switch (launch.launcher) {
    case Launcher::Mpirun:
    case Launcher::Srun:
#ifdef AMPWB_HAVE_MPI
      return std::make_unique<MpiCommunicator>(launch, collective_timeout);
#else
      (void)collective_timeout;
      throw Error("this process is " + describe(launch) +
                  ", but this build has no MPI: install Open MPI (scripts/install-deps.sh) and build again");
#endif
    case Launcher::Torchrun:
      // The TCP rendezvous carries NCCL's id only: the CPU's collectives are MPI's.
      throw Error("this process is " + describe(launch) +
                  ", on the CPU, but torchrun-style ranks have no collectives over host memory without MPI: start "
                  "the ranks with mpirun or srun, or train on GPUs (the device cuda)");
    case Launcher::Single:
      break;
  }
  throw Error("a single-process launch with " + std::to_string(launch.world_size) + " ranks");
}

}  // namespace ampwb
