// FP32 <-> FP8 bulk conversions: a scalar path (core/fp8.h) and AVX2 / AVX-512 paths that give the same bits.
// Rounding is integer arithmetic on the FP32 bits, as the scalar path's; widening goes through FP16 (F16C), whose
// upper byte E5M2 is and whose values are E4M3's times 2^-8, so that only E4M3's NaN needs its own select.
#include "core/convert8.h"

#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized misreads.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>

#include "core/simd.h"

namespace ampwb {

namespace {

using NarrowKernel = void (*)(const float*, uint8_t*, int64_t);
using WidenKernel = void (*)(const uint8_t*, float*, int64_t);

// ---- Scalar ----------------------------------------------------------------------------------------------------

template <Fp8Format F, Fp8Overflow O>
void narrow_scalar(const float* in, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_fp8_bits<F>(in[i], O);
}

template <Fp8Format F>
void widen_scalar(const uint8_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp8_bits_to_float(F, in[i]);
}

// ---- AVX2 (with F16C) ------------------------------------------------------------------------------------------

// Eight floats' bits rounded to FP8 codes, one in the low byte of each lane, as float_to_fp8_bits does.
template <Fp8Format F, Fp8Overflow O>
__attribute__((target("avx2"))) inline __m256i fp8_codes_avx2(__m256i bits) {
  using S = Fp8Spec<F>;
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
  __m256i m = magnitude;  // every comparison below is of non-negative int32s
  if constexpr (O == Fp8Overflow::Saturate) m = _mm256_min_epi32(m, _mm256_set1_epi32(S::kMaxBits));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(m, S::kDroppedBits), _mm256_set1_epi32(1));
  const __m256i half_ulp = _mm256_set1_epi32((1 << (S::kDroppedBits - 1)) - 1);
  const __m256i normal = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_sub_epi32(m, _mm256_set1_epi32(S::kRebias)), _mm256_add_epi32(half_ulp, odd)),
      S::kDroppedBits);
  const __m256i anchor = _mm256_set1_epi32(S::kSubnormalAnchorBits);
  const __m256i subnormal =
      _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(m), _mm256_castsi256_ps(anchor))), anchor);
  __m256i code = _mm256_blendv_epi8(normal, subnormal, _mm256_cmpgt_epi32(_mm256_set1_epi32(S::kMinNormalBits), m));
  if constexpr (O == Fp8Overflow::NonFinite)
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(S::kOverflowCode),
                              _mm256_cmpgt_epi32(m, _mm256_set1_epi32(S::kOverflowBits - 1)));
  const __m256i nan_code = _mm256_or_si256(
      _mm256_set1_epi32(S::kNanCode),
      _mm256_and_si256(_mm256_srli_epi32(magnitude, S::kDroppedBits), _mm256_set1_epi32(S::kMantissaMask)));
  code = _mm256_blendv_epi8(code, nan_code, _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000)));
  return _mm256_or_si256(code, sign);
}

template <Fp8Format F, Fp8Overflow O>
__attribute__((target("avx2"))) void narrow_avx2(const float* in, uint8_t* out, int64_t n) {
  const int64_t vectors = n / 32 * 32;
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < vectors; i += 32) {
    __m256i codes[4];
    for (int q = 0; q < 4; ++q)
      codes[q] = fp8_codes_avx2<F, O>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 8 * q)));
    // The packs work within 128-bit lanes, leaving each quarter's two halves in different lanes; the permute puts
    // the eight 4-byte groups back in order.
    const __m256i words01 = _mm256_packus_epi32(codes[0], codes[1]);
    const __m256i words23 = _mm256_packus_epi32(codes[2], codes[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(words01, words23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bytes);
  }
  narrow_scalar<F, O>(in + vectors, out + vectors, n - vectors);
}

// Eight FP8 codes (the low 8 bytes) as the FP16 values that widen to them: E5M2 is FP16's upper byte; E4M3's
// exponent and mantissa shifted into FP16's are its value times 2^-8, subnormals included.
template <Fp8Format F>
__attribute__((target("avx2"))) inline __m128i fp8_as_half_avx2(__m128i bytes) {
  const __m128i words = _mm_cvtepu8_epi16(bytes);
  if constexpr (F == Fp8Format::E5M2) return _mm_slli_epi16(words, 8);
  return _mm_or_si128(_mm_slli_epi16(_mm_and_si128(words, _mm_set1_epi16(0x80)), 8),
                      _mm_slli_epi16(_mm_and_si128(words, _mm_set1_epi16(0x7f)), 7));
}

template <Fp8Format F>
__attribute__((target("avx2,f16c"))) void widen_avx2(const uint8_t* in, float* out, int64_t n) {
  const int64_t vectors = n / 8 * 8;
  for (int64_t i = 0; i < vectors; i += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i));
    __m256 values = _mm256_cvtph_ps(fp8_as_half_avx2<F>(bytes));
    if constexpr (F == Fp8Format::E4M3) {
      values = _mm256_mul_ps(values, _mm256_set1_ps(256.0f));  // exact: a power of two, far inside FP32's range
      const __m256i codes = _mm256_cvtepu8_epi32(bytes);
      const __m256i nan = _mm256_cmpeq_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(0x7f)), _mm256_set1_epi32(0x7f));
      const __m256i nan_value = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(0x80)), 24),
                                                _mm256_set1_epi32(0x7fc00000));
      values = _mm256_blendv_ps(values, _mm256_castsi256_ps(nan_value), _mm256_castsi256_ps(nan));
    }
    _mm256_storeu_ps(out + i, values);
  }
  widen_scalar<F>(in + vectors, out + vectors, n - vectors);
}

// ---- AVX-512 ---------------------------------------------------------------------------------------------------

template <Fp8Format F, Fp8Overflow O>
__attribute__((target("avx512f"))) void narrow_avx512(const float* in, uint8_t* out, int64_t n) {
  using S = Fp8Spec<F>;
  const int64_t vectors = n / 16 * 16;
  const __m512i anchor = _mm512_set1_epi32(S::kSubnormalAnchorBits);
  const __m512i half_ulp = _mm512_set1_epi32((1 << (S::kDroppedBits - 1)) - 1);
  for (int64_t i = 0; i < vectors; i += 16) {
    const __m512i bits = _mm512_loadu_si512(in + i);
    const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80));
    __m512i m = magnitude;
    if constexpr (O == Fp8Overflow::Saturate) m = _mm512_min_epu32(m, _mm512_set1_epi32(S::kMaxBits));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(m, S::kDroppedBits), _mm512_set1_epi32(1));
    __m512i code = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_sub_epi32(m, _mm512_set1_epi32(S::kRebias)), _mm512_add_epi32(half_ulp, odd)),
        S::kDroppedBits);
    const __m512i subnormal = _mm512_sub_epi32(
        _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(m), _mm512_castsi512_ps(anchor))), anchor);
    code = _mm512_mask_mov_epi32(code, _mm512_cmplt_epu32_mask(m, _mm512_set1_epi32(S::kMinNormalBits)), subnormal);
    if constexpr (O == Fp8Overflow::NonFinite)
      code = _mm512_mask_mov_epi32(code, _mm512_cmpge_epu32_mask(m, _mm512_set1_epi32(S::kOverflowBits)),
                                   _mm512_set1_epi32(S::kOverflowCode));
    const __m512i nan_code = _mm512_or_si512(
        _mm512_set1_epi32(S::kNanCode),
        _mm512_and_si512(_mm512_srli_epi32(magnitude, S::kDroppedBits), _mm512_set1_epi32(S::kMantissaMask)));
    code = _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000)), nan_code);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(_mm512_or_si512(code, sign)));
  }
  narrow_scalar<F, O>(in + vectors, out + vectors, n - vectors);
}

template <Fp8Format F>
__attribute__((target("avx512f"))) void widen_avx512(const uint8_t* in, float* out, int64_t n) {
  const int64_t vectors = n / 16 * 16;
  for (int64_t i = 0; i < vectors; i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m256i words = _mm256_cvtepu8_epi16(bytes);
    __m512 values;
    if constexpr (F == Fp8Format::E5M2) {
      values = _mm512_cvtph_ps(_mm256_slli_epi16(words, 8));
    } else {
      const __m256i halves = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(words, _mm256_set1_epi16(0x80)), 8),
                                             _mm256_slli_epi16(_mm256_and_si256(words, _mm256_set1_epi16(0x7f)), 7));
      values = _mm512_mul_ps(_mm512_cvtph_ps(halves), _mm512_set1_ps(256.0f));
      const __m512i codes = _mm512_cvtepu8_epi32(bytes);
      const __mmask16 nan =
          _mm512_cmpeq_epi32_mask(_mm512_and_si512(codes, _mm512_set1_epi32(0x7f)), _mm512_set1_epi32(0x7f));
      const __m512i nan_value = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(codes, _mm512_set1_epi32(0x80)), 24),
                                                _mm512_set1_epi32(0x7fc00000));
      values = _mm512_mask_mov_ps(values, nan, _mm512_castsi512_ps(nan_value));
    }
    _mm512_storeu_ps(out + i, values);
  }
  widen_scalar<F>(in + vectors, out + vectors, n - vectors);
}

// ---- Dispatch --------------------------------------------------------------------------------------------------

template <Fp8Format F, Fp8Overflow O>
NarrowKernel narrow_kernel(SimdLevel level) {
  return level == SimdLevel::Avx512 ? narrow_avx512<F, O>
         : level == SimdLevel::Avx2 ? narrow_avx2<F, O>
                                    : narrow_scalar<F, O>;
}

template <Fp8Format F>
NarrowKernel narrow_kernel(Fp8Overflow overflow, SimdLevel level) {
  return overflow == Fp8Overflow::Saturate ? narrow_kernel<F, Fp8Overflow::Saturate>(level)
                                           : narrow_kernel<F, Fp8Overflow::NonFinite>(level);
}

// The kernels of the level in force.
NarrowKernel narrow_kernel(Fp8Format format, Fp8Overflow overflow) {
  const SimdLevel level = simd_level();
  return format == Fp8Format::E4M3 ? narrow_kernel<Fp8Format::E4M3>(overflow, level)
                                   : narrow_kernel<Fp8Format::E5M2>(overflow, level);
}

template <Fp8Format F>
WidenKernel widen_kernel(SimdLevel level) {
  return level == SimdLevel::Avx512 ? widen_avx512<F> : level == SimdLevel::Avx2 ? widen_avx2<F> : widen_scalar<F>;
}

WidenKernel widen_kernel(Fp8Format format) {
  const SimdLevel level = simd_level();
  return format == Fp8Format::E4M3 ? widen_kernel<Fp8Format::E4M3>(level) : widen_kernel<Fp8Format::E5M2>(level);
}

// Runs a kernel over `n` elements, in chunks shared by `threads` threads.
template <class In, class Out>
void run(void (*kernel)(const In*, Out*, int64_t), const In* in, Out* out, int64_t n, int threads) {
  constexpr int64_t kChunk = 1 << 14;
  if (n <= kChunk || threads <= 1) return kernel(in, out, n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t start = 0; start < n; start += kChunk) kernel(in + start, out + start, std::min(kChunk, n - start));
}

}  // namespace

void round_to_fp8(Fp8Format format, const float* in, uint8_t* out, int64_t n, Fp8Overflow overflow, int threads) {
  run(narrow_kernel(format, overflow), in, out, n, threads);
}

void widen_fp8(Fp8Format format, const uint8_t* in, float* out, int64_t n, int threads) {
  run(widen_kernel(format), in, out, n, threads);
}

void round_through_fp8(Fp8Format format, float* values, int64_t n, Fp8Overflow overflow, int threads) {
  const NarrowKernel narrow = narrow_kernel(format, overflow);
  const WidenKernel widen = widen_kernel(format);
  constexpr int64_t kChunk = 1 << 12;  // its 8-bit copy (4 KiB) stays in L1 between the two conversions
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for num_threads(chunks > 1 ? threads : 1) schedule(static)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    uint8_t narrow_copy[kChunk];
    const int64_t start = chunk * kChunk, count = std::min(kChunk, n - start);
    narrow(values + start, narrow_copy, count);
    widen(narrow_copy, values + start, count);
  }
}

}  // namespace ampwb
