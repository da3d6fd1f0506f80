#pragma once
// Convolution weights copied by the engine from OIHW into the blocked layouts oneDNN 2.6's convolutions read on
// AVX-512, instead of by oneDNN's reorders. The weights change at every step, so these copies run at every step, and
// oneDNN's reorders into these layouts are bound by their shuffles, not by memory (on a Zen 5: 2.1 ms of FP32's 71 ms
// step at 64 px for backward data's, 3.8 ms of native BF16's 215 ms step at 224 px for the forward's). The engine's
// copies write oneDNN's exact bytes, 1.15-2.3x as fast (caches flushed, as in a step).
#include <cstdint>

#include "core/tensor.h"

namespace ampwb::cpu_detail {

// Backward data's layouts: blocks of 16 output x 16 input channels per kernel tap, output channels outermost within
// a tap's block (FP32: OIhw16o16i, oneDNN's `ABcd16a16b`) and paired for VDPBF16PS (BF16: OIhw8o16i2o,
// `ABcd8a16b2a`).
//
// Whether to_backward_data_layout copies this one: w (K,C,3,3) FP32 or BF16 OIHW, K and C multiples of 16, on a CPU
// with AVX-512.
bool backward_data_layout_fits(const Tensor& w);

// out = w in the layout above: value (k, c, r, s) of tap t = r * 3 + s, in 16 x 16 block
// b = k / 16 * C / 16 + c / 16, at b * 16 * 16 * 9 + t * 16 * 16 + (FP32) k % 16 * 16 + c % 16
// or (BF16) k % 16 / 2 * 32 + c % 16 * 2 + k % 2.
void to_backward_data_layout(const Tensor& w, void* out, int threads);

// The forward's BF16 layouts: blocks of 16, 32 or 64 output channels per kernel tap, input channels paired for
// VDPBF16PS (OhwI{16,32,64}o2i, oneDNN's `AcdB16a2b`, `AcdB32a2b`, `AcdB64a2b`). (FP32's, `Acdb{16,32,64}a`, move
// twice the bytes and oneDNN's reorders into them run at memory speed already: an own copy measured no faster.)
//
// Whether to_forward_layout copies this one: w (K,C,R,S) BF16 OIHW, 3x3 or 1x1, K a multiple of `block` (16, 32 or
// 64) and C of 32, on a CPU with AVX-512.
bool forward_layout_fits(const Tensor& w, int block);

// out = w in the layout above: value (k, c, r, s) of tap t = r * S + s at
// ((k / block * R * S + t) * C / 2 + c / 2) * block * 2 + k % block * 2 + c % 2.
void to_forward_layout(const Tensor& w, int block, void* out, int threads);

}  // namespace ampwb::cpu_detail
