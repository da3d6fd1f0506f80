// The communicator over MPI (Open MPI): the collectives on host memory of processes started by mpirun or srun.
// Built only where CMake found MPI (AMPWB_HAVE_MPI); nothing outside engine/dist/ sees MPI's headers.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "dist/collective_timeout.h"
#include "dist/communicator.h"
#include "dist/launch.h"

namespace ampwb {

class MpiCollectiveWait;  // mpi_collective_wait.h: MPI's types stay out of this header

class MpiCommunicator final : public Communicator {
 public:
  // Starts MPI on first use in the process (it is finalized once, at exit), with MPI errors returned, not fatal. Throws
  // Error where MPI's rank and size are not the launcher's, as when a process of an sbatch script was not started by
  // srun. Every collective waits at most `collective_timeout` for the other ranks (and a few seconds more to name
  // those that do not answer), then throws RankLostError; after one, the process ends the MPI job at exit.
  explicit MpiCommunicator(const LaunchInfo& launch,
                           std::chrono::milliseconds collective_timeout = kDefaultCollectiveTimeout);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int local_rank() const override { return local_rank_; }

  void all_reduce_sum(float* data, size_t count) override;
  void all_reduce_sum(double* data, size_t count) override;
  void all_reduce_sum(int64_t* data, size_t count) override;
  void all_reduce_sum(uint16_t* data, size_t count, Float16Format format) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void barrier() override;
  void exiting_on_failure() override;

  std::string describe() const override { return description_; }

 private:
  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  std::string description_;
  std::unique_ptr<MpiCollectiveWait> wait_;  // every collective is started non-blocking and completed by it
  std::mutex call_mutex_;  // one MPI call at a time: MPI runs at MPI_THREAD_SERIALIZED (mpi_communicator.cpp)
};

}  // namespace ampwb
