// The processes of one run, as one group: who this process is among them, and the collectives the training needs
// over host memory (all-reduce, broadcast, barrier). Every collective is called by every rank, in the same order, with
// the same counts: that is the caller's contract, as in MPI; a communicator may be called from any thread, one call
// at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ampwb {

// The 16-bit floats a sum may travel in (IEEE binary16, bfloat16), as bit patterns.
enum class Float16Format : uint8_t { F16, BF16 };

// `count` FP32 values at the device address `data`.
struct DeviceFloats {
  float* data;
  size_t count;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;        // 0 .. world_size()-1; rank 0 alone writes the run
  virtual int world_size() const = 0;  // the processes of the run
  virtual int local_rank() const = 0;  // among the processes on this machine: picks the GPU

  // In place: every rank's `data` becomes the element-wise sum over the ranks, the same bits on every rank.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
  virtual void all_reduce_sum(double* data, size_t count) = 0;
  virtual void all_reduce_sum(int64_t* data, size_t count) = 0;  // counts: exact whatever the order of the sum
  // 16-bit floats in `format`, half the bytes of FP32: each addition of two ranks' values (or partial sums) in FP32,
  // its result rounded to nearest even back to `format`, as an FP16 overflow past 65504 becomes inf.
  virtual void all_reduce_sum(uint16_t* data, size_t count, Float16Format format) = 0;

  // `bytes` bytes at `data` on rank `root` copied to every other rank's `data`.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;

  // Returns on each rank once every rank has called it.
  virtual void barrier() = 0;

  // Collectives in a GPU's memory: NCCL's communicator, whose GPU is device_index() (-1: the collectives work on host
  // memory only, and the four below throw). They return without waiting: each is queued on a stream of the
  // communicator's own after the device stream's work that wrote its data (set_device_stream, a cudaStream_t: the
  // backend's compute stream), while the device stream goes on, and join_device_collectives() makes the device
  // stream wait for them before any work that reads or frees their data. The host collectives above still work,
  // staged through the GPU after the device collectives queued so far.
  virtual int device_index() const { return -1; }
  bool reduces_device_memory() const { return device_index() >= 0; }
  virtual void set_device_stream(void* cuda_stream);
  // Marks the work queued so far on the device stream as what the device collective of `slot` waits for: called on
  // the thread that queues that work, when it has queued the last write of the collective's data (a bucket is
  // complete). A slot is reused once its collective was queued.
  virtual void device_inputs_ready(size_t slot);
  // In place: each span's values become their mean over the ranks, after the work marked for `slot`; the spans go as
  // one group (one bucket).
  virtual void all_reduce_mean_on_device(const std::vector<DeviceFloats>& spans, size_t slot);
  // `bytes` bytes at the device address `data` on rank `root` copied to every other rank's, after the work queued so
  // far on the device stream.
  virtual void broadcast_on_device(void* data, size_t bytes, int root);
  // The work queued on the device stream from here on waits for the device collectives queued so far; throws the
  // Error of a communicator that failed meanwhile (the collectives' results are then not the mean).
  virtual void join_device_collectives() {}

  // This process ends on a failure the other ranks may not share, and they may be waiting in a collective for it: at
  // exit it gives them a grace (collective_timeout.h) to end too, then ends every rank (MPI_Abort) instead of waiting
  // for them until the collective timeout. A failure they share ends them all within the grace anyway. Over MPI only:
  // NCCL's ranks wait for their collective timeout.
  virtual void exiting_on_failure() {}

  // "Open MPI 4.1.4, 2 ranks": what carries the collectives, for logs and the run's record.
  virtual std::string describe() const = 0;
};

}  // namespace ampwb
