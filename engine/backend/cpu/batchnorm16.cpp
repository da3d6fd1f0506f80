// Batch norm on 16-bit tensors in FP32 arithmetic, a chunk at a time (see batchnorm16.h).
#include "backend/cpu/batchnorm16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/convert16.h"
#include "core/error.h"

namespace ampwb {
namespace {

constexpr int64_t kChunk = 1024;   // elements widened at a time: 4 KiB of FP32, in L1
constexpr int64_t kMinPixels = 8;  // NHWC chunks hold at least this many pixels, so per-channel sums add up

// FP16 and BF16 share the sign in bit 15: "positive" is the 16-bit ReLU's own test (relu_forward / relu_backward).
inline bool positive16(uint16_t bits) { return !(bits & 0x8000u) && (bits & 0x7fffu); }

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
  std::vector<double> sums;
};

using Widen = void (*)(const uint16_t*, float*, int64_t, int);
using Round = void (*)(const float*, uint16_t*, int64_t, int);

const Tensor& checked_16bit(const Tensor& x) {
  AMPWB_CHECK((x.dtype() == DType::F16 || x.dtype() == DType::BF16) && x.numel() > 0,
              "16-bit batch norm on " << x.describe());
  return x;
}

class Passes {
 public:
  Passes(const Tensor& x, int threads)
      : chunks(checked_16bit(x)),
        C(x.c()),
        per_channel(static_cast<double>(x.numel() / C)),
        widen(x.dtype() == DType::BF16 ? bf16_to_f32 : f16_to_f32),
        round(x.dtype() == DType::BF16 ? f32_to_bf16 : f32_to_f16),
        threads_(std::max(1, threads)),
        scratch_(threads_) {
    for (Scratch& s : scratch_) {
      s.a.resize(chunks.max_size());
      s.b.resize(chunks.max_size());
      s.chunk_sums.resize(2 * C);
      s.sums.resize(2 * C);
    }
  }

  // body(chunk, scratch) over every chunk, split statically between the threads: the same split every call.
  template <class Body>
  void run(Body body) {
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t k = 0; k < chunks.count(); ++k) body(chunks[k], scratch_[omp_get_thread_num()]);
  }

  // The per-channel sums of S terms over the tensor: terms(chunk, scratch) first widens the chunk into the
  // scratch, then returns term(i, c, out) writing element i's S terms. Summed in FP32 within a chunk, in FP64
  // across chunks, and thread by thread in order: the same bits for the same thread count.
  template <int S, class Terms>
  std::vector<double> channel_sums(Terms terms) {
    for (Scratch& s : scratch_) std::fill(s.sums.begin(), s.sums.end(), 0.0);
    run([&](const Chunk& k, Scratch& s) {
      auto term = terms(k, s);
      float t[S];
      if (k.channel >= 0) {  // one channel: the sums in registers
        float part[S] = {};
        for (int64_t i = 0; i < k.size; ++i) {
          term(i, k.channel, t);
          for (int j = 0; j < S; ++j) part[j] += t[j];
        }
        for (int j = 0; j < S; ++j) s.sums[j * C + k.channel] += part[j];
        return;
      }
      float* part = s.chunk_sums.data();  // whole pixels: a sum per channel, the loop over channels vectorised
      std::fill(part, part + S * C, 0.0f);
      for (int64_t p = 0; p < k.size; p += C)
        for (int64_t c = 0; c < C; ++c) {
          term(p + c, c, t);
          for (int j = 0; j < S; ++j) part[j * C + c] += t[j];
        }
      for (int j = 0; j < S; ++j)
        for (int64_t c = 0; c < C; ++c) s.sums[j * C + c] += part[j * C + c];
    });
    std::vector<double> total(S * C, 0.0);
    for (const Scratch& s : scratch_)
      for (int64_t i = 0; i < S * C; ++i) total[i] += s.sums[i];
    return total;
  }

  const Chunks chunks;
  const int64_t C;
  const double per_channel;  // elements per channel: N*H*W
  const Widen widen;         // 16 bits to FP32, and back
  const Round round;

 private:
  const int threads_;
  std::vector<Scratch> scratch_;
};

std::vector<float> inverse_std(const Tensor& batch_var, float eps) {
  const float* var = batch_var.data_as<float>();
  std::vector<float> inv(batch_var.numel());
  for (size_t c = 0; c < inv.size(); ++c) inv[c] = 1.0f / std::sqrt(var[c] + eps);
  return inv;
}
}  // namespace

void batchnorm16_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                  Tensor& batch_mean, Tensor& batch_var, float eps, bool relu, int threads) {
  Passes passes(x, threads);
  const int64_t C = passes.C;
  const uint16_t* in = x.data_as<uint16_t>();
  auto widen_x = [&](const Chunk& k, Scratch& s) {
    passes.widen(in + k.start, s.a.data(), k.size, 1);
    return s.a.data();
  };

  float* mean = batch_mean.data_as<float>();
  const std::vector<double> sums = passes.channel_sums<1>([&](const Chunk& k, Scratch& s) {
    const float* v = widen_x(k, s);
    return [v](int64_t i, int64_t, float* t) { t[0] = v[i]; };
  });
  for (int64_t c = 0; c < C; ++c) mean[c] = static_cast<float>(sums[c] / passes.per_channel);

  float* var = batch_var.data_as<float>();
  const std::vector<double> squares = passes.channel_sums<1>([&](const Chunk& k, Scratch& s) {
    const float* v = widen_x(k, s);
    return [v, mean](int64_t i, int64_t c, float* t) {
      const float d = v[i] - mean[c];
      t[0] = d * d;
    };
  });
  for (int64_t c = 0; c < C; ++c) var[c] = static_cast<float>(squares[c] / passes.per_channel);

  const std::vector<float> inv_std = inverse_std(batch_var, eps);
  std::vector<float> scale(C);
  for (int64_t c = 0; c < C; ++c) scale[c] = gamma.data_as<float>()[c] * inv_std[c];
  const float* shift = beta.data_as<float>();
  uint16_t* out = y.data_as<uint16_t>();
  passes.run([&](const Chunk& k, Scratch& s) {
    const float* v = widen_x(k, s);
    float* result = s.b.data();
    each_element(k, C, [&](int64_t i, int64_t c) { result[i] = (v[i] - mean[c]) * scale[c] + shift[c]; });
    uint16_t* chunk = out + k.start;
    passes.round(result, chunk, k.size, 1);
    if (relu)
      for (int64_t i = 0; i < k.size; ++i) chunk[i] = positive16(chunk[i]) ? chunk[i] : 0;
  });
}

void batchnorm16_backward(const Tensor& x, const Tensor& relu_output, const Tensor& dy, const Tensor& gamma,
                          const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                          float eps, int threads) {
  Passes passes(x, threads);
  const int64_t C = passes.C;
  const uint16_t* in = x.data_as<uint16_t>();
  const uint16_t* grad = dy.data_as<uint16_t>();
  const uint16_t* mask = relu_output.defined() ? relu_output.data_as<uint16_t>() : nullptr;
  const float* mean = batch_mean.data_as<float>();
  const std::vector<float> inv_std = inverse_std(batch_var, eps);
  // x and the gradient at batch norm's output (dy, or dy where the ReLU's output is positive), widened.
  auto widen_chunk = [&](const Chunk& k, Scratch& s) {
    passes.widen(in + k.start, s.a.data(), k.size, 1);
    float* g = s.b.data();
    passes.widen(grad + k.start, g, k.size, 1);
    if (mask)
      for (int64_t i = 0; i < k.size; ++i) {
        const float value = g[i];  // loaded unconditionally, so the loop vectorises
        g[i] = positive16(mask[k.start + i]) ? value : 0.0f;
      }
  };

  const std::vector<double> sums = passes.channel_sums<2>([&](const Chunk& k, Scratch& s) {
    widen_chunk(k, s);
    return [v = s.a.data(), g = s.b.data(), mean, inv = inv_std.data()](int64_t i, int64_t c, float* t) {
      t[0] = g[i];
      t[1] = g[i] * (v[i] - mean[c]) * inv[c];
    };
  });
  float* db = dbeta.data_as<float>();
  float* dg = dgamma.data_as<float>();
  std::vector<float> coefficient(C), mean_db(C), mean_dg(C);
  for (int64_t c = 0; c < C; ++c) {
    db[c] = static_cast<float>(sums[c]);
    dg[c] = static_cast<float>(sums[C + c]);
    coefficient[c] = gamma.data_as<float>()[c] * inv_std[c];
    mean_db[c] = static_cast<float>(sums[c] / passes.per_channel);
    mean_dg[c] = static_cast<float>(sums[C + c] / passes.per_channel);
  }

  // dx = gamma / sigma * (g - mean(g) - x_hat * mean(g * x_hat)), rounded once.
  uint16_t* out = dx.data_as<uint16_t>();
  passes.run([&](const Chunk& k, Scratch& s) {
    widen_chunk(k, s);
    const float* v = s.a.data();
    float* g = s.b.data();  // overwritten by the result, element by element
    each_element(k, C, [&](int64_t i, int64_t c) {
      const float x_hat = (v[i] - mean[c]) * inv_std[c];
      g[i] = coefficient[c] * (g[i] - mean_db[c] - x_hat * mean_dg[c]);
    });
    passes.round(g, out + k.start, k.size, 1);
  });
}

}  // namespace ampwb
