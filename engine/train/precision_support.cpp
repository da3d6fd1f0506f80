// Precision modes against a backend's capabilities: refusals with their reason, what computes, and notes.
#include "train/precision_support.h"

#include <cstdio>

namespace ampwb {

namespace {

// "1.49x" with where it was measured, or where a figure would come from.
std::string expected_speed(const ComputeSupport& s) {
  if (s.speed_vs_fp32 <= 0) return s.speed_source.empty() ? std::string() : " (" + s.speed_source + ")";
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2fx", s.speed_vs_fp32);
  return "; expect about " + std::string(ratio) + " FP32's training speed (measured: " + s.speed_source + ")";
}

// The mode on a device, its FP8 note said of a run's own FP8 settings where `run_fp8` is given.
ModeSupport support_of(PrecisionMode mode, const Capabilities& caps, const Fp8Config* run_fp8) {
  ModeSupport m;
  const bool cpu = caps.device.is_cpu();
  const ComputeSupport* format = nullptr;
  std::string format_name;
  switch (mode_info(mode).format) {
    case NumberFormat::Fp32:
      return m;  // runs everywhere
    case NumberFormat::Tf32:
      format = &caps.tf32, format_name = "TF32";
      break;
    case NumberFormat::Fp16:
      format = &caps.fp16, format_name = "FP16";
      break;
    case NumberFormat::Bf16:
      format = &caps.bf16, format_name = "BF16";
      break;
    case NumberFormat::Fp8:
      format = &caps.fp8, format_name = "FP8";
      break;
  }
  m.compute = format_name + ": " + format->how;
  if (!format->available) {
    m.supported = false;
    m.reason = std::string("precision ") + mode_name(mode) + " cannot run on " + caps.device_name + ": " + format->how;
    if (cpu && mode_info(mode).cuda_only) m.reason += " (choose fp32, or amp-bf16 for the CPU's low-precision path)";
    return m;
  }
  if (cpu && format == &caps.fp8)
    m.notes.push_back(
        "FP8 is emulated on the CPU (E4M3 and E5M2 values and their per-tensor scales, FP32 arithmetic): faithful "
        "numerics, no speed gain; " +
        std::string(!run_fp8 ? "by default the first convolution and the last linear layer compute in BF16"
                    : run_fp8->first_and_last ? "every convolution and linear layer computes in FP8, the first and "
                                                "last too"
                                              : "its first convolution and last linear layer compute in BF16") +
        ", and the other ops as in amp-bf16 (batch norm in FP32)" + "; BF16 here: " + caps.bf16.how);
  if (cpu && format == &caps.fp16)
    m.notes.push_back(
        "FP16 is emulated on the CPU (FP16 storage and range, FP32 arithmetic): faithful numerics; its speed "
        "belongs to GPUs (here only its smaller memory traffic can pay)");
  // BF16 deserves a word where its gain is limited: emulated, or measured under 2x FP32 (AVX512-BF16 without AMX).
  if (cpu && format == &caps.bf16 && (!format->native || (format->speed_vs_fp32 > 0 && format->speed_vs_fp32 < 2)))
    m.notes.push_back("BF16 on this CPU (" + caps.isa + "): " + format->how + expected_speed(*format));
  return m;
}

}  // namespace

ModeSupport mode_support(PrecisionMode mode, const Capabilities& caps) { return support_of(mode, caps, nullptr); }

ModeSupport mode_support(const PrecisionConfig& precision, const Capabilities& caps) {
  return support_of(precision.mode, caps, &precision.fp8);
}

}  // namespace ampwb
