// Device helpers shared by the backend's .cu files: element loads/stores as float, storage offsets of logical
// (n, c, h, w) positions, block reductions, launch sizes, and the dtype dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"

namespace ampwb::cuda {

constexpr int kThreads = 256;         // threads per block of the elementwise kernels
constexpr int64_t kMaxBlocks = 8192;  // grid-stride loops beyond this

inline int blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Whether the ReLU kernels pass a value (and its gradient): FP32 above 0 (not NaN); a 16-bit value with a clear sign
// bit that is not zero (its NaNs too), as relu_forward_16 tests the bits. Fused kernels use the same test, so that
// they match the separate ops bit for bit.
__device__ __forceinline__ bool positive16(uint16_t bits) { return !(bits & 0x8000u) && (bits & 0x7fffu); }
__device__ __forceinline__ bool relu_passes(float v) { return v > 0.0f; }
__device__ __forceinline__ bool relu_passes(__half v) { return positive16(__half_as_ushort(v)); }
__device__ __forceinline__ bool relu_passes(__nv_bfloat16 v) { return positive16(__bfloat16_as_ushort(v)); }

// Any element type as float and back, chosen at run time (for the conversion kernels, where the memory traffic
// dwarfs a uniform switch).
__device__ __forceinline__ float load_any(const void* p, KType t, int64_t i) {
  switch (t) {
    case KType::F32:
      return static_cast<const float*>(p)[i];
    case KType::F16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case KType::BF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case KType::I32:
      return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case KType::U8:
      return static_cast<float>(static_cast<const uint8_t*>(p)[i]);
    case KType::F8E4M3:
      return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_storage_t*>(p)[i], __NV_E4M3)));
    case KType::F8E5M2:
      return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_storage_t*>(p)[i], __NV_E5M2)));
  }
  return 0.0f;
}
__device__ __forceinline__ void store_any(void* p, KType t, int64_t i, float v) {
  switch (t) {
    case KType::F32:
      static_cast<float*>(p)[i] = v;
      break;
    case KType::F16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    case KType::BF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
    case KType::I32:  // as oneDNN's reorder on the CPU: rounded to nearest even, saturated
      static_cast<int32_t*>(p)[i] = __float2int_rn(fminf(fmaxf(v, -2147483648.0f), 2147483520.0f));
      break;
    case KType::U8:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(__float2uint_rn(fminf(fmaxf(v, 0.0f), 255.0f)));
      break;
    case KType::F8E4M3:  // nearest even, saturated (Hopper's cvt.rn.satfinite), as core/fp8.h
      static_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
      break;
    case KType::F8E5M2:
      static_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2);
      break;
  }
}

// 16 bytes of elements moved as one load or store: the packed kernels' unit (8 FP16/BF16 or 4 FP32 values).
template <class T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte load

template <class T>
struct alignas(16) Pack {
  T v[kPack<T>];
};
template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  Pack<T> r;
  *reinterpret_cast<uint4*>(&r) = __ldg(reinterpret_cast<const uint4*>(p));
  return r;
}
template <class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& r) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&r);
}
// Whether every pointer is on a 16-byte boundary (null ones pass): the allocator's are, a view into another
// tensor might not be.
inline bool aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}
inline size_t element_size(KType floating) { return floating == KType::F32 ? 4 : 2; }
// Whether the packed kernels apply to an NHWC tensor of these dims: whole packs of channels, aligned pointers.
inline bool packable(const Dims4& d, size_t element_size, std::initializer_list<const void*> pointers) {
  return d.nhwc && d.c % static_cast<int64_t>(16 / element_size) == 0 && aligned16(pointers);
}

// Storage offset of logical (n, c, h, w).
__device__ __forceinline__ int64_t offset_of(const Dims4& d, int64_t n, int64_t c, int64_t h, int64_t w) {
  return d.nhwc ? ((n * d.h + h) * d.w + w) * d.c + c : ((n * d.c + c) * d.h + h) * d.w + w;
}
// Logical (n, c, h, w) of a storage index.
__device__ __forceinline__ void coords_of(const Dims4& d, int64_t i, int64_t& n, int64_t& c, int64_t& h, int64_t& w) {
  if (d.nhwc) {
    c = i % d.c;
    i /= d.c;
    w = i % d.w;
    i /= d.w;
    h = i % d.h;
    n = i / d.h;
  } else {
    w = i % d.w;
    i /= d.w;
    h = i % d.h;
    i /= d.h;
    c = i % d.c;
    n = i / d.c;
  }
}
// The channel of a storage index.
__device__ __forceinline__ int64_t channel_of(const Dims4& d, int64_t i) {
  return d.nhwc ? i % d.c : (i / (d.h * d.w)) % d.c;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T warp_sums[32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = threadIdx.x < warps ? warp_sums[threadIdx.x] : T(0);
  if (warp == 0)
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_max[32];
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = threadIdx.x < warps ? warp_max[threadIdx.x] : -INFINITY;
  if (warp == 0)
    for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

}  // namespace ampwb::cuda

// Runs the statement with T bound to the storage type of a floating KType.
#define AMPWB_DISPATCH_FLOATING(ktype, name, ...)                                          \
  switch (ktype) {                                                                         \
    case ::ampwb::cuda::KType::F32: {                                                      \
      using T = float;                                                                     \
      __VA_ARGS__;                                                                         \
      break;                                                                               \
    }                                                                                      \
    case ::ampwb::cuda::KType::F16: {                                                      \
      using T = __half;                                                                    \
      __VA_ARGS__;                                                                         \
      break;                                                                               \
    }                                                                                      \
    case ::ampwb::cuda::KType::BF16: {                                                     \
      using T = __nv_bfloat16;                                                             \
      __VA_ARGS__;                                                                         \
      break;                                                                               \
    }                                                                                      \
    default:                                                                               \
      throw ::ampwb::Error(std::string(name) + ": expected an FP32, FP16 or BF16 tensor"); \
  }
