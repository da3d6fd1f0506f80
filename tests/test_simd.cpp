// The engine's own vector code: every SIMD path this CPU has, each forced in turn with the others off, gives the
// scalar path's bits (core/half.h) for every 16-bit value and for floats around every rounding boundary.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "core/convert16.h"
#include "core/half.h"
#include "core/rng.h"
#include "core/simd.h"
#include "simd_limit.h"

namespace ampwb {
namespace {

using test::SimdLimit;

// Floats that exercise both roundings: every 16-bit value widened, the midpoints between neighbours (ties to
// even) and one FP32 ulp either side, FP32 subnormals, infinities, NaNs with payloads, and random magnitudes.
// An odd count, so every vector path also runs its scalar tail.
std::vector<float> boundary_floats() {
  std::vector<float> v;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    for (const uint32_t f : {bits << 16, static_cast<uint32_t>(std::bit_cast<uint32_t>(half_bits_to_float(bits)))}) {
      v.push_back(std::bit_cast<float>(f));
      for (const uint32_t below : {0x7fffu, 0x8000u, 0x8001u, 0x0fffu, 0x1000u, 0x1001u}) {
        v.push_back(std::bit_cast<float>(f + below));  // BF16 (16 dropped bits) and FP16 (13 dropped bits) ties
        v.push_back(std::bit_cast<float>(f - below));
      }
    }
  }
  for (uint32_t sub : {1u, 2u, 0x7fffffu, 0x400000u}) v.push_back(std::bit_cast<float>(sub));
  Rng rng(1);
  for (int i = 0; i < 100001; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng.next_u64())));
  if (v.size() % 2 == 0) v.push_back(1.0f);
  return v;
}

void expect_bits_equal(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want, const char* what,
                       SimdLevel level, const std::vector<float>& input) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << what << " on the " << simd_level_name(level) << " path, input bits 0x" << std::hex
                               << std::bit_cast<uint32_t>(input[i]);
}

TEST(SimdConversions, EveryPathRoundsFloatsLikeTheScalarReference) {
  const std::vector<float> in = boundary_floats();
  std::vector<uint16_t> want_f16(in.size()), want_bf16(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    want_f16[i] = float_to_half_bits(in[i]);
    want_bf16[i] = float_to_bfloat16_bits(in[i]);
  }
  for (SimdLevel level : test::simd_levels_here()) {
    SimdLimit limit(level);
    ASSERT_EQ(simd_level(), level);
    for (int threads : {1, 2}) {
      std::vector<uint16_t> f16(in.size()), bf16(in.size());
      f32_to_f16(in.data(), f16.data(), static_cast<int64_t>(in.size()), threads);
      f32_to_bf16(in.data(), bf16.data(), static_cast<int64_t>(in.size()), threads);
      expect_bits_equal(f16, want_f16, "f32 -> f16", level, in);
      expect_bits_equal(bf16, want_bf16, "f32 -> bf16", level, in);
    }
  }
}

TEST(SimdConversions, EveryPathWidensEverySixteenBitValueExactly) {
  std::vector<uint16_t> all(0x10000 + 7);  // every pattern, and a tail
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (SimdLevel level : test::simd_levels_here()) {
    SimdLimit limit(level);
    std::vector<float> from_f16(all.size()), from_bf16(all.size());
    f16_to_f32(all.data(), from_f16.data(), static_cast<int64_t>(all.size()), 2);
    bf16_to_f32(all.data(), from_bf16.data(), static_cast<int64_t>(all.size()), 2);
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(from_f16[i]), std::bit_cast<uint32_t>(half_bits_to_float(all[i])))
          << "f16 0x" << std::hex << all[i] << " on the " << simd_level_name(level) << " path";
      ASSERT_EQ(std::bit_cast<uint32_t>(from_bf16[i]), std::bit_cast<uint32_t>(bfloat16_bits_to_float(all[i])))
          << "bf16 0x" << std::hex << all[i] << " on the " << simd_level_name(level) << " path";
    }
  }
}

// Rounding in place through a 16-bit type leaves the bits of rounding to it, then widening back.
TEST(SimdConversions, RoundingThroughSixteenBitsInPlaceEqualsNarrowingThenWidening) {
  const std::vector<float> in = boundary_floats();
  const auto n = static_cast<int64_t>(in.size());
  for (SimdLevel level : test::simd_levels_here()) {
    SimdLimit limit(level);
    for (DType dtype : {DType::F16, DType::BF16})
      for (int threads : {1, 2}) {
        std::vector<uint16_t> narrow(in.size());
        std::vector<float> want(in.size()), got = in;
        round_to_16bit(dtype, in.data(), narrow.data(), n);
        widen_16bit(dtype, narrow.data(), want.data(), n);
        round_through_16bit(dtype, got.data(), n, threads);
        for (size_t i = 0; i < in.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << dtype_name(dtype) << " on the " << simd_level_name(level) << " path, " << threads
              << " threads, input bits 0x" << std::hex << std::bit_cast<uint32_t>(in[i]);
      }
  }
}

TEST(SimdConversions, TheCapLowersTheLevelAndNeverRaisesIt) {
  const SimdLevel here = simd_level();
  {
    SimdLimit limit(SimdLevel::Scalar);
    EXPECT_EQ(simd_level(), SimdLevel::Scalar);
  }
  EXPECT_EQ(simd_level(), here);
  SimdLimit limit(SimdLevel::Avx512);
  EXPECT_LE(simd_level(), detected_simd_level());
}

}  // namespace
}  // namespace ampwb
