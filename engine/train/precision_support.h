// Whether a device can train in a precision mode, what really computes there and what to expect: the one place
// that reads the backend's capabilities for the trainer, `ampwb bench`, the CLI and the GUI.
#pragma once

#include <string>
#include <vector>

#include "amp/precision.h"
#include "backend/backend.h"

namespace ampwb {

struct ModeSupport {
  bool supported = true;
  std::string reason;              // why not, when unsupported
  std::string compute;             // what computes the mode's low-precision ops here; empty for fp32
  std::vector<std::string> notes;  // advice for the user, shown before and with the run
};

// Whether the device with capabilities `caps` trains in `mode`.
ModeSupport mode_support(PrecisionMode mode, const Capabilities& caps);
// The same for one run's precision: its notes say what its own settings do (FP8's first and last layers).
ModeSupport mode_support(const PrecisionConfig& precision, const Capabilities& caps);

}  // namespace ampwb
