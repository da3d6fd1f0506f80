// Data-parallel gradients, as PyTorch's DistributedDataParallel keeps them: every rank starts from rank 0's weights
// and buffers, and each step's weight gradients become their mean over the ranks before the loss scaler checks them,
// so an overflow on any rank is an overflow on every rank (an inf or NaN survives the sum) and every rank skips the
// same steps, backs its scale off alike and takes bit-identical updates.
//
// The sums overlap backward: the gradients go in buckets, and a bucket's all-reduce starts on a communication thread
// as soon as backward has said all of its gradients are final (gradients_final), while backward goes on; finish()
// waits for the last. The communication thread makes every bucket's call in bucket order, the same on every rank; the
// trainer's own collectives (validation, the stop agreement) come after finish(), so two never run at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dist/communicator.h"
#include "nn/layer.h"
#include "train/data_parallel_settings.h"

namespace ampwb {

class GradientReducer {
 public:
  static constexpr size_t kBucketBytes = size_t{25} << 20;  // DistributedDataParallel's default bucket_cap_mb
  // The first bucket (the last layers') is smaller, as DistributedDataParallel's: its all-reduce starts early in
  // backward, and a small model's gradients are not one bucket that could only go at backward's end.
  static constexpr size_t kFirstBucketBytes = size_t{1} << 20;

  // Buckets of about bucket_bytes of FP32 gradients (the first at most kFirstBucketBytes) in reverse order of `params`
  // (the order backward produces the gradients), the same on every rank since every rank builds the same model;
  // summed in `precision`.
  GradientReducer(Communicator& communicator, std::vector<Parameter*> params,
                  GradientAllReduce precision = GradientAllReduce::F32, size_t bucket_bytes = kBucketBytes);
  // Waits for a bucket still in flight (a step that threw), then ends the communication thread.
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Rank 0's parameter values and buffers copied to every rank (on the calling thread: no step is under way).
  void broadcast_from_rank0(const std::vector<Buffer*>& buffers);
  // Rank 0's buffers alone (batch norm's running statistics, which each rank's own batches move), as
  // DistributedDataParallel's broadcast_buffers does before a forward pass: validation then runs rank 0's model.
  void broadcast_buffers_from_rank0(const std::vector<Buffer*>& buffers);

  // One step's mean, on the trainer's thread: begin() before backward; gradients_final(layer) as backward leaves a
  // layer whose parameters' gradients will not change again this step (each bucket complete in order goes to the
  // communication thread); finish() after backward sends the rest, waits for every bucket and rethrows the Error of
  // a failed collective. Every gradient (FP32, on the host) is then the mean over the ranks: in FP32 summed, then
  // times 1 / world size; in 16 bits each rank's divided by the world size, then summed (fp16_compress_hook's way).
  // On a communicator over GPU memory (NCCL) each bucket's FP32 gradients are averaged in place on their GPU instead
  // (ncclAvg, one group), on the communicator's stream after the backward work that wrote them, while backward goes
  // on on the backend's stream: finish() waits for the queuing only, and makes the backend's stream wait for the
  // means.
  void begin();
  void gradients_final(Layer& layer);
  void finish();
  // For a step that throws before finish(): waits for the buckets in flight, dropping their errors.
  void abandon() noexcept;
  // The whole step's mean at once, after backward: begin() and finish().
  void average_gradients();

  size_t buckets() const { return buckets_.size(); }
  size_t buckets_launched() const { return launched_; }  // this step's so far, handed to the communication thread
  GradientAllReduce precision() const { return precision_; }
  // Since construction: the seconds the communication thread spent on the buckets (rounding, the all-reduce, the
  // mean), and the seconds finish() waited for them.
  double communication_seconds() const;
  double waiting_seconds() const { return waiting_seconds_; }

 private:
  void broadcast(const Tensor& t, const std::string& name);  // rank 0's `t` to every rank

  struct Bucket {
    std::vector<Parameter*> params;
    std::vector<size_t> sizes;  // each parameter's floats
    size_t floats = 0;
    std::vector<float*> grads;  // where each parameter's gradient is, taken when the bucket is launched
    size_t pending = 0;         // parameters whose gradients are not final yet, this step
  };
  void launch_ready();  // hands the buckets complete in order to the communication thread
  void launch(size_t index);  // buckets_[index], on the trainer's thread
  void wait_all(std::unique_lock<std::mutex>& lock);
  void join_dropping_errors() noexcept;  // Communicator::join_device_collectives, for a step that fails anyway
  void communicate();  // the communication thread
  void reduce(size_t index);  // buckets_[index], on the communication thread

  Communicator& communicator_;
  const GradientAllReduce precision_;
  std::vector<Parameter*> params_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const Parameter*, size_t> bucket_of_;
  std::vector<Parameter*> collected_;  // gradients_final's scratch
  size_t launched_ = 0;                // buckets handed over this step (the trainer's thread writes it, under mutex_)
  double waiting_seconds_ = 0;         // the trainer's thread's

  // Shared with the communication thread, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  size_t done_ = 0;  // buckets reduced this step, in order
  bool stop_ = false;
  std::exception_ptr error_;
  double communication_seconds_ = 0;

  // The communication thread's own: one bucket's gradients side by side, reused; on a GPU, where each one is.
  std::vector<float> flat_;
  std::vector<DeviceFloats> spans_;
  std::vector<uint16_t> flat16_;
  std::thread thread_;  // last: started once every member it reads exists
};

}  // namespace ampwb
