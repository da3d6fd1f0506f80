// float_as_decimal: a float printed as its shortest decimal, narrowing back to itself.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "core/float_decimal.h"

namespace ampwb {
namespace {

TEST(FloatAsDecimal, PrintsAsTheFloatDoesAndNarrowsBackToIt) {
  EXPECT_EQ(float_as_decimal(0.9f), 0.9);
  EXPECT_EQ(float_as_decimal(0.05f), 0.05);
  EXPECT_EQ(float_as_decimal(1e-8f), 1e-8);
  EXPECT_EQ(float_as_decimal(65504.0f), 65504.0);
  EXPECT_EQ(float_as_decimal(-0.0f), 0.0);
  EXPECT_TRUE(std::signbit(float_as_decimal(-0.0f)));
  EXPECT_TRUE(std::isnan(float_as_decimal(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(float_as_decimal(-std::numeric_limits<float>::infinity()), -std::numeric_limits<double>::infinity());
  // Every float, normal or not, comes back as itself: 2^20 random bit patterns and the extremes.
  std::mt19937 bits(7);
  for (int i = 0; i < (1 << 20); ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(bits()));
    if (!std::isfinite(f)) continue;
    ASSERT_EQ(static_cast<float>(float_as_decimal(f)), f) << std::bit_cast<uint32_t>(f);
  }
  for (float f : {std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::lowest()})
    EXPECT_EQ(static_cast<float>(float_as_decimal(f)), f) << f;
}

}  // namespace
}  // namespace ampwb
