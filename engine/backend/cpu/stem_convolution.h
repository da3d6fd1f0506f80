#pragma once
// The forward pass of a convolution over images of few channels (a ResNet's stem: 7x7, stride 2, over 3 channels) in
// native BF16. VDPBF16PS multiplies pairs of values; oneDNN pairs input channels, and pads 3 channels to 4, a quarter
// of its work on zeros (its BF16 stem ran at 1.4x FP32's speed on a Zen 5, where BF16's peak is 1.8x FP32's). Here
// the pairs run along a kernel row instead: in NHWC, a row of taps over all channels is one run of S*C values (7x7
// over 3 channels: 21, in 11 pairs).
#include "backend/backend.h"
#include "core/tensor.h"

namespace ampwb::cpu_detail {

// Whether stem_forward computes this one: x (N,C,H,W) and y (N,K,P,Q) NHWC, w (K,C,R,S) OIHW, all BF16, on a CPU with
// AVX512-BF16; C of 4 or fewer, K of 16, 32, 48 or 64.
bool stem_forward_fits(const Tensor& x, const Tensor& w, const Tensor& y);

// y = the convolution of x by w, summed in FP32 and rounded to nearest even.
void stem_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p, int threads);

}  // namespace ampwb::cpu_detail
