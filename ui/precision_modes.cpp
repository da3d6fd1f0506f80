// Sweep variants and the seed article's preset.
#include "precision_modes.h"

#include "facade/run_setup.h"

namespace ampwb::ui {

const std::vector<SweepVariant>& sweep_variants() {
  // Every mode of the engine's table, and AMP FP16 without its loss scaling after the AMP modes.
  static const std::vector<SweepVariant> variants = [] {
    std::vector<SweepVariant> out;
    for (const PrecisionModeInfo& m : kPrecisionModes) {
      out.push_back({m.name, m.name, m.mode});
      if (m.mode == PrecisionMode::AmpBf16) {
        const std::string amp_fp16 = mode_name(PrecisionMode::AmpFp16);
        out.push_back({amp_fp16 + "-noscale", amp_fp16 + ", no loss scaling", PrecisionMode::AmpFp16, true});
      }
    }
    return out;
  }();
  return variants;
}

TrainConfig apply_variant(TrainConfig base, const SweepVariant& variant) {
  PrecisionOverrides overrides = overrides_of(base.precision);
  if (variant.loss_scaling_off) overrides.loss_scale_kind = LossScaleKind::Off;
  const Fp8Config fp8 = base.precision.fp8;
  base.precision = resolve_precision(variant.mode, overrides);
  base.precision.fp8 = fp8;
  return base;
}

TrainConfig seed_article_config(const std::string& data_dir) {
  TrainConfig c;
  c.data_dir = data_dir;
  c.depth = 18;
  c.optimizer.kind = OptimizerKind::Adam;
  c.lr = 0.001f;
  c.schedule = Schedule::Constant;
  c.batch_size = 16;
  c.image_size = 224;
  c.epochs = 5;
  c.data.validation_fraction = 0.2;
  return c;
}

std::vector<std::string> seed_article_variants(const Capabilities& caps) {
  std::vector<std::string> keys = {mode_name(PrecisionMode::Fp32), mode_name(PrecisionMode::AmpFp16)};
  if (caps.bf16.native && !caps.fp16.native) keys.push_back(mode_name(PrecisionMode::AmpBf16));
  return keys;
}

}  // namespace ampwb::ui
