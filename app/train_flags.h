// The flags that describe a training run, bound to TrainConfig's fields for `ampwb train`: a flag's default is the
// field's default (shown in the help), and what CLI11 cannot check alone (ranges that depend on each other, the
// data) is refused by validate() naming the setting, which the CLI says as the flag (setting_flags.h).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "train/config.h"

namespace ampwb::cli {

// The precision modes' names, as --precision takes them (from the one table, kPrecisionModes in amp/precision.h).
const std::vector<std::string>& precision_modes();

// Adds --precision MODE bound to `mode` (fp32 by default), refused by name when it is not a mode.
CLI::Option* add_precision_mode(CLI::App* command, std::string& mode);

// The precision mode and its overrides, applied in this order whatever the order of the flags: the mode's preset,
// a framework's scaler defaults (--scaler-preset), --loss-scale and --master-weights, then single scaler
// parameters (for ablations).
struct PrecisionFlags {
  std::string mode = "fp32";
  std::string scaler_preset, loss_scale, master_weights;  // empty: not given
  std::optional<double> init_scale, growth_factor, backoff_factor, min_scale, max_scale;
  std::optional<int64_t> growth_interval;
  std::optional<int> hysteresis;
  Fp8Config fp8;  // amp-fp8's settings, as given (the defaults otherwise)

  PrecisionConfig resolve() const;
};

struct TrainFlags {
  TrainConfig config;  // the fields a flag sets as they are; precision and stem come from the members below
  std::string stem = "auto";
  PrecisionFlags precision;

  // The configuration the flags describe (TrainFlags{}.resolve(): the one no flag changes).
  TrainConfig resolve() const;
};

// Adds every training flag to `command`, in help groups, bound to `flags` (which must outlive the parse).
void add_train_flags(CLI::App* command, TrainFlags& flags);

// A folder as an absolute path, so a stored run finds it from any working directory ("" stays ""). A path in quotes
// that name no folder, where the path inside them does, is refused saying so.
std::string absolute_folder(const std::string& folder);

}  // namespace ampwb::cli
