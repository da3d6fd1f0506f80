// The precision sweep's variants (a mode plus an override, e.g. amp-fp16 without loss scaling) and the seed
// article's preset. The modes themselves, their titles and explanations are the engine's (amp/precision.h).
// Plain C++.
#pragma once

#include <string>
#include <vector>

#include "facade/devices.h"
#include "train/config.h"

namespace ampwb::ui {

// One run of a precision sweep: a mode's preset with an optional change.
struct SweepVariant {
  std::string key;    // "amp-fp16-noscale": stable, for settings
  std::string label;  // "amp-fp16, no loss scaling"
  PrecisionMode mode;
  bool loss_scaling_off = false;
};
const std::vector<SweepVariant>& sweep_variants();
// `base` with the variant's mode: its preset, then what `base` changed on its own mode's preset (the loss scaler,
// master weights, FP8 scaling), then the variant's loss scaling; other settings untouched.
TrainConfig apply_variant(TrainConfig base, const SweepVariant& variant);

// The first seed article's experiment (ResNet-18, Adam lr 0.001, batch 16, 224 px, 5 epochs, 80/20 split, FP32
// against AMP) on `data_dir`, and the variants it compares.
TrainConfig seed_article_config(const std::string& data_dir);
// Keys: fp32 and amp-fp16, as the article; and amp-bf16 where `caps` computes BF16 natively but FP16 not (a CPU
// with AVX512-BF16 or AMX), whose AMP is BF16: without it the sweep would only show an emulated format's slowdown.
std::vector<std::string> seed_article_variants(const Capabilities& caps);

}  // namespace ampwb::ui
