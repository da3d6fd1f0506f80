// Bulk conversions between FP32 and the 16-bit floats (FP16, BF16), vectorised for the SIMD level in force
// (core/simd.h). Every path rounds exactly like core/half.h: nearest even, NaN quieted, subnormals kept, FP16
// overflow to inf. `threads` OpenMP threads share the work.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace ampwb {

void f32_to_f16(const float* in, uint16_t* out, int64_t n, int threads = 1);
void f16_to_f32(const uint16_t* in, float* out, int64_t n, int threads = 1);
void f32_to_bf16(const float* in, uint16_t* out, int64_t n, int threads = 1);
void bf16_to_f32(const uint16_t* in, float* out, int64_t n, int threads = 1);

// The same for a 16-bit type named at run time: FP16 or BF16 (dtype) to FP32, and FP32 rounded to it.
void widen_16bit(DType dtype, const uint16_t* in, float* out, int64_t n, int threads = 1);
void round_to_16bit(DType dtype, const float* in, uint16_t* out, int64_t n, int threads = 1);
// FP32 values rounded in place to dtype's nearest and kept FP32: the bits round_to_16bit then widen_16bit leave, in
// one pass over memory (an emulated 16-bit gradient handed over wide).
void round_through_16bit(DType dtype, float* values, int64_t n, int threads = 1);

}  // namespace ampwb
