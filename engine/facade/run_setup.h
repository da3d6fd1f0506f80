// The facade's run setup: the settings of a run (TrainConfig) with the value types and presets they are made of
// (ResNet depths and stems, loss-scale presets, a precision mode's preset with a user's overrides), what a precision
// mode does on a device, and the memory a run needs.
// The front ends set runs up through this header rather than reaching into models/ or amp/.
#pragma once

#include "amp/loss_scaler.h"
#include "amp/precision_overrides.h"
#include "models/resnet.h"
#include "train/config.h"
#include "train/memory_estimate.h"
#include "train/precision_support.h"
