// A precision mode's preset with a user's changes to it: the one resolver behind the CLI's precision flags and the
// GUI's precision fields, so that the same choices make the same PrecisionConfig in both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "amp/precision.h"

namespace ampwb {

// What a user changed on a mode's preset; each part left unset keeps the preset's.
// Each member braced, so that a designated initializer may leave any out without GCC 12's warning.
struct PrecisionOverrides {
  // A framework's loss-scaler settings (loss_scale_preset: "pytorch", "apex", ...) in place of the preset's, which
  // keeps its kind; empty: none.
  std::string scaler_preset{};
  std::optional<LossScaleKind> loss_scale_kind{};
  std::optional<bool> master_weights{};
  std::optional<double> init_scale{}, growth_factor{}, backoff_factor{}, min_scale{}, max_scale{};
  std::optional<int64_t> growth_interval{};
  std::optional<int> hysteresis{};
};

// The mode's preset, then the scaler preset, then each override given.
PrecisionConfig resolve_precision(PrecisionMode mode, const PrecisionOverrides& overrides = {});

// What `p` sets differently from its mode's preset, as overrides: resolved with another mode, they carry a user's
// loss scaler settings over to it (a sweep of modes from one configuration).
PrecisionOverrides overrides_of(const PrecisionConfig& p);

}  // namespace ampwb
