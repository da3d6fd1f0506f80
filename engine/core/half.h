// IEEE binary16 (FP16) and bfloat16 (BF16) storage types with round-to-nearest-even conversion.
//
// FP16: 1 sign, 5 exponent, 10 mantissa bits; largest finite 65504, smallest normal 2^-14, smallest subnormal
// 2^-24; floats at or above 65520 round to infinity. BF16: 1/8/7 bits, FP32's range. NaNs stay NaN (quieted, sign and
// upper payload kept), as the x86 F16C instructions do; subnormals are kept, never flushed.
#pragma once

#include <bit>
#include <cstdint>

namespace ampwb {

inline uint16_t float_to_half_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: quiet it, keep the top payload bits
    return sign | 0x7e00u | static_cast<uint16_t>((magnitude >> 13) & 0x3ffu);
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (and inf) rounds to inf
  if (magnitude >= 0x38800000u) {                       // a normal half (>= 2^-14)
    const uint32_t odd = (magnitude >> 13) & 1u;
    // Re-bias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
    return sign | static_cast<uint16_t>((magnitude - 0x38000000u + 0xfffu + odd) >> 13);
  }
  // Subnormal half or zero: adding 0.5f puts the value's 2^-24 units into the low mantissa bits, rounded to
  // nearest even by the FPU (0.5 has an ulp of exactly 2^-24).
  const float shifted = std::bit_cast<float>(magnitude) + 0.5f;
  return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3f000000u);
}

inline float half_bits_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) {  // inf, or NaN (quieted)
    const uint32_t quiet = mantissa ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  const uint32_t odd = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + odd) >> 16);  // nearest even; overflow carries into inf
}

inline float bfloat16_bits_to_float(uint16_t bf16) { return std::bit_cast<float>(static_cast<uint32_t>(bf16) << 16); }

// Storage types: plain 16-bit values that convert explicitly.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float value) : bits(float_to_half_bits(value)) {}
  explicit operator float() const { return half_bits_to_float(bits); }
  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value) : bits(float_to_bfloat16_bits(value)) {}
  explicit operator float() const { return bfloat16_bits_to_float(bits); }
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

// Rounds a float to the nearest value representable in FP16 / BF16 (what storing it there would keep).
inline float round_to_half(float value) { return half_bits_to_float(float_to_half_bits(value)); }
inline float round_to_bfloat16(float value) { return bfloat16_bits_to_float(float_to_bfloat16_bits(value)); }

constexpr float kHalfMax = 65504.0f;
constexpr float kHalfMinNormal = 0x1p-14f;
constexpr float kHalfMinSubnormal = 0x1p-24f;

}  // namespace ampwb
