// The flags that describe a training run, shared by `ampwb train` (and later the GUI's presets).
#pragma once

#include "args.h"
#include "train/config.h"

namespace ampwb::cli {

// Reads every training flag into a configuration; throws naming a malformed flag.
TrainConfig parse_train_flags(Args& args);

// The precision mode and its overrides: --precision, --loss-scale, --master-weights, --scaler-preset and the
// scaler's parameters.
PrecisionConfig parse_precision_flags(Args& args);

// The help text for those flags.
const char* train_flags_help();

}  // namespace ampwb::cli
