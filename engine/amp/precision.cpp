// The precision modes' names and presets.
#include "amp/precision.h"

#include "core/error.h"

namespace ampwb {

PrecisionMode parse_precision_mode(std::string_view name) {
  for (const PrecisionModeInfo& m : kPrecisionModes)
    if (name == m.name) return m.mode;
  throw Error("unknown precision mode '" + std::string(name) + "' (expected " + precision_mode_names() + ")");
}

std::string precision_mode_names() {
  std::string names;
  for (size_t i = 0; i < kPrecisionModes.size(); ++i)
    names += (i == 0 ? "" : i + 1 == kPrecisionModes.size() ? " or " : ", ") + std::string(kPrecisionModes[i].name);
  return names;
}

PrecisionConfig precision_preset(PrecisionMode mode) {
  const PrecisionModeInfo& m = mode_info(mode);
  return {mode, m.master_weights, {m.loss_scaling}, {}};
}

PrecisionConfig precision_preset(std::string_view name) { return precision_preset(parse_precision_mode(name)); }

}  // namespace ampwb
