// Gradients averaged over the ranks, on a communication thread that overlaps backward (see the header).
#include "train/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "core/convert16.h"
#include "core/error.h"
#include "core/setting_error.h"

namespace ampwb {
namespace {

using Clock = std::chrono::steady_clock;

// Collectives over host memory: a GPU's tensors need NCCL, which is not part of this communicator.
void require_host(const Tensor& t, const std::string& what) {
  AMPWB_CHECK(t.defined() && t.device().is_cpu(),
              "data-parallel training over MPI averages host tensors; " << what << " is on " << t.device().str());
}

// MPI's communicator averages host tensors, NCCL's the tensors on its own GPU.
void require_reachable(const Communicator& communicator, const Tensor& t, const std::string& what) {
  if (!communicator.reduces_device_memory()) return require_host(t, what);
  const Device gpu = Device::cuda(communicator.device_index());
  AMPWB_CHECK(t.defined() && t.device() == gpu, "data-parallel training over NCCL averages the tensors on "
                                                    << gpu.str() << "; " << what << " is on " << t.device().str());
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

GradientReducer::GradientReducer(Communicator& communicator, std::vector<Parameter*> params,
                                 GradientAllReduce precision, size_t bucket_bytes)
    : communicator_(communicator), precision_(precision), params_(std::move(params)) {
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
    const size_t floats = static_cast<size_t>((*it)->value.numel());
    const size_t cap = buckets_.size() == 1 ? std::min(bucket_bytes, kFirstBucketBytes) : bucket_bytes;
    if (buckets_.empty() || (buckets_.back().floats > 0 && (buckets_.back().floats + floats) * 4 > cap))
      buckets_.emplace_back();
    buckets_.back().params.push_back(*it);
    buckets_.back().sizes.push_back(floats);
    buckets_.back().floats += floats;
    bucket_of_[*it] = buckets_.size() - 1;
  }
  if (communicator_.reduces_device_memory() && precision_ != GradientAllReduce::F32)
    throw SettingError("data_parallel.gradient_allreduce",
                       "a 16-bit gradient all-reduce on GPUs is not built yet (NCCL sums FP32 gradients): leave the "
                       "gradient all-reduce at fp32");
  thread_ = std::thread([this] { communicate(); });
}

GradientReducer::~GradientReducer() {
  abandon();
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void GradientReducer::broadcast(const Tensor& t, const std::string& name) {
  require_reachable(communicator_, t, name);
  if (communicator_.reduces_device_memory())
    communicator_.broadcast_on_device(t.data(), t.nbytes(), 0);
  else
    communicator_.broadcast(t.data(), t.nbytes(), 0);
}

void GradientReducer::broadcast_from_rank0(const std::vector<Buffer*>& buffers) {
  for (Parameter* p : params_) {
    broadcast(p->value, p->name);
    ++p->version;  // a low-precision compute copy follows the new values
  }
  broadcast_buffers_from_rank0(buffers);
}

void GradientReducer::broadcast_buffers_from_rank0(const std::vector<Buffer*>& buffers) {
  for (Buffer* b : buffers) broadcast(b->value, b->name);
  communicator_.join_device_collectives();  // the next forward pass reads the broadcast values
}

void GradientReducer::begin() {
  std::unique_lock lock(mutex_);
  wait_all(lock);  // nothing of an earlier step is in flight (abandon() or finish() waited already)
  launched_ = done_ = 0;
  error_ = nullptr;
  for (Bucket& bucket : buckets_) bucket.pending = bucket.params.size();
}

void GradientReducer::gradients_final(Layer& layer) {
  collected_.clear();
  layer.collect_parameters(collected_);
  for (const Parameter* p : collected_)
    if (auto it = bucket_of_.find(p); it != bucket_of_.end() && buckets_[it->second].pending > 0)
      --buckets_[it->second].pending;
  launch_ready();
}

void GradientReducer::launch_ready() {
  // In bucket order only, as every rank must call the collectives in one order: a bucket complete before the one
  // ahead of it waits for it.
  size_t ready = launched_;
  while (ready < buckets_.size() && buckets_[ready].pending == 0) launch(ready++);
  if (ready == launched_) return;
  {
    std::lock_guard lock(mutex_);
    launched_ = ready;
  }
  changed_.notify_all();
}

void GradientReducer::launch(size_t index) {
  Bucket& bucket = buckets_[index];
  bucket.grads.clear();
  for (Parameter* p : bucket.params) {
    require_reachable(communicator_, p->grad, p->name + "'s gradient");
    AMPWB_CHECK(p->grad.dtype() == DType::F32, p->name << "'s gradient is " << dtype_name(p->grad.dtype()));
    bucket.grads.push_back(p->grad.data_as<float>());
  }
  // On a GPU the bucket's all-reduce waits for the backward work queued up to here, which wrote its gradients, and
  // not for what backward queues while the communication thread comes to it.
  if (communicator_.reduces_device_memory()) communicator_.device_inputs_ready(index);
}

void GradientReducer::finish() {
  for (Bucket& bucket : buckets_) bucket.pending = 0;  // backward is over: whatever it did not name is final too
  launch_ready();
  const Clock::time_point start = Clock::now();
  std::unique_lock lock(mutex_);
  wait_all(lock);
  waiting_seconds_ += seconds_since(start);
  if (error_) {
    join_dropping_errors();  // the buckets queued before the failure may still write
    std::rethrow_exception(std::exchange(error_, nullptr));
  }
  communicator_.join_device_collectives();  // the scaler's check and the update read the means
}

void GradientReducer::abandon() noexcept {
  std::unique_lock lock(mutex_);
  wait_all(lock);
  error_ = nullptr;
  join_dropping_errors();  // nothing may write or free the gradients while a collective reads them
}

void GradientReducer::join_dropping_errors() noexcept {
  try {
    communicator_.join_device_collectives();
  } catch (...) {  // a broken communicator: the error already on its way is the one to report
  }
}

void GradientReducer::average_gradients() {
  begin();
  finish();
}

void GradientReducer::wait_all(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return done_ == launched_; });
}

double GradientReducer::communication_seconds() const {
  std::lock_guard lock(mutex_);
  return communication_seconds_;
}

void GradientReducer::communicate() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || done_ < launched_; });
    if (done_ == launched_) return;  // stop_, and nothing left
    const size_t index = done_;
    const bool failed = error_ != nullptr;
    lock.unlock();
    // After a failed collective the communicator is broken: the rest of the step's buckets are dropped, and the
    // trainer's thread gets the first Error from finish().
    std::exception_ptr error;
    const Clock::time_point start = Clock::now();
    if (!failed) {
      try {
        reduce(index);
      } catch (...) {
        error = std::current_exception();
      }
    }
    const double seconds = seconds_since(start);
    lock.lock();
    if (error) error_ = error;
    communication_seconds_ += seconds;
    ++done_;
    changed_.notify_all();
  }
}

void GradientReducer::reduce(size_t index) {
  Bucket& bucket = buckets_[index];
  if (communicator_.reduces_device_memory()) {  // NCCL: in place on the GPU, after the backward that wrote them
    spans_.clear();
    for (size_t i = 0; i < bucket.sizes.size(); ++i) spans_.push_back({bucket.grads[i], bucket.sizes[i]});
    communicator_.all_reduce_mean_on_device(spans_, index);
    return;
  }
  flat_.resize(bucket.floats);
  size_t at = 0;
  for (size_t i = 0; i < bucket.sizes.size(); ++i) {
    const size_t n = bucket.sizes[i];
    std::memcpy(flat_.data() + at, bucket.grads[i], n * sizeof(float));
    at += n;
  }
  const auto count = static_cast<int64_t>(flat_.size());
  const auto world = static_cast<float>(communicator_.world_size());
  float after_sum = 1 / world;  // the mean: the sum times 1 / world size, unless each rank divided before it
  if (precision_ == GradientAllReduce::F32) {
    communicator_.all_reduce_sum(flat_.data(), flat_.size());
  } else {
    // As PyTorch's fp16_compress_hook: each rank's gradient rounded to nearest even (FP16: past 65504 to inf, an
    // overflow the loss scaler sees), divided by the world size and rounded again, so that the sum is the mean and
    // overflows no sooner than it; the sum's additions in FP32, each partial sum rounded back (MpiCommunicator).
    const DType dtype = precision_ == GradientAllReduce::F16 ? DType::F16 : DType::BF16;
    flat16_.resize(flat_.size());
    round_to_16bit(dtype, flat_.data(), flat16_.data(), count);
    widen_16bit(dtype, flat16_.data(), flat_.data(), count);
    for (float& v : flat_) v /= world;
    round_to_16bit(dtype, flat_.data(), flat16_.data(), count);
    communicator_.all_reduce_sum(flat16_.data(), flat16_.size(),
                                 precision_ == GradientAllReduce::F16 ? Float16Format::F16 : Float16Format::BF16);
    widen_16bit(dtype, flat16_.data(), flat_.data(), count);
    after_sum = 1;
  }
  at = 0;
  for (size_t i = 0; i < bucket.sizes.size(); ++i) {
    const size_t n = bucket.sizes[i];
    std::transform(flat_.data() + at, flat_.data() + at + n, bucket.grads[i],
                   [&](float sum) { return sum * after_sum; });
    at += n;
  }
}

}  // namespace ampwb
