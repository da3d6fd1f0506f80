// FP32 <-> FP16/BF16 bulk conversions: a scalar path (core/half.h) and AVX2 / AVX-512 paths that give the same
// bits. BF16 rounding is done in integer arithmetic rather than with VCVTNEPS2BF16, which flushes FP32 subnormals.
#include "core/convert16.h"

#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized misreads.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>

#include "core/half.h"
#include "core/simd.h"

namespace ampwb {

namespace {

// ---- Scalar ----------------------------------------------------------------------------------------------------

void f32_to_f16_scalar(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_half_bits(in[i]);
}
void f16_to_f32_scalar(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = half_bits_to_float(in[i]);
}
void f32_to_bf16_scalar(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bfloat16_bits(in[i]);
}
void bf16_to_f32_scalar(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bfloat16_bits_to_float(in[i]);
}

// ---- AVX2 (with F16C) ------------------------------------------------------------------------------------------

__attribute__((target("avx2,f16c"))) void f32_to_f16_avx2(const float* in, uint16_t* out, int64_t n) {
  const int64_t vectors = n / 8 * 8;
  for (int64_t i = 0; i < vectors; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  f32_to_f16_scalar(in + vectors, out + vectors, n - vectors);
}

__attribute__((target("avx2,f16c"))) void f16_to_f32_avx2(const uint16_t* in, float* out, int64_t n) {
  const int64_t vectors = n / 8 * 8;
  for (int64_t i = 0; i < vectors; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  f16_to_f32_scalar(in + vectors, out + vectors, n - vectors);
}

// Eight floats' bits rounded to BF16 in the low 16 bits of each lane, as float_to_bfloat16_bits does.
__attribute__((target("avx2"))) inline __m256i round_to_bf16_avx2(__m256i bits) {
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));  // both positive as int32
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

__attribute__((target("avx2"))) void f32_to_bf16_avx2(const float* in, uint16_t* out, int64_t n) {
  const int64_t vectors = n / 16 * 16;
  for (int64_t i = 0; i < vectors; i += 16) {
    const __m256i lo = round_to_bf16_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    const __m256i hi = round_to_bf16_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 8)));
    // packus works within 128-bit lanes: lo0 hi0 lo1 hi1; the permute puts the quarters back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  f32_to_bf16_scalar(in + vectors, out + vectors, n - vectors);
}

__attribute__((target("avx2"))) void bf16_to_f32_avx2(const uint16_t* in, float* out, int64_t n) {
  const int64_t vectors = n / 8 * 8;
  for (int64_t i = 0; i < vectors; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(wide, 16));
  }
  bf16_to_f32_scalar(in + vectors, out + vectors, n - vectors);
}

// ---- AVX-512 ---------------------------------------------------------------------------------------------------

__attribute__((target("avx512f"))) void f32_to_f16_avx512(const float* in, uint16_t* out, int64_t n) {
  const int64_t vectors = n / 16 * 16;
  for (int64_t i = 0; i < vectors; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  f32_to_f16_scalar(in + vectors, out + vectors, n - vectors);
}

__attribute__((target("avx512f"))) void f16_to_f32_avx512(const uint16_t* in, float* out, int64_t n) {
  const int64_t vectors = n / 16 * 16;
  for (int64_t i = 0; i < vectors; i += 16)
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  f16_to_f32_scalar(in + vectors, out + vectors, n - vectors);
}

__attribute__((target("avx512f"))) void f32_to_bf16_avx512(const float* in, uint16_t* out, int64_t n) {
  const int64_t vectors = n / 16 * 16;
  const __m512i one = _mm512_set1_epi32(1), half_ulp = _mm512_set1_epi32(0x7fff);
  for (int64_t i = 0; i < vectors; i += 16) {
    const __m512i bits = _mm512_loadu_si512(in + i);
    const __m512i upper = _mm512_srli_epi32(bits, 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(half_ulp, _mm512_and_si512(upper, one))), 16);
    rounded = _mm512_mask_or_epi32(rounded, nan, upper, _mm512_set1_epi32(0x40));  // quiet NaN
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(rounded));
  }
  f32_to_bf16_scalar(in + vectors, out + vectors, n - vectors);
}

__attribute__((target("avx512f"))) void bf16_to_f32_avx512(const uint16_t* in, float* out, int64_t n) {
  const int64_t vectors = n / 16 * 16;
  for (int64_t i = 0; i < vectors; i += 16) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(wide, 16));
  }
  bf16_to_f32_scalar(in + vectors, out + vectors, n - vectors);
}

// Runs the kernel of the level in force over `n` elements, in chunks shared by `threads` threads.
template <class In, class Out>
void run(void (*scalar)(const In*, Out*, int64_t), void (*avx2)(const In*, Out*, int64_t),
         void (*avx512)(const In*, Out*, int64_t), const In* in, Out* out, int64_t n, int threads) {
  const SimdLevel level = simd_level();
  auto* kernel = level == SimdLevel::Avx512 ? avx512 : level == SimdLevel::Avx2 ? avx2 : scalar;
  constexpr int64_t kChunk = 1 << 14;
  if (n <= kChunk || threads <= 1) return kernel(in, out, n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t start = 0; start < n; start += kChunk) kernel(in + start, out + start, std::min(kChunk, n - start));
}

}  // namespace

void f32_to_f16(const float* in, uint16_t* out, int64_t n, int threads) {
  run(f32_to_f16_scalar, f32_to_f16_avx2, f32_to_f16_avx512, in, out, n, threads);
}
void f16_to_f32(const uint16_t* in, float* out, int64_t n, int threads) {
  run(f16_to_f32_scalar, f16_to_f32_avx2, f16_to_f32_avx512, in, out, n, threads);
}
void f32_to_bf16(const float* in, uint16_t* out, int64_t n, int threads) {
  run(f32_to_bf16_scalar, f32_to_bf16_avx2, f32_to_bf16_avx512, in, out, n, threads);
}
void bf16_to_f32(const uint16_t* in, float* out, int64_t n, int threads) {
  run(bf16_to_f32_scalar, bf16_to_f32_avx2, bf16_to_f32_avx512, in, out, n, threads);
}

void widen_16bit(DType dtype, const uint16_t* in, float* out, int64_t n, int threads) {
  (dtype == DType::BF16 ? bf16_to_f32 : f16_to_f32)(in, out, n, threads);
}
void round_to_16bit(DType dtype, const float* in, uint16_t* out, int64_t n, int threads) {
  (dtype == DType::BF16 ? f32_to_bf16 : f32_to_f16)(in, out, n, threads);
}
void round_through_16bit(DType dtype, float* values, int64_t n, int threads) {
  constexpr int64_t kChunk = 1 << 12;  // its 16-bit copy (8 KiB) stays in L1 between the two conversions
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for num_threads(chunks > 1 ? threads : 1) schedule(static)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    uint16_t narrow[kChunk];
    const int64_t start = chunk * kChunk, count = std::min(kChunk, n - start);
    round_to_16bit(dtype, values + start, narrow, count);
    widen_16bit(dtype, narrow, values + start, count);
  }
}

}  // namespace ampwb
