// FP32 3x3 convolutions (stride 1, padding 1) through Winograd's minimal filtering F(2x2,3x3) (Lavin and Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2016): every 2x2 output tile of every channel pair takes 16
// multiplications instead of 36, so the convolution becomes 16 matrix products (one per point of a 4x4 tile) over
// 2.25x fewer multiply-adds than the direct one, plus transforms of the input, the weights and the output that only
// add, subtract and halve. The data gradient is the same computation with the weights flipped and transposed.
//
// Why: oneDNN 2.6 offers Winograd only on AVX-512; on AVX2 its direct convolutions already run at 85-100% of the
// FP32 peak, so fewer multiplications are the one way left to a faster FP32 step (docs/benchmarks.md).
// Accuracy: F(2x2,3x3)'s transforms have coefficients 0, +-1 and +-1/2 only; measured within 3e-6 of the largest
// output against float64 at 512 channels, inside the project's FP32 bound of 1e-5 (tests/op_tolerances.h).
// Results do not depend on the thread count: every matrix product runs on one thread, over the same tiles.
#pragma once

#include "backend/backend.h"

namespace ampwb::cpu_detail {

// Every tensor may be FP32, FP16 or BF16: 16-bit ones are widened pixel by pixel as the transforms read them and
// results rounded as they are written, by the converters the engine's FP16/BF16 emulation widens and rounds whole
// tensors with, so a 16-bit convolution here has the bits of the emulation's widen, FP32 convolution, round
// (conversions folded into the kernels: no FP32 copies of the activations).
//
// Whether this convolution can take the Winograd path: FP32, FP16 or BF16 tensors, NHWC activations, a 3x3
// kernel, stride 1, padding 1,
// 64 to 256 channels in and out (below, the transforms cost more than the multiplications saved: 0.7x the direct
// convolution's speed at 16 channels, 1.05x at 32, 1.2-1.8x at 64 on Zen 1; above, see kMaxChannelPairs), and
// images of at least 12x12 pixels (kMinImageSide).
bool winograd_fits(const Tensor& in, const Tensor& w, const Tensor& out, ConvParams p);

// y (N,K,H,W) NHWC = x (N,C,H,W) NHWC convolved with w (K,C,3,3), either weight layout.
void winograd_forward(const Tensor& x, const Tensor& w, Tensor& y, int threads);

// dw (K,C,3,3), either layout, = the weight gradient of winograd_forward for x and dy (N,K,H,W) NHWC: the sum over
// tiles of the transformed input times the transformed output gradient, point by point, transformed back.
void winograd_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, int threads);

// dx (N,C,H,W) NHWC = the data gradient of winograd_forward for dy (N,K,H,W) NHWC.
void winograd_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, int threads);

}  // namespace ampwb::cpu_detail
