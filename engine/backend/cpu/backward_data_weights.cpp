#include "backend/cpu/backward_data_weights.h"

#include <immintrin.h>

#include <array>

#include "backend/cpu/kernel_threads.h"

namespace ampwb::cpu_detail {

namespace {

constexpr int64_t kBlock = 16;  // channels of a block, in and out
constexpr int kTaps = 9;        // 3x3
constexpr int kRegisterPairs = (kTaps + 1) / 2;

#define AMPWB_AVX512 gnu::target("avx512f,avx512bw")

// A block's 16 input channels x 9 taps of one output channel (FP32), or of a pair of them interleaved into 32-bit
// pairs (BF16), fill 9 registers of 16 32-bit values: (input channel i, tap t) at i * 9 + t. Tap t's row of the
// block, values t, t + 9, ..., t + 135, merges VPERMT2D's picks out of register pairs (2p, 2p + 1): per tap and
// register pair the indices and the mask of the row's values it holds.
struct Picks {
  alignas(64) std::array<std::array<std::array<int32_t, 16>, kRegisterPairs>, kTaps> index{};
  std::array<std::array<uint16_t, kRegisterPairs>, kTaps> mask{};
  constexpr Picks() {
    for (int tap = 0; tap < kTaps; ++tap)
      for (int i = 0; i < 16; ++i) {
        const int at = i * kTaps + tap;
        index[tap][at / 32][i] = at % 32;
        mask[tap][at / 32] = static_cast<uint16_t>(mask[tap][at / 32] | 1 << i);
      }
  }
};
constexpr Picks kPicks;

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

}  // namespace ampwb::cpu_detail
