// The one tolerance table of the op tests: how far a backend's result may be from the float64 reference, keyed by
// (kernel, precision, kind of result), each value with its reason. The op harness (test_backend_ops.cpp) reads it
// for every backend; other tests that compare with the reference take their bounds from here too.
//
// The measure is max|got - want| / max|want| over a result (near-zero entries cannot inflate it), where want is the
// float64 reference computed from the very inputs the backend saw (16-bit inputs are generated in FP32 and rounded
// to their type first) and then rounded to the result's own type: what a perfect backend would store. Infinities
// must match exactly and do not count in max|want|.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "backend/backend.h"

namespace ampwb::testing {

// The number formats a case runs in. TF32 is FP32 storage with TF32 products (a CUDA capability); FP8 is amp-fp8's
// path through FP32 ops: inputs and weights cast to E4M3 and output gradients to E5M2 by scaled_cast, each scaled
// from its amax, the FP32 results times the scale-inverses; the others are storage types.
enum class Precision { FP32, TF32, FP16, BF16, FP8, Count };
inline constexpr std::array<const char*, static_cast<size_t>(Precision::Count)> kPrecisionNames = {
    "fp32", "tf32", "fp16", "bf16", "fp8"};
inline const char* precision_name(Precision p) { return kPrecisionNames.at(static_cast<size_t>(p)); }
inline DType storage_dtype(Precision p) {
  return p == Precision::FP16 ? DType::F16 : p == Precision::BF16 ? DType::BF16 : DType::F32;
}

// The Backend functions that compute, one entry each (upload and read_scalars are exercised by them).
enum class Kernel {
  Conv2dForward,
  Conv2dBackwardData,
  Conv2dBackwardWeights,
  BatchNormTraining,
  BatchNormInference,
  BatchNormBackward,
  ReluForward,
  ReluBackward,
  MaxPoolForward,
  MaxPoolBackward,
  GlobalAvgPoolForward,
  GlobalAvgPoolBackward,
  LinearForward,
  LinearBackward,
  Add,
  Convert,
  SoftmaxCrossEntropy,
  SgdUpdate,
  AdamUpdate,
  ScaleAndCheck,
  ScaledCast,
  Count
};
inline constexpr std::array<const char*, static_cast<size_t>(Kernel::Count)> kKernelNames = {
    "conv2d_forward",
    "conv2d_backward_data",
    "conv2d_backward_weights",
    "batchnorm_forward_training",
    "batchnorm_forward_inference",
    "batchnorm_backward",
    "relu_forward",
    "relu_backward",
    "maxpool_forward",
    "maxpool_backward",
    "global_avgpool_forward",
    "global_avgpool_backward",
    "linear_forward",
    "linear_backward",
    "add",
    "convert",
    "softmax_cross_entropy",
    "sgd_update",
    "adam_update",
    "scale_and_check",
    "scaled_cast"};
static_assert(kKernelNames.size() == static_cast<size_t>(Kernel::Count), "one name per kernel");
inline const char* kernel_name(Kernel k) { return kKernelNames.at(static_cast<size_t>(k)); }

// What is compared.
enum class Result {
  Same,    // a tensor in the case's own type: the op's output or the gradient of one of its inputs
  Fp32,    // an FP32 tensor an op makes from inputs of the case's type: batch-norm statistics and parameter
           // gradients, running statistics, a weight gradient asked for in FP32 from 16-bit activations
  Scalar,  // a number read back through read_scalars() (the loss, the sum of squares), relative to itself
};

inline constexpr Kernel kAnyKernel = Kernel::Count;
inline constexpr Precision kAnyPrecision = Precision::Count;

struct Tolerance {
  Kernel kernel;        // or kAnyKernel
  Precision precision;  // or kAnyPrecision
  Result result;
  double bound;
  const char* why;
};

// The first row that matches wins: exact results first, then specific kernels, then one row per precision.
// Unit roundoff u: 2^-24 FP32, 2^-11 FP16, 2^-8 BF16; one ulp is 2u relative at most. The measured figures are
// test_ops's largest errors (AMPWB_OP_ERRORS=1 prints them); the GPU's are still to be measured (docs/gpu.md).
inline constexpr Tolerance kTolerances[] = {
    // Exact in every type: the reference rounded to the result's type is what any correct backend returns.
    {Kernel::ReluForward, kAnyPrecision, Result::Same, 0, "a selection (x or 0): exact in every type"},
    {Kernel::ReluBackward, kAnyPrecision, Result::Same, 0, "a selection (dy or 0): exact in every type"},
    {Kernel::MaxPoolForward, kAnyPrecision, Result::Same, 0, "a selection of the window's maximum: exact"},
    {Kernel::Convert, kAnyPrecision, Result::Same, 0,
     "one rounding to nearest even (FP16: overflow to inf, subnormals kept), signed zeros kept: bitwise"},
    {Kernel::Add, kAnyPrecision, Result::Same, 0,
     "one rounding of an exact sum: FP32 + FP32 is correctly rounded by IEEE 754, and the FP32 sum of two 16-bit "
     "values of these magnitudes is exact before its one rounding to 16 bits"},
    {Kernel::ScaledCast, kAnyPrecision, Result::Same, 0,
     "one FP32 product (correctly rounded by IEEE 754), then one rounding to nearest even to the FP8 format "
     "(saturating) or to the result's type: the reference rounds the same product by the formats' definition "
     "(tests/fp8_reference.h); every FP8 value is exact in FP32, FP16 and BF16: bitwise"},
    {Kernel::ScaleAndCheck, Precision::FP32, Result::Same, 0,
     "one FP32 multiplication, correctly rounded by IEEE 754: bitwise"},
    // Read back through read_scalars().
    {Kernel::ScaleAndCheck, Precision::FP32, Result::Scalar, 1e-9,
     "a float64 sum of up to a million squares of FP32 values: n 2^-53 at worst, in any summation order"},
    {Kernel::SoftmaxCrossEntropy, Precision::FP32, Result::Scalar, 1e-5,
     "the mean over the batch of log-sum-exp over FP32 logits: exp and log in FP32 on a GPU (2^-24 each, a few per "
     "term), float64 on the CPU"},
    // FP32, kernel by kernel.
    {Kernel::MaxPoolBackward, Precision::FP32, Result::Same, 1e-6,
     "an FP32 sum of the at most ceil(k/s)^2 gradients that overlapping windows send to one input: a few 2^-24"},
    {Kernel::GlobalAvgPoolForward, Precision::FP32, Result::Same, 1e-6,
     "a mean of H W FP32 values (at most 49 in a ResNet, 256 here): summed in float64 on the CPU, FP32 on a GPU"},
    {Kernel::GlobalAvgPoolBackward, Precision::FP32, Result::Same, 1e-6,
     "dy times 1/(H W), both rounded to FP32: two roundings of 2^-24"},
    {Kernel::SgdUpdate, kAnyPrecision, Result::Same, 1e-6,
     "a handful of FP32 multiply-adds per element (decay, momentum, Nesterov, step), no sums across elements"},
    {Kernel::AdamUpdate, kAnyPrecision, Result::Same, 1e-6,
     "a handful of FP32 operations per element (moments, square root, division); bias corrections in float64"},
    {Kernel::SoftmaxCrossEntropy, kAnyPrecision, Result::Same, 1e-5,
     "softmax of FP32 logits minus the target, over N, times the loss scale: a few roundings, exp in FP32 on a GPU"},
    // FP32 storage and arithmetic: summation order only.
    {kAnyKernel, Precision::FP32, Result::Same, 1e-5,
     "FP32 sums of up to a few thousand products (C R S in a forward convolution, N P Q in a weight gradient, N H W "
     "in batch-norm statistics) in the order oneDNN's or cuDNN's algorithm picks (direct, implicit GEMM, Winograd, "
     "split reductions): the project's FP32 bound; measured at most 9e-7 on the CPU (AVX2)"},
    // TF32 on a GPU: convolutions and matrix products only.
    {kAnyKernel, Precision::TF32, Result::Same, 1e-3,
     "inputs rounded to TF32's 10-bit mantissa inside the tensor cores (2^-11 relative each, FP32 accumulation): "
     "the errors of many products add like a random walk, far below the worst case sum of |x w| 2^-10"},
    // FP8 (amp-fp8's emulation) against the float64 reference of the unrounded inputs: the FP8 rounding itself.
    {Kernel::Conv2dForward, Precision::FP8, Result::Same, 0x1p-4,
     "input and weight each rounded to E4M3 (4 significand bits: 2^-4 relative at most, scaled so that none "
     "saturates or leaves the normal range but the smallest), their products exact in FP32 and summed there: the "
     "per-element 2^-4 of E4M3, whose errors over the C R S products add like a random walk; measured at most "
     "0.05 on the CPU"},
    {Kernel::LinearForward, Precision::FP8, Result::Same, 0x1p-4,
     "as the FP8 convolution: input and weight in E4M3, 2^-4 relative each, FP32 accumulation over I products"},
    {kAnyKernel, Precision::FP8, Result::Same, 0x1p-3,
     "gradients from the output gradient in E5M2 (3 significand bits: 2^-3 relative at most) with an E4M3 "
     "weight or input: the per-element 2^-3 of E5M2, the errors adding like a random walk over the sums; measured "
     "at most 0.084 on the CPU"},
    // 16-bit types: FP32 results made from 16-bit inputs are computed like FP32 ones.
    {kAnyKernel, kAnyPrecision, Result::Fp32, 1e-5,
     "the same FP32 arithmetic as in FP32 mode, on inputs that happen to be 16-bit values (their products are "
     "exact in FP32); measured at most 1e-6 on the CPU"},
    {kAnyKernel, Precision::FP16, Result::Same, 1e-3,
     "FP32 accumulation, the result rounded once to FP16 (11-bit significand): it and the reference rounded to "
     "FP16 fall at most one ulp (2^-10 relative) apart, plus the FP32 bound 1e-5; measured 6e-4 on the CPU"},
    {kAnyKernel, Precision::BF16, Result::Same, 8e-3,
     "FP32 accumulation, the result rounded once to BF16 (8-bit significand): it and the reference rounded to BF16 "
     "fall at most one ulp (2^-7 relative) apart, plus the FP32 bound 1e-5; measured 2.5e-3 on the CPU"},
};

// The row for a result; nullptr when the table has none (a test must then fail: every bound needs its reason).
inline const Tolerance* find_tolerance(Kernel kernel, Precision precision, Result result) {
  for (const Tolerance& t : kTolerances)
    if ((t.kernel == kernel || t.kernel == kAnyKernel) && (t.precision == precision || t.precision == kAnyPrecision) &&
        t.result == result)
      return &t;
  return nullptr;
}

// The bound alone, for tests outside the harness; throws when the table has no row.
inline double tolerance(Kernel kernel, Precision precision, Result result = Result::Same) {
  const Tolerance* t = find_tolerance(kernel, precision, result);
  if (!t)
    throw std::logic_error(std::string("no tolerance for ") + kernel_name(kernel) + " in " + precision_name(precision));
  return t->bound;
}

}  // namespace ampwb::testing
