#pragma once
// BF16 convolution weights copied from OIHW into the layouts oneDNN 2.6's BF16 forward convolutions (brgconv) read on
// AVX512-BF16: blocks of 16, 32 or 64 output channels per kernel tap, input channels paired for VDPBF16PS
// (OhwI{16,32,64}o2i, oneDNN's `AcdB16a2b`, `AcdB32a2b`, `AcdB64a2b`). oneDNN's reorders into them run at every step
// (the weights change at every step): on a Zen 5, 3.8 ms of native BF16's 215 ms step at 224 px, 0.41 ms per
// 512x512x3x3 weight alone with the caches flushed, against the engine's copy's 0.18 ms.
#include <cstdint>

#include "core/tensor.h"

namespace ampwb::cpu_detail {

// Whether to_forward_layout copies this one: w (K,C,R,S) BF16 OIHW, 3x3 or 1x1, K a multiple of `block` (16, 32 or
// 64) and C of 32, on a CPU with AVX-512.
bool forward_layout_fits(const Tensor& w, int block);

// out = w in the layout above: value (k, c, r, s) of tap t = r * S + s at
// ((k / block * R * S + t) * C / 2 + c / 2) * block * 2 + k % block * 2 + c % 2.
void to_forward_layout(const Tensor& w, int block, void* out, int threads);

}  // namespace ampwb::cpu_detail
