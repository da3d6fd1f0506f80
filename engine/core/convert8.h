// Bulk conversions between FP32 and the FP8 formats (E4M3, E5M2), vectorised for the SIMD level in force
// (core/simd.h). Every path gives the bits of core/fp8.h: nearest even, overflow as Fp8Overflow says, NaN kept,
// subnormals kept. `threads` OpenMP threads share the work.
#pragma once

#include <cstdint>

#include "core/fp8.h"

namespace ampwb {

// FP32 rounded to the format, and the format widened to FP32 (exact).
void round_to_fp8(Fp8Format format, const float* in, uint8_t* out, int64_t n,
                  Fp8Overflow overflow = Fp8Overflow::Saturate, int threads = 1);
void widen_fp8(Fp8Format format, const uint8_t* in, float* out, int64_t n, int threads = 1);

// FP32 values rounded in place to the format's nearest and kept FP32: the bits round_to_fp8 then widen_fp8 leave, in
// one pass over memory (FP8 storage emulated with FP32 arithmetic).
void round_through_fp8(Fp8Format format, float* values, int64_t n, Fp8Overflow overflow = Fp8Overflow::Saturate,
                       int threads = 1);

}  // namespace ampwb
