// FP16 and BF16 conversions: every bit pattern round-trips, and float -> half agrees with the CPU's F16C
// instructions on a sweep of ties, subnormals, the overflow threshold 65520, infinities and NaNs.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <limits>

#include "core/half.h"

namespace ampwb {
namespace {

__attribute__((target("f16c"))) uint16_t f16c_from_float(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float f16c_to_float(uint16_t h) { return _cvtsh_ss(h); }
bool has_f16c() { return __builtin_cpu_supports("f16c"); }

bool is_nan_half(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = half_bits_to_float(h);
    const uint16_t back = float_to_half_bits(f);
    if (is_nan_half(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      ASSERT_EQ(back, h | 0x0200) << "NaN keeps sign and payload, quieted: " << std::hex << bits;
    } else {
      ASSERT_EQ(back, h) << std::hex << bits;
    }
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(half_bits_to_float(0x7bff), 65504.0f);               // largest finite
  EXPECT_EQ(half_bits_to_float(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(float_to_half_bits(65519.996f), 0x7bff);             // just below the threshold rounds down
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);               // the threshold rounds to inf
  EXPECT_EQ(float_to_half_bits(-1e6f), 0xfc00);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);         // half of the smallest subnormal: tie to even 0
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.5f, -25)), 0x0001);         // above the tie rounds up
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 ulp: tie to even 2
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie between 1 and 1+2^-10: even
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
}

TEST(Half, HalfToFloatAgreesWithF16CForEveryPattern) {
  if (!has_f16c()) GTEST_SKIP() << "this CPU has no F16C";
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(half_bits_to_float(h)), std::bit_cast<uint32_t>(f16c_to_float(h)))
        << std::hex << bits;
  }
}

TEST(Half, FloatToHalfAgreesWithF16COnSweep) {
  if (!has_f16c()) GTEST_SKIP() << "this CPU has no F16C";
  int64_t checked = 0;
  auto check = [&](uint32_t bits) {
    const float f = std::bit_cast<float>(bits);
    ASSERT_EQ(float_to_half_bits(f), f16c_from_float(f)) << "float bits 0x" << std::hex << bits << " = " << f;
    ++checked;
  };
  // Every float from 2^-26 up to 2^-14 (the subnormal halves and their ties), both signs.
  for (uint32_t bits = 101u << 23; bits < 113u << 23; ++bits) {
    check(bits);
    check(bits | 0x80000000u);
  }
  // Ties and their neighbours at every half mantissa step, for every exponent (normal halves, overflow, inf/NaN).
  for (uint32_t upper = 0; upper < (1u << 19); ++upper)
    for (uint32_t low : {0x0u, 0x1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu}) check((upper << 13) | low);
  // Densely around the overflow threshold 65520 and the largest finite 65504.
  for (uint32_t bits = std::bit_cast<uint32_t>(65000.0f); bits < std::bit_cast<uint32_t>(66000.0f); ++bits) check(bits);
  // A coarse sweep of all floats.
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 7919) check(static_cast<uint32_t>(bits));
  EXPECT_GT(checked, 200'000'000 / 2);
}

// The nearest BF16 by brute force: the two candidates around the value, ties to the even one.
uint16_t bfloat16_by_search(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t down = static_cast<uint16_t>(bits >> 16), up = static_cast<uint16_t>(down + 1);
  const double x = f, lo = bfloat16_bits_to_float(down);
  const double hi =
      (up & 0x7f80) == 0x7f80 && (up & 0x7f) == 0 ? std::copysign(std::ldexp(1.0, 128), x) : bfloat16_bits_to_float(up);
  const double d_lo = std::fabs(x - lo), d_hi = std::fabs(hi - x);
  if (d_lo < d_hi) return down;
  if (d_hi < d_lo) return up;
  return (down & 1) ? up : down;
}

TEST(BFloat16, EveryBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    const float f = bfloat16_bits_to_float(b);
    const bool nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f);
    ASSERT_EQ(float_to_bfloat16_bits(f), nan ? (b | 0x40) : b) << std::hex << bits;
  }
}

TEST(BFloat16, RoundsToNearestEvenOnSweep) {
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 997) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bfloat16_bits(f), bfloat16_by_search(f)) << std::hex << bits;
  }
  for (uint32_t upper = 0; upper < 0x10000; ++upper)  // exact ties at every BF16 step
    for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u}) {
      const float f = std::bit_cast<float>((upper << 16) | low);
      if (std::isnan(f)) continue;
      ASSERT_EQ(float_to_bfloat16_bits(f), bfloat16_by_search(f)) << std::hex << upper;
    }
}

}  // namespace
}  // namespace ampwb
