// The precision modes in one table: each mode's name, what it is, its knobs (master weights, loss scaling), the
// number format its low-precision ops compute in, and where it can run. Everything else (the CLI's choices, the
// GUI's list, the policy, the capability checks, the help) reads this table. Depends on core/ only.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "amp/loss_scale_kind.h"
#include "core/delayed_scaling.h"
#include "core/dtype.h"

namespace ampwb {

enum class PrecisionMode : uint8_t { Fp32, Tf32, AmpFp16, AmpBf16, Fp16O2, Fp16Pure, AmpFp8, Count };

// What a device must compute in to run a mode (Capabilities has one entry per format but FP32).
// Fp8: convolutions and linear layers in E4M3 (inputs, weights) and E5M2 (output gradients), scaled per tensor
// (core/delayed_scaling.h), with everything else in BF16.
enum class NumberFormat : uint8_t { Fp32, Tf32, Fp16, Bf16, Fp8 };

struct PrecisionModeInfo {
  PrecisionMode mode;
  const char* name;            // the CLI's, the store's and the JSON's spelling: "amp-fp16"
  const char* title;           // the GUI's: "AMP FP16"
  const char* description;     // one sentence for help texts and tooltips
  NumberFormat format;         // what the mode's low-precision ops compute in
  DType low;                   // the type they store: F32 for fp32 and tf32
  bool master_weights;         // preset: FP32 master weights
  LossScaleKind loss_scaling;  // preset: off or dynamic
  bool everything_low;         // batch-norm parameters and statistics stored low too (Apex O3)
  bool cuda_only;              // no CPU computes its format
};

inline constexpr std::array<PrecisionModeInfo, static_cast<size_t>(PrecisionMode::Count)> kPrecisionModes = {{
    {PrecisionMode::Fp32, "fp32", "FP32", "Everything in FP32: the reference every other mode is measured against.",
     NumberFormat::Fp32, DType::F32, false, LossScaleKind::Off, false, false},
    {PrecisionMode::Tf32, "tf32", "TF32 (CUDA)", "FP32 storage with TF32 tensor-core math: NVIDIA GPUs only.",
     NumberFormat::Tf32, DType::F32, false, LossScaleKind::Off, false, true},
    {PrecisionMode::AmpFp16, "amp-fp16", "AMP FP16",
     "Autocast to FP16, FP32 master weights, dynamic loss scaling (torch.autocast + GradScaler, Apex O1).",
     NumberFormat::Fp16, DType::F16, true, LossScaleKind::Dynamic, false, false},
    {PrecisionMode::AmpBf16, "amp-bf16", "AMP BF16",
     "Autocast to BF16 with FP32 master weights; BF16 has FP32's range, so no loss scaling is needed.",
     NumberFormat::Bf16, DType::BF16, true, LossScaleKind::Off, false, false},
    {PrecisionMode::Fp16O2, "fp16-o2", "FP16 O2",
     "FP16 model and activations, FP32 batch norm and master weights, dynamic loss scaling (Apex O2).",
     NumberFormat::Fp16, DType::F16, true, LossScaleKind::Dynamic, false, false},
    {PrecisionMode::Fp16Pure, "fp16-pure", "FP16 pure",
     "FP16 everywhere, batch norm's parameters and statistics too (its arithmetic FP32, as cuDNN's), no master "
     "weights or loss scaling (Apex O3): expect trouble.",
     NumberFormat::Fp16, DType::F16, false, LossScaleKind::Off, true, false},
    {PrecisionMode::AmpFp8, "amp-fp8", "AMP FP8",
     "Convolutions and linear layers in FP8 (E4M3 forward, E5M2 gradients) with per-tensor delayed scaling, by "
     "default all but the first convolution and the last linear layer; the rest in BF16, FP32 master weights, no "
     "loss scaling (Transformer Engine's recipe).",
     NumberFormat::Fp8, DType::BF16, true, LossScaleKind::Off, false, false},
}};
static_assert(
    [] {
      for (size_t i = 0; i < kPrecisionModes.size(); ++i)
        if (static_cast<size_t>(kPrecisionModes[i].mode) != i) return false;
      return true;
    }(),
    "one row per mode, in the enum's order");

inline const PrecisionModeInfo& mode_info(PrecisionMode mode) { return kPrecisionModes.at(static_cast<size_t>(mode)); }
inline const char* mode_name(PrecisionMode mode) { return mode_info(mode).name; }
// The mode spelled `name`; throws ampwb::Error naming the valid ones.
PrecisionMode parse_precision_mode(std::string_view name);
std::string precision_mode_names();  // "fp32, tf32, amp-fp16, amp-bf16, fp16-o2, fp16-pure or amp-fp8"

// Loss scaling with PyTorch GradScaler semantics; presets carry other frameworks' defaults.
struct LossScaleConfig {
  LossScaleKind kind = LossScaleKind::Dynamic;
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int hysteresis = 1;      // non-finite steps tolerated before backing off (DeepSpeed, Megatron: 2)
  double min_scale = 0.0;  // 0 = none (PyTorch enforces none)
  double max_scale = 0.0;  // 0 = none (Apex: 2^24)
};

// Which FP8 format each tensor takes: Transformer Engine's fp8_format, HYBRID (its default) or E4M3.
enum class Fp8Formats : uint8_t { Hybrid, E4M3 };

template <>
struct ChoiceTable<Fp8Formats> {
  static constexpr const char* what = "FP8 formats";
  static constexpr std::array<Choice<Fp8Formats>, 2> rows = {{
      {Fp8Formats::Hybrid, "hybrid", "E4M3, E5M2 gradients",
       "inputs and weights in E4M3 (precision), output gradients in E5M2 (range)"},
      {Fp8Formats::E4M3, "e4m3", "E4M3 for all",
       "output gradients in E4M3 too: a bit more precision, 2^18 of range below their amax where E5M2 has 2^32"},
  }};
};

// FP8's settings (amp-fp8; the other modes ignore them): Transformer Engine's DelayedScaling defaults, its formats,
// and whether the network's first convolution and its last linear layer compute in FP8 too (the usual practice
// keeps them in BF16: the stem sees raw pixels, the head makes the logits).
struct Fp8Config {
  DelayedScalingSettings scaling;
  Fp8Formats formats = Fp8Formats::Hybrid;
  bool first_and_last = false;
  Fp8Format gradient_format() const { return formats == Fp8Formats::E4M3 ? Fp8Format::E4M3 : Fp8Format::E5M2; }
};

struct PrecisionConfig {
  PrecisionMode mode = PrecisionMode::Fp32;
  bool master_weights = false;
  LossScaleConfig loss_scale{LossScaleKind::Off};
  Fp8Config fp8;
  // Whether the run multiplies its loss at all: an unscaled run's recorded scale of 1 means "none", not "1".
  bool scales_loss() const { return loss_scale.kind != LossScaleKind::Off; }
};

// The preset of a mode: its defining knobs (master weights, loss scaling), from the table.
PrecisionConfig precision_preset(PrecisionMode mode);
PrecisionConfig precision_preset(std::string_view name);  // throws on an unknown mode

}  // namespace ampwb
