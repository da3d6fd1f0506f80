// The FP8 formats as their definition gives them, in float64, for the conversion tests: the value of every code, and
// the code nearest to a value by search over those values (ties to the even code), written from the definition
// alone and sharing nothing with core/fp8.h's bit arithmetic but the enums.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/fp8.h"

namespace ampwb::test {

struct Fp8Layout {
  int exponent_bits, mantissa_bits, bias;
};
inline Fp8Layout fp8_layout(Fp8Format f) { return f == Fp8Format::E4M3 ? Fp8Layout{4, 3, 7} : Fp8Layout{5, 2, 15}; }

// (-1)^s * 2^(e - bias) * (1 + m / 2^M), or 2^(1 - bias) * m / 2^M for e = 0; E4M3 gives its all-ones code to NaN
// (no infinities), E5M2 its all-ones exponent to infinity (m = 0) and NaN, as IEEE 754 does.
inline double fp8_defined_value(Fp8Format f, uint8_t code) {
  const Fp8Layout l = fp8_layout(f);
  const int e = (code >> l.mantissa_bits) & ((1 << l.exponent_bits) - 1);
  const int m = code & ((1 << l.mantissa_bits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int all_ones = (1 << l.exponent_bits) - 1;
  if (f == Fp8Format::E4M3 && e == all_ones && m == (1 << l.mantissa_bits) - 1)
    return std::copysign(std::numeric_limits<double>::quiet_NaN(), sign);
  if (f == Fp8Format::E5M2 && e == all_ones)
    return m == 0 ? sign * std::numeric_limits<double>::infinity()
                  : std::copysign(std::numeric_limits<double>::quiet_NaN(), sign);
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), 1 - l.bias - l.mantissa_bits);
  return sign * std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -l.mantissa_bits), e - l.bias);
}

// The non-negative finite values in increasing order, their codes 0, 1, ... (increasing codes are increasing
// values), then one step more: the value rounding with an unbounded exponent would reach next (480 for E4M3, whose
// code would be its NaN; 65536 for E5M2, its infinity's code).
struct Fp8Ladder {
  std::vector<double> values;  // values[code]
  int max_code = 0;            // the largest finite; max_code + 1 is the step beyond
};
inline Fp8Ladder fp8_ladder(Fp8Format f) {
  Fp8Ladder ladder;
  for (int code = 0; code < 0x80 && std::isfinite(fp8_defined_value(f, static_cast<uint8_t>(code))); ++code)
    ladder.values.push_back(fp8_defined_value(f, static_cast<uint8_t>(code)));
  ladder.max_code = static_cast<int>(ladder.values.size()) - 1;
  const double max = ladder.values.back(), step = max - ladder.values[ladder.values.size() - 2];
  ladder.values.push_back(max + step);
  return ladder;
}

// The code of the format's overflow under NonFinite: NaN for E4M3, infinity for E5M2.
inline uint8_t fp8_overflow_code(Fp8Format f) { return f == Fp8Format::E4M3 ? 0x7f : 0x7c; }

// The code x (not NaN) rounds to: the nearest value on the ladder, a tie to the even code; beyond max, saturated or
// the overflow code as `overflow` says.
inline uint8_t fp8_reference_code(Fp8Format f, double x, Fp8Overflow overflow) {
  static const Fp8Ladder ladders[2] = {fp8_ladder(Fp8Format::E4M3), fp8_ladder(Fp8Format::E5M2)};
  const Fp8Ladder& ladder = ladders[f == Fp8Format::E4M3 ? 0 : 1];
  const auto sign = static_cast<uint8_t>(std::signbit(x) ? 0x80 : 0);
  const double a = std::fabs(x), max = ladder.values[ladder.max_code];
  if (a > max && overflow == Fp8Overflow::Saturate) return sign | static_cast<uint8_t>(ladder.max_code);
  if (a >= ladder.values.back()) return sign | fp8_overflow_code(f);
  // The last value at or below a, and the next.
  const auto above = std::upper_bound(ladder.values.begin(), ladder.values.end(), a);
  const int low = static_cast<int>(above - ladder.values.begin()) - 1;
  const double below_distance = a - ladder.values[low], above_distance = ladder.values[low + 1] - a;
  int code = low;
  if (above_distance < below_distance || (above_distance == below_distance && low % 2 == 1)) code = low + 1;
  if (code > ladder.max_code) return sign | fp8_overflow_code(f);
  return sign | static_cast<uint8_t>(code);
}

// The code of a format's NaN for a float NaN's bits: E4M3 has one per sign; E5M2 keeps the quiet bit set and the
// payload bit below it, as FP16 does.
inline uint8_t fp8_nan_code(Fp8Format f, uint32_t float_bits) {
  const auto sign = static_cast<uint8_t>((float_bits >> 24) & 0x80);
  if (f == Fp8Format::E4M3) return sign | 0x7f;
  return sign | 0x7e | ((float_bits >> 21) & 1);
}

// The reference as steps over FP32 magnitudes, for sweeps over every float: the first FP32 magnitude (bits) of each
// code above zero. Built from the ladder's float64 midpoints (each exactly an FP32) and the tie rule, and checked
// against fp8_reference_code on both sides of every step by the tests.
struct Fp8Steps {
  std::vector<uint32_t> first_bits;  // first_bits[k]: the smallest magnitude whose code is k + 1
  uint8_t saturated_code = 0;        // the code of everything at or past the last step, infinity included
};
inline Fp8Steps fp8_steps(Fp8Format f, Fp8Overflow overflow) {
  const Fp8Ladder ladder = fp8_ladder(f);
  Fp8Steps steps;
  const int last = overflow == Fp8Overflow::Saturate ? ladder.max_code : ladder.max_code + 1;
  for (int code = 1; code <= last; ++code) {
    const double midpoint = (ladder.values[code - 1] + ladder.values[code]) / 2;
    const uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(midpoint));
    steps.first_bits.push_back(code % 2 == 0 ? bits : bits + 1);  // the tie belongs to the even code
  }
  steps.saturated_code =
      overflow == Fp8Overflow::Saturate ? static_cast<uint8_t>(ladder.max_code) : fp8_overflow_code(f);
  return steps;
}

// Walks the steps upward through increasing FP32 magnitudes, giving each one's code.
class Fp8StepWalker {
 public:
  Fp8StepWalker(const Fp8Steps& steps, uint32_t start_magnitude) : steps_(steps) {
    next_ = static_cast<size_t>(std::upper_bound(steps.first_bits.begin(), steps.first_bits.end(), start_magnitude) -
                                steps.first_bits.begin());
  }
  // The code of `magnitude` (not NaN), which is at or above the previous one asked.
  uint8_t code(uint32_t magnitude) {
    while (next_ < steps_.first_bits.size() && magnitude >= steps_.first_bits[next_]) ++next_;
    return next_ == steps_.first_bits.size() ? steps_.saturated_code : static_cast<uint8_t>(next_);
  }
  // The magnitude where the code next changes (past every finite float when none).
  uint64_t next_change() const {
    return next_ < steps_.first_bits.size() ? steps_.first_bits[next_] : uint64_t{1} << 32;
  }

 private:
  const Fp8Steps& steps_;
  size_t next_ = 0;
};

}  // namespace ampwb::test
