// FP8 E4M3 and E5M2 (core/fp8.h) against their definition in float64 (tests/fp8_reference.h): every code's value,
// every rounding boundary with the floats either side, subnormals, saturation and overflow, NaN and infinity. (All
// 2^32 FP32 patterns through every path, the scalar one included: test_fp8_simd.cpp.)
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "core/fp8.h"
#include "fp8_reference.h"

namespace ampwb {
namespace {

using test::fp8_defined_value;
using test::fp8_ladder;
using test::fp8_nan_code;
using test::fp8_reference_code;

constexpr Fp8Format kFormats[] = {Fp8Format::E4M3, Fp8Format::E5M2};
constexpr Fp8Overflow kOverflows[] = {Fp8Overflow::Saturate, Fp8Overflow::NonFinite};

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }

// What a failure names: the format, the overflow rule and the input's bits.
std::string where(Fp8Format f, Fp8Overflow o, float x) {
  char text[96];
  std::snprintf(text, sizeof text, "%s, %s, input 0x%08x (%a)", fp8_format_name(f), fp8_overflow_name(o), bits_of(x),
                static_cast<double>(x));
  return text;
}

TEST(Fp8Format, EveryCodeDecodesToTheValueItsDefinitionGives) {
  for (Fp8Format f : kFormats)
    for (int code = 0; code < 256; ++code) {
      const auto c = static_cast<uint8_t>(code);
      const double want = fp8_defined_value(f, c);
      const float got = fp8_bits_to_float(f, c);
      const float got_direct = f == Fp8Format::E4M3 ? e4m3_bits_to_float(c) : e5m2_bits_to_float(c);
      EXPECT_EQ(bits_of(got), bits_of(got_direct));
      EXPECT_EQ(std::signbit(got), (code & 0x80) != 0) << fp8_format_name(f) << " code 0x" << std::hex << code;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << fp8_format_name(f) << " code 0x" << std::hex << code;
        EXPECT_TRUE(bits_of(got) & 0x00400000u) << "a quiet NaN: " << fp8_format_name(f) << " 0x" << std::hex << code;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << fp8_format_name(f) << " code 0x" << std::hex << code;
      }
    }
}

TEST(Fp8Format, TheDefinitionsLimitsAndSpecialCodes) {
  // E4M3: one NaN per sign, no infinity; E5M2: two infinities, six NaNs.
  int e4m3_nans = 0, e5m2_nans = 0, e5m2_infinities = 0;
  for (int code = 0; code < 256; ++code) {
    e4m3_nans += std::isnan(fp8_defined_value(Fp8Format::E4M3, static_cast<uint8_t>(code)));
    e5m2_nans += std::isnan(fp8_defined_value(Fp8Format::E5M2, static_cast<uint8_t>(code)));
    e5m2_infinities += std::isinf(fp8_defined_value(Fp8Format::E5M2, static_cast<uint8_t>(code)));
  }
  EXPECT_EQ(e4m3_nans, 2);
  EXPECT_EQ(e5m2_nans, 6);
  EXPECT_EQ(e5m2_infinities, 2);
  EXPECT_TRUE(std::isnan(e4m3_bits_to_float(0x7f)) && std::isnan(e4m3_bits_to_float(0xff)));
  EXPECT_EQ(e5m2_bits_to_float(0x7c), std::numeric_limits<float>::infinity());
  EXPECT_EQ(e5m2_bits_to_float(0xfc), -std::numeric_limits<float>::infinity());

  EXPECT_EQ(fp8_defined_value(Fp8Format::E4M3, 0x7e), 448.0);
  EXPECT_EQ(fp8_defined_value(Fp8Format::E4M3, 0x08), 0x1p-6);
  EXPECT_EQ(fp8_defined_value(Fp8Format::E4M3, 0x01), 0x1p-9);
  EXPECT_EQ(fp8_defined_value(Fp8Format::E5M2, 0x7b), 57344.0);
  EXPECT_EQ(fp8_defined_value(Fp8Format::E5M2, 0x04), 0x1p-14);
  EXPECT_EQ(fp8_defined_value(Fp8Format::E5M2, 0x01), 0x1p-16);
  EXPECT_EQ(fp8_defined_value(Fp8Format::E4M3, 0x38), 1.0);
  EXPECT_EQ(fp8_defined_value(Fp8Format::E5M2, 0x3c), 1.0);

  EXPECT_EQ(static_cast<double>(kE4M3Max), fp8_defined_value(Fp8Format::E4M3, 0x7e));
  EXPECT_EQ(static_cast<double>(kE4M3MinNormal), fp8_defined_value(Fp8Format::E4M3, 0x08));
  EXPECT_EQ(static_cast<double>(kE4M3MinSubnormal), fp8_defined_value(Fp8Format::E4M3, 0x01));
  EXPECT_EQ(static_cast<double>(kE5M2Max), fp8_defined_value(Fp8Format::E5M2, 0x7b));
  EXPECT_EQ(static_cast<double>(kE5M2MinNormal), fp8_defined_value(Fp8Format::E5M2, 0x04));
  EXPECT_EQ(static_cast<double>(kE5M2MinSubnormal), fp8_defined_value(Fp8Format::E5M2, 0x01));
  EXPECT_EQ(fp8_max(Fp8Format::E4M3), kE4M3Max);
  EXPECT_EQ(fp8_max(Fp8Format::E5M2), kE5M2Max);

  // The FP32 thresholds the conversions compare against are the definition's.
  EXPECT_EQ(float_of(Fp8Spec<Fp8Format::E4M3>::kMaxBits), 448.0f);
  EXPECT_EQ(float_of(Fp8Spec<Fp8Format::E4M3>::kMinNormalBits), 0x1p-6f);
  EXPECT_EQ(float_of(Fp8Spec<Fp8Format::E4M3>::kOverflowBits), std::nextafter(464.0f, 1000.0f));
  EXPECT_EQ(float_of(Fp8Spec<Fp8Format::E5M2>::kMaxBits), 57344.0f);
  EXPECT_EQ(float_of(Fp8Spec<Fp8Format::E5M2>::kMinNormalBits), 0x1p-14f);
  EXPECT_EQ(float_of(Fp8Spec<Fp8Format::E5M2>::kOverflowBits), 61440.0f);
}

TEST(Fp8Format, EveryCodeRoundTrips) {
  for (Fp8Format f : kFormats)
    for (Fp8Overflow o : kOverflows)
      for (int code = 0; code < 256; ++code) {
        const auto c = static_cast<uint8_t>(code);
        const float value = fp8_bits_to_float(f, c);
        const uint8_t back = float_to_fp8_bits(f, value, o);
        if (std::isnan(value))
          EXPECT_EQ(back, f == Fp8Format::E4M3 ? c : (c | 0x02))
              << "NaN keeps its sign, quieted: " << where(f, o, value);
        else if (std::isinf(value) && o == Fp8Overflow::Saturate)
          EXPECT_EQ(back, (c & 0x80) | 0x7b) << "infinity saturates: " << where(f, o, value);
        else
          EXPECT_EQ(back, c) << where(f, o, value);
        EXPECT_EQ(bits_of(round_to_fp8(f, value, o)), bits_of(fp8_bits_to_float(f, back)));
      }
}

// Between every two neighbours on the ladder (zero and the smallest subnormal, every subnormal and normal step, max
// and the step beyond it): the midpoint, which must tie to the even code, and the FP32 values either side of it.
TEST(Fp8Rounding, EveryBoundaryAndItsNeighboursRoundsAsTheReference) {
  int ties_down = 0, ties_up = 0;
  for (Fp8Format f : kFormats) {
    const test::Fp8Ladder ladder = fp8_ladder(f);
    for (size_t i = 0; i + 1 < ladder.values.size(); ++i) {
      const double midpoint = (ladder.values[i] + ladder.values[i + 1]) / 2;
      const float mid = static_cast<float>(midpoint);
      ASSERT_EQ(static_cast<double>(mid), midpoint) << "every FP8 midpoint is an FP32";
      for (Fp8Overflow o : kOverflows)
        for (float sign : {1.0f, -1.0f})
          for (float x : {std::nextafter(mid, 0.0f), mid, std::nextafter(mid, 1e30f)}) {
            const float input = sign * x;
            const uint8_t want = fp8_reference_code(f, input, o);
            ASSERT_EQ(float_to_fp8_bits(f, input, o), want) << where(f, o, input);
            if (x == mid && o == Fp8Overflow::NonFinite && sign > 0) ((want & 1) == (i & 1) ? ties_down : ties_up)++;
          }
    }
  }
  EXPECT_GT(ties_down, 100);  // the boundaries alternate between going down and going up
  EXPECT_GT(ties_up, 100);
}

TEST(Fp8Rounding, KnownTiesSubnormalsAndThresholds) {
  using enum Fp8Overflow;
  // Ties to even: 1 + 2^-4 lies between E4M3's 1 (0x38) and 1.125 (0x39); 1 + 3 * 2^-4 between 0x39 and 1.25 (0x3a).
  EXPECT_EQ(float_to_e4m3_bits(1.0f + 0x1p-4f), 0x38);
  EXPECT_EQ(float_to_e4m3_bits(1.0f + 0x3p-4f), 0x3a);
  EXPECT_EQ(float_to_e5m2_bits(1.0f + 0x1p-3f), 0x3c);
  EXPECT_EQ(float_to_e5m2_bits(1.0f + 0x3p-3f), 0x3e);
  // Subnormals: half the smallest ties to zero, 1.5 times it to 2 steps; the largest subnormal rounds up to the
  // smallest normal when just under it.
  EXPECT_EQ(float_to_e4m3_bits(0x1p-10f), 0x00);
  EXPECT_EQ(float_to_e4m3_bits(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3_bits(0x3p-10f), 0x02);
  EXPECT_EQ(float_to_e4m3_bits(-0x1p-10f), 0x80);
  EXPECT_EQ(float_to_e4m3_bits(std::nextafter(0x1p-6f, 0.0f)), 0x08);
  EXPECT_EQ(float_to_e5m2_bits(0x1p-17f), 0x00);
  EXPECT_EQ(float_to_e5m2_bits(0x3p-17f), 0x02);
  EXPECT_EQ(float_to_e5m2_bits(0x7p-17f), 0x04);  // 3.5 steps: tie to the even 4, the smallest normal
  // Every FP32 subnormal is far below half of either format's smallest subnormal: zero, with its sign.
  for (uint32_t m = 1; m < 0x00800000u; m += 997)
    for (Fp8Format f : kFormats) {
      ASSERT_EQ(float_to_fp8_bits(f, float_of(m)), 0x00);
      ASSERT_EQ(float_to_fp8_bits(f, float_of(m | 0x80000000u)), 0x80);
    }
  // The saturation threshold: 464 ties to E4M3's 448; above it NonFinite gives NaN, Saturate 448.
  EXPECT_EQ(float_to_e4m3_bits(464.0f, NonFinite), 0x7e);
  EXPECT_EQ(float_to_e4m3_bits(std::nextafter(464.0f, 1e9f), NonFinite), 0x7f);
  EXPECT_EQ(float_to_e4m3_bits(std::nextafter(464.0f, 1e9f), Saturate), 0x7e);
  EXPECT_EQ(float_to_e4m3_bits(-1e9f, NonFinite), 0xff);
  EXPECT_EQ(float_to_e4m3_bits(-1e9f, Saturate), 0xfe);
  // E5M2: 61440 ties to infinity (57344's mantissa is odd), as FP16's 65520 does; just under it stays 57344.
  EXPECT_EQ(float_to_e5m2_bits(61440.0f, NonFinite), 0x7c);
  EXPECT_EQ(float_to_e5m2_bits(std::nextafter(61440.0f, 0.0f), NonFinite), 0x7b);
  EXPECT_EQ(float_to_e5m2_bits(61440.0f, Saturate), 0x7b);
  EXPECT_EQ(float_to_e5m2_bits(-1e30f, Saturate), 0xfb);
}

TEST(Fp8Rounding, InfinitiesSaturateOrStayNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_e4m3_bits(inf, Fp8Overflow::Saturate), 0x7e);
  EXPECT_EQ(float_to_e4m3_bits(-inf, Fp8Overflow::Saturate), 0xfe);
  EXPECT_EQ(float_to_e4m3_bits(inf, Fp8Overflow::NonFinite), 0x7f);  // E4M3 has no infinity: NaN
  EXPECT_EQ(float_to_e4m3_bits(-inf, Fp8Overflow::NonFinite), 0xff);
  EXPECT_EQ(float_to_e5m2_bits(inf, Fp8Overflow::Saturate), 0x7b);
  EXPECT_EQ(float_to_e5m2_bits(-inf, Fp8Overflow::Saturate), 0xfb);
  EXPECT_EQ(float_to_e5m2_bits(inf, Fp8Overflow::NonFinite), 0x7c);
  EXPECT_EQ(float_to_e5m2_bits(-inf, Fp8Overflow::NonFinite), 0xfc);
}

TEST(Fp8Rounding, NaNsStayNaNWithTheirSign) {
  for (uint32_t payload : {0x1u, 0x200000u, 0x400000u, 0x600000u, 0x7fffffu, 0x123456u})
    for (uint32_t sign : {0u, 0x80000000u})
      for (Fp8Format f : kFormats)
        for (Fp8Overflow o : kOverflows) {
          const uint32_t bits = sign | 0x7f800000u | payload;
          const uint8_t code = float_to_fp8_bits(f, float_of(bits), o);
          EXPECT_EQ(code, fp8_nan_code(f, bits)) << where(f, o, float_of(bits));
          EXPECT_TRUE(std::isnan(fp8_bits_to_float(f, code)));
        }
  EXPECT_EQ(float_to_e5m2_bits(float_of(0x7f800001u)), 0x7e);  // a signalling NaN, quieted
  EXPECT_EQ(float_to_e5m2_bits(float_of(0xffe00000u)), 0xff);  // the payload bit below the quiet bit kept
}

// The reference's steps over FP32 magnitudes, which the sweeps over all 2^32 FP32 patterns (test_fp8_simd.cpp, every
// path, the scalar one included) compare against, agree with the search-based reference on both sides of each step.
TEST(Fp8Rounding, TheSweepsStepsAreTheReferences) {
  for (Fp8Format f : kFormats)
    for (Fp8Overflow o : kOverflows) {
      const test::Fp8Steps steps = test::fp8_steps(f, o);
      EXPECT_EQ(steps.first_bits.size(),
                static_cast<size_t>(o == Fp8Overflow::Saturate ? 0 : 1) + (f == Fp8Format::E4M3 ? 0x7e : 0x7b));
      for (uint32_t first : steps.first_bits) {
        const uint8_t at = fp8_reference_code(f, float_of(first), o),
                      below = fp8_reference_code(f, float_of(first - 1), o);
        ASSERT_NE(at, below) << where(f, o, float_of(first));
        ASSERT_EQ(test::Fp8StepWalker(steps, first).code(first), at) << where(f, o, float_of(first));
        ASSERT_EQ(test::Fp8StepWalker(steps, first - 1).code(first - 1), below) << where(f, o, float_of(first - 1));
        ASSERT_EQ(float_to_fp8_bits(f, float_of(first), o), at) << where(f, o, float_of(first));
        ASSERT_EQ(float_to_fp8_bits(f, float_of(first - 1), o), below) << where(f, o, float_of(first - 1));
      }
      const float inf = std::numeric_limits<float>::infinity();
      EXPECT_EQ(test::Fp8StepWalker(steps, 0).code(bits_of(inf)), fp8_reference_code(f, inf, o));
    }
}

// Every NaN payload, both signs, both rules.
TEST(Fp8Rounding, EveryNaNPatternStaysNaN) {
  for (Fp8Format f : kFormats)
    for (Fp8Overflow o : kOverflows)
      for (uint32_t m = 0x7f800001u; m <= 0x7fffffffu && m > 0x7f800000u; ++m)
        for (uint32_t bits : {m, m | 0x80000000u})
          if (float_to_fp8_bits(f, float_of(bits), o) != fp8_nan_code(f, bits))
            FAIL() << "NaN " << where(f, o, float_of(bits));
}

}  // namespace
}  // namespace ampwb
