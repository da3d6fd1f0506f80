// NCCL's communicator made non-blocking (so that its set-up and its calls can be bounded), its unique id carried by MPI
// or the TCP rendezvous, every collective on a stream of its own (the host collectives staged through pinned host and
// device buffers), and the watchdog over the device collectives (see the header).
#include "dist/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"
#include "dist/collective_timeout.h"
#include "dist/tcp_rendezvous.h"

namespace ampwb {
namespace {

using Clock = std::chrono::steady_clock;

// How often the watchdog looks at the device collectives in flight, and at NCCL's asynchronous error.
constexpr std::chrono::milliseconds kWatchInterval{100};

std::string version_text() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "NCCL";
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9.
  return "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

std::string seconds_text(std::chrono::milliseconds ms) {
  return ms.count() % 1000 == 0 ? std::to_string(ms.count() / 1000) + " s" : std::to_string(ms.count()) + " ms";
}

}  // namespace

struct NcclCommunicator::State {
  std::string who;  // "rank 1 of 2 (cuda:1, NCCL)", for messages
  int gpu = 0;
  std::chrono::milliseconds timeout{0};
  ncclComm_t comm = nullptr;
  cudaStream_t own_stream = nullptr;     // every collective's, in the order they are called
  cudaStream_t device_stream = nullptr;  // set_device_stream: the backend's
  cudaEvent_t inputs_ready = nullptr;    // recorded on device_stream before a broadcast, which waits for it
  cudaEvent_t collectives_done = nullptr;  // recorded on own_stream after each: join_device_collectives waits for it
  bool device_queued = false;
  void* device_buffer = nullptr;  // the host collectives' data on the GPU
  void* host_buffer = nullptr;    // pinned: copies that do not block the host, so that every wait can be bounded
  size_t buffer_bytes = 0;
  // Outgrown staging buffers, freed at the end: cudaFree would wait for the whole GPU, a lost rank's collective
  // included, with call_mutex held, where the watchdog could not abort it.
  std::vector<void*> retired_device, retired_host;

  // device_inputs_ready's events, one per slot, recorded by the thread that queues the backend's work.
  std::mutex slots_mutex;
  std::vector<cudaEvent_t> slot_events;

  std::mutex call_mutex;   // one call at a time, the watchdog's abort included
  std::string failure;     // set once the communicator is aborted: every later call throws it
  bool rank_lost = false;  // ... as RankLostError: another rank died or hangs, and the run can resume

  // The device collectives nobody waits for, oldest first, each with when it was queued; events to reuse.
  struct InFlight {
    cudaEvent_t done;
    Clock::time_point queued;
    const char* what;
  };
  std::deque<InFlight> in_flight;
  std::vector<cudaEvent_t> spare_events;
  std::mutex watch_mutex;
  std::condition_variable watch_wake;
  bool stop_watching = false;
  std::thread watchdog;

  [[noreturn]] void throw_failure() const {
    if (rank_lost) throw RankLostError(failure, {});  // NCCL does not say which rank
    throw Error(failure);
  }

  // Aborts the communicator once, with `why` for every later call; call_mutex held.
  void abort(const std::string& why, bool lost = false) {
    if (failure.empty()) {
      failure = who + ": " + why;
      rank_lost = lost;
    }
    if (comm) {
      ncclCommAbort(comm);  // the kernels still waiting for other ranks end
      comm = nullptr;
    }
  }

  void check(ncclResult_t result, const char* call) {
    if (result == ncclSuccess) return;
    const std::string text = std::string(call) + " failed: " + ncclGetErrorString(result) + " (" +
                             ncclGetLastError(comm) + ")";  // NCCL's last warning, whether comm exists or not
    abort(text, result == ncclRemoteError);  // a rank gone, or the network between them
    throw_failure();
  }

  // A non-blocking communicator's call may return ncclInProgress: it is queued once the state leaves it.
  void settle(ncclResult_t result, const char* call) {
    const Clock::time_point until = Clock::now() + timeout;
    while (result == ncclInProgress) {
      if (Clock::now() > until) {
        abort(std::string(call) + " did not finish within " + seconds_text(timeout) +
                  ": another rank died or hangs (NCCL cannot say which: the other ranks' messages name theirs)",
              true);
        throw_failure();
      }
      std::this_thread::yield();
      ncclCommGetAsyncError(comm, &result);
    }
    check(result, call);
  }

  // Waits for `stream`, bounded by the timeout and by NCCL's asynchronous error; call_mutex held.
  void wait(cudaStream_t stream, const char* what) {
    const Clock::time_point until = Clock::now() + timeout;
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      const cudaError_t status = cudaStreamQuery(stream);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) {
        cudaGetLastError();
        abort(std::string(what) + " failed on the GPU: " + cudaGetErrorString(status));
        throw_failure();
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        abort(std::string(what) + " failed: NCCL reports " + ncclGetErrorString(async) +
                  " (another rank died, or the network between the ranks failed)",
              true);
        throw_failure();
      }
      if (Clock::now() > until) {
        abort(std::string(what) + " did not finish within " + seconds_text(timeout) +
                  ": another rank died or hangs (NCCL cannot say which: the other ranks' messages name theirs)",
              true);
        throw_failure();
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  void reserve(size_t bytes) {
    if (bytes <= buffer_bytes) return;
    if (device_buffer) retired_device.push_back(device_buffer);
    if (host_buffer) retired_host.push_back(host_buffer);
    device_buffer = host_buffer = nullptr;
    buffer_bytes = 0;
    CUDA_CHECK(cudaMalloc(&device_buffer, bytes));
    CUDA_CHECK(cudaMallocHost(&host_buffer, bytes));
    buffer_bytes = bytes;
  }

  // A host collective: `bytes` of `data` to the GPU, `collective` on them there (after the device collectives queued
  // so far, on the same stream), back to `data`.
  template <class Collective>
  void on_host_data(void* data, size_t bytes, const char* what, Collective collective) {
    std::lock_guard lock(call_mutex);
    if (!failure.empty()) throw_failure();
    cuda::DeviceScope on_gpu(gpu);  // any thread may call
    reserve(std::max<size_t>(bytes, 8));
    std::memcpy(host_buffer, data, bytes);
    CUDA_CHECK(cudaMemcpyAsync(device_buffer, host_buffer, bytes, cudaMemcpyHostToDevice, own_stream));
    settle(collective(device_buffer, own_stream), what);
    CUDA_CHECK(cudaMemcpyAsync(host_buffer, device_buffer, bytes, cudaMemcpyDeviceToHost, own_stream));
    wait(own_stream, what);
    std::memcpy(data, host_buffer, bytes);
  }

  // Before a device collective: its stream waits for `ready`, recorded on the backend's stream after the work that
  // wrote its data. call_mutex held.
  void after_device_work(cudaEvent_t ready, const char* what) {
    if (!failure.empty()) throw_failure();
    AMPWB_CHECK(device_stream, what << " before set_device_stream");
    CUDA_CHECK(cudaStreamWaitEvent(own_stream, ready, 0));
  }

  // After a device collective was queued: what join_device_collectives waits for, and the watchdog's entry.
  void queued_on_device(const char* what) {
    CUDA_CHECK(cudaEventRecord(collectives_done, own_stream));
    device_queued = true;
    std::lock_guard lock(watch_mutex);
    cudaEvent_t done = nullptr;
    if (!spare_events.empty()) {
      done = spare_events.back();
      spare_events.pop_back();
    } else {
      CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventRecord(done, own_stream));
    in_flight.push_back({done, Clock::now(), what});
  }

  // The watchdog thread: drops the device collectives done; aborts where NCCL reports an error or the oldest is late.
  // It never holds watch_mutex while it takes call_mutex: a call holds call_mutex when it takes watch_mutex.
  void watch(int gpu) {
    cudaSetDevice(gpu);  // the current device is per thread
    for (;;) {
      std::string why;
      bool any_in_flight = false;
      {
        std::unique_lock lock(watch_mutex);
        watch_wake.wait_for(lock, kWatchInterval);
        if (stop_watching) return;
        while (!in_flight.empty() && cudaEventQuery(in_flight.front().done) != cudaErrorNotReady) {
          spare_events.push_back(in_flight.front().done);
          in_flight.pop_front();
        }
        cudaGetLastError();  // an event's error belongs to the stream's own user, who reads it there
        any_in_flight = !in_flight.empty();
        if (any_in_flight && Clock::now() - in_flight.front().queued > timeout)
          why = std::string(in_flight.front().what) + " did not finish within " + seconds_text(timeout) +
                ": another rank died or hangs (NCCL cannot say which: the other ranks' messages name theirs)";
      }
      if (!any_in_flight) continue;
      {
        std::lock_guard call(call_mutex);
        if (why.empty() && comm) {
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(comm, &async);
          if (async != ncclSuccess && async != ncclInProgress)
            why = std::string("NCCL reports ") + ncclGetErrorString(async) +
                  " in the background (another rank died, or the network between the ranks failed)";
        }
        if (why.empty()) continue;
        abort(why, true);  // the kernels end, so whoever waits for the backend's stream stops waiting
      }
      std::lock_guard lock(watch_mutex);
      for (const InFlight& f : in_flight) spare_events.push_back(f.done);
      in_flight.clear();
    }
  }
};

NcclCommunicator::NcclCommunicator(const LaunchInfo& launch, int gpu, Communicator* id_carrier,
                                   std::chrono::milliseconds timeout)
    : rank_(launch.rank),
      world_size_(launch.world_size),
      local_rank_(launch.local_rank),
      gpu_(gpu),
      state_(std::make_unique<State>()) {
  State& s = *state_;
  s.who = "rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) + " (cuda:" + std::to_string(gpu) +
          ", NCCL)";
  s.timeout = timeout;
  s.gpu = gpu;
  CUDA_CHECK(cudaSetDevice(gpu));
  ncclUniqueId id{};
  if (rank_ == 0) s.check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (world_size_ > 1) {
    if (id_carrier)
      id_carrier->broadcast(&id, sizeof id, 0);
    else
      tcp_rendezvous(launch, &id, sizeof id);
  }
  // Non-blocking: a set-up that waits for a rank that never comes is ended by the timeout, not left hanging.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t started = ncclCommInitRankConfig(&s.comm, world_size_, id, rank_, &config);
  if (started != ncclInProgress) s.check(started, "ncclCommInitRankConfig");
  if (s.comm) s.settle(started, "NCCL's set-up (ncclCommInitRankConfig)");
  try {
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.own_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.inputs_ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.collectives_done, cudaEventDisableTiming));
  } catch (...) {  // no destructor runs for a constructor that throws: NCCL's communicator goes here
    ncclCommAbort(s.comm);
    if (s.inputs_ready) cudaEventDestroy(s.inputs_ready);
    if (s.own_stream) cudaStreamDestroy(s.own_stream);
    throw;
  }
  description_ =
      version_text() + ", " + std::to_string(world_size_) + (world_size_ == 1 ? " rank" : " ranks") + ", one GPU each";
  s.watchdog = std::thread([&s, gpu] { s.watch(gpu); });
}

NcclCommunicator::~NcclCommunicator() {
  State& s = *state_;
  if (s.watchdog.joinable()) {
    {
      std::lock_guard lock(s.watch_mutex);
      s.stop_watching = true;
    }
    s.watch_wake.notify_all();
    s.watchdog.join();
  }
  cudaSetDevice(gpu_);
  {
    std::lock_guard lock(s.call_mutex);
    if (s.comm) {
      // Finalize waits for the collectives still queued (bounded: a rank gone leaves it in progress), then free.
      ncclResult_t state = ncclCommFinalize(s.comm);
      const Clock::time_point until = Clock::now() + s.timeout;
      while (state == ncclInProgress && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ncclCommGetAsyncError(s.comm, &state);
      }
      if (state == ncclSuccess)
        ncclCommDestroy(s.comm);
      else
        ncclCommAbort(s.comm);
      s.comm = nullptr;
    }
  }
  for (const State::InFlight& f : s.in_flight) cudaEventDestroy(f.done);
  for (cudaEvent_t e : s.spare_events) cudaEventDestroy(e);
  if (s.inputs_ready) cudaEventDestroy(s.inputs_ready);
  if (s.collectives_done) cudaEventDestroy(s.collectives_done);
  for (cudaEvent_t e : s.slot_events) cudaEventDestroy(e);
  for (void* p : s.retired_device) cudaFree(p);
  for (void* p : s.retired_host) cudaFreeHost(p);
  if (s.own_stream) cudaStreamDestroy(s.own_stream);
  if (s.device_buffer) cudaFree(s.device_buffer);
  if (s.host_buffer) cudaFreeHost(s.host_buffer);
}

void NcclCommunicator::all_reduce_sum(float* data, size_t count) {
  state_->on_host_data(data, count * sizeof(float), "NCCL's all-reduce", [&](void* d, cudaStream_t stream) {
    return ncclAllReduce(d, d, count, ncclFloat32, ncclSum, state_->comm, stream);
  });
}

void NcclCommunicator::all_reduce_sum(double* data, size_t count) {
  state_->on_host_data(data, count * sizeof(double), "NCCL's all-reduce", [&](void* d, cudaStream_t stream) {
    return ncclAllReduce(d, d, count, ncclFloat64, ncclSum, state_->comm, stream);
  });
}

void NcclCommunicator::all_reduce_sum(int64_t* data, size_t count) {
  state_->on_host_data(data, count * sizeof(int64_t), "NCCL's all-reduce", [&](void* d, cudaStream_t stream) {
    return ncclAllReduce(d, d, count, ncclInt64, ncclSum, state_->comm, stream);
  });
}

void NcclCommunicator::all_reduce_sum(uint16_t* data, size_t count, Float16Format format) {
  const ncclDataType_t type = format == Float16Format::F16 ? ncclFloat16 : ncclBfloat16;
  state_->on_host_data(data, count * sizeof(uint16_t), "NCCL's 16-bit all-reduce", [&](void* d, cudaStream_t stream) {
    return ncclAllReduce(d, d, count, type, ncclSum, state_->comm, stream);
  });
}

void NcclCommunicator::broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= world_size_)
    throw Error("broadcast from rank " + std::to_string(root) + ", but the ranks are 0 .. " +
                std::to_string(world_size_ - 1));
  state_->on_host_data(data, bytes, "NCCL's broadcast", [&](void* d, cudaStream_t stream) {
    return ncclBroadcast(d, d, bytes, ncclUint8, root, state_->comm, stream);
  });
}

void NcclCommunicator::barrier() {
  int64_t nothing = 0;
  state_->on_host_data(
      &nothing, sizeof nothing, "NCCL's barrier (an all-reduce of one number)",
      [&](void* d, cudaStream_t stream) { return ncclAllReduce(d, d, 1, ncclInt64, ncclSum, state_->comm, stream); });
}

void NcclCommunicator::set_device_stream(void* cuda_stream) {
  std::lock_guard lock(state_->call_mutex);
  state_->device_stream = static_cast<cudaStream_t>(cuda_stream);
}

void NcclCommunicator::device_inputs_ready(size_t slot) {
  State& s = *state_;
  AMPWB_CHECK(s.device_stream, "a device collective before set_device_stream");
  cuda::DeviceScope on_gpu(gpu_);
  std::lock_guard lock(s.slots_mutex);
  while (s.slot_events.size() <= slot) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    s.slot_events.push_back(e);
  }
  CUDA_CHECK(cudaEventRecord(s.slot_events[slot], s.device_stream));
}

void NcclCommunicator::all_reduce_mean_on_device(const std::vector<DeviceFloats>& spans, size_t slot) {
  State& s = *state_;
  std::lock_guard lock(s.call_mutex);
  cuda::DeviceScope on_gpu(gpu_);  // the caller may be the reducer's communication thread
  cudaEvent_t ready = nullptr;
  {
    std::lock_guard slots(s.slots_mutex);
    AMPWB_CHECK(slot < s.slot_events.size(), "a device all-reduce of slot " << slot << " before device_inputs_ready");
    ready = s.slot_events[slot];
  }
  s.after_device_work(ready, "a device all-reduce");
  // One group: NCCL launches the bucket's all-reduces together. ncclAvg: each rank's values times 1 / world size,
  // summed (exact for one rank). The group is ended whatever its calls return, as NCCL cleans up a failed group
  // there, and an abort inside an open group would wait for it.
  s.check(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t failed = ncclSuccess;
  for (const DeviceFloats& span : spans) {
    const ncclResult_t queued =
        ncclAllReduce(span.data, span.data, span.count, ncclFloat32, ncclAvg, s.comm, s.own_stream);
    if (failed == ncclSuccess && queued != ncclSuccess && queued != ncclInProgress) failed = queued;
  }
  const ncclResult_t ended = ncclGroupEnd();
  s.check(failed, "NCCL's gradient all-reduce");
  s.settle(ended, "NCCL's gradient all-reduce (ncclGroupEnd)");
  s.queued_on_device("NCCL's gradient all-reduce");
}

void NcclCommunicator::broadcast_on_device(void* data, size_t bytes, int root) {
  State& s = *state_;
  if (root < 0 || root >= world_size_)
    throw Error("broadcast from rank " + std::to_string(root) + ", but the ranks are 0 .. " +
                std::to_string(world_size_ - 1));
  std::lock_guard lock(s.call_mutex);
  cuda::DeviceScope on_gpu(gpu_);
  AMPWB_CHECK(s.device_stream, "a device broadcast before set_device_stream");
  CUDA_CHECK(cudaEventRecord(s.inputs_ready, s.device_stream));  // the caller queued the work that wrote `data`
  s.after_device_work(s.inputs_ready, "a device broadcast");
  s.settle(ncclBroadcast(data, data, bytes, ncclUint8, root, s.comm, s.own_stream), "NCCL's broadcast of the weights");
  s.queued_on_device("NCCL's broadcast of the weights");
}

void NcclCommunicator::join_device_collectives() {
  State& s = *state_;
  std::lock_guard lock(s.call_mutex);
  if (s.device_queued) {
    AMPWB_CHECK(s.device_stream, "join_device_collectives before set_device_stream");
    cuda::DeviceScope on_gpu(gpu_);
    // A device wait: an aborted collective ends its kernels, so the backend's stream does not wait forever.
    CUDA_CHECK(cudaStreamWaitEvent(s.device_stream, s.collectives_done, 0));
  }
  if (!s.failure.empty()) s.throw_failure();  // aborted meanwhile (the watchdog): the results are not the means
}

}  // namespace ampwb
