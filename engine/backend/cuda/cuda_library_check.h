// CUDNN_CHECK and CUBLAS_CHECK: cuDNN and cuBLAS(Lt) statuses checked through one macro each, throwing
// ampwb::Error that names the call, the status and its text. Allocation failures say the GPU is out of memory and
// suggest a smaller batch. For host (.cpp) files only: includes the cuDNN and cuBLASLt headers.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include <sstream>

#include "backend/cuda/cuda_check.h"

namespace ampwb::cuda {

[[noreturn]] inline void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  std::ostringstream out;
  out << "cuDNN call " << call << " failed: " << cudnnGetErrorString(status) << " (status " << static_cast<int>(status)
      << ")";
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    out << " - out of memory; " << kOutOfMemoryHint;
  ::ampwb::detail::fail(file, line, out.str());
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  std::ostringstream out;
  out << "cuBLAS call " << call << " failed: " << cublasLtGetStatusString(status) << " (status "
      << static_cast<int>(status) << ")";
  if (status == CUBLAS_STATUS_ALLOC_FAILED) out << " - out of memory; " << kOutOfMemoryHint;
  ::ampwb::detail::fail(file, line, out.str());
}

}  // namespace ampwb::cuda

#define CUDNN_CHECK(call)                                                               \
  do {                                                                                  \
    const cudnnStatus_t ampwb_cudnn_status_ = (call);                                   \
    if (ampwb_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                    \
      ::ampwb::cuda::throw_cudnn_error(ampwb_cudnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                \
  do {                                                                                    \
    const cublasStatus_t ampwb_cublas_status_ = (call);                                   \
    if (ampwb_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::ampwb::cuda::throw_cublas_error(ampwb_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)
