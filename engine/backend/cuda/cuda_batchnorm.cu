// Batch normalization kernels: per-channel reductions over (N, H, W) for FP32, FP16 and BF16 activations with FP32
// scale, shift and statistics (see cuda_kernels.h for the contract).
//
// Reduction layout: threadIdx.x picks neighbouring channels (coalesced reads in NHWC), threadIdx.y and blockIdx.y
// stride over the M = N H W rows. Each block writes one FP32 partial per channel; a finalize kernel adds the
// row_blocks partials in FP64, kFinalizeLanes threads a channel, in a fixed order. Deterministic.
//
// Two forms of every pass. The packed one, for NHWC with C a multiple of 16 bytes' worth of channels (every
// ResNet layer): each thread moves 16 bytes at a time (8 FP16/BF16 or 4 FP32 channels) and keeps one pack of
// channels for all its rows, and the forward statistics take one pass (Welford) instead of two. The general one
// (NCHW, odd channel counts): one element per thread and step, blocks of 32 channels x 8 rows, the mean then the
// squared deviations. Both compute each element's output by the same expressions; the statistics differ in their
// rounding only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_kernel_util.cuh"

namespace ampwb::cuda {
namespace {

constexpr int kChannelsPerBlock = 32, kRowsPerBlock = 8;

// Storage offset of (row r, channel c), with r = n H W + h W + w.
__device__ __forceinline__ int64_t row_offset(const Dims4& d, int64_t r, int64_t c) {
  if (d.nhwc) return r * d.c + c;
  const int64_t hw = d.h * d.w;
  return ((r / hw) * d.c + c) * hw + r % hw;
}

// scale = gamma / sqrt(var + eps) from the FP32 variance the forward saves, so that the backward of a batch norm +
// ReLU recomputes the forward's scale bit for bit.
__device__ __forceinline__ float channel_scale(float gamma, float var, float eps) {
  return static_cast<float>(gamma / sqrt(static_cast<double>(var) + eps));
}

// One output element, (x - mean) scale + beta in one fused multiply-add (pinned, so that the backward's replay
// below rounds exactly as the forward did), rounded to T.
template <class T>
__device__ __forceinline__ T normalized(float x, float mean, float scale, float beta) {
  return from_float<T>(__fmaf_rn(x - mean, scale, beta));
}

// What the normalization stores for an element v: v, then (residual) the residual added as add rounds it, then
// (relu) the ReLU of the rounded value: batch norm then add_relu, or batch norm then relu_forward.
template <class T>
__device__ __forceinline__ T finished(T v, bool has_residual, T residual, bool relu) {
  if (has_residual) v = from_float<T>(to_float(v) + to_float(residual));
  return !relu || relu_passes(v) ? v : from_float<T>(0.0f);
}

// dy through the mask of a fused ReLU, where there is one (relu_beta): the forward's output recomputed from x, so
// that the backward need not read it; what relu_backward would pass on.
template <class T>
__device__ __forceinline__ float masked_gradient(T dy, float x, float mean, float scale, bool relu, float relu_beta) {
  return relu && !relu_passes(normalized<T>(x, mean, scale, relu_beta)) ? 0.0f : to_float(dy);
}

// Partial sums per channel over this block's rows:
//   dy == nullptr, mean == nullptr: a = sum x
//   dy == nullptr, mean != nullptr: a = sum (x - mean)^2
//   dy != nullptr:                  a = sum dy, b = sum dy (x - mean), dy masked by the ReLU where relu_beta is given
//                                   (its scale from gamma and var)
template <class T>
__global__ void channel_partials(const T* x, const T* dy, Dims4 d, const float* mean, const float* gamma,
                                 const float* relu_beta, const float* var, float eps, float* part_a, float* part_b) {
  const int64_t c = int64_t{blockIdx.x} * kChannelsPerBlock + threadIdx.x;
  const int64_t rows = d.n * d.h * d.w;
  float a = 0.0f, b = 0.0f;
  if (c < d.c) {
    const float mu = mean ? mean[c] : 0.0f;
    const float scale = relu_beta ? channel_scale(gamma[c], var[c], eps) : 0.0f;
    const float beta = relu_beta ? relu_beta[c] : 0.0f;
    for (int64_t r = int64_t{blockIdx.y} * kRowsPerBlock + threadIdx.y; r < rows;
         r += int64_t{gridDim.y} * kRowsPerBlock) {
      const int64_t o = row_offset(d, r, c);
      const float v = to_float(x[o]);
      if (dy) {
        const float g = masked_gradient(dy[o], v, mu, scale, relu_beta != nullptr, beta);
        a += g;
        b += g * (v - mu);
      } else if (mean) {
        const float dv = v - mu;
        a += dv * dv;
      } else {
        a += v;
      }
    }
  }
  __shared__ float sa[kRowsPerBlock][kChannelsPerBlock], sb[kRowsPerBlock][kChannelsPerBlock];
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < d.c) {
    for (int y = 1; y < kRowsPerBlock; ++y) {
      a += sa[y][threadIdx.x];
      b += sb[y][threadIdx.x];
    }
    part_a[int64_t{blockIdx.y} * d.c + c] = a;
    if (part_b) part_b[int64_t{blockIdx.y} * d.c + c] = b;
  }
}

// The finalize kernels run blocks of kChannelsPerBlock channels by kFinalizeLanes lanes: lane l adds the partials
// of row blocks l, l + kFinalizeLanes, ..., then the lanes' sums are added in lane order. One thread a channel would
// wait on each of up to a thousand partials in turn (8 blocks per multiprocessor, 64 channels: ~1000 row blocks).
constexpr int kFinalizeLanes = 8;

__device__ __forceinline__ int64_t finalize_channel() { return int64_t{blockIdx.x} * kChannelsPerBlock + threadIdx.x; }

// Channel c's partial of row block b; 0 past the last channel, whose threads still take part in the block's sums.
__device__ __forceinline__ double partial(const float* part, int b, int64_t c, int64_t channels) {
  return c < channels ? part[int64_t{b} * channels + c] : 0.0;
}

// The sum of term(b) over the row blocks for this thread's channel, the same for every lane of it. Every thread of
// the block calls it.
template <class Term>
__device__ double channel_sum(int row_blocks, const Term& term) {
  __shared__ double lanes[kFinalizeLanes][kChannelsPerBlock];
  double s = 0;
  for (int b = threadIdx.y; b < row_blocks; b += kFinalizeLanes) s += term(b);
  lanes[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  double total = 0;
  for (int l = 0; l < kFinalizeLanes; ++l) total += lanes[l][threadIdx.x];
  __syncthreads();  // read by every lane before the next sum overwrites them
  return total;
}

__global__ void finalize_mean(const float* part_a, int64_t channels, int row_blocks, double rows, float* mean) {
  const int64_t c = finalize_channel();
  const double sum = channel_sum(row_blocks, [&](int b) { return partial(part_a, b, c, channels); });
  if (threadIdx.y == 0 && c < channels) mean[c] = static_cast<float>(sum / rows);
}

// The biased variance, the running statistics, and scale = gamma / sqrt(var + eps) for the normalization.
__global__ void finalize_var(const float* part_a, int64_t channels, int row_blocks, double rows, const float* gamma,
                             const float* mean, float* var, float* running_mean, float* running_var, float momentum,
                             float eps, float* scale) {
  const int64_t c = finalize_channel();
  const double v = channel_sum(row_blocks, [&](int b) { return partial(part_a, b, c, channels); }) / rows;
  if (threadIdx.y != 0 || c >= channels) return;
  var[c] = static_cast<float>(v);
  const float unbias = rows > 1 ? static_cast<float>(rows / (rows - 1)) : 1.0f;
  running_mean[c] = (1 - momentum) * running_mean[c] + momentum * mean[c];
  running_var[c] = (1 - momentum) * running_var[c] + momentum * static_cast<float>(v) * unbias;
  scale[c] = channel_scale(gamma[c], var[c], eps);
}

__global__ void inference_scale(const float* gamma, const float* var, int64_t channels, float eps, float* scale) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c < channels) scale[c] = channel_scale(gamma[c], var[c], eps);
}

// y = (x - mean) * scale + beta, then what `finished` adds: the residual (null: none, else in x's storage order)
// and the ReLU.
template <class T>
__global__ void normalize(const T* x, const T* residual, T* y, Dims4 d, const float* mean, const float* scale,
                          const float* beta, bool relu) {
  const int64_t total = d.numel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = channel_of(d, i);
    const T v = normalized<T>(to_float(x[i]), mean[c], scale[c], beta[c]);
    y[i] = finished(v, residual != nullptr, residual ? residual[i] : v, relu);
  }
}

// dbeta = sum dy, dgamma = sum dy (x - mean) / sqrt(var + eps), and the coefficients of
// dx = a (dy - k1 - (x - mean) k2) with a = gamma invstd, k1 = dbeta / M, k2 = invstd^2 sum dy (x - mean) / M;
// forward_scale: the forward's scale, for a fused ReLU's mask.
__global__ void finalize_backward(const float* part_a, const float* part_b, int64_t channels, int row_blocks,
                                  double rows, const float* gamma, const float* var, float eps, float* dgamma,
                                  float* dbeta, float* coef_a, float* coef_k1, float* coef_k2, float* forward_scale) {
  const int64_t c = finalize_channel();
  auto sum_of = [&](const float* part) {
    return channel_sum(row_blocks, [&](int b) { return partial(part, b, c, channels); });
  };
  const double sum_dy = sum_of(part_a), sum_dy_xmu = sum_of(part_b);
  if (threadIdx.y != 0 || c >= channels) return;
  const double invstd = 1.0 / sqrt(static_cast<double>(var[c]) + eps);
  dbeta[c] = static_cast<float>(sum_dy);
  dgamma[c] = static_cast<float>(sum_dy_xmu * invstd);
  coef_a[c] = static_cast<float>(gamma[c] * invstd);
  coef_k1[c] = static_cast<float>(sum_dy / rows);
  coef_k2[c] = static_cast<float>(invstd * invstd * sum_dy_xmu / rows);
  forward_scale[c] = channel_scale(gamma[c], var[c], eps);
}

// coef: a, k1, k2 and the forward's scale, C each (finalize_backward's).
template <class T>
__global__ void backward_dx(const T* x, const T* dy, T* dx, Dims4 d, const float* mean, const float* relu_beta,
                            const float* coef) {
  const int64_t total = d.numel();
  const float *coef_a = coef, *coef_k1 = coef + d.c, *coef_k2 = coef + 2 * d.c, *scale = coef + 3 * d.c;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = channel_of(d, i);
    const float v = to_float(x[i]), xmu = v - mean[c];
    const float g = masked_gradient(dy[i], v, mean[c], scale[c], relu_beta != nullptr, relu_beta ? relu_beta[c] : 0.0f);
    dx[i] = from_float<T>(coef_a[c] * (g - coef_k1[c] - xmu * coef_k2[c]));
  }
}

// ---- The packed form ----------------------------------------------------------------------------------------------

// n per-channel FP32 values from c (n a multiple of 4, c 16-byte aligned).
template <int n>
__device__ __forceinline__ void load_channels(const float* p, int64_t c, float (&out)[n]) {
#pragma unroll
  for (int k = 0; k < n; k += 4) {
    const float4 f = __ldg(reinterpret_cast<const float4*>(p + c + k));
    out[k] = f.x;
    out[k + 1] = f.y;
    out[k + 2] = f.z;
    out[k + 3] = f.w;
  }
}

constexpr int kPackedThreads = 256;

// Lanes (channel packs) per block: up to 32 side by side, the rest of the block's threads down the rows.
int packed_lanes(int64_t packs) { return static_cast<int>(std::min<int64_t>(packs, 32)); }

// The forward statistics in one pass over NHWC rows of C = packs * kPack<T> channels, block (lanes,
// kPackedThreads / lanes): each thread keeps, per channel of its pack, the mean and the sum of squared deviations of
// its rows (Welford's update, no cancellation), and the block merges its row threads' in order (Chan et al.'s
// formula, in FP64) into one partial per channel: part_mean, part_m2.
template <class T>
__global__ void channel_moments_packed(const T* x, int64_t rows, int64_t channels, float* part_mean, float* part_m2) {
  constexpr int n = kPack<T>;
  const int lanes = blockDim.x;
  const int64_t c0 = (int64_t{blockIdx.x} * lanes + threadIdx.x) * n;
  float mean[n] = {}, m2[n] = {}, count = 0.0f;
  if (c0 < channels) {
    for (int64_t r = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r < rows; r += int64_t{gridDim.y} * blockDim.y) {
      count += 1.0f;
      const float inverse = 1.0f / count;
      const Pack<T> xv = load_pack(x + r * channels + c0);
#pragma unroll
      for (int k = 0; k < n; ++k) {
        const float v = to_float(xv.v[k]), d = v - mean[k];
        mean[k] += d * inverse;
        m2[k] += d * (v - mean[k]);
      }
    }
  }
  __shared__ float s_mean[kPackedThreads * n], s_m2[kPackedThreads * n], s_count[kPackedThreads];
  const int tid = threadIdx.y * lanes + threadIdx.x;
#pragma unroll
  for (int k = 0; k < n; ++k) {
    s_mean[tid * n + k] = mean[k];
    s_m2[tid * n + k] = m2[k];
  }
  s_count[tid] = count;
  __syncthreads();
  // One thread per (lane, k): the block's rows are the union of its row threads'. Their mean first, then the sum
  // of squared deviations as each thread's own plus its count times its mean's squared distance.
  if (tid >= lanes * n) return;
  const int64_t c = int64_t{blockIdx.x} * lanes * n + tid;
  if (c >= channels) return;
  const int lane = tid / n, rows_here = static_cast<int>(blockDim.y);
  double total = 0, sum = 0;
  for (int y = 0; y < rows_here; ++y) {
    const double k = s_count[y * lanes + lane];
    total += k;
    sum += k * s_mean[y * lanes * n + tid];
  }
  const double block_mean = total > 0 ? sum / total : 0.0;
  double block_m2 = 0;
  for (int y = 0; y < rows_here; ++y) {
    const double k = s_count[y * lanes + lane], d = s_mean[y * lanes * n + tid] - block_mean;
    block_m2 += s_m2[y * lanes * n + tid] + k * d * d;
  }
  part_mean[int64_t{blockIdx.y} * channels + c] = static_cast<float>(block_mean);
  part_m2[int64_t{blockIdx.y} * channels + c] = static_cast<float>(block_m2);
}

// How many rows each block of channel_moments_packed's grid visited: row r went to block (r / rows_per_block) %
// blocks, so every block has `full` cycles of rows_per_block rows, and the first ones share the rest.
struct BlockRows {
  int64_t full = 0, rest = 0, rows_per_block = 1;
  __device__ __forceinline__ double of(int b) const {
    const int64_t extra = rest - int64_t{b} * rows_per_block;
    return static_cast<double>(full + (extra < 0 ? 0 : extra > rows_per_block ? rows_per_block : extra));
  }
};
BlockRows block_rows(int64_t rows, int64_t rows_per_block, int blocks) {
  const int64_t cycle = rows_per_block * blocks;
  return {rows / cycle * rows_per_block, rows % cycle, rows_per_block};
}

// The batch mean and biased variance from the blocks' partials (merged as in the block, in a fixed order), then
// what finalize_var does with them.
__global__ void finalize_moments(const float* part_mean, const float* part_m2, int64_t channels, int row_blocks,
                                 int64_t rows, BlockRows counts, const float* gamma, float* mean, float* var,
                                 float* running_mean, float* running_var, float momentum, float eps, float* scale) {
  const int64_t c = finalize_channel();
  const double mu = channel_sum(row_blocks, [&](int b) { return counts.of(b) * partial(part_mean, b, c, channels); }) /
                    static_cast<double>(rows);
  const double v = channel_sum(row_blocks,
                               [&](int b) {
                                 const double d = partial(part_mean, b, c, channels) - mu;
                                 return partial(part_m2, b, c, channels) + counts.of(b) * d * d;
                               }) /
                   static_cast<double>(rows);
  if (threadIdx.y != 0 || c >= channels) return;
  mean[c] = static_cast<float>(mu);
  var[c] = static_cast<float>(v);
  const float unbias = rows > 1 ? static_cast<float>(static_cast<double>(rows) / static_cast<double>(rows - 1)) : 1.0f;
  running_mean[c] = (1 - momentum) * running_mean[c] + momentum * mean[c];
  running_var[c] = (1 - momentum) * running_var[c] + momentum * static_cast<float>(v) * unbias;
  scale[c] = channel_scale(gamma[c], var[c], eps);
}

// The backward's partial sums per channel for NHWC rows of packs (channel_partials' dy form): a = sum dy,
// b = sum dy (x - mean), dy masked by the ReLU where relu_beta is given. Block (lanes, kPackedThreads / lanes).
template <class T>
__global__ void channel_partials_packed(const T* x, const T* dy, int64_t rows, int64_t channels, const float* mean,
                                        const float* gamma, const float* relu_beta, const float* var, float eps,
                                        float* part_a, float* part_b) {
  constexpr int n = kPack<T>;
  const int lanes = blockDim.x;
  const int64_t c0 = (int64_t{blockIdx.x} * lanes + threadIdx.x) * n;
  float a[n] = {}, b[n] = {}, mu[n] = {}, scale[n] = {}, beta[n] = {};
  if (c0 < channels) {
    load_channels<n>(mean, c0, mu);
    if (relu_beta)
      for (int k = 0; k < n; ++k) {
        scale[k] = channel_scale(gamma[c0 + k], var[c0 + k], eps);
        beta[k] = relu_beta[c0 + k];
      }
    for (int64_t r = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r < rows; r += int64_t{gridDim.y} * blockDim.y) {
      const int64_t o = r * channels + c0;
      const Pack<T> xv = load_pack(x + o), g = load_pack(dy + o);
#pragma unroll
      for (int k = 0; k < n; ++k) {
        const float v = to_float(xv.v[k]);
        const float gk = masked_gradient(g.v[k], v, mu[k], scale[k], relu_beta != nullptr, beta[k]);
        a[k] += gk;
        b[k] += gk * (v - mu[k]);
      }
    }
  }
  // [row thread][lane][k]; then one thread per (lane, k) adds the block's rows in order.
  __shared__ float sa[kPackedThreads * n], sb[kPackedThreads * n];
  const int tid = threadIdx.y * lanes + threadIdx.x;
#pragma unroll
  for (int k = 0; k < n; ++k) {
    sa[tid * n + k] = a[k];
    sb[tid * n + k] = b[k];
  }
  __syncthreads();
  if (tid >= lanes * n) return;
  const int64_t c = int64_t{blockIdx.x} * lanes * n + tid;
  if (c >= channels) return;
  float ta = 0.0f, tb = 0.0f;
  for (int y = 0; y < static_cast<int>(blockDim.y); ++y) {
    ta += sa[y * lanes * n + tid];
    tb += sb[y * lanes * n + tid];
  }
  part_a[int64_t{blockIdx.y} * channels + c] = ta;
  part_b[int64_t{blockIdx.y} * channels + c] = tb;
}

// The training passes' elementwise kernels over NHWC rows of packs, with the statistics' block and grid
// (packed_block, packed_grid): each thread keeps one pack of channels for all its rows, so it reads their
// per-channel coefficients once and finds no channel by division, and it loads kRowsInFlight rows before it stores
// any (in place too: every element is its own thread's). Each element's value comes from the same expressions as
// in normalize and backward_dx.
//
// Two rows of two 16-byte loads in flight per thread, and at least two blocks per multiprocessor (at most 128
// registers; four rows took up to 151 registers for BF16, one block per multiprocessor).
constexpr int kRowsInFlight = 2;

// This thread's rows, kRowsInFlight at a time: load(u, offset) for each of them, then store(u, offset), where
// offset is the row's pack at channel c0.
template <class Load, class Store>
__device__ __forceinline__ void for_rows_in_flight(int64_t rows, int64_t channels, int64_t c0, Load load, Store store) {
  const int64_t stride = int64_t{gridDim.y} * blockDim.y;
  for (int64_t r0 = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r0 < rows; r0 += kRowsInFlight * stride) {
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u)
      if (r0 + u * stride < rows) load(u, (r0 + u * stride) * channels + c0);
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u)
      if (r0 + u * stride < rows) store(u, (r0 + u * stride) * channels + c0);
  }
}

// normalize, rows of packs: y = finished(normalized(x)).
template <class T>
__global__ void __launch_bounds__(kPackedThreads, 2)
    normalize_rows(const T* x, const T* residual, T* y, int64_t rows, int64_t channels, const float* mean,
                   const float* scale, const float* beta, bool relu) {
  constexpr int n = kPack<T>;
  const int64_t c0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * n;
  if (c0 >= channels) return;
  float mu[n], sc[n], be[n];
  load_channels<n>(mean, c0, mu);
  load_channels<n>(scale, c0, sc);
  load_channels<n>(beta, c0, be);
  Pack<T> xv[kRowsInFlight], rv[kRowsInFlight];
  for_rows_in_flight(
      rows, channels, c0,
      [&](int u, int64_t o) {
        xv[u] = load_pack(x + o);
        rv[u] = residual ? load_pack(residual + o) : xv[u];
      },
      [&](int u, int64_t o) {
        Pack<T> out;
#pragma unroll
        for (int k = 0; k < n; ++k) {
          const T v = normalized<T>(to_float(xv[u].v[k]), mu[k], sc[k], be[k]);
          out.v[k] = finished(v, residual != nullptr, rv[u].v[k], relu);
        }
        store_pack(y + o, out);
      });
}

// backward_dx, rows of packs.
template <class T>
__global__ void __launch_bounds__(kPackedThreads, 2)
    backward_dx_rows(const T* x, const T* dy, T* dx, int64_t rows, int64_t channels, const float* mean,
                     const float* relu_beta, const float* coef) {
  constexpr int n = kPack<T>;
  const int64_t c0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * n;
  if (c0 >= channels) return;
  float mu[n], ca[n], k1[n], k2[n], scale[n] = {}, beta[n] = {};
  load_channels<n>(mean, c0, mu);
  load_channels<n>(coef, c0, ca);
  load_channels<n>(coef + channels, c0, k1);
  load_channels<n>(coef + 2 * channels, c0, k2);
  if (relu_beta) {
    load_channels<n>(coef + 3 * channels, c0, scale);
    for (int k = 0; k < n; ++k) beta[k] = relu_beta[c0 + k];  // not checked for 16-byte alignment
  }
  Pack<T> xv[kRowsInFlight], g[kRowsInFlight];
  for_rows_in_flight(
      rows, channels, c0,
      [&](int u, int64_t o) {
        xv[u] = load_pack(x + o);
        g[u] = load_pack(dy + o);
      },
      [&](int u, int64_t o) {
        Pack<T> out;
#pragma unroll
        for (int k = 0; k < n; ++k) {
          const float v = to_float(xv[u].v[k]);
          const float gk = masked_gradient(g[u].v[k], v, mu[k], scale[k], relu_beta != nullptr, beta[k]);
          out.v[k] = from_float<T>(ca[k] * (gk - k1[k] - (v - mu[k]) * k2[k]));
        }
        store_pack(dx + o, out);
      });
}

template <class T>
dim3 packed_block(const Dims4& d) {
  const int lanes = packed_lanes(d.c / kPack<T>);
  return dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(kPackedThreads / lanes));
}
template <class T>
dim3 packed_grid(const Dims4& d, int row_blocks) {
  const int64_t packs = d.c / kPack<T>, lanes = packed_lanes(packs);
  return dim3(static_cast<unsigned>((packs + lanes - 1) / lanes), static_cast<unsigned>(row_blocks));
}

dim3 partial_grid(const Dims4& d, int row_blocks) {
  return dim3(static_cast<unsigned>((d.c + kChannelsPerBlock - 1) / kChannelsPerBlock),
              static_cast<unsigned>(row_blocks));
}
const dim3 kPartialBlock(kChannelsPerBlock, kRowsPerBlock);
unsigned channel_blocks(int64_t channels) { return static_cast<unsigned>((channels + kThreads - 1) / kThreads); }
unsigned finalize_blocks(int64_t channels) {
  return static_cast<unsigned>((channels + kChannelsPerBlock - 1) / kChannelsPerBlock);
}
const dim3 kFinalizeBlock(kChannelsPerBlock, kFinalizeLanes);

}  // namespace

int batchnorm_row_blocks(Dims4 dims, KType type, int sm_count) {
  const int64_t rows = dims.n * dims.h * dims.w;
  // The block shape of the form that will run (the packed form's pointers are checked at launch; either form
  // takes any number of row blocks).
  int64_t channels_per_block = kChannelsPerBlock, rows_per_block = kRowsPerBlock, min_rows_per_thread = 32;
  if (dims.c > 0 && packable(dims, element_size(type), {})) {
    const int64_t pack = 16 / static_cast<int64_t>(element_size(type)), lanes = packed_lanes(dims.c / pack);
    channels_per_block = lanes * pack;
    rows_per_block = kPackedThreads / lanes;
    min_rows_per_thread = 8;  // each of those rows is a whole pack
  }
  // At least one group: an empty tensor (C = 0) reaches here before its op returns.
  const int64_t channel_groups = std::max<int64_t>(1, (dims.c + channels_per_block - 1) / channels_per_block);
  // About 8 blocks of 256 threads per multiprocessor in all, and a minimum of rows per thread.
  const int64_t by_occupancy = std::max<int64_t>(1, 8 * int64_t{sm_count > 0 ? sm_count : 1} / channel_groups);
  const int64_t by_rows = std::max<int64_t>(1, rows / (min_rows_per_thread * rows_per_block));
  return static_cast<int>(std::min<int64_t>({by_occupancy, by_rows, 65535}));
}

int64_t batchnorm_scratch_floats(Dims4 dims, int row_blocks) {
  return 2 * int64_t{row_blocks} * dims.c + 4 * dims.c;  // two partial arrays, four per-channel coefficients
}

void batchnorm_forward_training(const void* x, const void* residual, void* y, KType type, Dims4 dims,
                                const float* gamma, const float* beta, float* mean, float* var, float* running_mean,
                                float* running_var, float momentum, float eps, bool relu, float* scratch,
                                int row_blocks, cudaStream_t stream) {
  const int64_t C = dims.c;
  const double rows = static_cast<double>(dims.n * dims.h * dims.w);
  if (C == 0 || rows == 0) return;
  float* part_a = scratch;  // and part_a + row_blocks C: the packed form's second partial
  float* scale = scratch + 2 * int64_t{row_blocks} * C;
  // The statistics' form from x alone, so that every form of this op (with or without a residual) rounds them alike.
  const bool packed_statistics = packable(dims, element_size(type), {x});
  const bool packed = packed_statistics && packable(dims, element_size(type), {residual, y, mean, scale, beta});
  AMPWB_DISPATCH_FLOATING(type, "batchnorm_forward_training", {
    const T* xt = static_cast<const T*>(x);
    if (packed_statistics) {  // in one pass
      const int64_t rows_i = dims.n * dims.h * dims.w;
      const dim3 block = packed_block<T>(dims);
      channel_moments_packed<T>
          <<<packed_grid<T>(dims, row_blocks), block, 0, stream>>>(xt, rows_i, C, part_a, part_a + row_blocks * C);
      CUDA_CHECK_LAUNCH("channel_moments_packed");
      finalize_moments<<<finalize_blocks(C), kFinalizeBlock, 0, stream>>>(
          part_a, part_a + row_blocks * C, C, row_blocks, rows_i, block_rows(rows_i, block.y, row_blocks), gamma, mean,
          var, running_mean, running_var, momentum, eps, scale);
      CUDA_CHECK_LAUNCH("finalize_moments");
    } else {
      channel_partials<T><<<partial_grid(dims, row_blocks), kPartialBlock, 0, stream>>>(
          xt, nullptr, dims, nullptr, nullptr, nullptr, nullptr, eps, part_a, nullptr);
      CUDA_CHECK_LAUNCH("channel_partials (mean)");
      finalize_mean<<<finalize_blocks(C), kFinalizeBlock, 0, stream>>>(part_a, C, row_blocks, rows, mean);
      CUDA_CHECK_LAUNCH("finalize_mean");
      channel_partials<T><<<partial_grid(dims, row_blocks), kPartialBlock, 0, stream>>>(
          xt, nullptr, dims, mean, nullptr, nullptr, nullptr, eps, part_a, nullptr);
      CUDA_CHECK_LAUNCH("channel_partials (variance)");
      finalize_var<<<finalize_blocks(C), kFinalizeBlock, 0, stream>>>(part_a, C, row_blocks, rows, gamma, mean, var,
                                                                      running_mean, running_var, momentum, eps, scale);
      CUDA_CHECK_LAUNCH("finalize_var");
    }
    const T* rt = static_cast<const T*>(residual);
    if (packed) {
      normalize_rows<T><<<packed_grid<T>(dims, row_blocks), packed_block<T>(dims), 0, stream>>>(
          xt, rt, static_cast<T*>(y), dims.n * dims.h * dims.w, C, mean, scale, beta, relu);
      CUDA_CHECK_LAUNCH("normalize_rows");
    } else {
      normalize<T><<<blocks_for(dims.numel()), kThreads, 0, stream>>>(xt, rt, static_cast<T*>(y), dims, mean, scale,
                                                                      beta, relu);
      CUDA_CHECK_LAUNCH("normalize");
    }
  });
}

void batchnorm_forward_inference(const void* x, void* y, KType type, Dims4 dims, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float eps, float* scratch,
                                 int row_blocks, cudaStream_t stream) {
  const int64_t C = dims.c;
  if (C == 0 || dims.numel() == 0) return;
  inference_scale<<<channel_blocks(C), kThreads, 0, stream>>>(gamma, running_var, C, eps, scratch);
  CUDA_CHECK_LAUNCH("inference_scale");
  const bool packed = packable(dims, element_size(type), {x, y, running_mean, scratch, beta});
  AMPWB_DISPATCH_FLOATING(type, "batchnorm_forward_inference", {
    if (packed) {
      normalize_rows<T><<<packed_grid<T>(dims, row_blocks), packed_block<T>(dims), 0, stream>>>(
          static_cast<const T*>(x), nullptr, static_cast<T*>(y), dims.n * dims.h * dims.w, dims.c, running_mean,
          scratch, beta, false);
      CUDA_CHECK_LAUNCH("normalize_rows");
      return;
    }
    normalize<T><<<blocks_for(dims.numel()), kThreads, 0, stream>>>(
        static_cast<const T*>(x), nullptr, static_cast<T*>(y), dims, running_mean, scratch, beta, false);
    CUDA_CHECK_LAUNCH("normalize");
  });
}

void batchnorm_backward(const void* x, const void* dy, void* dx, KType type, Dims4 dims, const float* gamma,
                        const float* relu_beta, const float* mean, const float* var, float* dgamma, float* dbeta,
                        float eps, float* scratch, int row_blocks, cudaStream_t stream) {
  const int64_t C = dims.c;
  const double rows = static_cast<double>(dims.n * dims.h * dims.w);
  if (C == 0 || rows == 0) return;
  float* part_a = scratch;
  float* part_b = scratch + int64_t{row_blocks} * C;
  float* coef = scratch + 2 * int64_t{row_blocks} * C;  // a, k1, k2, the forward's scale
  const bool packed = packable(dims, element_size(type), {x, dy, dx, mean, coef, coef + C, coef + 2 * C, coef + 3 * C});
  AMPWB_DISPATCH_FLOATING(type, "batchnorm_backward", {
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    if (packed) {
      channel_partials_packed<T><<<packed_grid<T>(dims, row_blocks), packed_block<T>(dims), 0, stream>>>(
          xt, dyt, dims.n * dims.h * dims.w, C, mean, gamma, relu_beta, var, eps, part_a, part_b);
      CUDA_CHECK_LAUNCH("channel_partials_packed (backward)");
    } else {
      channel_partials<T><<<partial_grid(dims, row_blocks), kPartialBlock, 0, stream>>>(
          xt, dyt, dims, mean, gamma, relu_beta, var, eps, part_a, part_b);
      CUDA_CHECK_LAUNCH("channel_partials (backward)");
    }
    finalize_backward<<<finalize_blocks(C), kFinalizeBlock, 0, stream>>>(part_a, part_b, C, row_blocks, rows, gamma,
                                                                         var, eps, dgamma, dbeta, coef, coef + C,
                                                                         coef + 2 * C, coef + 3 * C);
    CUDA_CHECK_LAUNCH("finalize_backward");
    if (packed) {
      backward_dx_rows<T><<<packed_grid<T>(dims, row_blocks), packed_block<T>(dims), 0, stream>>>(
          xt, dyt, static_cast<T*>(dx), dims.n * dims.h * dims.w, C, mean, relu_beta, coef);
      CUDA_CHECK_LAUNCH("backward_dx_rows");
    } else {
      backward_dx<T><<<blocks_for(dims.numel()), kThreads, 0, stream>>>(xt, dyt, static_cast<T*>(dx), dims, mean,
                                                                        relu_beta, coef);
      CUDA_CHECK_LAUNCH("backward_dx");
    }
  });
}

}  // namespace ampwb::cuda
