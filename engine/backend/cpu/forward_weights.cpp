#include "backend/cpu/forward_weights.h"

#include <immintrin.h>

#include <array>

#include "backend/cpu/kernel_threads.h"

namespace ampwb::cpu_detail {

namespace {

// The copy works on 16 output channels x a group of 16 input channel pairs at a time: per output channel it moves
// the group's 32 x taps values from input channel major to tap major (16-bit picks), then per tap it transposes the
// 16 x 16 matrix of 32-bit pairs so that output channels run innermost.
constexpr int kLanes = 16;
constexpr int kGroupPairs = 16;

#define AMPWB_AVX512 gnu::target("avx512f,avx512bw")

// A group's values of one output channel of a 3x3 kernel, (pair p, channel c of the pair, tap t) at
// (2p + c) * 9 + t, fill 9 registers of 32; tap t's register of 32 values, value 2p + c, merges VPERMT2W's picks out
// of register pairs (2q, 2q + 1): per tap and register pair the indices and the mask of the values it holds.
constexpr int kTaps3x3 = 9;
struct WordPicks {
  static constexpr int kRegisterPairs = (kTaps3x3 + 1) / 2;
  alignas(64) std::array<std::array<std::array<int16_t, 32>, kRegisterPairs>, kTaps3x3> index{};
  std::array<std::array<uint32_t, kRegisterPairs>, kTaps3x3> mask{};
  constexpr WordPicks() {
    for (int tap = 0; tap < kTaps3x3; ++tap)
      for (int j = 0; j < 32; ++j) {
        const int at = j * kTaps3x3 + tap;  // j = 2p + c
        index[tap][at / 64][j] = static_cast<int16_t>(at % 64);
        mask[tap][at / 64] |= 1u << j;
      }
  }
};
constexpr WordPicks kPicks;

// rows[k] = 16 32-bit values of row k; afterwards rows[j] = column j. (The unpacks' maskz forms: GCC 12 warns of
// the plain ones' undefined operand.)
[[AMPWB_AVX512]] inline void transpose_16x16(__m512i (&rows)[kLanes]) {
  __m512i t[kLanes], u[kLanes];
  for (int i = 0; i < kLanes; i += 2) {
    t[i] = _mm512_maskz_unpacklo_epi32(0xffff, rows[i], rows[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(0xffff, rows[i], rows[i + 1]);
  }
  for (int g = 0; g < kLanes; g += 4) {  // u[g + m], 128-bit lane L: column 4L + m of rows g .. g + 3
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
// (1x1, whose pairs are in place already) or 9 (3x3).
template <int Taps>
[[AMPWB_AVX512]] void copy_items(const uint16_t* w, uint16_t* out, int64_t C, int block, int64_t first, int64_t last) {
  const int64_t groups = C / (2 * kGroupPairs), pairs = C / 2;
  alignas(64) uint32_t by_tap[Taps][kLanes][kLanes];  // [tap][output channel][pair]
  for (int64_t item = first; item < last; ++item) {
    const int64_t k0 = item / groups * kLanes, group = item % groups;
    for (int k = 0; k < kLanes; ++k) {
      const uint16_t* row = w + ((k0 + k) * C + group * 2 * kGroupPairs) * Taps;
      if constexpr (Taps == 1) {
        _mm512_store_si512(by_tap[0][k], _mm512_loadu_si512(row));  // already pairs
      } else {
        __m512i values[Taps + 1];
#pragma GCC unroll 16
        for (int r = 0; r < Taps; ++r) values[r] = _mm512_loadu_si512(row + 32 * r);
        values[Taps] = values[Taps - 1];  // never picked: completes the last register pair
#pragma GCC unroll 16
        for (int tap = 0; tap < Taps; ++tap) {
          __m512i pairs_of_tap = _mm512_setzero_si512();
#pragma GCC unroll 16
          for (int q = 0; q < WordPicks::kRegisterPairs; ++q) {
            if (!kPicks.mask[tap][q]) continue;
            const __m512i index = _mm512_load_si512(kPicks.index[tap][q].data());
            pairs_of_tap = _mm512_mask_mov_epi16(pairs_of_tap, kPicks.mask[tap][q],
                                                 _mm512_permutex2var_epi16(values[2 * q], index, values[2 * q + 1]));
          }
          _mm512_store_si512(by_tap[tap][k], pairs_of_tap);
        }
      }
    }
    const int64_t block_of_k = k0 / block, k_in_block = k0 % block;
    for (int tap = 0; tap < Taps; ++tap) {
      __m512i rows[kLanes];
      for (int k = 0; k < kLanes; ++k) rows[k] = _mm512_load_si512(by_tap[tap][k]);
      transpose_16x16(rows);  // rows[p]: pair p of the 16 output channels
      uint16_t* to = out + ((block_of_k * Taps + tap) * pairs + group * kGroupPairs) * block * 2 + k_in_block * 2;
      for (int p = 0; p < kGroupPairs; ++p) _mm512_storeu_si512(to + p * block * 2, rows[p]);
    }
  }
}

}  // namespace

bool forward_layout_fits(const Tensor& w, int block) {
  return w.dtype() == DType::BF16 && w.rank() == 4 && w.layout() == Layout::NCHW &&
         (block == 16 || block == 32 || block == 64) && w.n() % block == 0 && w.c() % (2 * kGroupPairs) == 0 &&
         ((w.h() == 3 && w.w() == 3) || (w.h() == 1 && w.w() == 1)) && cpu_has_avx512();
}

void to_forward_layout(const Tensor& w, int block, void* out, int threads) {
  AMPWB_CHECK(forward_layout_fits(w, block), "to_forward_layout: w " << w.describe() << ", block " << block);
  const int64_t items = w.n() / kLanes * (w.c() / (2 * kGroupPairs)), C = w.c();
  const auto* from = static_cast<const uint16_t*>(w.data());
  auto* to = static_cast<uint16_t*>(out);
  const bool one_tap = w.h() == 1;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int k = 0; k < threads; ++k) {
    const auto [first, last] = thread_share(items, threads, k);
    if (one_tap)
      copy_items<1>(from, to, C, block, first, last);
    else
      copy_items<kTaps3x3>(from, to, C, block, first, last);
  }
}

}  // namespace ampwb::cpu_detail
