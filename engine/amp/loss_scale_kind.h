// Whether and how the loss is scaled (LossScaleConfig::kind, a precision mode's preset): off, a fixed scale, or a
// scale that follows the gradients' overflows (amp/loss_scaler.h).
#pragma once

#include <array>
#include <cstdint>

#include "core/choices.h"

namespace ampwb {

enum class LossScaleKind : uint8_t { Off, Static, Dynamic };

template <>
struct ChoiceTable<LossScaleKind> {
  static constexpr const char* what = "loss scaling";
  static constexpr std::array<Choice<LossScaleKind>, 3> rows = {{
      {LossScaleKind::Off, "off", "off", "scale 1: the gradients pass through and no step is skipped"},
      {LossScaleKind::Static, "static", "static",
       "a fixed scale, the initial one; no step is skipped (Apex's static mode)"},
      {LossScaleKind::Dynamic, "dynamic", "dynamic",
       "backs off when a step's gradients overflow, skipping the step, and grows after a run of clean steps "
       "(PyTorch's GradScaler)"},
  }};
};

}  // namespace ampwb
