#include "backend/cpu/direct_weight_gradient.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "backend/cpu/kernel_threads.h"

namespace ampwb::cpu_detail {

namespace {

constexpr int kTaps = 9;         // 3x3
constexpr int64_t kLanes = 16;   // input channels an accumulator holds
constexpr int64_t kOutputs = 2;  // output channels a block holds: 2 x 9 accumulators
// BF16: x's and dy's pairs made at a time, in values (512 KiB): a part of the batch, where the whole would take more.
constexpr int64_t kPartValues = int64_t{1} << 18;

// Every function below with AVX-512 inside: BF16's instructions are used only on BF16's path, which runs only where
// the CPU has them (GCC 12 does not emit them for float code).
#define AMPWB_AVX512 gnu::target("avx512f,avx512bw,avx512bf16")

// The output pixels' valid taps: for each, a 9-bit mask and the offset of its window's top-left input pixel.
struct Window {
  uint32_t taps;
  int64_t offset;  // in elements (a BF16 pair is one), before the image where the top-left tap is padding
};

// A part of the batch, where the images are summed a part at a time (BF16's pairs made for one part at a time): each
// block's 18 accumulators and 2 centre sums kept in `sums` between the parts, so that the sums are the ones a single
// pass over the batch makes, bit for bit. One part: sums is null.
constexpr int64_t kBlockSums = 2 * kTaps + 2;  // vectors of kLanes a block keeps
struct Part {
  float* sums = nullptr;  // (blocks, kBlockSums, kLanes)
  bool first = true, last = true;
};

// FP32: one image at a time; an element is a float, the gradient broadcast as it is.
struct Fp32 {
  using Element = float;
  using Gradient = __m512;
  [[AMPWB_AVX512]] static Gradient broadcast(const float* g) { return _mm512_set1_ps(*g); }
  [[AMPWB_AVX512]] static __m512 multiply_add(__m512 acc, const float* in, Gradient g) {
    return _mm512_fmadd_ps(_mm512_loadu_ps(in), g, acc);
  }
};

// BF16: images in pairs (pair_images), an element the two images' values; VDPBF16PS adds both products.
struct Bf16Pairs {
  using Element = uint32_t;
  using Gradient = __m512bh;
  [[AMPWB_AVX512]] static Gradient broadcast(const uint32_t* g) {
    return (__m512bh)_mm512_set1_epi32(static_cast<int>(*g));
  }
  [[AMPWB_AVX512]] static __m512 multiply_add(__m512 acc, const uint32_t* in, Gradient g) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(in), g);
  }
};

// (N, values) BF16 -> (ceil(N/2), values, 2): images 2i and 2i+1 interleaved value by value, so that one 32-bit
// element holds the two values VDPBF16PS multiplies and adds; an odd batch's last image paired with zeros.
// values: a multiple of 16; chunks [first, last) of 16 values each.
[[AMPWB_AVX512]] void pair_chunks(const uint16_t* in, uint32_t* out, int64_t images, int64_t values, int64_t first,
                                  int64_t last) {
  alignas(64) static const std::array<uint16_t, 32> order = [] {  // a0 b0 a1 b1 ... of a's and b's first 16
    std::array<uint16_t, 32> idx{};
    for (int i = 0; i < 32; ++i) idx[i] = static_cast<uint16_t>(i / 2 + (i % 2) * 32);
    return idx;
  }();
  const __m512i interleave = _mm512_load_si512(order.data());
  const int64_t chunks = values / 16;
  for (int64_t chunk = first; chunk < last; ++chunk) {
    const int64_t pair = chunk / chunks, v = chunk % chunks * 16;
    const uint16_t* a = in + 2 * pair * values + v;
    const __m512i a_values = _mm512_maskz_loadu_epi16(0xFFFF, a);
    const __m512i b_values =
        2 * pair + 1 < images ? _mm512_maskz_loadu_epi16(0xFFFF, a + values) : _mm512_setzero_si512();
    _mm512_storeu_si512(out + pair * values + v, _mm512_permutex2var_epi16(a_values, interleave, b_values));
  }
}

void pair_images(const uint16_t* in, uint32_t* out, int64_t images, int64_t values, int threads) {
  const int64_t chunks = (images + 1) / 2 * (values / 16);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int k = 0; k < threads; ++k) {
    const auto [first, last] = thread_share(chunks, threads, k);
    pair_chunks(in, out, images, values, first, last);
  }
}

// Tap t's input times both output channels' gradients, into its accumulators (the centre tap's: centre0 and
// centre1). t is known when compiled wherever this is inlined (the callers' loops are unrolled).
template <class Kind>
[[AMPWB_AVX512, gnu::always_inline]] inline void add_tap(int t, const typename Kind::Element* in,
                                                         typename Kind::Gradient g0, typename Kind::Gradient g1,
                                                         __m512 (&acc0)[kTaps], __m512 (&acc1)[kTaps], __m512& centre0,
                                                         __m512& centre1) {
  if (t == 4) {
    centre0 = Kind::multiply_add(centre0, in, g0);
    centre1 = Kind::multiply_add(centre1, in, g1);
  } else {
    acc0[t] = Kind::multiply_add(acc0[t], in, g0);
    acc1[t] = Kind::multiply_add(acc1[t], in, g1);
  }
}

// One output pixel's share of a block's sums: its valid taps' inputs (kMask, or `mask` where kMask is 0) each loaded
// once and multiplied by both output channels' gradients; the centre tap's into centre0 and centre1.
template <class Kind, uint32_t kMask>
[[AMPWB_AVX512, gnu::always_inline]] inline void sum_pixel(const typename Kind::Element* window,
                                                           const typename Kind::Element* grad, int64_t C, int64_t row,
                                                           uint32_t mask, __m512 (&acc0)[kTaps], __m512 (&acc1)[kTaps],
                                                           __m512& centre0, __m512& centre1) {
  const typename Kind::Gradient g0 = Kind::broadcast(grad), g1 = Kind::broadcast(grad + 1);
  const uint32_t taps = kMask ? kMask : mask;
  const typename Kind::Element* rows[3] = {window, window + row, window + 2 * row};
#pragma GCC unroll 9
  for (int t = 0; t < kTaps; ++t)
    if (taps >> t & 1) {
      const typename Kind::Element* in = rows[t / 3] + t % 3 * C;
      add_tap<Kind>(t, in, g0, g1, acc0, acc1, centre0, centre1);
    }
}

// One image's (or pair's) share: every output pixel, its taps known when compiled for a 3x3 window with one pixel
// of padding (the inside, four edges, four corners); a branch per tap cost as much as the multiply-adds over 2x2.
template <class Kind>
[[AMPWB_AVX512, gnu::always_inline]] inline void sum_image(const typename Kind::Element* image,
                                                           const typename Kind::Element* grad, int64_t K, int64_t C,
                                                           int64_t row, const Window* windows, int64_t pixels,
                                                           __m512 (&acc0)[kTaps], __m512 (&acc1)[kTaps],
                                                           __m512& centre0, __m512& centre1) {
  for (int64_t pixel = 0; pixel < pixels; ++pixel, grad += K) {
    const typename Kind::Element* window = image + windows[pixel].offset;
    const uint32_t mask = windows[pixel].taps;
    // clang-format off
    switch (mask) {
#define AMPWB_TAPS(m) case m: sum_pixel<Kind, m>(window, grad, C, row, mask, acc0, acc1, centre0, centre1); break;
      AMPWB_TAPS(0x1FF)                                                        // inside
      AMPWB_TAPS(0x1F8) AMPWB_TAPS(0x03F) AMPWB_TAPS(0x1B6) AMPWB_TAPS(0x0DB)  // top, bottom, left, right edges
      AMPWB_TAPS(0x1B0) AMPWB_TAPS(0x0D8) AMPWB_TAPS(0x036) AMPWB_TAPS(0x01B)  // corners
#undef AMPWB_TAPS
      default: sum_pixel<Kind, 0>(window, grad, C, row, mask, acc0, acc1, centre0, centre1);
    }
    // clang-format on
  }
}

// The same over a square image of kSide x kSide pixels, stride 1, padding 1 (ResNet-18's last two stages at 64 px),
// unrolled whole: every pixel's taps known when compiled, and each input pixel loaded once for the taps of every
// output pixel it falls under (over 2x2 images a branch per pixel cost as much as its multiply-adds).
template <class Kind, int kSide>
[[AMPWB_AVX512, gnu::always_inline]] inline void sum_small_image(const typename Kind::Element* image,
                                                                 const typename Kind::Element* grad, int64_t K,
                                                                 int64_t C, __m512 (&acc0)[kTaps],
                                                                 __m512 (&acc1)[kTaps], __m512& centre0,
                                                                 __m512& centre1) {
#pragma GCC unroll 16
  for (int pixel = 0; pixel < kSide * kSide; ++pixel) {
    const typename Kind::Gradient g0 = Kind::broadcast(grad + pixel * K), g1 = Kind::broadcast(grad + pixel * K + 1);
#pragma GCC unroll 9
    for (int t = 0; t < kTaps; ++t) {
      const int h = pixel / kSide + t / 3 - 1, w = pixel % kSide + t % 3 - 1;
      if (h < 0 || h >= kSide || w < 0 || w >= kSide) continue;
      const typename Kind::Element* in = image + (h * kSide + w) * C;
      add_tap<Kind>(t, in, g0, g1, acc0, acc1, centre0, centre1);
    }
  }
}

// From 9 rows (tap t: 16 input channels) to OIHW's 16 rows of 9 taps, for one output channel: lookups into pairs
// of rows, each output lane's row picked by masks.
struct OihwOrder {
  // BF16: rows 2k and 2k+1 in one register, 32 values; 5 output registers, the last half full.
  __m512i bf16_index[5];
  std::array<__mmask32, 5> bf16_rows23, bf16_row4;
  // FP32: 9 output registers of 16; index (t % 2) * 16 + c into rows t - t % 2 and t - t % 2 + 1, pair t / 2.
  __m512i fp32_index[9];
  std::array<std::array<__mmask16, 5>, 9> fp32_pair;

  [[AMPWB_AVX512]] OihwOrder() {
    for (int j = 0; j < 5; ++j) {
      alignas(64) uint16_t idx[32];
      uint32_t rows23 = 0, row4 = 0;
      for (int l = 0; l < 32; ++l) {
        const int e = std::min(32 * j + l, 143), source = e % 9 * 16 + e / 9;
        idx[l] = static_cast<uint16_t>(source & 63);
        if (source >= 64 && source < 128) rows23 |= 1u << l;
        if (source >= 128) row4 |= 1u << l;
      }
      bf16_index[j] = _mm512_load_si512(idx);
      bf16_rows23[j] = rows23;
      bf16_row4[j] = row4;
    }
    for (int j = 0; j < 9; ++j) {
      alignas(64) int32_t idx[16];
      fp32_pair[j] = {};
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * j + l, t = e % 9, c = e / 9;
        idx[l] = t % 2 * 16 + c;
        fp32_pair[j][t / 2] = static_cast<__mmask16>(fp32_pair[j][t / 2] | 1u << l);
      }
      fp32_index[j] = _mm512_load_si512(idx);
    }
  }

  // 144 BF16 values, rounded to nearest even.
  [[AMPWB_AVX512]] void store(const __m512 (&acc)[kTaps], uint16_t* out) const {
    // VCVTNE2PS2BF16 writes its second operand's values into the low half.
    const __m512i s0 = (__m512i)_mm512_cvtne2ps_pbh(acc[1], acc[0]), s1 = (__m512i)_mm512_cvtne2ps_pbh(acc[3], acc[2]),
                  s2 = (__m512i)_mm512_cvtne2ps_pbh(acc[5], acc[4]), s3 = (__m512i)_mm512_cvtne2ps_pbh(acc[7], acc[6]),
                  s4 = (__m512i)_mm512_cvtne2ps_pbh(_mm512_setzero_ps(), acc[8]);
    for (int j = 0; j < 5; ++j) {
      __m512i v = _mm512_permutex2var_epi16(s0, bf16_index[j], s1);
      v = _mm512_mask_blend_epi16(bf16_rows23[j], v, _mm512_permutex2var_epi16(s2, bf16_index[j], s3));
      v = _mm512_mask_blend_epi16(bf16_row4[j], v, _mm512_permutexvar_epi16(bf16_index[j], s4));
      if (j < 4)
        _mm512_storeu_si512(out + 32 * j, v);
      else
        _mm512_mask_storeu_epi16(out + 128, 0xFFFF, v);
    }
  }

  // 144 FP32 values.
  [[AMPWB_AVX512]] void store(const __m512 (&acc)[kTaps], float* out) const {
    for (int j = 0; j < 9; ++j) {
      __m512 v = _mm512_permutex2var_ps(acc[8], fp32_index[j], acc[8]);  // pair 4: row 8 alone
      for (int pair = 0; pair < 4; ++pair)
        v = _mm512_mask_blend_ps(fp32_pair[j][pair], v,
                                 _mm512_permutex2var_ps(acc[2 * pair], fp32_index[j], acc[2 * pair + 1]));
      _mm512_storeu_ps(out + 16 * j, v);
    }
  }
};

// One thread's blocks [first, last) of weight_gradient (below).
template <class Kind, int kSide, class Out>
[[AMPWB_AVX512]] void weight_gradient_blocks(const typename Kind::Element* x, const typename Kind::Element* dy, Out* dw,
                                             int64_t images, int64_t C, int64_t K, int64_t image_values,
                                             int64_t dy_values, const std::vector<Window>& windows, int64_t row,
                                             Part part, int64_t first, int64_t last) {
  static const OihwOrder order;
  const int64_t output_blocks = K / kOutputs, pixels = static_cast<int64_t>(windows.size());
  for (int64_t block = first; block < last; ++block) {
    const int64_t c = block / output_blocks * kLanes, o = block % output_blocks * kOutputs;
    // The centre tap, which every output pixel uses, sums odd and even images apart: over images of 2x2 or 4x4
    // pixels its sums are the longest chains of dependent multiply-adds, and would set the pace.
    __m512 acc0[kTaps], acc1[kTaps], centre0 = _mm512_setzero_ps(), centre1 = _mm512_setzero_ps();
    for (int t = 0; t < kTaps; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
    float* const sums = part.sums ? part.sums + block * kBlockSums * kLanes : nullptr;
    if (sums && !part.first) {
      for (int t = 0; t < kTaps; ++t) {
        acc0[t] = _mm512_loadu_ps(sums + t * kLanes);
        acc1[t] = _mm512_loadu_ps(sums + (kTaps + t) * kLanes);
      }
      centre0 = _mm512_loadu_ps(sums + 2 * kTaps * kLanes);
      centre1 = _mm512_loadu_ps(sums + (2 * kTaps + 1) * kLanes);
    }
    auto image = [&](int64_t i) { return x + i * image_values + c; };
    auto grad = [&](int64_t i) { return dy + i * dy_values + o; };
    for (int64_t i = 0; i < images; i += 2) {
      const bool second = i + 1 < images;
      if constexpr (kSide != 0) {
        sum_small_image<Kind, kSide>(image(i), grad(i), K, C, acc0, acc1, acc0[4], acc1[4]);
        if (second) sum_small_image<Kind, kSide>(image(i + 1), grad(i + 1), K, C, acc0, acc1, centre0, centre1);
      } else {
        sum_image<Kind>(image(i), grad(i), K, C, row, windows.data(), pixels, acc0, acc1, acc0[4], acc1[4]);
        if (second)
          sum_image<Kind>(image(i + 1), grad(i + 1), K, C, row, windows.data(), pixels, acc0, acc1, centre0, centre1);
      }
    }
    if (sums && !part.last) {
      for (int t = 0; t < kTaps; ++t) {
        _mm512_storeu_ps(sums + t * kLanes, acc0[t]);
        _mm512_storeu_ps(sums + (kTaps + t) * kLanes, acc1[t]);
      }
      _mm512_storeu_ps(sums + 2 * kTaps * kLanes, centre0);
      _mm512_storeu_ps(sums + (2 * kTaps + 1) * kLanes, centre1);
      continue;
    }
    acc0[4] = _mm512_add_ps(acc0[4], centre0);
    acc1[4] = _mm512_add_ps(acc1[4], centre1);
    order.store(acc0, dw + (o * C + c) * kTaps);
    order.store(acc1, dw + ((o + 1) * C + c) * kTaps);
  }
}

// dw[o .. o+1][c .. c+15][taps] for every such block, the blocks shared among the threads: the sums over all images
// (pairs) in 18 accumulators, then written in OIHW order. kSide: 2 or 4 for sum_small_image's images, else 0.
template <class Kind, int kSide, class Out>
void weight_gradient(const typename Kind::Element* x, const typename Kind::Element* dy, Out* dw, int64_t images,
                     int64_t C, int64_t K, int64_t image_values, int64_t dy_values, const std::vector<Window>& windows,
                     int64_t row, Part part, int threads) {
  const int64_t blocks = C / kLanes * (K / kOutputs);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int k = 0; k < threads; ++k) {
    const auto [first, last] = thread_share(blocks, threads, k);
    weight_gradient_blocks<Kind, kSide>(x, dy, dw, images, C, K, image_values, dy_values, windows, row, part, first,
                                        last);
  }
}

#undef AMPWB_AVX512

// BF16's pairs of x and dy are made for a part of the batch at a time where the block sums kept between the parts
// take less memory than the pairs of the whole batch would.
struct Bf16Parts {
  int64_t pairs, part_pairs;  // the batch's image pairs, and those of a part (even: each part's first pair is even)
  int64_t sums_values;        // the block sums kept between the parts (none for one part)
  int64_t scratch;            // BF16 values: the pairs of a part, and the sums (FP32: two values each)
};
Bf16Parts bf16_parts(const Tensor& x, const Tensor& dy) {
  const int64_t pairs = (x.n() + 1) / 2, pair_values = 2 * (x.h() * x.w() * x.c() + dy.h() * dy.w() * dy.c());
  const int64_t sums_values = x.c() / kLanes * (dy.c() / kOutputs) * kBlockSums * kLanes;
  if (pairs * pair_values <= kPartValues || sums_values > kPartValues) return {pairs, pairs, 0, pairs * pair_values};
  const int64_t part_pairs = std::max<int64_t>(2, kPartValues / pair_values / 2 * 2);
  if (part_pairs >= pairs) return {pairs, pairs, 0, pairs * pair_values};
  return {pairs, part_pairs, sums_values, part_pairs * pair_values + 2 * sums_values};
}
}  // namespace

int64_t direct_weight_gradient_scratch_values(const Tensor& x, const Tensor& dy) {
  return x.dtype() == DType::BF16 ? bf16_parts(x, dy).scratch : 0;
}

bool direct_weight_gradient_fits(const Tensor& x, const Tensor& dy, const Tensor& dw) {
  static const bool avx512 = cpu_has_avx512(), bf16 = cpu_has_avx512_bf16();
  const DType type = x.dtype();
  return (type == DType::F32 ? avx512 : type == DType::BF16 && bf16) && dy.dtype() == type && dw.dtype() == type &&
         x.layout() == Layout::NHWC && dy.layout() == Layout::NHWC && dw.layout() == Layout::NCHW && dw.h() == 3 &&
         dw.w() == 3 && x.c() % kLanes == 0 && dy.c() % kLanes == 0;
}

void direct_weight_gradient(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p, int threads) {
  AMPWB_CHECK(direct_weight_gradient_fits(x, dy, dw),
              "direct_weight_gradient: x " << x.describe() << " dy " << dy.describe() << " dw " << dw.describe());
  const int64_t N = x.n(), C = x.c(), H = x.h(), W = x.w(), K = dy.c(), P = dy.h(), Q = dy.w();
  std::vector<Window> windows;
  windows.reserve(static_cast<size_t>(P * Q));
  for (int64_t out_h = 0; out_h < P; ++out_h)
    for (int64_t out_w = 0; out_w < Q; ++out_w) {
      const int64_t top = out_h * p.stride - p.padding, left = out_w * p.stride - p.padding;
      uint32_t taps = 0;
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t s = 0; s < 3; ++s)
          if (top + r >= 0 && top + r < H && left + s >= 0 && left + s < W) taps |= 1u << (r * 3 + s);
      windows.push_back({taps, (top * W + left) * C});
    }
  // Square images of 2x2 or 4x4 pixels at stride 1, padding 1: unrolled whole (sum_small_image).
  const int side = H == W && P == H && Q == W && p.stride == 1 && p.padding == 1 && (H == 2 || H == 4) ? int(H) : 0;
  auto run = [&]<class Kind>(const typename Kind::Element* in, const typename Kind::Element* grad, auto* out,
                             int64_t images, Part part) {
    auto with = [&]<int kSide>() {
      weight_gradient<Kind, kSide>(in, grad, out, images, C, K, H * W * C, P * Q * K, windows, W * C, part, threads);
    };
    side == 2   ? with.template operator()<2>()
    : side == 4 ? with.template operator()<4>()
                : with.template operator()<0>();
  };
  if (x.dtype() == DType::F32)
    return run.template operator()<Fp32>(x.data_as<float>(), dy.data_as<float>(), dw.data_as<float>(), N, Part{});
  const Bf16Parts parts = bf16_parts(x, dy);
  const int64_t pairs = parts.pairs, part_pairs = parts.part_pairs;
  Tensor x2 = Tensor::empty({part_pairs * H * W * C * 2}, DType::BF16),
         dy2 = Tensor::empty({part_pairs * P * Q * K * 2}, DType::BF16);
  Tensor sums = parts.sums_values ? Tensor::empty({parts.sums_values}, DType::F32) : Tensor();
  for (int64_t first = 0; first < pairs; first += part_pairs) {
    const int64_t part = std::min(part_pairs, pairs - first), images = std::min(2 * part, N - 2 * first);
    pair_images(static_cast<const uint16_t*>(x.data()) + 2 * first * H * W * C, static_cast<uint32_t*>(x2.data()),
                images, H * W * C, threads);
    pair_images(static_cast<const uint16_t*>(dy.data()) + 2 * first * P * Q * K, static_cast<uint32_t*>(dy2.data()),
                images, P * Q * K, threads);
    run.template operator()<Bf16Pairs>(
        static_cast<const uint32_t*>(x2.data()), static_cast<const uint32_t*>(dy2.data()),
        static_cast<uint16_t*>(dw.data()), part,
        Part{sums.defined() ? sums.data_as<float>() : nullptr, first == 0, first + part == pairs});
  }
}

}  // namespace ampwb::cpu_detail
