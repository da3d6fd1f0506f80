// Batch norm in FP32 arithmetic a chunk at a time (see batchnorm_chunked.h).
#include "backend/cpu/batchnorm_chunked.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/convert16.h"
#include "core/error.h"
#include "core/half.h"
#include "core/simd.h"

namespace ampwb {
namespace {

constexpr int64_t kChunk = 1024;   // elements widened at a time: 4 KiB of FP32, in L1
constexpr int64_t kBlock = 16;     // channels whose NHWC sums stay in registers: two AVX2 vectors, four SSE ones
constexpr int64_t kMinPixels = 8;  // NHWC chunks hold at least this many pixels, so per-channel sums add up

// FP16 and BF16 share the sign in bit 15: "positive" is the 16-bit ReLU's own test (relu_forward / relu_backward).
inline bool positive16(uint16_t bits) { return !(bits & 0x8000u) && (bits & 0x7fffu); }

// masked[i] = g[i] where element i of y (a chunk of the ReLU's output, FP32 or 16-bit) is positive, else 0, as
// relu_backward takes it. masked may be g.
void mask_where_not_positive(const void* y, DType dtype, const float* g, float* masked, int64_t n) {
  if (dtype == DType::F32) {
    const float* out = static_cast<const float*>(y);
    for (int64_t i = 0; i < n; ++i) {
      const float value = g[i];  // loaded unconditionally, so the loop vectorises
      masked[i] = out[i] > 0.0f ? value : 0.0f;
    }
    return;
  }
  const uint16_t* out = static_cast<const uint16_t*>(y);
  for (int64_t i = 0; i < n; ++i) {
    const float value = g[i];
    masked[i] = positive16(out[i]) ? value : 0.0f;
  }
}

// A run of elements: in NCHW a piece of one (n, c) plane (channel >= 0), in NHWC whole pixels (channel -1:
// element i of the run has channel i % C).
struct Chunk {
  int64_t start, size, channel;
};

class Chunks {
 public:
  explicit Chunks(const Tensor& t) : channels(t.c()) {
    if (t.layout() == Layout::NHWC) {
      pixel_step_ = std::max(kMinPixels, kChunk / channels) * channels;
      total_ = t.numel();
      count_ = (total_ + pixel_step_ - 1) / pixel_step_;
    } else {
      plane_ = t.h() * t.w();
      per_plane_ = (plane_ + kChunk - 1) / kChunk;
      count_ = t.n() * channels * per_plane_;
    }
  }
  int64_t count() const { return count_; }
  int64_t max_size() const { return per_plane_ ? kChunk : pixel_step_; }
  Chunk operator[](int64_t k) const {
    if (!per_plane_) return {k * pixel_step_, std::min(pixel_step_, total_ - k * pixel_step_), -1};
    const int64_t plane = k / per_plane_, offset = k % per_plane_ * kChunk;
    return {plane * plane_ + offset, std::min(kChunk, plane_ - offset), plane % channels};
  }
  const int64_t channels;

 private:
  int64_t pixel_step_ = 0, total_ = 0, plane_ = 0, per_plane_ = 0, count_ = 0;
};

// f(i, c) for every element i of the chunk, c its channel.
template <class F>
inline void each_element(const Chunk& k, int64_t C, F&& f) {
  if (k.channel >= 0) {
    for (int64_t i = 0; i < k.size; ++i) f(i, k.channel);
  } else {
    for (int64_t p = 0; p < k.size; p += C)
      for (int64_t c = 0; c < C; ++c) f(p + c, c);
  }
}

// One thread's buffers: two widened chunks, and per-channel sums (up to two per channel) of one chunk in FP32 and
// of all the thread's chunks in FP64.
struct Scratch {
  std::vector<float> a, b, chunk_sums;
  std::vector<uint16_t> rounded;  // a chunk of a 16-bit result, for a wide gradient
  std::vector<double> sums;
};

using Widen = void (*)(const void*, float*, int64_t);  // n elements of the tensor's type to FP32, and back
using Round = void (*)(const float*, void*, int64_t);

template <void (*convert)(const uint16_t*, float*, int64_t, int)>
void widen16(const void* in, float* out, int64_t n) {
  convert(static_cast<const uint16_t*>(in), out, n, 1);
}
template <void (*convert)(const float*, uint16_t*, int64_t, int)>
void round16(const float* in, void* out, int64_t n) {
  convert(in, static_cast<uint16_t*>(out), n, 1);
}

const Tensor& checked(const Tensor& x, bool fp32_too) {
  AMPWB_CHECK((is_16bit(x.dtype()) || (fp32_too && x.dtype() == DType::F32)) && x.numel() > 0,
              "chunked batch norm on " << x.describe());
  return x;
}

class Passes {
 public:
  Passes(const Tensor& x, bool fp32_too, int threads)
      : chunks(checked(x, fp32_too)),
        C(x.c()),
        per_channel(static_cast<double>(x.numel() / C)),
        dtype(x.dtype()),
        element_size(dtype_size(x.dtype())),
        widen(dtype == DType::BF16 ? widen16<bf16_to_f32> : widen16<f16_to_f32>),
        round(dtype == DType::BF16 ? round16<f32_to_bf16> : round16<f32_to_f16>),
        threads_(std::max(1, threads)),
        scratch_(threads_) {
    for (Scratch& s : scratch_) {
      s.a.resize(chunks.max_size());
      s.b.resize(chunks.max_size());
      s.chunk_sums.resize(2 * C);
      s.rounded.resize(chunks.max_size());
      s.sums.resize(2 * C);
    }
  }

  // body(chunk, scratch) over every chunk, split statically between the threads: the same split every call.
  // Compiled three times, for any x86-64, AVX2 and AVX-512 (two and four times the vector width), the body and all
  // it calls inlined into each (flatten): the loops only add, subtract, multiply and divide, lane by lane, and this
  // file fuses no multiply-add (-ffp-contract=off), so all three give the same bits.
  template <class Body>
  void run(Body body) {
    const SimdLevel level = level_;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t k = 0; k < chunks.count(); ++k) {
      Scratch& s = scratch_[omp_get_thread_num()];
      if (level == SimdLevel::Avx512)
        chunk_avx512(body, chunks[k], s);
      else if (level == SimdLevel::Avx2)
        chunk_avx2(body, chunks[k], s);
      else
        body(chunks[k], s);
    }
  }

  // The per-channel sums of S terms over the tensor: terms(chunk, scratch) first widens the chunk into the
  // scratch, then returns term(i, c, j), term j < S of element i (channel c). Summed in FP32 within a chunk, in
  // FP64 across chunks, and thread by thread in order: the same bits for the same thread count.
  template <int S, class Terms>
  std::vector<double> channel_sums(Terms terms) {
    for (Scratch& s : scratch_) std::fill(s.sums.begin(), s.sums.end(), 0.0);
    run([&](const Chunk& k, Scratch& s) {
      auto term = terms(k, s);
      if (k.channel >= 0) {  // one channel: the sums in registers
        float part[S] = {};
        for (int64_t i = 0; i < k.size; ++i)
          for (int j = 0; j < S; ++j) part[j] += term(i, k.channel, j);
        for (int j = 0; j < S; ++j) s.sums[j * C + k.channel] += part[j];
        return;
      }
      // Whole pixels: a sum per channel, pixel after pixel. Where C is a multiple of kBlock, a block of channels
      // at a time with the sums in registers (summed to memory at every pixel, they waited on the store).
      if (C % kBlock == 0) {
        for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
          float part[S][kBlock] = {};
          for (int64_t p = 0; p < k.size; p += C) {
            if constexpr (requires(float(&t)[S][kBlock]) { term.block(p, c0, t); }) {  // a block's terms at once
              float t[S][kBlock];
              term.block(p + c0, c0, t);
#pragma omp simd
              for (int64_t b = 0; b < kBlock; ++b)
                for (int j = 0; j < S; ++j) part[j][b] += t[j][b];
            } else {
#pragma omp simd
              for (int64_t b = 0; b < kBlock; ++b)
                for (int j = 0; j < S; ++j) part[j][b] += term(p + c0 + b, c0 + b, j);
            }
          }
          for (int j = 0; j < S; ++j)
            for (int64_t b = 0; b < kBlock; ++b) s.sums[j * C + c0 + b] += part[j][b];
        }
        return;
      }
      float* part = s.chunk_sums.data();
      std::fill(part, part + S * C, 0.0f);
      for (int64_t p = 0; p < k.size; p += C)
        for (int64_t c = 0; c < C; ++c)
          for (int j = 0; j < S; ++j) part[j * C + c] += term(p + c, c, j);
      for (int j = 0; j < S; ++j)
        for (int64_t c = 0; c < C; ++c) s.sums[j * C + c] += part[j * C + c];
    });
    std::vector<double> total(S * C, 0.0);
    for (const Scratch& s : scratch_)
      for (int64_t i = 0; i < S * C; ++i) total[i] += s.sums[i];
    return total;
  }

  // The chunk's values in FP32: an FP32 tensor's own, or widened into buffer.
  const float* read(const Tensor& t, const Chunk& k, float* buffer) const {
    if (dtype == DType::F32) return t.data_as<float>() + k.start;
    widen(at(t, k), buffer, k.size);
    return buffer;
  }
  // The chunk of a tensor of this type.
  const void* at(const Tensor& t, const Chunk& k) const {
    return static_cast<const char*>(t.data()) + k.start * element_size;
  }
  void* at(Tensor& t, const Chunk& k) const { return static_cast<char*>(t.data()) + k.start * element_size; }

  const Chunks chunks;
  const int64_t C;
  const double per_channel;  // elements per channel: N*H*W
  const DType dtype;
  const int64_t element_size;
  const Widen widen;  // 16 bits to FP32 and back (unused for FP32, read and written in place)
  const Round round;

 private:
  template <class Body>
  [[gnu::target("avx2,f16c"), gnu::flatten]] static void chunk_avx2(Body& body, const Chunk& k, Scratch& s) {
    body(k, s);
  }
  template <class Body>
  [[gnu::target("avx512f,avx512bw,avx512vl,f16c"), gnu::flatten]] static void chunk_avx512(Body& body, const Chunk& k,
                                                                                           Scratch& s) {
    body(k, s);
  }

  // AVX-512 for 16-bit tensors, whose passes widen and round (1.2-1.4x AVX2's speed on a Zen 4); FP32's passes,
  // memory-bound over large tensors, ran up to 1.5x slower with it there (ampwb_batchnorm_passes).
  const SimdLevel level_ = dtype == DType::F32 ? std::min(simd_level(), SimdLevel::Avx2) : simd_level();
  const int threads_;
  std::vector<Scratch> scratch_;
};

std::vector<float> inverse_std(const Tensor& batch_var, float eps) {
  const float* var = batch_var.data_as<float>();
  std::vector<float> inv(batch_var.numel());
  for (size_t c = 0; c < inv.size(); ++c) inv[c] = 1.0f / std::sqrt(var[c] + eps);
  return inv;
}

// dgamma and dbeta from the backward's sums (term 0 of each channel: dbeta's, term 1: dgamma's), and each channel's
// factors of dx = gamma / sigma * (g - mean(g) - x_hat * mean(g * x_hat)).
struct Coefficients {
  Coefficients(const std::vector<double>& sums, const Tensor& gamma, const std::vector<float>& inv_std,
               double per_channel, Tensor& dgamma, Tensor& dbeta)
      : coefficient(inv_std.size()), mean_db(inv_std.size()), mean_dg(inv_std.size()) {
    const size_t C = inv_std.size();
    float* db = dbeta.data_as<float>();
    float* dg = dgamma.data_as<float>();
    for (size_t c = 0; c < C; ++c) {
      db[c] = static_cast<float>(sums[c]);
      dg[c] = static_cast<float>(sums[C + c]);
      coefficient[c] = gamma.data_as<float>()[c] * inv_std[c];
      mean_db[c] = static_cast<float>(sums[c] / per_channel);
      mean_dg[c] = static_cast<float>(sums[C + c] / per_channel);
    }
  }
  // g: the gradient at batch norm's output; v: x; of channel c.
  float dx(float g, float v, float mean, float inv_std, int64_t c) const {
    const float x_hat = (v - mean) * inv_std;
    return coefficient[c] * (g - mean_db[c] - x_hat * mean_dg[c]);
  }
  std::vector<float> coefficient, mean_db, mean_dg;
};

// Element i of an FP32 or BF16 tensor in FP32; and stored back, BF16 rounded as f32_to_bf16 rounds.
inline float value_at(const float* t, int64_t i) { return t[i]; }
inline float value_at(const BFloat16* t, int64_t i) { return bfloat16_bits_to_float(t[i].bits); }
inline bool positive_at(const float* t, int64_t i) { return t[i] > 0.0f; }
inline bool positive_at(const BFloat16* t, int64_t i) { return positive16(t[i].bits); }
inline void store_at(float* t, int64_t i, float value) { t[i] = value; }
inline void store_at(BFloat16* t, int64_t i, float value) { t[i].bits = float_to_bfloat16_bits(value); }
// value as a tensor of type T holds it, in FP32: a wide gradient's element (is_wide_gradient).
template <class T>
inline float as_stored(float value) {
  T rounded[1];
  store_at(rounded, 0, value);
  return value_at(rounded, 0);
}

// A block of 16 FP16 values widened, and 16 FP32 values rounded to FP16, by F16C: f16_to_f32's and f32_to_f16's bits.
// Inlined into Passes' AVX2 and AVX-512 bodies; SimdLevel::Avx2 and above imply F16C.
//
// A widened block is stored as one vector of 16 floats: one 512-bit store in the AVX-512 body, where the loop that
// reads it back loads 512 bits at once. Stored as two 256-bit halves, each such load waited for both stores to
// retire (a Zen 5 forwards no load from two stores), and FP16's backward took 3x FP32's time there
// (build/bench/ampwb_batchnorm_passes; docs/benchmarks.md, "AVX512-BF16").
using Floats8 = float __attribute__((vector_size(32)));
using Floats16 = float __attribute__((vector_size(64)));
[[gnu::target("avx2,f16c")]] inline void store_block(__m256 low, __m256 high, float* out) {
  const Floats16 block =
      __builtin_shufflevector(Floats8(low), Floats8(high), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  std::memcpy(out, &block, sizeof block);
}
[[gnu::target("avx2,f16c")]] inline void widen_block(const Half* in, float* out) {
  const __m128i* halves = reinterpret_cast<const __m128i*>(in);
  store_block(_mm256_cvtph_ps(_mm_loadu_si128(halves)), _mm256_cvtph_ps(_mm_loadu_si128(halves + 1)), out);
}
// dy's block widened where the ReLU's output y is positive, else 0: positive16 is a 16-bit value above zero as a
// signed integer.
[[gnu::target("avx2,f16c")]] inline void widen_block_where_positive(const Half* dy, const Half* y, float* out) {
  __m256 part[2];
  for (int i = 0; i < 2; ++i) {
    const __m128i y_bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y) + i);
    const __m256i keep = _mm256_cvtepi16_epi32(_mm_cmpgt_epi16(y_bits, _mm_setzero_si128()));
    const __m256 g = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dy) + i));
    part[i] = _mm256_and_ps(g, _mm256_castsi256_ps(keep));
  }
  store_block(part[0], part[1], out);
}
[[gnu::target("avx2,f16c")]] inline void round_block(const float* in, Half* out) {
  __m128i* halves = reinterpret_cast<__m128i*>(out);
  _mm_storeu_si128(halves, _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
  _mm_storeu_si128(halves + 1, _mm256_cvtps_ph(_mm256_loadu_ps(in + 8), _MM_FROUND_TO_NEAREST_INT));
}

// backward_in_place for FP16, a block of 16 channels at a time: GCC vectorises no FP16 conversion written per
// element, so the blocks widen and round with F16C. The same terms, sums and results as backward_in_place's.
template <class Out, bool kRelu>
void backward_in_place_f16(Passes& passes, const Tensor& x, const Tensor& relu_output, const Tensor& dy,
                           const Tensor& gamma, const float* mean, const std::vector<float>& inv_std, Tensor& dx,
                           Tensor& dgamma, Tensor& dbeta) {
  struct Block {  // x and the gradient at batch norm's output of 16 channels of one pixel, from element i
    const Half *xs, *dys, *ys;
    void load(int64_t i, float* v, float* g) const {
      widen_block(xs + i, v);
      if constexpr (kRelu)
        widen_block_where_positive(dys + i, ys + i, g);
      else
        widen_block(dys + i, g);
    }
  };
  const Block in{static_cast<const Half*>(x.data()), static_cast<const Half*>(dy.data()),
                 kRelu ? static_cast<const Half*>(relu_output.data()) : nullptr};
  const float* inv = inv_std.data();
  struct Terms {  // term 0 for dbeta, term 1 for dgamma, a block at a time (channel_sums takes the NHWC blocks)
    Block in;
    int64_t start;
    const float *mean, *inv;
    void block(int64_t i, int64_t c0, float (&t)[2][kBlock]) const {
      float v[kBlock], g[kBlock];
      in.load(start + i, v, g);
#pragma omp simd
      for (int64_t b = 0; b < kBlock; ++b) {
        t[0][b] = g[b];
        t[1][b] = g[b] * (v[b] - mean[c0 + b]) * inv[c0 + b];
      }
    }
    float operator()(int64_t, int64_t, int) const { return 0.0f; }  // never called: C fills whole blocks
  };
  const std::vector<double> sums = passes.channel_sums<2>([&](const Chunk& k, Scratch&) {
    return Terms{in, k.start, mean, inv};
  });
  const Coefficients co(sums, gamma, inv_std, passes.per_channel, dgamma, dbeta);
  Out* out = static_cast<Out*>(dx.data());
  const int64_t C = passes.C;
  passes.run([&](const Chunk& k, Scratch&) {
    for (int64_t p = k.start; p < k.start + k.size; p += C)
      for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
        float v[kBlock], g[kBlock], value[kBlock];
        in.load(p + c0, v, g);
#pragma omp simd
        for (int64_t b = 0; b < kBlock; ++b) value[b] = co.dx(g[b], v[b], mean[c0 + b], inv[c0 + b], c0 + b);
        if constexpr (std::is_same_v<Out, Half>) {
          round_block(value, out + p + c0);
        } else {  // wide: rounded to FP16 and widened back
          Half rounded[kBlock];
          round_block(value, rounded);
          widen_block(rounded, out + p + c0);
        }
      }
  });
}

// batchnorm_chunked_backward on NHWC tensors of type T (float, BFloat16 or Half) whose channels fill whole blocks:
// the same chunks, sums and results as the widening path, each element read and written in place. Out: T, or float
// for a wide dx. kRelu: with relu_output (a template parameter, so that no branch stays in the loops).
template <class T, class Out, bool kRelu>
void backward_in_place(Passes& passes, const Tensor& x, const Tensor& relu_output, const Tensor& dy,
                       const Tensor& gamma, const float* mean, const std::vector<float>& inv_std, Tensor& dx,
                       Tensor& dgamma, Tensor& dbeta) {
  if constexpr (std::is_same_v<T, Half>) {
    return backward_in_place_f16<Out, kRelu>(passes, x, relu_output, dy, gamma, mean, inv_std, dx, dgamma, dbeta);
  } else {
    const T* xs = static_cast<const T*>(x.data());
    const T* dys = static_cast<const T*>(dy.data());
    const T* ys = kRelu ? static_cast<const T*>(relu_output.data()) : nullptr;
    const float* inv = inv_std.data();
    // The gradient at batch norm's output: dy, or dy where the ReLU's output is positive.
    auto gradient = [=](int64_t i) {
      const float g = value_at(dys, i);  // loaded unconditionally, so the loops vectorise
      if constexpr (kRelu) return positive_at(ys, i) ? g : 0.0f;
      return g;
    };
    const std::vector<double> sums = passes.channel_sums<2>([&](const Chunk& k, Scratch&) {
      return [=](int64_t i, int64_t c, int j) {  // i within the chunk; term 0 for dbeta, term 1 for dgamma
        const float g = gradient(k.start + i);
        return j == 0 ? g : g * (value_at(xs, k.start + i) - mean[c]) * inv[c];
      };
    });
    const Coefficients co(sums, gamma, inv_std, passes.per_channel, dgamma, dbeta);
    Out* out = static_cast<Out*>(dx.data());
    const int64_t C = passes.C;
    passes.run([&](const Chunk& k, Scratch&) {
      for (int64_t p = k.start; p < k.start + k.size; p += C)
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const float value = co.dx(gradient(p + c), value_at(xs, p + c), mean[c], inv[c], c);
          if constexpr (std::is_same_v<Out, T>)
            store_at(out, p + c, value);
          else
            store_at(out, p + c, as_stored<T>(value));
        }
    });
  }
}

}  // namespace

bool is_wide_gradient(const Tensor& dx, const Tensor& x) {
  return is_16bit(x.dtype()) && dx.dtype() == DType::F32 && dx.layout() == x.layout() && dx.shape() == x.shape();
}

void batchnorm_chunked_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                        Tensor& batch_mean, Tensor& batch_var, float eps, bool relu, int threads) {
  Passes passes(x, /*fp32_too=*/false, threads);
  const int64_t C = passes.C;
  auto widen_x = [&](const Chunk& k, Scratch& s) {
    passes.widen(passes.at(x, k), s.a.data(), k.size);
    return s.a.data();
  };

  float* mean = batch_mean.data_as<float>();
  const std::vector<double> sums = passes.channel_sums<1>([&](const Chunk& k, Scratch& s) {
    const float* v = widen_x(k, s);
    return [v](int64_t i, int64_t, int) { return v[i]; };
  });
  for (int64_t c = 0; c < C; ++c) mean[c] = static_cast<float>(sums[c] / passes.per_channel);

  float* var = batch_var.data_as<float>();
  const std::vector<double> squares = passes.channel_sums<1>([&](const Chunk& k, Scratch& s) {
    const float* v = widen_x(k, s);
    return [v, mean](int64_t i, int64_t c, int) {
      const float d = v[i] - mean[c];
      return d * d;
    };
  });
  for (int64_t c = 0; c < C; ++c) var[c] = static_cast<float>(squares[c] / passes.per_channel);

  const std::vector<float> inv_std = inverse_std(batch_var, eps);
  std::vector<float> scale(C);
  for (int64_t c = 0; c < C; ++c) scale[c] = gamma.data_as<float>()[c] * inv_std[c];
  const float* shift = beta.data_as<float>();
  passes.run([&](const Chunk& k, Scratch& s) {
    const float* v = widen_x(k, s);
    float* result = s.b.data();
    each_element(k, C, [&](int64_t i, int64_t c) { result[i] = (v[i] - mean[c]) * scale[c] + shift[c]; });
    uint16_t* chunk = static_cast<uint16_t*>(passes.at(y, k));
    passes.round(result, chunk, k.size);
    if (relu)
      for (int64_t i = 0; i < k.size; ++i) chunk[i] = positive16(chunk[i]) ? chunk[i] : 0;
  });
}

void batchnorm_chunked_backward(const Tensor& x, const Tensor& relu_output, const Tensor& dy, const Tensor& gamma,
                                const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx, Tensor& dgamma,
                                Tensor& dbeta, float eps, int threads, bool widen_every_chunk) {
  Passes passes(x, /*fp32_too=*/true, threads);
  for (const Tensor* t : {&relu_output, &dy, static_cast<const Tensor*>(&dx)})
    AMPWB_CHECK(!t->defined() || (t->dtype() == x.dtype() && t->layout() == x.layout() && t->shape() == x.shape()) ||
                    (t == &dx && is_wide_gradient(dx, x)),
                "batch norm backward: " << t->describe() << " for x " << x.describe());
  const int64_t C = passes.C;
  const float* mean = batch_mean.data_as<float>();
  const std::vector<float> inv_std = inverse_std(batch_var, eps);
  const bool fp32 = passes.dtype == DType::F32, wide = !fp32 && dx.dtype() == DType::F32;
  // NHWC tensors in whole blocks of channels: every element read where it lies, the 16-bit ones widened in
  // registers, so each pass streams x, dy and y together instead of copying a chunk at a time into the scratch
  // (build/bench/ampwb_batchnorm_passes; docs/benchmarks.md, "AVX512-BF16"). The same arithmetic in the same order:
  // the same bits.
  if (x.layout() == Layout::NHWC && C % kBlock == 0 && !widen_every_chunk) {
    auto in_place = [&](auto element) {
      using T = decltype(element);
      const bool relu = relu_output.defined();
      if (wide)
        return relu ? backward_in_place<T, float, true>(passes, x, relu_output, dy, gamma, mean, inv_std, dx, dgamma,
                                                        dbeta)
                    : backward_in_place<T, float, false>(passes, x, relu_output, dy, gamma, mean, inv_std, dx, dgamma,
                                                         dbeta);
      return relu ? backward_in_place<T, T, true>(passes, x, relu_output, dy, gamma, mean, inv_std, dx, dgamma, dbeta)
                  : backward_in_place<T, T, false>(passes, x, relu_output, dy, gamma, mean, inv_std, dx, dgamma, dbeta);
    };
    if (fp32) return in_place(float{});
    if (passes.dtype == DType::BF16) return in_place(BFloat16{});
    if (simd_level() >= SimdLevel::Avx2) return in_place(Half{});  // by F16C; else through the widened copies
  }
  // The chunk of x and of the gradient at batch norm's output (dy, or dy where the ReLU's output is positive) in
  // FP32: FP32 tensors read in place, the rest widened into the scratch.
  struct Inputs {
    const float* x;
    const float* g;
  };
  auto read_chunk = [&](const Chunk& k, Scratch& s) {
    const float* g = passes.read(dy, k, s.b.data());
    if (relu_output.defined()) {
      mask_where_not_positive(passes.at(relu_output, k), passes.dtype, g, s.b.data(), k.size);
      g = s.b.data();
    }
    return Inputs{passes.read(x, k, s.a.data()), g};
  };

  const std::vector<double> sums = passes.channel_sums<2>([&](const Chunk& k, Scratch& s) {
    const Inputs in = read_chunk(k, s);
    // Term 0 for dbeta, term 1 for dgamma.
    return [v = in.x, g = in.g, mean, inv = inv_std.data()](int64_t i, int64_t c, int j) {
      return j == 0 ? g[i] : g[i] * (v[i] - mean[c]) * inv[c];
    };
  });
  const Coefficients co(sums, gamma, inv_std, passes.per_channel, dgamma, dbeta);

  // dx = gamma / sigma * (g - mean(g) - x_hat * mean(g * x_hat)), rounded once.
  passes.run([&](const Chunk& k, Scratch& s) {
    const Inputs in = read_chunk(k, s);  // not a structured binding: clang 14 cannot capture one
    const float* v = in.x;
    const float* g = in.g;
    // FP32 written in place; 16 bits into the scratch (over g, element by element), then rounded, and for a wide
    // dx widened back.
    float* result = fp32 ? dx.data_as<float>() + k.start : s.b.data();
    each_element(k, C, [&](int64_t i, int64_t c) { result[i] = co.dx(g[i], v[i], mean[c], inv_std[c], c); });
    if (fp32) return;
    if (!wide) return passes.round(result, passes.at(dx, k), k.size);
    passes.round(result, s.rounded.data(), k.size);
    passes.widen(s.rounded.data(), dx.data_as<float>() + k.start, k.size);
  });
}

}  // namespace ampwb
