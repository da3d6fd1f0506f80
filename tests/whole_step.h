// The whole-step comparison: one training step of a fresh ResNet-18 (batch 16 at 32 px, random labels) in one
// precision mode on two backends, from the same weights and batch, as relative distances: the loss, every gradient
// and every updated weight over the whole model. test_cuda_training's CudaWholeStep holds the GPU's step to the
// CPU's with it; test_amp's WholeStepCheck shows that it refuses an FP32 step checked as a 16-bit mode's.
//
// The step is ill-conditioned: on the CPU alone (Zen 5), the FP32 step on 1 and on 2 threads (summation order only)
// is 4.8e-3 apart in its gradients, amp-fp16's step is 0.11 from FP32's, amp-bf16's 0.29, and amp-bf16 on 1 and on 2
// threads (oneDNN's native BF16 kernels differ) 0.23 apart; the updated weights 4.2e-5, 9.6e-4, 2.5e-3 and 2.0e-3.
// Two implementations of one format can differ about as much as the format differs from FP32 (GPU against CPU on an
// H200: FP32 3.1e-3, TF32 0.080, FP16 0.081, BF16 0.22; docs/gpu/2026-11-26-h200), so the tolerances, that spread
// with some margin, catch a wrong kernel (off by far more; the op tests bound each op tightly) but not a step in the
// wrong format: whole_step_mismatch also asks a 16-bit step to be nearer its mode's CPU step than FP32's.
#pragma once

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

#include "step_util.h"

namespace ampwb::testing {

inline StepOutcome whole_step(Backend& backend, const std::string& mode) {
  return one_training_step(backend, mode, ResNetConfig{18, 10, 3, 32, Stem::Auto}, 16, 17);
}

// How far `a` is from `b`: the loss relatively, every gradient and every updated weight as relative L2 distances
// over the whole model.
struct StepDistance {
  double loss, grads, weights;
};

inline StepDistance step_distance(const StepOutcome& a, const StepOutcome& b) {
  return {std::fabs(a.loss - b.loss) / std::fabs(b.loss), relative_l2(a.grads, b.grads),
          relative_l2(a.weights, b.weights)};
}

struct StepTolerance {
  const char* mode;
  double loss, grads, weights;
  const char* why;
  bool holds(const StepDistance& d) const { return d.loss < loss && d.grads < grads && d.weights < weights; }
};

inline void PrintTo(const StepTolerance& t, std::ostream* out) { *out << t.mode; }

// Why `candidate`, a step in tol.mode on another backend, does not pass as the CPU's step in that mode (empty where
// it does): within the mode's tolerances of it, and for a mode other than fp32 and tf32 nearer to it than to the
// CPU's FP32 step, in the gradients. This step is ill-conditioned enough that two implementations of one 16-bit
// format can be as far apart as the format is from FP32, so the tolerances alone would let an FP32 step through.
inline std::string whole_step_mismatch(const StepOutcome& candidate, const StepOutcome& cpu_mode,
                                       const StepOutcome& cpu_fp32, const StepTolerance& tol) {
  const StepDistance d = step_distance(candidate, cpu_mode);
  char apart[160];
  std::snprintf(apart, sizeof apart, "loss %.3g, gradients %.3g, weights %.3g from the CPU's %s step", d.loss, d.grads,
                d.weights, tol.mode);
  if (!tol.holds(d)) return std::string(apart) + ": beyond the tolerances (" + tol.why + ")";
  const std::string mode = tol.mode;
  if (mode == "fp32" || mode == "tf32") return "";
  const double from_fp32 = relative_l2(candidate.grads, cpu_fp32.grads);
  if (d.grads < from_fp32) return "";
  char nearer[120];
  std::snprintf(nearer, sizeof nearer, ", but gradients %.3g from its FP32 step: nearer FP32 than %s", from_fp32,
                tol.mode);
  return std::string(apart) + nearer;
}

inline constexpr StepTolerance kWholeStepTolerances[] = {
    StepTolerance{"fp32", 1e-4, 1e-2, 4e-4,
                  "FP32 both sides; summation order alone moves these gradients by 4.8e-3 on the CPU"},
    StepTolerance{"tf32", 1e-2, 0.15, 5e-3,
                  "TF32 rounds the products' inputs to FP16's 10 mantissa bits: no farther from FP32 than "
                  "amp-fp16's 0.11 on the CPU"},
    StepTolerance{"amp-fp16", 1e-2, 0.15, 5e-3, "FP16 storage on both sides; the CPU's amp-fp16 is 0.11 from FP32"},
    StepTolerance{"amp-bf16", 3e-2, 0.4, 1.5e-2,
                  "BF16 storage on both sides; the CPU's amp-bf16 is 0.29 from FP32, 0.23 from itself on 1 thread"},
    StepTolerance{"fp16-o2", 1e-2, 0.15, 5e-3, "as amp-fp16, with FP16 weights on both sides"},
    // The GPU's FP8 tensor cores (Capabilities::fp8.native) against the CPU's emulation of the same casts.
    StepTolerance{"amp-fp8", 5e-2, 0.8, 2e-2,
                  "E4M3 and E5M2 values on both sides from BF16 tensors that differ by BF16 roundings: an FP8 "
                  "rounding (2^-4 or 2^-3 relative) flips where they straddle its boundary; the CPU's amp-fp8 on 1 "
                  "and on 2 threads is 0.62 apart, 0.82 from FP32"}};

}  // namespace ampwb::testing
