// The FP8 bulk conversions (core/convert8.h) on every SIMD path this CPU has, each forced in turn with the others
// off: every FP32 bit pattern rounds to the float64 reference's code (tests/fp8_reference.h), every code widens to
// the scalar path's bits, and rounding in place equals rounding then widening.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/convert8.h"
#include "core/fp8.h"
#include "core/rng.h"
#include "core/simd.h"
#include "fp8_reference.h"
#include "simd_limit.h"

namespace ampwb {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::E4M3, Fp8Format::E5M2};
constexpr Fp8Overflow kOverflows[] = {Fp8Overflow::Saturate, Fp8Overflow::NonFinite};

using test::SimdLimit;

std::string where(SimdLevel level, Fp8Format f, Fp8Overflow o, uint32_t input_bits) {
  char text[112];
  std::snprintf(text, sizeof text, "%s path, %s, %s, input 0x%08x", simd_level_name(level), fp8_format_name(f),
                fp8_overflow_name(o), input_bits);
  return text;
}

// Floats around every FP8 rounding boundary (each midpoint and the FP32 values either side), every FP8 value, FP32
// subnormals, infinities, NaNs with payloads and random bit patterns, both signs; an odd count, so that every vector
// path also runs its scalar tail.
std::vector<float> boundary_floats() {
  std::vector<float> v;
  for (Fp8Format f : kFormats) {
    const test::Fp8Ladder ladder = test::fp8_ladder(f);
    for (size_t i = 0; i + 1 < ladder.values.size(); ++i) {
      const auto mid = static_cast<float>((ladder.values[i] + ladder.values[i + 1]) / 2);
      for (float x :
           {static_cast<float>(ladder.values[i]), std::nextafter(mid, 0.0f), mid, std::nextafter(mid, 1e30f)}) {
        v.push_back(x);
        v.push_back(-x);
      }
    }
  }
  for (uint32_t bits :
       {0x1u, 0x400000u, 0x7fffffu, 0x7f800000u, 0x7f800001u, 0x7fa00000u, 0x7fc00000u, 0x7fffffffu, 0x7f7fffffu}) {
    v.push_back(std::bit_cast<float>(bits));
    v.push_back(std::bit_cast<float>(bits | 0x80000000u));
  }
  Rng rng(8);
  for (int i = 0; i < 100001; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng.next_u64())));
  if (v.size() % 2 == 0) v.push_back(1.0f);
  return v;
}

TEST(Fp8SimdConversions, EveryPathRoundsBoundariesLikeTheScalarPath) {
  const std::vector<float> in = boundary_floats();
  const auto n = static_cast<int64_t>(in.size());
  for (Fp8Format f : kFormats)
    for (Fp8Overflow o : kOverflows) {
      std::vector<uint8_t> want(in.size());
      for (size_t i = 0; i < in.size(); ++i) want[i] = float_to_fp8_bits(f, in[i], o);
      for (SimdLevel level : test::simd_levels_here()) {
        SimdLimit limit(level);
        ASSERT_EQ(simd_level(), level);
        for (int threads : {1, 2}) {
          std::vector<uint8_t> got(in.size());
          round_to_fp8(f, in.data(), got.data(), n, o, threads);
          for (size_t i = 0; i < in.size(); ++i)
            ASSERT_EQ(got[i], want[i]) << where(level, f, o, std::bit_cast<uint32_t>(in[i])) << ", " << threads
                                       << " threads";
        }
      }
    }
}

TEST(Fp8SimdConversions, EveryPathWidensEveryCodeExactly) {
  std::vector<uint8_t> codes(256 * 5 + 13);  // every code at every offset within a vector, and a tail
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7 + i / 256);
  for (Fp8Format f : kFormats)
    for (SimdLevel level : test::simd_levels_here()) {
      SimdLimit limit(level);
      std::vector<float> got(codes.size());
      widen_fp8(f, codes.data(), got.data(), static_cast<int64_t>(codes.size()), 2);
      for (size_t i = 0; i < codes.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(fp8_bits_to_float(f, codes[i])))
            << simd_level_name(level) << " path, " << fp8_format_name(f) << " code 0x" << std::hex << int{codes[i]};
        const double defined = test::fp8_defined_value(f, codes[i]);
        if (!std::isnan(defined)) {
          ASSERT_EQ(static_cast<double>(got[i]), defined);
        }
      }
    }
}

// Rounding in place through FP8 leaves the bits of rounding to it, then widening back.
TEST(Fp8SimdConversions, RoundingThroughFp8InPlaceEqualsNarrowingThenWidening) {
  const std::vector<float> in = boundary_floats();
  const auto n = static_cast<int64_t>(in.size());
  for (SimdLevel level : test::simd_levels_here()) {
    SimdLimit limit(level);
    for (Fp8Format f : kFormats)
      for (Fp8Overflow o : kOverflows)
        for (int threads : {1, 2}) {
          std::vector<uint8_t> narrow(in.size());
          std::vector<float> want(in.size()), got = in;
          round_to_fp8(f, in.data(), narrow.data(), n, o);
          widen_fp8(f, narrow.data(), want.data(), n);
          round_through_fp8(f, got.data(), n, o, threads);
          for (size_t i = 0; i < in.size(); ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                << where(level, f, o, std::bit_cast<uint32_t>(in[i])) << ", " << threads << " threads";
        }
  }
}

// The codes of one block of consecutive FP32 bit patterns (one sign) that differ from the reference's: runs of
// equal expected codes compared in one loop each, so that the check costs less than the conversion.
int64_t mismatches_in_block(Fp8Format f, const test::Fp8Steps& steps, uint32_t begin, const uint8_t* out,
                            uint32_t count, uint32_t* first_mismatch) {
  const auto sign = static_cast<uint8_t>((begin >> 24) & 0x80u);
  test::Fp8StepWalker walker(steps, begin & 0x7fffffffu);
  int64_t mismatches = 0;
  uint32_t j = 0;
  while (j < count) {
    const uint32_t magnitude = (begin + j) & 0x7fffffffu;
    uint32_t run_end = count;
    uint8_t want = 0;
    if (magnitude > 0x7f800000u) {  // NaNs to the block's end, each with its own payload bit
      for (; j < count; ++j)
        if (out[j] != test::fp8_nan_code(f, begin + j) && mismatches++ == 0) *first_mismatch = begin + j;
      break;
    }
    want = static_cast<uint8_t>(walker.code(magnitude) | sign);
    const uint64_t change = std::min<uint64_t>(walker.next_change(), 0x7f800001u);  // the NaNs start a run too
    run_end = static_cast<uint32_t>(std::min<uint64_t>(count, j + (change - magnitude)));
    int64_t bad = 0;
    for (uint32_t k = j; k < run_end; ++k) bad += out[k] != want;
    if (bad && mismatches == 0)
      for (uint32_t k = j; k < run_end; ++k)
        if (out[k] != want) {
          *first_mismatch = begin + k;
          break;
        }
    mismatches += bad;
    j = run_end;
  }
  return mismatches;
}

// Runs of consecutive FP32 bit patterns, each within one sign.
struct PatternRun {
  uint32_t begin = 0, count = 0;
};

// Every one of the 2^32 patterns.
std::vector<PatternRun> every_pattern() {
  std::vector<PatternRun> runs;
  for (uint64_t begin = 0; begin < (uint64_t{1} << 32); begin += 1 << 16)
    runs.push_back({static_cast<uint32_t>(begin), 1u << 16});
  return runs;
}

// A dense stratified sample: in each of the 512 binades (every FP32 exponent, both signs, subnormals, infinities
// and NaNs included) 16 evenly spread runs of 2048 consecutive patterns, which take every combination of the low 11
// bits; and the 4096 patterns around every rounding step of both formats and both rules, both signs.
std::vector<PatternRun> stratified_patterns() {
  std::vector<PatternRun> runs;
  for (uint32_t binade = 0; binade < 512; ++binade)
    for (uint32_t k = 0; k < 16; ++k) runs.push_back({(binade << 23) | (k << 19) | (k * 0x9e37u & 0x7f800u), 2048});
  for (Fp8Format f : kFormats)
    for (Fp8Overflow o : kOverflows)
      for (uint32_t first : test::fp8_steps(f, o).first_bits)
        for (uint32_t sign : {0u, 0x80000000u}) runs.push_back({sign | (first - 2048), 4096});
  return runs;
}

// The patterns of `runs` whose codes on the path in force differ from the reference's, and the first of them.
int64_t mismatches_on_runs(Fp8Format f, Fp8Overflow o, const std::vector<PatternRun>& runs, uint32_t* first_mismatch) {
  const test::Fp8Steps steps = test::fp8_steps(f, o);
  int64_t mismatches = 0;
#pragma omp parallel reduction(+ : mismatches)
  {
    std::vector<float> in;
    std::vector<uint8_t> out;
#pragma omp for schedule(dynamic, 16)
    for (size_t r = 0; r < runs.size(); ++r) {
      const PatternRun run = runs[r];
      in.resize(run.count);
      out.resize(run.count);
      for (uint32_t j = 0; j < run.count; ++j) in[j] = std::bit_cast<float>(run.begin + j);
      round_to_fp8(f, in.data(), out.data(), run.count, o);
      uint32_t first = 0;
      const int64_t bad = mismatches_in_block(f, steps, run.begin, out.data(), run.count, &first);
      if (bad && mismatches == 0) {
#pragma omp critical
        *first_mismatch = first;
      }
      mismatches += bad;
    }
  }
  return mismatches;
}

// FP32 bit patterns through every path (the scalar one too, through the same bulk call), both formats and both
// overflow rules, against the float64 reference's steps (test_fp8.cpp checks those against the search-based
// reference on both sides of every step). All 2^32 patterns take about 10 s per path on two cores: the suite runs
// them as a test of their own (fp8.every_float32_pattern, AMPWB_FP8_EVERY_PATTERN=1); unset, a dense stratified
// sample.
TEST(Fp8SimdConversions, EveryPathRoundsFloatPatternsAsTheReference) {
  const char* every = std::getenv("AMPWB_FP8_EVERY_PATTERN");
  const bool exhaustive = every && std::string(every) == "1";
  const std::vector<PatternRun> runs = exhaustive ? every_pattern() : stratified_patterns();
  uint64_t patterns = 0;
  for (const PatternRun& run : runs) {
    ASSERT_EQ(run.begin >> 31, (run.begin + run.count - 1) >> 31) << "a run within one sign";
    patterns += run.count;
  }
  EXPECT_GE(patterns, exhaustive ? uint64_t{1} << 32 : uint64_t{16'000'000});
  for (SimdLevel level : test::simd_levels_here()) {
    SimdLimit limit(level);
    for (Fp8Format f : kFormats)
      for (Fp8Overflow o : kOverflows) {
        uint32_t first_mismatch = 0;
        EXPECT_EQ(mismatches_on_runs(f, o, runs, &first_mismatch), 0)
            << "first at " << where(level, f, o, first_mismatch);
      }
  }
}

}  // namespace
}  // namespace ampwb
