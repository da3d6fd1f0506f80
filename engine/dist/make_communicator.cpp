// Choosing the communicator for a launch, and refusing the launches this build cannot serve, before any rank waits.
#include "dist/make_communicator.h"

#include <string>

#include "core/error.h"
#include "dist/single_process_communicator.h"
#ifdef AMPWB_HAVE_MPI
#include "dist/mpi_communicator.h"
#endif

namespace ampwb {

bool have_mpi() {
#ifdef AMPWB_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_communicator(const LaunchInfo& launch,
                                                std::chrono::milliseconds collective_timeout) {
  // One rank exchanges nothing: MPI is not started, so `mpirun -np 1` runs in a build without MPI too.
  if (launch.world_size == 1) return std::make_unique<SingleProcessCommunicator>();
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
      throw Error("this process is " + describe(launch) +
                  ", but the rendezvous of torchrun-style ranks at MASTER_ADDR:MASTER_PORT is not built yet: start "
                  "the ranks with mpirun or srun");
    case Launcher::Single:
      break;
  }
  throw Error("a single-process launch with " + std::to_string(launch.world_size) + " ranks");
}

}  // namespace ampwb
