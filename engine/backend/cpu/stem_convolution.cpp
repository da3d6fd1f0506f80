#include "backend/cpu/stem_convolution.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernel_threads.h"

namespace ampwb::cpu_detail {

namespace {

constexpr int64_t kLanes = 16;     // output channels an accumulator holds
constexpr int kPixels = 4;         // output pixels of a row a block holds: 4 x (K / 16) accumulators
constexpr int64_t kMaxBlocks = 4;  // of 16 output channels
constexpr int64_t kMaxChannels = 4;

#define AMPWB_AVX512 gnu::target("avx512f,avx512bw,avx512bf16")

// The sizes of one call. x is copied with its padding into `padded` (N, Hp, Wp, C), wide enough that every block's
// runs, the last pair's extra value included, lie inside it.
struct Dims {
  int64_t N, C, H, W, K, R, S, P, Q, stride, padding;
  int64_t pairs;   // of a kernel row's run of S*C values, the last one completed by a zero weight
  int64_t Hp, Wp;  // padded image
};

Dims dims_of(const Tensor& x, const Tensor& w, const Tensor& y, ConvParams p) {
  Dims d{x.n(), x.c(), x.h(), x.w(), w.n(), w.h(), w.w(), y.h(), y.w(), p.stride, p.padding, 0, 0, 0};
  d.pairs = (d.S * d.C + 1) / 2;
  const int64_t blocks = (d.Q + kPixels - 1) / kPixels;
  d.Hp = std::max(d.H + 2 * d.padding, (d.P - 1) * d.stride + d.R);
  d.Wp = std::max(d.W + 2 * d.padding, ((blocks * kPixels - 1) * d.stride * d.C + 2 * d.pairs + d.C - 1) / d.C);
  return d;
}

// Output rows [first, last) (image n, row oh: item n * P + oh) of y, kBlocks x 16 output channels: per block of
// kPixels output pixels, each kernel row's run of pairs times the pairs' weights (R, pairs, K).
template <int kBlocks>
[[AMPWB_AVX512]] void stem_rows(const uint16_t* padded, const uint32_t* weights, uint16_t* y, const Dims& d,
                                int64_t first, int64_t last) {
  const int64_t step = d.stride * d.C;  // values between neighbouring output pixels' runs
  for (int64_t item = first; item < last; ++item) {
    const int64_t n = item / d.P, oh = item % d.P;
    const uint16_t* image_row = padded + (n * d.Hp + oh * d.stride) * d.Wp * d.C;
    uint16_t* out = y + item * d.Q * d.K;
    for (int64_t q0 = 0; q0 < d.Q; q0 += kPixels) {
      __m512 acc[kPixels][kBlocks];
      for (auto& pixel : acc)
        for (__m512& a : pixel) a = _mm512_setzero_ps();
      for (int64_t r = 0; r < d.R; ++r) {
        const uint16_t* run = image_row + r * d.Wp * d.C + q0 * step;
        const uint32_t* row_weights = weights + r * d.pairs * d.K;
        for (int64_t j = 0; j < d.pairs; ++j) {
          __m512bh w[kBlocks];
          for (int b = 0; b < kBlocks; ++b) w[b] = (__m512bh)_mm512_loadu_si512(row_weights + j * d.K + b * kLanes);
          for (int px = 0; px < kPixels; ++px) {
            uint32_t pair;
            std::memcpy(&pair, run + px * step + 2 * j, sizeof pair);
            const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
            for (int b = 0; b < kBlocks; ++b) acc[px][b] = _mm512_dpbf16_ps(acc[px][b], w[b], x);
          }
        }
      }
      for (int px = 0; px < kPixels && q0 + px < d.Q; ++px)
        for (int b = 0; b < kBlocks; ++b)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (q0 + px) * d.K + b * kLanes),
                              (__m256i)_mm512_cvtneps_pbh(acc[px][b]));
    }
  }
}

#undef AMPWB_AVX512

}  // namespace

bool stem_forward_fits(const Tensor& x, const Tensor& w, const Tensor& y) {
  static const bool bf16 = cpu_has_avx512_bf16();
  return bf16 && x.dtype() == DType::BF16 && w.dtype() == DType::BF16 && y.dtype() == DType::BF16 &&
         x.layout() == Layout::NHWC && y.layout() == Layout::NHWC && w.layout() == Layout::NCHW &&
         x.c() <= kMaxChannels && w.n() % kLanes == 0 && w.n() <= kMaxBlocks * kLanes;
}

void stem_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p, int threads) {
  AMPWB_CHECK(stem_forward_fits(x, w, y),
              "stem_forward: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  const Dims d = dims_of(x, w, y, p);
  // x with its padding (zeros) around each image.
  Tensor padded = Tensor::empty({d.N * d.Hp * d.Wp * d.C}, DType::BF16);
  const uint16_t* in = static_cast<const uint16_t*>(x.data());
  uint16_t* pad = static_cast<uint16_t*>(padded.data());
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t n = 0; n < d.N; ++n) {
    uint16_t* image = pad + n * d.Hp * d.Wp * d.C;
    std::fill(image, image + d.Hp * d.Wp * d.C, uint16_t{0});
    for (int64_t h = 0; h < d.H; ++h)
      std::copy_n(in + (n * d.H + h) * d.W * d.C, d.W * d.C, image + ((h + d.padding) * d.Wp + d.padding) * d.C);
  }
  // The weights by kernel row, pair of the row's run and output channel: each 32-bit element the two BF16 weights
  // that one pair of the run multiplies (run value i: tap i / C, channel i % C), zero past the run.
  Tensor paired = Tensor::empty({d.R * d.pairs * d.K * 2}, DType::BF16);
  uint32_t* weights = static_cast<uint32_t*>(paired.data());
  const uint16_t* oihw = static_cast<const uint16_t*>(w.data());
  auto weight = [&](int64_t k, int64_t r, int64_t i) -> uint32_t {
    return i < d.S * d.C ? oihw[((k * d.C + i % d.C) * d.R + r) * d.S + i / d.C] : 0;
  };
  for (int64_t r = 0; r < d.R; ++r)
    for (int64_t j = 0; j < d.pairs; ++j)
      for (int64_t k = 0; k < d.K; ++k)
        weights[(r * d.pairs + j) * d.K + k] = weight(k, r, 2 * j) | weight(k, r, 2 * j + 1) << 16;
  uint16_t* out = static_cast<uint16_t*>(y.data());
  const int64_t rows = d.N * d.P;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int k = 0; k < threads; ++k) {
    const auto [first, last] = thread_share(rows, threads, k);
    switch (d.K / kLanes) {
      case 1:
        stem_rows<1>(pad, weights, out, d, first, last);
        break;
      case 2:
        stem_rows<2>(pad, weights, out, d, first, last);
        break;
      case 3:
        stem_rows<3>(pad, weights, out, d, first, last);
        break;
      default:
        stem_rows<4>(pad, weights, out, d, first, last);
    }
  }
}

}  // namespace ampwb::cpu_detail
