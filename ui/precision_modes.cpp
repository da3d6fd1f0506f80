// Sweep variants and the seed article's preset.
#include "precision_modes.h"

namespace ampwb::ui {

const std::vector<SweepVariant>& sweep_variants() {
  static const std::vector<SweepVariant> variants = {
      {"fp32", "fp32", PrecisionMode::Fp32},
      {"tf32", "tf32", PrecisionMode::Tf32},
      {"amp-fp16", "amp-fp16", PrecisionMode::AmpFp16},
      {"amp-bf16", "amp-bf16", PrecisionMode::AmpBf16},
      {"amp-fp16-noscale", "amp-fp16, no loss scaling", PrecisionMode::AmpFp16, true},
      {"fp16-o2", "fp16-o2", PrecisionMode::Fp16O2},
      {"fp16-pure", "fp16-pure", PrecisionMode::Fp16Pure},
  };
  return variants;
}

TrainConfig apply_variant(TrainConfig base, const SweepVariant& variant) {
  base.precision = precision_preset(variant.mode);
  if (variant.loss_scaling_off) base.precision.loss_scale.kind = "off";
  return base;
}

TrainConfig seed_article_config(const std::string& data_dir) {
  TrainConfig c;
  c.data_dir = data_dir;
  c.depth = 18;
  c.optimizer.kind = "adam";
  c.lr = 0.001f;
  c.schedule = "constant";
  c.batch_size = 16;
  c.image_size = 224;
  c.epochs = 5;
  c.data.validation_fraction = 0.2;
  return c;
}

std::vector<std::string> seed_article_variants() { return {"fp32", "amp-fp16"}; }

}  // namespace ampwb::ui
