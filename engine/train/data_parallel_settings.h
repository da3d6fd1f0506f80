// The settings of one run on many processes (docs/distributed.md): how batch norm sees the batch and in what
// precision the gradients travel. A run on one process has nothing to share, and they change nothing there.
#pragma once

#include <array>
#include <cstdint>

#include "core/choices.h"

namespace ampwb {

// The precision of the gradients' all-reduce. 16-bit halves the bytes each rank sends: each rank's FP32 gradient is
// rounded to nearest even, and each addition of two ranks' values (or partial sums) is taken in FP32 and rounded
// back, so over N ranks each element of the mean is within N u times the mean of the ranks' |gradient| of the exact
// mean (u = 2^-11 for FP16, 2^-8 for BF16; FP16 also loses up to 2^-25 of each value below 2^-14 to its subnormal
// steps); the mean itself is taken in FP32. Past 65504 an FP16 value or sum becomes inf: an overflow the loss
// scaler sees, so the step is skipped on every rank and the scale backs off (as PyTorch's GradScaler behind DDP's
// fp16_compress_hook); FP16 therefore needs a dynamic loss scale. BF16 has FP32's range (docs/distributed.md).
enum class GradientAllReduce : uint8_t { F32, F16, BF16 };

template <>
struct ChoiceTable<GradientAllReduce> {
  static constexpr const char* what = "gradient all-reduce";
  static constexpr std::array<Choice<GradientAllReduce>, 3> rows = {{
      {GradientAllReduce::F32, "fp32", "FP32",
       "the gradients travel as computed, summed in FP32: within (N-1) 2^-24 mean |g| of the exact mean"},
      {GradientAllReduce::F16, "fp16", "FP16",
       "half the bytes; each gradient and partial sum rounded to FP16: within N 2^-11 mean |g| of the exact mean; "
       "past 65504 an overflow that skips the step (needs a dynamic loss scale)"},
      {GradientAllReduce::BF16, "bf16", "BF16",
       "half the bytes; each gradient and partial sum rounded to BF16: within N 2^-8 mean |g| of the exact mean, "
       "FP32's range"},
  }};
};

struct DataParallelConfig {
  bool sync_batchnorm = false;  // batch statistics over every rank's batch, as one process at the global batch
  GradientAllReduce gradient_allreduce = GradientAllReduce::F32;
};

}  // namespace ampwb
