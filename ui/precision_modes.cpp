// Precision mode texts, sweep variants and the seed article's preset.
#include "precision_modes.h"

namespace ampwb::ui {

const std::vector<PrecisionModeInfo>& precision_modes() {
  static const std::vector<PrecisionModeInfo> modes = {
      {"fp32", "FP32", "Everything in FP32: the reference every other mode is measured against."},
      {"tf32", "TF32 (CUDA)", "FP32 storage with TF32 tensor-core math: NVIDIA GPUs only."},
      {"amp-fp16", "AMP FP16",
       "Autocast to FP16, FP32 master weights, dynamic loss scaling (torch.autocast + GradScaler, Apex O1)."},
      {"amp-bf16", "AMP BF16",
       "Autocast to BF16 with FP32 master weights; BF16 has FP32's range, so no loss scaling is needed."},
      {"fp16-o2", "FP16 O2",
       "FP16 model and activations, FP32 batch norm and master weights, dynamic loss scaling (Apex O2)."},
      {"fp16-pure", "FP16 pure",
       "FP16 everywhere, batch norm included, no master weights or loss scaling (Apex O3): expect trouble."},
  };
  return modes;
}

const PrecisionModeInfo* find_precision_mode(const std::string& mode) {
  for (const PrecisionModeInfo& m : precision_modes())
    if (mode == m.mode) return &m;
  return nullptr;
}

const std::vector<SweepVariant>& sweep_variants() {
  static const std::vector<SweepVariant> variants = {
      {"fp32", "fp32", "fp32", false, false},
      {"tf32", "tf32", "tf32", false, true},
      {"amp-fp16", "amp-fp16", "amp-fp16", false, false},
      {"amp-bf16", "amp-bf16", "amp-bf16", false, false},
      {"amp-fp16-noscale", "amp-fp16, no loss scaling", "amp-fp16", true, false},
      {"fp16-o2", "fp16-o2", "fp16-o2", false, false},
      {"fp16-pure", "fp16-pure", "fp16-pure", false, false},
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
