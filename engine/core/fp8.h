// The two 8-bit floating-point formats of FP8 training (OCP 8-bit floating point specification; NVIDIA Hopper's
// tensor-core formats), with round-to-nearest-even conversion from FP32 and exact conversion back.
//
// E4M3 (the "FN" variant): 1 sign, 4 exponent, 3 mantissa bits, bias 7; largest finite 448, smallest normal 2^-6,
// smallest subnormal 2^-9; no infinities, and one NaN per sign, S.1111.111.
// E5M2: 1 sign, 5 exponent, 2 mantissa bits, bias 15, IEEE-like: largest finite 57344, smallest normal 2^-14, smallest
// subnormal 2^-16, infinities S.11111.00 and NaNs S.11111.{01,10,11}. E5M2 is FP16's upper byte.
//
// Overflow (Fp8Overflow): Saturate, the default for both formats, sends every magnitude above the largest finite,
// infinities included, to ±max. It is what Transformer Engine's casts do (cuda_fp8.h's __NV_SATFINITE) and the only
// form of Hopper's conversion instruction (cvt.rn.satfinite), so the CPU's emulation gives the GPU's bits; and under
// delayed scaling an overflow is seen in the FP32 tensor's amax before the cast, where it moves the next scale,
// rather than as an infinity carried into a product. NonFinite follows IEEE rounding instead, as PyTorch's
// tensor.to(float8_e5m2 / float8_e4m3fn) does: a value that rounds beyond max becomes inf in E5M2 (from 61440 up,
// the tie going to inf as FP16's 65520 does) and NaN in E4M3 (above 464; 464 itself ties to 448).
// NaNs stay NaN with their sign in both modes (E5M2 quieted, keeping the top payload bit, as FP16 does); FP32
// subnormals and every FP8 subnormal are kept, never flushed.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "core/half.h"

namespace ampwb {

enum class Fp8Format : uint8_t { E4M3, E5M2 };
enum class Fp8Overflow : uint8_t { Saturate, NonFinite };

constexpr const char* fp8_format_name(Fp8Format format) { return format == Fp8Format::E4M3 ? "e4m3" : "e5m2"; }
constexpr const char* fp8_overflow_name(Fp8Overflow o) { return o == Fp8Overflow::Saturate ? "saturate" : "nonfinite"; }

constexpr float kE4M3Max = 448.0f;
constexpr float kE4M3MinNormal = 0x1p-6f;
constexpr float kE4M3MinSubnormal = 0x1p-9f;
constexpr float kE5M2Max = 57344.0f;
constexpr float kE5M2MinNormal = 0x1p-14f;
constexpr float kE5M2MinSubnormal = 0x1p-16f;

constexpr float fp8_max(Fp8Format format) { return format == Fp8Format::E4M3 ? kE4M3Max : kE5M2Max; }

// Whether a magnitude rounds past the format's largest value, its range taken as unbounded: what a saturating cast
// clips, beyond the rounding every value gets (E4M3: above 464, whose tie rounds to 448; E5M2: from 61440, whose
// tie rounds to infinity). NaN is not.
constexpr bool fp8_clips(Fp8Format format, float magnitude) {
  return format == Fp8Format::E4M3 ? magnitude > 464.0f : magnitude >= 61440.0f;
}

// One format's layout, and the FP32 bit patterns its rounding compares against (every scalar and vector path reads
// them from here).
template <Fp8Format F>
struct Fp8Spec {
  static constexpr int kBias = F == Fp8Format::E4M3 ? 7 : 15;
  static constexpr int kMantissaBits = F == Fp8Format::E4M3 ? 3 : 2;
  static constexpr int kDroppedBits = 23 - kMantissaBits;  // FP32 mantissa bits rounded off
  static constexpr uint32_t kMantissaMask = (1u << kMantissaBits) - 1;
  static constexpr uint32_t kMaxCode = F == Fp8Format::E4M3 ? 0x7e : 0x7b;       // S.1111.110 / S.11110.11
  static constexpr uint32_t kOverflowCode = F == Fp8Format::E4M3 ? 0x7f : 0x7c;  // NaN / inf, for NonFinite
  static constexpr uint32_t kNanCode = F == Fp8Format::E4M3 ? 0x7f : 0x7e;       // the payload bits OR into it
  // FP32's exponent bias minus the format's, in FP32's exponent field: subtracting it re-biases a normal value.
  static constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << 23;
  static constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  static constexpr uint32_t kMaxBits =
      (((kMaxCode >> kMantissaBits) << 23) + kRebias) | ((kMaxCode & kMantissaMask) << kDroppedBits);
  // The smallest magnitude that rounds beyond max: past the midpoint, or on it where max's mantissa is odd.
  static constexpr uint32_t kOverflowBits = kMaxBits + (1u << (kDroppedBits - 1)) + ((kMaxCode & 1u) ? 0u : 1u);
  // 2^(23 + 1 - bias - mantissa bits): the FP32 whose ulp is the smallest subnormal, so that adding it rounds a
  // subnormal-range value to whole subnormal steps.
  static constexpr uint32_t kSubnormalAnchorBits = static_cast<uint32_t>(127 + 24 - kBias - kMantissaBits) << 23;
};

template <Fp8Format F>
inline uint8_t float_to_fp8_bits(float value, Fp8Overflow overflow) {
  using S = Fp8Spec<F>;
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: the format's quiet NaN, with the top payload bits it has room for
    return sign | static_cast<uint8_t>(S::kNanCode | ((magnitude >> S::kDroppedBits) & S::kMantissaMask));
  if (overflow == Fp8Overflow::Saturate)
    magnitude = std::min(magnitude, S::kMaxBits);
  else if (magnitude >= S::kOverflowBits)
    return sign | static_cast<uint8_t>(S::kOverflowCode);
  if (magnitude >= S::kMinNormalBits) {
    const uint32_t odd = (magnitude >> S::kDroppedBits) & 1u;
    // Re-bias the exponent and round the dropped bits to nearest even; a carry moves into the exponent.
    return sign |
           static_cast<uint8_t>((magnitude - S::kRebias + (1u << (S::kDroppedBits - 1)) - 1u + odd) >> S::kDroppedBits);
  }
  // Subnormal or zero: the FPU rounds the sum to the anchor's ulp, the smallest subnormal, to nearest even.
  const float anchored = std::bit_cast<float>(magnitude) + std::bit_cast<float>(S::kSubnormalAnchorBits);
  return sign | static_cast<uint8_t>(std::bit_cast<uint32_t>(anchored) - S::kSubnormalAnchorBits);
}

inline float e4m3_bits_to_float(uint8_t e4m3) {
  const uint32_t sign = static_cast<uint32_t>(e4m3 & 0x80u) << 24;
  const uint32_t exponent = (e4m3 >> 3) & 0xfu;
  const uint32_t mantissa = e4m3 & 0x7u;
  if (exponent == 0xf && mantissa == 0x7) return std::bit_cast<float>(sign | 0x7fc00000u);  // the NaN
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-9, exact in float
    const float magnitude = static_cast<float>(mantissa) * kE4M3MinSubnormal;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

inline float e5m2_bits_to_float(uint8_t e5m2) { return half_bits_to_float(static_cast<uint16_t>(e5m2 << 8)); }

inline uint8_t float_to_e4m3_bits(float value, Fp8Overflow overflow = Fp8Overflow::Saturate) {
  return float_to_fp8_bits<Fp8Format::E4M3>(value, overflow);
}
inline uint8_t float_to_e5m2_bits(float value, Fp8Overflow overflow = Fp8Overflow::Saturate) {
  return float_to_fp8_bits<Fp8Format::E5M2>(value, overflow);
}

// The same for a format named at run time.
inline uint8_t float_to_fp8_bits(Fp8Format format, float value, Fp8Overflow overflow = Fp8Overflow::Saturate) {
  return format == Fp8Format::E4M3 ? float_to_e4m3_bits(value, overflow) : float_to_e5m2_bits(value, overflow);
}
inline float fp8_bits_to_float(Fp8Format format, uint8_t bits) {
  return format == Fp8Format::E4M3 ? e4m3_bits_to_float(bits) : e5m2_bits_to_float(bits);
}

// Rounds a float to the nearest value the format holds (what storing it there would keep).
inline float round_to_fp8(Fp8Format format, float value, Fp8Overflow overflow = Fp8Overflow::Saturate) {
  return fp8_bits_to_float(format, float_to_fp8_bits(format, value, overflow));
}

}  // namespace ampwb
