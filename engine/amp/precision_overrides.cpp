// The preset-plus-overrides resolver shared by the CLI and the GUI.
#include "amp/precision_overrides.h"

#include "amp/loss_scaler.h"

namespace ampwb {

PrecisionConfig resolve_precision(PrecisionMode mode, const PrecisionOverrides& o) {
  PrecisionConfig p = precision_preset(mode);
  LossScaleConfig& s = p.loss_scale;
  if (!o.scaler_preset.empty()) {
    const LossScaleKind kind = s.kind;
    s = loss_scale_preset(o.scaler_preset);
    s.kind = kind;
  }
  s.kind = o.loss_scale_kind.value_or(s.kind);
  p.master_weights = o.master_weights.value_or(p.master_weights);
  s.init_scale = o.init_scale.value_or(s.init_scale);
  s.growth_factor = o.growth_factor.value_or(s.growth_factor);
  s.backoff_factor = o.backoff_factor.value_or(s.backoff_factor);
  s.growth_interval = o.growth_interval.value_or(s.growth_interval);
  s.hysteresis = o.hysteresis.value_or(s.hysteresis);
  s.min_scale = o.min_scale.value_or(s.min_scale);
  s.max_scale = o.max_scale.value_or(s.max_scale);
  return p;
}

PrecisionOverrides overrides_of(const PrecisionConfig& p) {
  const PrecisionConfig preset = precision_preset(p.mode);
  const LossScaleConfig &s = p.loss_scale, &d = preset.loss_scale;
  PrecisionOverrides o;
  if (s.kind != d.kind) o.loss_scale_kind = s.kind;
  if (p.master_weights != preset.master_weights) o.master_weights = p.master_weights;
  if (s.init_scale != d.init_scale || s.kind == LossScaleKind::Static) o.init_scale = s.init_scale;
  if (s.growth_factor != d.growth_factor) o.growth_factor = s.growth_factor;
  if (s.backoff_factor != d.backoff_factor) o.backoff_factor = s.backoff_factor;
  if (s.growth_interval != d.growth_interval) o.growth_interval = s.growth_interval;
  if (s.hysteresis != d.hysteresis) o.hysteresis = s.hysteresis;
  if (s.min_scale != d.min_scale) o.min_scale = s.min_scale;
  if (s.max_scale != d.max_scale) o.max_scale = s.max_scale;
  return o;
}

}  // namespace ampwb
