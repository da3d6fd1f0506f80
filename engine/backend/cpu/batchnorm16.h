// Batch norm (training forward and backward, with an optional ReLU after it) on FP16/BF16 tensors in FP32
// arithmetic: the CPU's emulation of 16-bit batch norm. Each pass reads the 16-bit tensors and widens them a chunk
// at a time in L1, instead of widened copies for oneDNN's FP32 primitive: a third of the memory traffic. The
// statistics take two passes, the mean and then the mean squared deviation, each chunk summed in FP32 and the
// chunks in FP64 (deterministic for a given thread count); every result is rounded once to 16 bits, and the ReLU
// taken on the rounded value, as relu_forward takes it.
#pragma once

#include "core/tensor.h"

namespace ampwb {

// x, y (N,C,H,W) FP16 or BF16, either layout; gamma, beta, batch_mean, batch_var (C) FP32. batch_var is the biased
// variance, as oneDNN's. With relu, y = relu(batch norm of x).
void batchnorm16_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                  Tensor& batch_mean, Tensor& batch_var, float eps, bool relu, int threads);

// The gradients for dy at batch norm's output, or, with relu_output (the forward's y), at the ReLU's output: dy
// is then taken where y is positive. dgamma, dbeta (C) FP32, overwritten.
void batchnorm16_backward(const Tensor& x, const Tensor& relu_output, const Tensor& dy, const Tensor& gamma,
                          const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                          float eps, int threads);

}  // namespace ampwb
