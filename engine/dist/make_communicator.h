// The communicator for how this process was launched and where it trains: one process alone, MPI for processes on
// CPUs started by mpirun or srun, NCCL for processes on GPUs.
#pragma once

#include <chrono>
#include <memory>

#include "core/device_choice.h"
#include "dist/collective_timeout.h"
#include "dist/communicator.h"
#include "dist/launch.h"

namespace ampwb {

// A world of one: SingleProcessCommunicator, whatever the launcher and device. More ranks training on a GPU (`device`
// cuda, or auto on a machine with one): NcclCommunicator on the local rank's GPU, its unique id passed over MPI under
// mpirun or srun, or over the TCP rendezvous at MASTER_ADDR:MASTER_PORT for torchrun-style variables. More ranks on
// the CPU: MpiCommunicator, which starts MPI, under mpirun or srun only. Throws Error, naming the launch, where this
// build lacks what the launch needs (MPI; NCCL), for torchrun-style ranks on the CPU, or where a rank has no GPU of its
// own. A collective that waits longer than `collective_timeout` for the other ranks throws RankLostError
// (collective_timeout.h; NCCL's names no lost rank: NCCL cannot tell which).
std::unique_ptr<Communicator> make_communicator(
    const LaunchInfo& launch, std::chrono::milliseconds collective_timeout = kDefaultCollectiveTimeout,
    DeviceChoice device = DeviceChoice::cpu());

// Whether this build carries the MPI communicator (CMake found MPI).
bool have_mpi();
// Whether this build carries the NCCL communicator (CMake found NCCL beside the CUDA backend).
bool have_nccl();

}  // namespace ampwb
