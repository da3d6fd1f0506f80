#include "backend/cpu/weight_layouts.h"

#include <immintrin.h>

#include <array>

#include "backend/cpu/kernel_threads.h"

namespace ampwb::cpu_detail {

namespace {

constexpr int64_t kBlock = 16;  // channels of a block, in and out
constexpr int kTaps = 9;        // 3x3
constexpr int kRegisterPairs = (kTaps + 1) / 2;

#define AMPWB_AVX512 gnu::target("avx512f,avx512bw")

// Values of 3x3 kernels in 9 registers, value j of tap t at j * 9 + t, to be gathered tap by tap: tap t's register
// of Lanes values (j = 0 .. Lanes - 1) merges VPERMT2D's (32-bit lanes) or VPERMT2W's (16-bit) picks out of register
// pairs (2q, 2q + 1): per tap and register pair the indices and the mask of the values it holds.
template <class Index, class Mask, int Lanes>
struct TapPicks {
  alignas(64) std::array<std::array<std::array<Index, Lanes>, kRegisterPairs>, kTaps> index{};
  std::array<std::array<Mask, kRegisterPairs>, kTaps> mask{};
  constexpr TapPicks() {
    for (int tap = 0; tap < kTaps; ++tap)
      for (int j = 0; j < Lanes; ++j) {
        const int at = j * kTaps + tap, pair = at / (2 * Lanes);
        index[tap][pair][j] = static_cast<Index>(at % (2 * Lanes));
        mask[tap][pair] = static_cast<Mask>(mask[tap][pair] | Mask{1} << j);
      }
  }
};
// Backward data's: a block's 16 input channels x 9 taps of one output channel (FP32), or of a pair of them
// interleaved into 32-bit pairs (BF16); tap t's row of the block is (input channel i, tap t) for i = 0 .. 15.
constexpr TapPicks<int32_t, uint16_t, 16> kPicks;

// The 9 rows (one a tap) of 16 32-bit values from `values` (16 x 9, input channel major), each stored at
// out + tap * tap_stride.
[[AMPWB_AVX512]] inline void transpose_taps(const __m512i (&values)[kTaps + 1], uint32_t* out, int64_t tap_stride) {
#pragma GCC unroll 16
  for (int tap = 0; tap < kTaps; ++tap) {
    __m512i row = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int p = 0; p < kRegisterPairs; ++p) {
      if (!kPicks.mask[tap][p]) continue;
      const __m512i index = _mm512_load_si512(kPicks.index[tap][p].data());
      row = _mm512_mask_mov_epi32(row, kPicks.mask[tap][p],
                                  _mm512_permutex2var_epi32(values[2 * p], index, values[2 * p + 1]));
    }
    _mm512_storeu_si512(out + tap * tap_stride, row);
  }
}

// Blocks [first, last) of out, block b = its 16 output channels' block * C/16 + its 16 input channels' block.
[[AMPWB_AVX512]] void fp32_blocks(const float* w, float* out, int64_t C, int64_t first, int64_t last) {
  const int64_t input_blocks = C / kBlock;
  for (int64_t b = first; b < last; ++b) {
    const int64_t output_block = b / input_blocks, input_block = b % input_blocks;
    auto* block = reinterpret_cast<uint32_t*>(out + b * kBlock * kBlock * kTaps);
    for (int64_t k = 0; k < kBlock; ++k) {
      const float* row = w + ((output_block * kBlock + k) * C + input_block * kBlock) * kTaps;
      __m512i values[kTaps + 1];
#pragma GCC unroll 16
      for (int r = 0; r < kTaps; ++r) values[r] = _mm512_castps_si512(_mm512_loadu_ps(row + 16 * r));
      values[kTaps] = values[kTaps - 1];  // never picked: completes the last register pair
      transpose_taps(values, block + k * kBlock, kBlock * kBlock);
    }
  }
}

[[AMPWB_AVX512]] void bf16_blocks(const uint16_t* w, uint16_t* out, int64_t C, int64_t first, int64_t last) {
  const int64_t input_blocks = C / kBlock;
  for (int64_t b = first; b < last; ++b) {
    const int64_t output_block = b / input_blocks, input_block = b % input_blocks;
    auto* block = reinterpret_cast<uint32_t*>(out + b * kBlock * kBlock * kTaps);
    for (int64_t pair = 0; pair < kBlock / 2; ++pair) {
      const uint16_t* even = w + ((output_block * kBlock + 2 * pair) * C + input_block * kBlock) * kTaps;
      const uint16_t* odd = even + C * kTaps;
      __m512i values[kTaps + 1];
#pragma GCC unroll 16
      for (int r = 0; r < kTaps; ++r) {  // (the maskz forms: GCC 12 warns of the plain ones' undefined operand)
        const __m512i low =
            _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + 16 * r)));
        const __m512i high =
            _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(odd + 16 * r)));
        values[r] = _mm512_or_si512(low, _mm512_maskz_slli_epi32(0xffff, high, 16));
      }
      values[kTaps] = values[kTaps - 1];
      transpose_taps(values, block + pair * kBlock, kBlock * kBlock / 2);
    }
  }
}

// ---- The forward's layouts -------------------------------------------------------------------------------------
// The copy works on 16 output channels x a group of 16 input channel pairs at a time: per output channel it moves the
// group's values from input channel major to tap major, then per tap it transposes the 16 x 16 matrix of 32-bit pairs
// so that output channels run innermost.

// The forward's: a group's 16 input channel pairs x 9 taps of one output channel, (pair p, channel c of the pair,
// tap t) at (2p + c) * 9 + t; tap t's register holds its 16 pairs.
constexpr TapPicks<int16_t, uint32_t, 32> kWordPicks;

// rows[k] = 16 32-bit values of row k; afterwards rows[j] = column j. (The unpacks' maskz forms: GCC 12 warns of
// the plain ones' undefined operand.)
[[AMPWB_AVX512]] inline void transpose_16x16(__m512i (&rows)[kBlock]) {
  __m512i t[kBlock], u[kBlock];
  for (int i = 0; i < kBlock; i += 2) {
    t[i] = _mm512_maskz_unpacklo_epi32(0xffff, rows[i], rows[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(0xffff, rows[i], rows[i + 1]);
  }
  for (int g = 0; g < kBlock; g += 4) {  // u[g + m], 128-bit lane L: column 4L + m of rows g .. g + 3
    u[g] = _mm512_maskz_unpacklo_epi64(0xff, t[g], t[g + 2]);
    u[g + 1] = _mm512_maskz_unpackhi_epi64(0xff, t[g], t[g + 2]);
    u[g + 2] = _mm512_maskz_unpacklo_epi64(0xff, t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_maskz_unpackhi_epi64(0xff, t[g + 1], t[g + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i x0 = _mm512_maskz_shuffle_i32x4(0xffff, u[m], u[4 + m], 0x44),
                  x1 = _mm512_maskz_shuffle_i32x4(0xffff, u[m], u[4 + m], 0xee);
    const __m512i y0 = _mm512_maskz_shuffle_i32x4(0xffff, u[8 + m], u[12 + m], 0x44),
                  y1 = _mm512_maskz_shuffle_i32x4(0xffff, u[8 + m], u[12 + m], 0xee);
    rows[m] = _mm512_maskz_shuffle_i32x4(0xffff, x0, y0, 0x88);
    rows[4 + m] = _mm512_maskz_shuffle_i32x4(0xffff, x0, y0, 0xdd);
    rows[8 + m] = _mm512_maskz_shuffle_i32x4(0xffff, x1, y1, 0x88);
    rows[12 + m] = _mm512_maskz_shuffle_i32x4(0xffff, x1, y1, 0xdd);
  }
}

// Items [first, last) of out, item = its 16 output channels (k / 16) * C / 32 + its group of input channels; Taps 1
// (1x1, whose pairs are in tap major order already) or 9 (3x3).
template <int Taps>
[[AMPWB_AVX512]] void forward_pairs(const uint16_t* w, uint32_t* out, int64_t C, int block, int64_t first,
                                    int64_t last) {
  const int64_t groups = C / (2 * kBlock), pairs = C / 2;
  alignas(64) uint32_t by_tap[Taps][kBlock][kBlock];  // [tap][output channel][pair]
  for (int64_t item = first; item < last; ++item) {
    const int64_t k0 = item / groups * kBlock, group = item % groups;
    for (int k = 0; k < kBlock; ++k) {
      const uint16_t* row = w + ((k0 + k) * C + group * 2 * kBlock) * Taps;
      if constexpr (Taps == 1) {
        _mm512_store_si512(by_tap[0][k], _mm512_loadu_si512(row));
      } else {
        __m512i values[kTaps + 1];
#pragma GCC unroll 16
        for (int r = 0; r < kTaps; ++r) values[r] = _mm512_loadu_si512(row + 32 * r);
        values[kTaps] = values[kTaps - 1];  // never picked: completes the last register pair
#pragma GCC unroll 16
        for (int tap = 0; tap < kTaps; ++tap) {
          __m512i pairs_of_tap = _mm512_setzero_si512();
#pragma GCC unroll 16
          for (int q = 0; q < kRegisterPairs; ++q) {
            if (!kWordPicks.mask[tap][q]) continue;
            const __m512i index = _mm512_load_si512(kWordPicks.index[tap][q].data());
            pairs_of_tap = _mm512_mask_mov_epi16(pairs_of_tap, kWordPicks.mask[tap][q],
                                                 _mm512_permutex2var_epi16(values[2 * q], index, values[2 * q + 1]));
          }
          _mm512_store_si512(by_tap[tap][k], pairs_of_tap);
        }
      }
    }
    const int64_t block_of_k = k0 / block, k_in_block = k0 % block;
    for (int tap = 0; tap < Taps; ++tap) {
      __m512i rows[kBlock];
      for (int k = 0; k < kBlock; ++k) rows[k] = _mm512_load_si512(by_tap[tap][k]);
      transpose_16x16(rows);  // rows[p]: pair p of the 16 output channels
      uint32_t* to = out + ((block_of_k * Taps + tap) * pairs + group * kBlock) * block + k_in_block;
      for (int p = 0; p < kBlock; ++p) _mm512_storeu_si512(to + p * block, rows[p]);
    }
  }
}

}  // namespace

bool backward_data_layout_fits(const Tensor& w) {
  return (w.dtype() == DType::F32 || w.dtype() == DType::BF16) && w.rank() == 4 && w.layout() == Layout::NCHW &&
         w.n() % kBlock == 0 && w.c() % kBlock == 0 && w.h() == 3 && w.w() == 3 && cpu_has_avx512();
}

void to_backward_data_layout(const Tensor& w, void* out, int threads) {
  AMPWB_CHECK(backward_data_layout_fits(w), "to_backward_data_layout: w " << w.describe());
  const int64_t blocks = (w.n() / kBlock) * (w.c() / kBlock), C = w.c();
  const bool fp32 = w.dtype() == DType::F32;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int k = 0; k < threads; ++k) {
    const auto [first, last] = thread_share(blocks, threads, k);
    if (fp32)
      fp32_blocks(w.data_as<float>(), static_cast<float*>(out), C, first, last);
    else
      bf16_blocks(static_cast<const uint16_t*>(w.data()), static_cast<uint16_t*>(out), C, first, last);
  }
}

bool forward_layout_fits(const Tensor& w, int block) {
  return w.dtype() == DType::BF16 && w.rank() == 4 && w.layout() == Layout::NCHW &&
         (block == 16 || block == 32 || block == 64) && w.n() % block == 0 && w.c() % (2 * kBlock) == 0 &&
         ((w.h() == 3 && w.w() == 3) || (w.h() == 1 && w.w() == 1)) && cpu_has_avx512();
}

void to_forward_layout(const Tensor& w, int block, void* out, int threads) {
  AMPWB_CHECK(forward_layout_fits(w, block), "to_forward_layout: w " << w.describe() << ", block " << block);
  const int64_t items = w.n() / kBlock * (w.c() / (2 * kBlock)), C = w.c();
  const auto copy = w.h() == 1 ? forward_pairs<1> : forward_pairs<kTaps>;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int k = 0; k < threads; ++k) {
    const auto [first, last] = thread_share(items, threads, k);
    copy(static_cast<const uint16_t*>(w.data()), static_cast<uint32_t*>(out), C, block, first, last);
  }
}

}  // namespace ampwb::cpu_detail
