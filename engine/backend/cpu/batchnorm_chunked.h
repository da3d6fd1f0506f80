// Batch norm in FP32 arithmetic a chunk at a time, on FP32, FP16 or BF16 tensors: the CPU's training batch norm
// wherever oneDNN's does not fit.
// - Forward, emulated 16-bit: each pass reads the 16-bit tensors and widens them a chunk at a time in L1, instead
//   of widened copies for oneDNN's FP32 primitive (a third of the memory traffic).
// - Backward, every type: with a ReLU after the batch norm, the ReLU's mask is read from the forward's output (dy
//   taken where y is positive, as relu_backward takes it), so the forward keeps no workspace between the passes.
// The statistics take two passes, the mean and then the mean squared deviation, each chunk summed in FP32 and the
// chunks in FP64 (deterministic for a given thread count); every 16-bit result is rounded once, and the ReLU taken
// on the rounded value, as relu_forward takes it.
#pragma once

#include "core/tensor.h"

namespace ampwb {

// x, y (N,C,H,W) FP16 or BF16, either layout; gamma, beta, batch_mean, batch_var (C) FP32. batch_var is the biased
// variance, as oneDNN's. With relu, y = relu(batch norm of x).
void batchnorm_chunked_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                        Tensor& batch_mean, Tensor& batch_var, float eps, bool relu, int threads);

// Whether dx is x's gradient held wide: FP32 for a 16-bit x, its values those of the 16-bit gradient (each rounded
// to x's type, then widened), for an emulated convolution that would widen it anyway (Backend::batchnorm_backward).
bool is_wide_gradient(const Tensor& dx, const Tensor& x);

// The gradients for dy at batch norm's output, or, with relu_output (the forward's y), at the ReLU's output: dy
// is then taken where y is positive. x, relu_output, dy, dx (N,C,H,W) of one type (FP32, FP16 or BF16) and
// layout, or dx wide (is_wide_gradient); dgamma, dbeta (C) FP32, overwritten.
// NHWC tensors whose channels fill blocks of 16 are read and written in place (FP16 only with AVX2, for F16C), the
// rest a chunk at a time through widened copies: the same bits (widen_every_chunk: the copies everywhere, for the
// tests).
void batchnorm_chunked_backward(const Tensor& x, const Tensor& relu_output, const Tensor& dy, const Tensor& gamma,
                                const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx, Tensor& dgamma,
                                Tensor& dbeta, float eps, int threads, bool widen_every_chunk = false);

}  // namespace ampwb
