#pragma once
// 3x3 convolution weights copied from OIHW into the layouts oneDNN's backward-data convolutions read on AVX-512:
// blocks of 16 output x 16 input channels per kernel tap, output channels outermost within a tap's block (FP32:
// OIhw16o16i, oneDNN's `ABcd16a16b`) and paired for VDPBF16PS (BF16: OIhw8o16i2o, `ABcd8a16b2a`). oneDNN's reorders
// into them are bound by their shuffles, not by memory (512x512x3x3 on a Zen 5: 0.48 ms FP32, 0.36 ms BF16), and
// they run at every step: 2.1 ms of FP32's 71 ms step at 64 px, 1.8 ms of native BF16's 39.
#include <cstdint>

#include "core/tensor.h"

namespace ampwb::cpu_detail {

// Whether to_backward_data_layout copies this one: w (K,C,3,3) FP32 or BF16 OIHW, K and C multiples of 16, on a CPU
// with AVX-512.
bool backward_data_layout_fits(const Tensor& w);

// out = w in the layout above: value (k, c, r, s) of tap t = r * 3 + s, in 16 x 16 block
// b = k / 16 * C / 16 + c / 16, at b * 16 * 16 * 9 + t * 16 * 16 + (FP32) k % 16 * 16 + c % 16
// or (BF16) k % 16 / 2 * 32 + c % 16 * 2 + k % 2.
void to_backward_data_layout(const Tensor& w, void* out, int threads);

}  // namespace ampwb::cpu_detail
