// The CUDA backend's own kernels other than batch normalization: conversions, channel padding, ReLU, add, pooling,
// linear helpers, softmax cross-entropy, optimizer updates and the fused scale-and-check. Simple grid-stride
// kernels, one element per thread per iteration, or 16 bytes where the data allows (ReLU, add, max pooling); see
// cuda_kernels.h for the contracts.
#include <cuda_fp8.h>

#include <algorithm>
#include <cfloat>
#include <string>

#include "backend/cuda/cuda_kernel_util.cuh"

namespace ampwb::cuda {
namespace {

// ---- Conversions ----------------------------------------------------------------------------------------------

// Through float for different dtypes; dst index i is a storage index of dst.
__global__ void convert_kernel(const void* src, KType st, Dims4 sd, void* dst, KType dt, Dims4 dd, bool same_order,
                               int64_t total) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t j = i;
    if (!same_order) {
      int64_t n, c, h, w;
      coords_of(dd, i, n, c, h, w);
      j = offset_of(sd, n, c, h, w);
    }
    store_any(dst, dt, i, load_any(src, st, j));
  }
}

// Same dtype, another layout: an exact permutation of elements of type E.
template <class E>
__global__ void permute_kernel(const E* src, Dims4 sd, E* dst, Dims4 dd, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t n, c, h, w;
    coords_of(dd, i, n, c, h, w);
    dst[i] = src[offset_of(sd, n, c, h, w)];
  }
}

// A row (pixel) per thread and step: channel counts are small where padding happens (3 image channels to 8), so
// no division per element.
template <class E>
__global__ void pad_channels_kernel(const E* src, int64_t rows, int64_t c, E* dst, int64_t padded_c) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x)
    for (int64_t ch = 0; ch < padded_c; ++ch) dst[r * padded_c + ch] = ch < c ? src[r * c + ch] : E(0);
}

template <class E>
__global__ void slice_channels_kernel(const E* src, int64_t rows, int64_t padded_c, E* dst, int64_t c) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x)
    for (int64_t ch = 0; ch < c; ++ch) dst[r * c + ch] = src[r * padded_c + ch];
}

// ---- Elementwise ----------------------------------------------------------------------------------------------

// Flat elementwise passes: whole 16-byte packs first where every pointer is 16-byte aligned (`packs` of them),
// then the remaining elements one by one (all of them where a pointer is not aligned).
__device__ __forceinline__ float relu_value(float v) { return v > 0.0f ? v : 0.0f; }
__device__ __forceinline__ uint16_t relu_value(uint16_t bits) { return positive16(bits) ? bits : uint16_t{0}; }
__device__ __forceinline__ float relu_gradient(float y, float dy) { return y > 0.0f ? dy : 0.0f; }
__device__ __forceinline__ uint16_t relu_gradient(uint16_t y, uint16_t dy) { return positive16(y) ? dy : uint16_t{0}; }

// E: float, or uint16_t for FP16 and BF16 (the ReLU tests their bits).
template <class E>
__global__ void relu_forward_kernel(const E* x, E* y, int64_t n, int64_t packs) {
  constexpr int k = kPack<E>;
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = first; i < packs; i += stride) {
    const Pack<E> v = load_pack(x + i * k);
    Pack<E> out;
#pragma unroll
    for (int j = 0; j < k; ++j) out.v[j] = relu_value(v.v[j]);
    store_pack(y + i * k, out);
  }
  for (int64_t i = packs * k + first; i < n; i += stride) y[i] = relu_value(x[i]);
}

// out = op(a, b) element by element, for the binary passes below.
template <class E, class Op>
__global__ void binary_kernel(const E* a, const E* b, E* out, int64_t n, int64_t packs, Op op) {
  constexpr int k = kPack<E>;
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = first; i < packs; i += stride) {
    const Pack<E> av = load_pack(a + i * k), bv = load_pack(b + i * k);
    Pack<E> result;
#pragma unroll
    for (int j = 0; j < k; ++j) result.v[j] = op(av.v[j], bv.v[j]);
    store_pack(out + i * k, result);
  }
  for (int64_t i = packs * k + first; i < n; i += stride) out[i] = op(a[i], b[i]);
}

struct ReluGradient {  // (y, dy) -> dx
  template <class E>
  __device__ E operator()(E y, E dy) const {
    return relu_gradient(y, dy);
  }
};

// y = a + b in one storage order, then with relu the ReLU of the rounded sum.
template <class T>
__device__ __forceinline__ T add_value(T a, T b, bool relu) {
  const T sum = from_float<T>(to_float(a) + to_float(b));
  return !relu || relu_passes(sum) ? sum : from_float<T>(0.0f);
}
struct AddMaybeRelu {
  bool relu;
  template <class T>
  __device__ T operator()(T a, T b) const {
    return add_value(a, b, relu);
  }
};

// dx = relu_backward(y, a + b): the sum rounded as add_value rounds it, passed where the ReLU's output y passed.
template <class T>
__global__ void relu_backward_of_sum_kernel(const T* y, const T* a, const T* b, T* dx, int64_t n, int64_t packs) {
  constexpr int k = kPack<T>;
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = first; i < packs; i += stride) {
    const Pack<T> yv = load_pack(y + i * k), av = load_pack(a + i * k), bv = load_pack(b + i * k);
    Pack<T> result;
#pragma unroll
    for (int j = 0; j < k; ++j)
      result.v[j] = relu_passes(yv.v[j]) ? add_value(av.v[j], bv.v[j], false) : from_float<T>(0.0f);
    store_pack(dx + i * k, result);
  }
  for (int64_t i = packs * k + first; i < n; i += stride)
    dx[i] = relu_passes(y[i]) ? add_value(a[i], b[i], false) : from_float<T>(0.0f);
}

// The number of whole packs of E in n elements where every pointer is 16-byte aligned, else 0.
template <class E>
int64_t whole_packs(int64_t n, std::initializer_list<const void*> pointers) {
  return aligned16(pointers) ? n / kPack<E> : 0;
}
// Blocks for `packs` packs of E and the elements after them.
template <class E>
int flat_blocks(int64_t n, int64_t packs) {
  return blocks_for(packs + (n - packs * kPack<E>));
}

// The same where the operands' layouts differ from y's (add_relu: what add then relu_forward write).
template <class T>
__global__ void add_any_order(const T* a, Dims4 ad, const T* b, Dims4 bd, T* y, Dims4 yd, int64_t total, bool relu) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t n, c, h, w;
    coords_of(yd, i, n, c, h, w);
    y[i] = add_value(a[offset_of(ad, n, c, h, w)], b[offset_of(bd, n, c, h, w)], relu);
  }
}

// ---- Pooling --------------------------------------------------------------------------------------------------

template <class T>
__global__ void maxpool_forward_kernel(const T* x, Dims4 xd, T* y, Dims4 yd, uint8_t* argmax, int kernel, int stride,
                                       int padding) {
  const int64_t total = yd.numel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t n, c, p, q;
    coords_of(yd, i, n, c, p, q);
    const int64_t h0 = p * stride - padding, w0 = q * stride - padding;
    float best = 0.0f;
    int best_at = -1;
    for (int kh = 0; kh < kernel; ++kh) {
      const int64_t h = h0 + kh;
      if (h < 0 || h >= xd.h) continue;
      for (int kw = 0; kw < kernel; ++kw) {
        const int64_t w = w0 + kw;
        if (w < 0 || w >= xd.w) continue;
        const float v = to_float(x[offset_of(xd, n, c, h, w)]);
        if (best_at < 0 || v > best) {  // the first maximum in scan order wins ties
          best = v;
          best_at = kh * kernel + kw;
        }
      }
    }
    y[i] = from_float<T>(best);  // exact: best is one of the inputs
    argmax[i] = static_cast<uint8_t>(best_at < 0 ? 0 : best_at);
  }
}

template <class T>
__global__ void maxpool_backward_kernel(const T* dy, Dims4 yd, const uint8_t* argmax, T* dx, Dims4 xd, int kernel,
                                        int stride, int padding) {
  const int64_t total = xd.numel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t n, c, h, w;
    coords_of(xd, i, n, c, h, w);
    // The windows p with p*stride - padding <= h <= p*stride - padding + kernel - 1.
    const int64_t hp = h + padding, wp = w + padding;
    const int64_t p_begin = hp >= kernel ? (hp - kernel) / stride + 1 : 0;
    const int64_t q_begin = wp >= kernel ? (wp - kernel) / stride + 1 : 0;
    const int64_t p_end = min(hp / stride + 1, yd.h), q_end = min(wp / stride + 1, yd.w);
    float sum = 0.0f;
    for (int64_t p = p_begin; p < p_end; ++p)
      for (int64_t q = q_begin; q < q_end; ++q) {
        const int64_t o = offset_of(yd, n, c, p, q);
        const int at = static_cast<int>((hp - p * stride) * kernel + (wp - q * stride));
        if (argmax[o] == at) sum += to_float(dy[o]);
      }
    dx[i] = from_float<T>(sum);
  }
}

// The same two passes over NHWC tensors with whole 16-byte packs of channels (the stem's pool): a pack of
// channels per thread, so the position arithmetic is done once per pack and the loads are 16 bytes wide. Each
// channel's value is found by the same comparisons and sums, in the same order: bit for bit the kernels above.
template <class T>
__global__ void maxpool_forward_packed(const T* x, Dims4 xd, T* y, Dims4 yd, uint8_t* argmax, int kernel, int stride,
                                       int padding) {
  constexpr int n = kPack<T>;
  const int64_t packs_per_row = yd.c / n, total = yd.numel() / n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c0 = (i % packs_per_row) * n, pixel = i / packs_per_row;
    const int64_t q = pixel % yd.w, p = (pixel / yd.w) % yd.h, image = pixel / (yd.w * yd.h);
    const int64_t h0 = p * stride - padding, w0 = q * stride - padding;
    float best[n] = {};
    int best_at[n];
#pragma unroll
    for (int k = 0; k < n; ++k) best_at[k] = -1;
    for (int kh = 0; kh < kernel; ++kh) {
      const int64_t h = h0 + kh;
      if (h < 0 || h >= xd.h) continue;
      for (int kw = 0; kw < kernel; ++kw) {
        const int64_t w = w0 + kw;
        if (w < 0 || w >= xd.w) continue;
        const Pack<T> v = load_pack(x + ((image * xd.h + h) * xd.w + w) * xd.c + c0);
#pragma unroll
        for (int k = 0; k < n; ++k) {
          const float f = to_float(v.v[k]);
          if (best_at[k] < 0 || f > best[k]) {  // the first maximum in scan order wins ties
            best[k] = f;
            best_at[k] = kh * kernel + kw;
          }
        }
      }
    }
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < n; ++k) {
      out.v[k] = from_float<T>(best[k]);
      argmax[i * n + k] = static_cast<uint8_t>(best_at[k] < 0 ? 0 : best_at[k]);
    }
    store_pack(y + i * n, out);
  }
}

template <class T>
__global__ void maxpool_backward_packed(const T* dy, Dims4 yd, const uint8_t* argmax, T* dx, Dims4 xd, int kernel,
                                        int stride, int padding) {
  constexpr int n = kPack<T>;
  const int64_t packs_per_row = xd.c / n, total = xd.numel() / n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c0 = (i % packs_per_row) * n, pixel = i / packs_per_row;
    const int64_t w = pixel % xd.w, h = (pixel / xd.w) % xd.h, image = pixel / (xd.w * xd.h);
    const int64_t hp = h + padding, wp = w + padding;
    const int64_t p_begin = hp >= kernel ? (hp - kernel) / stride + 1 : 0;
    const int64_t q_begin = wp >= kernel ? (wp - kernel) / stride + 1 : 0;
    const int64_t p_end = min(hp / stride + 1, yd.h), q_end = min(wp / stride + 1, yd.w);
    float sum[n] = {};
    for (int64_t p = p_begin; p < p_end; ++p)
      for (int64_t q = q_begin; q < q_end; ++q) {
        const int64_t o = ((image * yd.h + p) * yd.w + q) * yd.c + c0;
        const int at = static_cast<int>((hp - p * stride) * kernel + (wp - q * stride));
        const Pack<T> g = load_pack(dy + o);
#pragma unroll
        for (int k = 0; k < n; ++k)
          if (argmax[o + k] == at) sum[k] += to_float(g.v[k]);
      }
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < n; ++k) out.v[k] = from_float<T>(sum[k]);
    store_pack(dx + i * n, out);
  }
}

template <class T>
__global__ void global_avgpool_forward_kernel(const T* x, Dims4 xd, T* y) {
  const int64_t total = xd.n * xd.c, hw = xd.h * xd.w;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / xd.c, c = i % xd.c;
    double sum = 0;
    for (int64_t s = 0; s < hw; ++s) sum += to_float(x[xd.nhwc ? (n * hw + s) * xd.c + c : (n * xd.c + c) * hw + s]);
    y[i] = from_float<T>(static_cast<float>(sum / static_cast<double>(hw)));
  }
}

template <class T>
__global__ void global_avgpool_backward_kernel(const T* dy, T* dx, Dims4 xd, float inv) {
  const int64_t total = xd.numel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t n, c, h, w;
    coords_of(xd, i, n, c, h, w);
    dx[i] = from_float<T>(to_float(dy[n * xd.c + c]) * inv);
  }
}

// ---- Linear helpers -------------------------------------------------------------------------------------------

__global__ void broadcast_rows_kernel(const void* b, KType bt, void* y, KType yt, int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    store_any(y, yt, i, load_any(b, bt, i % cols));
}

__global__ void column_sum_kernel(const void* dy, KType dyt, int64_t rows, int64_t cols, void* db, KType dbt) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols; c += int64_t{gridDim.x} * blockDim.x) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) sum += load_any(dy, dyt, r * cols + c);  // threads read neighbouring columns
    store_any(db, dbt, c, sum);
  }
}

// ---- Loss -----------------------------------------------------------------------------------------------------

// One block per row.
__global__ void softmax_cross_entropy_rows(const float* logits, const int32_t* labels, int64_t N, int64_t K,
                                           float smoothing, float grad_scale, const float* scale_from, float* dlogits,
                                           double* row_loss, LossResult* result) {
  const int64_t n = blockIdx.x;
  const float* z = logits + n * K;
  float* dz = dlogits + n * K;
  const int32_t label = labels[n];
  if (label < 0 || label >= K) {  // the host reports it after the copy back
    if (threadIdx.x == 0) {
      result->label = label;
      atomicExch(&result->bad_label, 1);
      row_loss[n] = 0;
    }
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) dz[k] = 0.0f;
    return;
  }
  float local_max = -INFINITY, local_other = -INFINITY;  // over every class; over the classes but the label
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
    local_max = fmaxf(local_max, z[k]);
    if (k != label) local_other = fmaxf(local_other, isnan(z[k]) ? INFINITY : z[k]);  // fmaxf drops a NaN
  }
  __shared__ float shared_max;
  __shared__ double shared_log_sum;  // in double: a float log-sum-exp loses 6e-5 of the softmax at logits near 1e3
  const float max = block_max(local_max);
  const float other = block_max(local_other);
  if (threadIdx.x == 0) {
    shared_max = max;
    // top-1: the label's logit above every other; a NaN label logit is no correct answer
    if (other < z[label]) atomicAdd(&result->correct, 1);
  }
  __syncthreads();
  double exp_sum = 0, z_sum = 0;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
    exp_sum += static_cast<double>(expf(z[k] - shared_max));
    z_sum += z[k];
  }
  exp_sum = block_sum(exp_sum);
  z_sum = block_sum(z_sum);
  const double off_target = static_cast<double>(smoothing) / K, on_target = 1.0 - smoothing + off_target;
  if (threadIdx.x == 0) {
    const double log_sum = log(exp_sum) + shared_max;
    shared_log_sum = log_sum;
    // -sum_k target_k (z_k - log_sum), with target_k = off_target + (on_target - off_target) [k == label]
    row_loss[n] = -(off_target * (z_sum - static_cast<double>(K) * log_sum) +
                    (on_target - off_target) * (static_cast<double>(z[label]) - log_sum));
  }
  __syncthreads();
  const float scale = scale_from ? grad_scale * *scale_from : grad_scale;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {  // as the CPU backend: in double, rounded once
    const double target = k == label ? on_target : off_target;
    dz[k] = static_cast<float>((exp(static_cast<double>(z[k]) - shared_log_sum) - target) / N) * scale;
  }
}

// One block: the mean of the row losses, in a fixed order.
__global__ void mean_of_rows(const double* row_loss, int64_t N, LossResult* result) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) sum += row_loss[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) result->loss = sum / static_cast<double>(N);
}

// ---- Optimizers -----------------------------------------------------------------------------------------------

// The segment holding a chunk of a multi-tensor kernel: the last one whose first_chunk <= chunk (binary search).
template <class Segment>
__device__ inline Segment segment_of(const Segment* segments, int count, int64_t chunk) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segments[mid].first_chunk <= chunk)
      lo = mid;
    else
      hi = mid - 1;
  }
  return segments[lo];
}

// Calls body(segment, i) for every element of every segment, each block taking chunks in turn. The segment is a
// local copy: the body's stores cannot alias it, so its pointers stay in registers.
template <class Segment, class Body>
__device__ inline void for_each_chunk(const Segment* segments, int count, int64_t total_chunks, Body body) {
  for (int64_t chunk = blockIdx.x; chunk < total_chunks; chunk += gridDim.x) {
    const Segment s = segment_of(segments, count, chunk);
    const int64_t begin = (chunk - s.first_chunk) * kChunk, end = min(begin + kChunk, s.n);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) body(s, i);
  }
}

// A segment's copy: null, or the weights' 16-bit compute copy (copy_type), written from each updated weight in the
// same pass, rounded as convert_kernel rounds.
__global__ void sgd_kernel(const UpdateSegment* segments, int count, int64_t total_chunks, SgdHyper h,
                           const float* found_inf, const StepValues* values) {
  if (found_inf && *found_inf != 0.0f) return;  // the loss scaler skips this step
  const float lr = values ? values->lr : h.lr;
  for_each_chunk(segments, count, total_chunks, [&](const UpdateSegment& s, int64_t i) {
    float* w = s.w;
    float d = s.g[i] + h.weight_decay * w[i];
    if (float* buf = s.s1) {
      buf[i] = h.first_step ? d : h.momentum * buf[i] + d;  // PyTorch: no dampening, the buffer starts at d
      d = h.nesterov ? d + h.momentum * buf[i] : buf[i];
    }
    w[i] -= lr * d;
    if (s.copy) store_any(s.copy, s.copy_type, i, w[i]);
  });
}

// Adam's step size, the square root of its second bias correction and AdamW's decay for the step'th update, in
// double as the CPU backend computes them (the decay in float, unfused, as the CPU's). Computed here, not on the
// host, in every case, so that a step queued with step values (a captured one) gives the bits of one without.
struct AdamStep {
  float step_size, bias2_sqrt, decay;
};
__device__ inline AdamStep adam_step(const AdamHyper& h, float lr, int64_t step) {
  const double t = static_cast<double>(step);
  return {static_cast<float>(lr / (1.0 - pow(static_cast<double>(h.beta1), t))),
          static_cast<float>(sqrt(1.0 - pow(static_cast<double>(h.beta2), t))),
          __fsub_rn(1.0f, __fmul_rn(lr, h.decoupled_wd))};
}

// With a loss-scale state: nothing where its found_inf is set, and t = step - skipped_steps. Each block's first
// thread computes the step's constants (from values' lr and step where given).
__global__ void adam_kernel(const UpdateSegment* segments, int count, int64_t total_chunks, AdamHyper h, float lr,
                            int64_t step, const LossScaleDevice* state, const StepValues* values) {
  if (state && state->found_inf != 0.0f) return;  // the loss scaler skips this step (the whole grid alike)
  __shared__ AdamStep shared;
  if (threadIdx.x == 0) {
    if (values) {
      lr = values->lr;
      step = values->step;
    }
    shared = adam_step(h, lr, step - (state ? state->skipped_steps : 0));
  }
  __syncthreads();
  const AdamStep c = shared;
  for_each_chunk(segments, count, total_chunks, [&](const UpdateSegment& s, int64_t i) {
    float *w = s.w, *m = s.s1, *v = s.s2;
    const float gi = s.g[i] + h.l2 * w[i];
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * gi;
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * gi * gi;
    w[i] = w[i] * c.decay - c.step_size * m[i] / (sqrtf(v[i]) / c.bias2_sqrt + h.eps);
    if (s.copy) store_any(s.copy, s.copy_type, i, w[i]);
  });
}

// ---- Fused scale and check ------------------------------------------------------------------------------------

__global__ void scale_and_check_kernel(const ScaleSegment* segments, int segment_count, int64_t total_chunks,
                                       float factor, double* partials, ScaleResult* result,
                                       LossScaleDevice* loss_scale) {
  // With a loss scale: PyTorch's unscale_, the reciprocal in double, then float.
  if (loss_scale) factor = static_cast<float>(1.0 / static_cast<double>(loss_scale->scale));
  double sum = 0;
  int nonfinite = 0;
  for_each_chunk(segments, segment_count, total_chunks, [&](const ScaleSegment& s, int64_t i) {
    nonfinite |= !isfinite(s.data[i]);  // the input, as PyTorch's unscale_ checks it
    const float v = s.data[i] * factor;
    s.data[i] = v;
    sum += static_cast<double>(v) * v;
  });
  if (__syncthreads_or(nonfinite) && threadIdx.x == 0) atomicOr(&result->nonfinite, 1);
  sum = block_sum(sum);
  __shared__ bool last_block;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
    __threadfence();  // the partial is visible to every block before this block counts itself done
    last_block = atomicAdd(&result->blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  double total = 0;
  for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += blockDim.x) {
    total += *static_cast<volatile double*>(partials + b);
  }
  total = block_sum(total);
  if (threadIdx.x == 0) {
    result->sum_of_squares = total;
    if (loss_scale) loss_scale->found_inf = *static_cast<volatile int*>(&result->nonfinite) ? 1.0f : 0.0f;
  }
}

// PyTorch's _amp_update_scale_, one thread: the product in double, stored as FP32.
__global__ void update_loss_scale_kernel(LossScaleDevice* s, double growth_factor, double backoff_factor,
                                         int growth_interval) {
  if (s->found_inf != 0.0f) {
    s->scale = static_cast<float>(s->scale * backoff_factor);
    s->growth_tracker = 0;
    ++s->skipped_steps;
  } else if (s->growth_tracker + 1 == growth_interval) {
    const float grown = static_cast<float>(s->scale * growth_factor);
    if (isfinite(grown)) s->scale = grown;
    s->growth_tracker = 0;
  } else {
    ++s->growth_tracker;
  }
  s->found_inf = 0.0f;
}

}  // namespace

// ---- Launchers ------------------------------------------------------------------------------------------------

void convert(const void* src, KType src_type, Dims4 src_dims, void* dst, KType dst_type, Dims4 dst_dims,
             cudaStream_t stream) {
  const int64_t total = dst_dims.numel();
  if (total == 0) return;
  const bool same_order = src_dims.nhwc == dst_dims.nhwc || (src_dims.c == 1) ||
                          (src_dims.h == 1 && src_dims.w == 1);  // NCHW and NHWC store these alike
  if (src_type == dst_type) {
    const size_t size = src_type == KType::F32 || src_type == KType::I32    ? 4
                        : src_type == KType::F16 || src_type == KType::BF16 ? 2
                                                                            : 1;
    if (same_order) {
      CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(total) * size, cudaMemcpyDeviceToDevice, stream));
      return;
    }
    if (size == 4)
      permute_kernel<<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const uint32_t*>(src), src_dims,
                                                                 static_cast<uint32_t*>(dst), dst_dims, total);
    else if (size == 2)
      permute_kernel<<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const uint16_t*>(src), src_dims,
                                                                 static_cast<uint16_t*>(dst), dst_dims, total);
    else
      permute_kernel<<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const uint8_t*>(src), src_dims,
                                                                 static_cast<uint8_t*>(dst), dst_dims, total);
    CUDA_CHECK_LAUNCH("permute_kernel");
    return;
  }
  convert_kernel<<<blocks_for(total), kThreads, 0, stream>>>(src, src_type, src_dims, dst, dst_type, dst_dims,
                                                             same_order, total);
  CUDA_CHECK_LAUNCH("convert_kernel");
}

void pad_channels(const void* src, int64_t rows, int64_t c, void* dst, int64_t padded_c, size_t element_size,
                  cudaStream_t stream) {
  const int blocks = blocks_for(rows);
  if (element_size == 2)
    pad_channels_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(src), rows, c,
                                                         static_cast<uint16_t*>(dst), padded_c);
  else
    pad_channels_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(src), rows, c,
                                                         static_cast<uint32_t*>(dst), padded_c);
  CUDA_CHECK_LAUNCH("pad_channels_kernel");
}

void slice_channels(const void* src, int64_t rows, int64_t padded_c, void* dst, int64_t c, size_t element_size,
                    cudaStream_t stream) {
  const int blocks = blocks_for(rows);
  if (element_size == 2)
    slice_channels_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(src), rows, padded_c,
                                                           static_cast<uint16_t*>(dst), c);
  else
    slice_channels_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(src), rows, padded_c,
                                                           static_cast<uint32_t*>(dst), c);
  CUDA_CHECK_LAUNCH("slice_channels_kernel");
}

void relu_forward(const void* x, void* y, KType type, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (type == KType::F32) {
    const int64_t packs = whole_packs<float>(n, {x, y});
    relu_forward_kernel<<<flat_blocks<float>(n, packs), kThreads, 0, stream>>>(static_cast<const float*>(x),
                                                                               static_cast<float*>(y), n, packs);
  } else {
    const int64_t packs = whole_packs<uint16_t>(n, {x, y});
    relu_forward_kernel<<<flat_blocks<uint16_t>(n, packs), kThreads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                                                  static_cast<uint16_t*>(y), n, packs);
  }
  CUDA_CHECK_LAUNCH("relu_forward");
}

void relu_backward(const void* y, const void* dy, void* dx, KType type, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (type == KType::F32) {
    const int64_t packs = whole_packs<float>(n, {y, dy, dx});
    binary_kernel<<<flat_blocks<float>(n, packs), kThreads, 0, stream>>>(
        static_cast<const float*>(y), static_cast<const float*>(dy), static_cast<float*>(dx), n, packs, ReluGradient{});
  } else {
    const int64_t packs = whole_packs<uint16_t>(n, {y, dy, dx});
    binary_kernel<<<flat_blocks<uint16_t>(n, packs), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(y), static_cast<const uint16_t*>(dy), static_cast<uint16_t*>(dx), n, packs,
        ReluGradient{});
  }
  CUDA_CHECK_LAUNCH("relu_backward");
}

void relu_backward_of_sum(const void* y, const void* dy_a, const void* dy_b, void* dx, KType type, int64_t n,
                          cudaStream_t stream) {
  if (n == 0) return;
  AMPWB_DISPATCH_FLOATING(type, "relu_backward_of_sum", {
    const int64_t packs = whole_packs<T>(n, {y, dy_a, dy_b, dx});
    relu_backward_of_sum_kernel<<<flat_blocks<T>(n, packs), kThreads, 0, stream>>>(
        static_cast<const T*>(y), static_cast<const T*>(dy_a), static_cast<const T*>(dy_b), static_cast<T*>(dx), n,
        packs);
  });
  CUDA_CHECK_LAUNCH("relu_backward_of_sum");
}

void add(const void* a, Dims4 a_dims, const void* b, Dims4 b_dims, void* y, Dims4 y_dims, KType type, bool relu,
         cudaStream_t stream) {
  const int64_t total = y_dims.numel();
  if (total == 0) return;
  const bool same_order = a_dims.nhwc == y_dims.nhwc && b_dims.nhwc == y_dims.nhwc;
  AMPWB_DISPATCH_FLOATING(type, "add", {
    if (same_order) {
      const int64_t packs = whole_packs<T>(total, {a, b, y});
      binary_kernel<<<flat_blocks<T>(total, packs), kThreads, 0, stream>>>(
          static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), total, packs, AddMaybeRelu{relu});
    } else {
      add_any_order<T><<<blocks_for(total), kThreads, 0, stream>>>(
          static_cast<const T*>(a), a_dims, static_cast<const T*>(b), b_dims, static_cast<T*>(y), y_dims, total, relu);
    }
  });
  CUDA_CHECK_LAUNCH("add");
}

void maxpool_forward(const void* x, Dims4 x_dims, void* y, Dims4 y_dims, uint8_t* argmax, KType type, int kernel,
                     int stride, int padding, cudaStream_t stream) {
  const int64_t total = y_dims.numel();
  if (total == 0) return;
  const bool packed = y_dims.nhwc && packable(x_dims, element_size(type), {x, y});
  AMPWB_DISPATCH_FLOATING(type, "maxpool_forward", {
    if (packed)
      maxpool_forward_packed<T><<<blocks_for(total / kPack<T>), kThreads, 0, stream>>>(
          static_cast<const T*>(x), x_dims, static_cast<T*>(y), y_dims, argmax, kernel, stride, padding);
    else
      maxpool_forward_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
          static_cast<const T*>(x), x_dims, static_cast<T*>(y), y_dims, argmax, kernel, stride, padding);
  });
  CUDA_CHECK_LAUNCH("maxpool_forward");
}

void maxpool_backward(const void* dy, Dims4 y_dims, const uint8_t* argmax, void* dx, Dims4 x_dims, KType type,
                      int kernel, int stride, int padding, cudaStream_t stream) {
  const int64_t total = x_dims.numel();
  if (total == 0) return;
  const bool packed = y_dims.nhwc && packable(x_dims, element_size(type), {dy, dx});
  AMPWB_DISPATCH_FLOATING(type, "maxpool_backward", {
    if (packed)
      maxpool_backward_packed<T><<<blocks_for(total / kPack<T>), kThreads, 0, stream>>>(
          static_cast<const T*>(dy), y_dims, argmax, static_cast<T*>(dx), x_dims, kernel, stride, padding);
    else
      maxpool_backward_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
          static_cast<const T*>(dy), y_dims, argmax, static_cast<T*>(dx), x_dims, kernel, stride, padding);
  });
  CUDA_CHECK_LAUNCH("maxpool_backward");
}

void global_avgpool_forward(const void* x, Dims4 x_dims, void* y, KType type, cudaStream_t stream) {
  const int64_t total = x_dims.n * x_dims.c;
  if (total == 0) return;
  AMPWB_DISPATCH_FLOATING(type, "global_avgpool_forward",
                          global_avgpool_forward_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
                              static_cast<const T*>(x), x_dims, static_cast<T*>(y)));
  CUDA_CHECK_LAUNCH("global_avgpool_forward_kernel");
}

void global_avgpool_backward(const void* dy, void* dx, Dims4 x_dims, KType type, cudaStream_t stream) {
  const int64_t total = x_dims.numel();
  if (total == 0) return;
  const float inv = 1.0f / static_cast<float>(x_dims.h * x_dims.w);
  AMPWB_DISPATCH_FLOATING(type, "global_avgpool_backward",
                          global_avgpool_backward_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
                              static_cast<const T*>(dy), static_cast<T*>(dx), x_dims, inv));
  CUDA_CHECK_LAUNCH("global_avgpool_backward_kernel");
}

void broadcast_rows(const void* b, KType b_type, void* y, KType y_type, int64_t rows, int64_t cols,
                    cudaStream_t stream) {
  if (rows * cols == 0) return;
  broadcast_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(b, b_type, y, y_type, rows, cols);
  CUDA_CHECK_LAUNCH("broadcast_rows_kernel");
}

void column_sum(const void* dy, KType dy_type, int64_t rows, int64_t cols, void* db, KType db_type,
                cudaStream_t stream) {
  if (cols == 0) return;
  column_sum_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(dy, dy_type, rows, cols, db, db_type);
  CUDA_CHECK_LAUNCH("column_sum_kernel");
}

void softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t N, int64_t K, float label_smoothing,
                           float grad_scale, const float* scale_from, float* dlogits, double* row_loss,
                           LossResult* result, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(result, 0, sizeof(LossResult), stream));
  if (N == 0) return;
  AMPWB_CHECK(N < (int64_t{1} << 31), "softmax_cross_entropy: batch of " << N << " rows");
  softmax_cross_entropy_rows<<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
      logits, labels, N, K, label_smoothing, grad_scale, scale_from, dlogits, row_loss, result);
  CUDA_CHECK_LAUNCH("softmax_cross_entropy_rows");
  mean_of_rows<<<1, 1024, 0, stream>>>(row_loss, N, result);
  CUDA_CHECK_LAUNCH("mean_of_rows");
}

void sgd_update(const UpdateSegment* segments, int segment_count, int64_t total_chunks, int blocks, SgdHyper hyper,
                const float* found_inf, const StepValues* values, cudaStream_t stream) {
  if (segment_count == 0 || total_chunks == 0) return;
  sgd_kernel<<<blocks, kThreads, 0, stream>>>(segments, segment_count, total_chunks, hyper, found_inf, values);
  CUDA_CHECK_LAUNCH("sgd_kernel");
}

void adam_update(const UpdateSegment* segments, int segment_count, int64_t total_chunks, int blocks, AdamHyper hyper,
                 float lr, int64_t step, const LossScaleDevice* state, const StepValues* values, cudaStream_t stream) {
  if (segment_count == 0 || total_chunks == 0) return;
  adam_kernel<<<blocks, kThreads, 0, stream>>>(segments, segment_count, total_chunks, hyper, lr, step, state, values);
  CUDA_CHECK_LAUNCH("adam_kernel");
}

void scale_and_check(const ScaleSegment* segments, int segment_count, int64_t total_chunks, float factor,
                     double* partials, int blocks, ScaleResult* result, LossScaleDevice* loss_scale,
                     cudaStream_t stream) {
  if (segment_count == 0 || total_chunks == 0) return;
  scale_and_check_kernel<<<blocks, kThreads, 0, stream>>>(segments, segment_count, total_chunks, factor, partials,
                                                          result, loss_scale);
  CUDA_CHECK_LAUNCH("scale_and_check_kernel");
}

void update_loss_scale(LossScaleDevice* state, double growth_factor, double backoff_factor, int growth_interval,
                       cudaStream_t stream) {
  update_loss_scale_kernel<<<1, 1, 0, stream>>>(state, growth_factor, backoff_factor, growth_interval);
  CUDA_CHECK_LAUNCH("update_loss_scale_kernel");
}

namespace {
// The factor in FP32, in ampwb::Fp8Factor::on_host's order.
__device__ float factor_value(const FactorDevice& f) {
  float v = f.value;
  if (f.inverse0) v *= *f.inverse0;
  if (f.inverse1) v *= *f.inverse1;
  if (f.scale) v *= *f.scale;
  return f.reciprocal ? 1.0f / v : v;
}

// A thread's share of a cast's statistics added to stats: reduced over the block first (every thread of it calls
// this), so that one atomic per block, not one per thread of a large grid, contends for each word.
__device__ void add_fp8_stats(Fp8StatsDevice* stats, float amax, unsigned long long saturated,
                              unsigned long long underflowed) {
  amax = block_max(amax);
  saturated = block_sum(saturated);
  underflowed = block_sum(underflowed);
  if (threadIdx.x != 0) return;
  if (amax > 0.0f) atomicMax(&stats->amax_bits, __float_as_uint(amax));
  if (saturated) atomicAdd(&stats->saturated, saturated);
  if (underflowed) atomicAdd(&stats->underflowed, underflowed);
}

template <int kFormat>  // -1: no FP8 rounding; 0: E4M3; 1: E5M2
__global__ void scaled_cast_kernel(const void* x, KType xt, void* y, KType yt, int64_t n, FactorDevice factor,
                                   Fp8StatsDevice* stats) {
  const float scale = factor_value(factor);
  float amax = 0.0f;
  unsigned long long saturated = 0, underflowed = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = load_any(x, xt, i);
    float out = v * scale;
    amax = fmaxf(amax, fabsf(v));
    if constexpr (kFormat >= 0) {
      constexpr __nv_fp8_interpretation_t kind = kFormat == 0 ? __NV_E4M3 : __NV_E5M2;
      saturated += kFormat == 0 ? fabsf(out) > 464.0f : fabsf(out) >= 61440.0f;  // fp8_clips (core/fp8.h)
      const __nv_fp8_storage_t bits = __nv_cvt_float_to_fp8(out, __NV_SATFINITE, kind);
      out = __half2float(__half(__nv_cvt_fp8_to_halfraw(bits, kind)));
      underflowed += v != 0.0f && out == 0.0f;
    }
    store_any(y, yt, i, out);
  }
  if (stats) add_fp8_stats(stats, amax, saturated, underflowed);
}

// The same cast into FP8 storage, eight elements a thread with one load and one store each: the casts of amp-fp8's
// activations and gradients, whose bytes bound them.
constexpr int kFp8Pack = 8;
template <class T, int kFormat>
__global__ void scaled_cast_fp8_packed_kernel(const T* x, __nv_fp8_storage_t* y, int64_t packs, FactorDevice factor,
                                              Fp8StatsDevice* stats) {
  const float scale = factor_value(factor);
  struct alignas(sizeof(T) * kFp8Pack) In {
    T v[kFp8Pack];
  };
  struct alignas(kFp8Pack) Out {
    __nv_fp8_storage_t v[kFp8Pack];
  };
  constexpr __nv_fp8_interpretation_t kind = kFormat == 0 ? __NV_E4M3 : __NV_E5M2;
  float amax = 0.0f;
  unsigned long long saturated = 0, underflowed = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < packs; i += int64_t{gridDim.x} * blockDim.x) {
    const In in = reinterpret_cast<const In*>(x)[i];
    Out out;
#pragma unroll
    for (int k = 0; k < kFp8Pack; ++k) {
      const float v = to_float(in.v[k]), scaled = v * scale;
      amax = fmaxf(amax, fabsf(v));
      saturated += kFormat == 0 ? fabsf(scaled) > 464.0f : fabsf(scaled) >= 61440.0f;  // as scaled_cast_kernel
      out.v[k] = __nv_cvt_float_to_fp8(scaled, __NV_SATFINITE, kind);
      underflowed += v != 0.0f && (out.v[k] & 0x7F) == 0;  // +-0 in either format
    }
    reinterpret_cast<Out*>(y)[i] = out;
  }
  if (stats) add_fp8_stats(stats, amax, saturated, underflowed);
}

// Whether the packed kernel takes the cast: FP32, FP16 or BF16 into the format's own storage, whole packs, aligned.
bool packed_fp8_cast(const void* x, KType x_type, void* y, KType y_type, int64_t n, int fp8_format) {
  const KType storage = fp8_format == 0 ? KType::F8E4M3 : KType::F8E5M2;
  const bool floating = x_type == KType::F32 || x_type == KType::F16 || x_type == KType::BF16;
  return fp8_format >= 0 && y_type == storage && floating && n % kFp8Pack == 0 &&
         reinterpret_cast<uintptr_t>(x) % 32 == 0 && reinterpret_cast<uintptr_t>(y) % kFp8Pack == 0;
}

__global__ void start_fp8_stats_kernel(Fp8StatsDevice* stats, int64_t n) {
  *stats = Fp8StatsDevice{0u, 0, static_cast<unsigned long long>(n), 0ull, 0ull};
}

__global__ void write_factor_kernel(FactorDevice factor, float* out) { *out = factor_value(factor); }

constexpr int kScaleInverse = kFp8StateSlots[0], kScale = kFp8StateSlots[1], kScaleUsed = kFp8StateSlots[2],
              kOldest = kFp8StateSlots[3], kHistory = kFp8StateSlots[4];
constexpr int kScalingsPerLaunch = 32;
struct Fp8ScalingBatch {  // by value: a launch's parameters, which a captured step keeps
  Fp8ScalingDevice scalings[kScalingsPerLaunch];
};

// A block per tensor: the rule's amax over the ring, then thread 0 rolls it and sets the scale.
__global__ void update_fp8_scalings_kernel(Fp8ScalingBatch batch) {
  const Fp8ScalingDevice& u = batch.scalings[blockIdx.x];
  float* state = u.state;
  float* ring = state + kHistory + 1;
  const int64_t past = u.count - kHistory - 1;
  const float recorded = u.stats ? __uint_as_float(u.stats->amax_bits) : 0.0f;
  const float this_step = fmaxf(state[kHistory], recorded);  // fmaxf passes over a NaN
  float chosen = -INFINITY;
  if (u.max_rule)
    for (int64_t i = threadIdx.x; i < past; i += blockDim.x) chosen = fmaxf(chosen, ring[i]);
  chosen = fmaxf(block_max(chosen), this_step);  // after the barriers in block_max no thread reads the ring
  if (threadIdx.x != 0) return;
  if (past > 0) {
    const auto oldest = static_cast<int64_t>(state[kOldest]);
    ring[oldest] = this_step;
    state[kOldest] = static_cast<float>((oldest + 1) % past);
  }
  state[kHistory] = 0.0f;
  state[kScaleUsed] = state[kScale];
  if (isfinite(chosen) && chosen > 0.0f) {
    float scale = u.scaled_max / chosen;
    if (isinf(scale)) scale = FLT_MAX;
    state[kScale] = scale;
    state[kScaleInverse] = 1.0f / scale;
  }
}
}  // namespace

void write_factor(FactorDevice factor, float* out, cudaStream_t stream) {
  write_factor_kernel<<<1, 1, 0, stream>>>(factor, out);
  CUDA_CHECK_LAUNCH("write_factor_kernel");
}

void update_fp8_scalings(const Fp8ScalingDevice* scalings, int count, cudaStream_t stream) {
  for (int first = 0; first < count; first += kScalingsPerLaunch) {
    const int in_launch = std::min(kScalingsPerLaunch, count - first);
    Fp8ScalingBatch batch{};
    for (int i = 0; i < in_launch; ++i) batch.scalings[i] = scalings[first + i];
    update_fp8_scalings_kernel<<<in_launch, kThreads, 0, stream>>>(batch);
    CUDA_CHECK_LAUNCH("update_fp8_scalings_kernel");
  }
}

void scaled_cast(const void* x, KType x_type, void* y, KType y_type, int64_t n, FactorDevice factor, int fp8_format,
                 Fp8StatsDevice* stats, cudaStream_t stream) {
  if (stats) {  // a kernel rather than a host copy: the cast stays capturable in a CUDA graph
    start_fp8_stats_kernel<<<1, 1, 0, stream>>>(stats, n);
    CUDA_CHECK_LAUNCH("start_fp8_stats_kernel");
  }
  if (n == 0) return;
  if (packed_fp8_cast(x, x_type, y, y_type, n, fp8_format)) {
    const int64_t packs = n / kFp8Pack;
    auto* out = static_cast<__nv_fp8_storage_t*>(y);
    AMPWB_DISPATCH_FLOATING(x_type, "scaled_cast", {
      if (fp8_format == 0)
        scaled_cast_fp8_packed_kernel<T, 0>
            <<<blocks_for(packs), kThreads, 0, stream>>>(static_cast<const T*>(x), out, packs, factor, stats);
      else
        scaled_cast_fp8_packed_kernel<T, 1>
            <<<blocks_for(packs), kThreads, 0, stream>>>(static_cast<const T*>(x), out, packs, factor, stats);
    });
    CUDA_CHECK_LAUNCH("scaled_cast_fp8_packed_kernel");
    return;
  }
  if (fp8_format == 0)
    scaled_cast_kernel<0><<<blocks_for(n), kThreads, 0, stream>>>(x, x_type, y, y_type, n, factor, stats);
  else if (fp8_format == 1)
    scaled_cast_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(x, x_type, y, y_type, n, factor, stats);
  else
    scaled_cast_kernel<-1><<<blocks_for(n), kThreads, 0, stream>>>(x, x_type, y, y_type, n, factor, stats);
  CUDA_CHECK_LAUNCH("scaled_cast_kernel");
}

}  // namespace ampwb::cuda
