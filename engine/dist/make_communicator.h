// The communicator for how this process was launched: one process alone, or MPI for processes started by mpirun or
// srun.
#pragma once

#include <chrono>
#include <memory>

#include "dist/collective_timeout.h"
#include "dist/communicator.h"
#include "dist/launch.h"

namespace ampwb {

// A world of one: SingleProcessCommunicator, whatever the launcher. mpirun or srun with more ranks: MpiCommunicator,
// which starts MPI. Throws Error, naming the launch, where this build has no MPI, or for torchrun-style variables
// with more than one rank (their rendezvous at MASTER_ADDR:MASTER_PORT is not built yet). A collective that waits
// longer than `collective_timeout` for the other ranks throws RankLostError (collective_timeout.h).
std::unique_ptr<Communicator> make_communicator(
    const LaunchInfo& launch, std::chrono::milliseconds collective_timeout = kDefaultCollectiveTimeout);

// Whether this build carries the MPI communicator (CMake found MPI).
bool have_mpi();

}  // namespace ampwb
