#pragma once
// The weight gradient of a 3x3 convolution over small images, computed directly: for each output pixel only the
// kernel taps whose input lies inside the image, where the product over im2col's rows also multiplies the zeros
// of the padding (9/4 of the work over 2x2 images, 1.44x over 4x4). Native BF16 sums image pairs by VDPBF16PS
// (AVX512-BF16), FP32 by AVX-512 multiply-adds; both sum in FP32.
#include "backend/backend.h"
#include "core/tensor.h"

namespace ampwb::cpu_detail {

// Whether direct_weight_gradient computes this one: x (N,C,H,W) and dy (N,K,P,Q) NHWC, dw (K,C,3,3) OIHW, all BF16
// (a CPU with AVX512-BF16) or all FP32 (AVX-512), C and K multiples of 16.
bool direct_weight_gradient_fits(const Tensor& x, const Tensor& dy, const Tensor& dw);

// What direct_weight_gradient allocates for its work, in 16-bit values: BF16's image pairs (and, where it pairs a part
// of the batch at a time, the sums kept between the parts); none for FP32.
int64_t direct_weight_gradient_scratch_values(const Tensor& x, const Tensor& dy);

// dw = the sum over images and output pixels of dy (x) x's kernel window, in FP32; BF16's rounded to nearest even
// (VCVTNE2PS2BF16, as oneDNN rounds).
void direct_weight_gradient(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p, int threads);

}  // namespace ampwb::cpu_detail
