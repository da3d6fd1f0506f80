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

}  // namespace ampwb
