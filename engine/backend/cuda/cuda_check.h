// CUDA_CHECK: every CUDA runtime status is checked through this one macro, which throws ampwb::Error naming the call
// that failed, the error's name and text, and where. Out-of-memory errors say so and suggest a smaller batch.
// (cuDNN and cuBLASLt statuses: CUDNN_CHECK and CUBLAS_CHECK in cuda_library_check.h.)
// Usable from .cu and .cpp files alike: needs only the CUDA runtime API header.
#pragma once

#include <cuda_runtime_api.h>

#include <sstream>
#include <string>

#include "core/error.h"

namespace ampwb::cuda {

// The hint every out-of-memory message carries.
inline constexpr const char* kOutOfMemoryHint = "try a smaller batch size (or a lower-memory precision mode)";

// "cudaMalloc(&p, bytes) failed: cudaErrorMemoryAllocation (out of memory) - the GPU is out of memory; try ...".
[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  std::ostringstream out;
  out << "CUDA call " << call << " failed: " << cudaGetErrorName(status) << " (" << cudaGetErrorString(status) << ")";
  if (status == cudaErrorMemoryAllocation) out << " - the GPU is out of memory; " << kOutOfMemoryHint;
  if (status == cudaErrorIllegalAddress || status == cudaErrorLaunchFailure || status == cudaErrorAssert)
    out << " - the CUDA context is no longer usable; restart the program";
  ::ampwb::detail::fail(file, line, out.str());
}

// Makes `index` the calling thread's current device for the scope and restores the previous one after (CUDA's
// current device is per host thread, and the trainer runs on its own thread).
class DeviceScope {
 public:
  explicit DeviceScope(int index) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != index) {
      const cudaError_t status = cudaSetDevice(index);
      if (status != cudaSuccess) {
        cudaGetLastError();
        throw_cuda_error(status, "cudaSetDevice(index)", __FILE__, __LINE__);
      }
      switched_ = true;
    }
  }
  ~DeviceScope() {
    if (switched_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace ampwb::cuda

// CUDA_CHECK(cudaMemcpyAsync(...)): throws ampwb::Error with the call text when the status is not cudaSuccess.
// A failed call's error is also cleared from the thread's "last error" so that later launch checks start clean.
#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    const cudaError_t ampwb_cuda_status_ = (call);                                    \
    if (ampwb_cuda_status_ != cudaSuccess) {                                          \
      cudaGetLastError();                                                             \
      ::ampwb::cuda::throw_cuda_error(ampwb_cuda_status_, #call, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)

// After a kernel launch: reports a bad launch configuration at once, naming the kernel (a string literal).
#define CUDA_CHECK_LAUNCH(kernel_name)                                                                   \
  do {                                                                                                   \
    const cudaError_t ampwb_cuda_status_ = cudaGetLastError();                                           \
    if (ampwb_cuda_status_ != cudaSuccess)                                                               \
      ::ampwb::cuda::throw_cuda_error(ampwb_cuda_status_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)

namespace ampwb::cuda {

// Times work queued on a stream between start() and stop() by two events, destroyed however the timing ends.
class StreamTimer {
 public:
  explicit StreamTimer(cudaStream_t stream) : stream_(stream) {
    CUDA_CHECK(cudaEventCreate(&start_.event));
    CUDA_CHECK(cudaEventCreate(&stop_.event));
  }
  void start() { CUDA_CHECK(cudaEventRecord(start_.event, stream_)); }
  // Waits for the work since start() and returns its milliseconds.
  float stop() {
    CUDA_CHECK(cudaEventRecord(stop_.event, stream_));
    CUDA_CHECK(cudaEventSynchronize(stop_.event));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_.event, stop_.event));
    return ms;
  }

 private:
  struct Event {  // a member, so destroyed where the constructor throws too
    cudaEvent_t event = nullptr;
    Event() = default;
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() {
      if (event) cudaEventDestroy(event);
    }
  };
  cudaStream_t stream_;
  Event start_, stop_;
};

}  // namespace ampwb::cuda
