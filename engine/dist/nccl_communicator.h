// The communicator over NCCL, for processes that train on GPUs, one GPU each: the gradients and the starting weights
// reduced and broadcast in the GPU's memory on a stream of its own beside the backend's, and the host collectives
// (validation counts, the stop agreement, the configuration) staged through the GPU on that stream, so that the
// trainer uses it as it uses MPI's. Built only where CMake found NCCL beside the CUDA backend (AMPWB_HAVE_NCCL);
// nothing outside engine/dist/ sees NCCL's headers.
//
// Failures are bounded as NCCL's asynchronous error handling intends: every wait polls ncclCommGetAsyncError, and a
// watchdog thread does the same for the device collectives (which nobody here waits for). An error NCCL reports, or a
// collective not done within the timeout (a rank that died or hangs), aborts the communicator (ncclCommAbort ends the
// kernels still waiting for the other ranks) and makes every later call throw an Error naming this rank.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "dist/launch.h"

namespace ampwb {

class NcclCommunicator final : public Communicator {
 public:
  // Joins the run's NCCL communicator on GPU `gpu` (gpu_of_rank in launch.h). Rank 0's unique id reaches the other
  // ranks through `id_carrier`'s broadcast (MPI's, under mpirun or srun) or, where it is null, through the TCP
  // rendezvous at MASTER_ADDR:MASTER_PORT (torchrun-style launches); a world of one needs neither. Throws Error naming
  // this rank where the GPU, the rendezvous or NCCL's set-up fails, or the set-up takes longer than `timeout`.
  NcclCommunicator(const LaunchInfo& launch, int gpu, Communicator* id_carrier, std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int local_rank() const override { return local_rank_; }
  int device_index() const override { return gpu_; }

  // Host collectives: copied to the GPU, reduced there after the device collectives queued so far, copied back.
  void all_reduce_sum(float* data, size_t count) override;
  void all_reduce_sum(double* data, size_t count) override;
  void all_reduce_sum(int64_t* data, size_t count) override;
  void all_reduce_sum(uint16_t* data, size_t count, Float16Format format) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void barrier() override;

  void set_device_stream(void* cuda_stream) override;
  void device_inputs_ready(size_t slot) override;
  void all_reduce_mean_on_device(const std::vector<DeviceFloats>& spans, size_t slot) override;
  void broadcast_on_device(void* data, size_t bytes, int root) override;
  void join_device_collectives() override;

  std::string describe() const override { return description_; }

 private:
  struct State;  // NCCL's and CUDA's handles, the staging buffers and the watchdog (nccl_communicator.cpp)
  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int gpu_ = 0;
  std::string description_;
  std::unique_ptr<State> state_;
};

}  // namespace ampwb
