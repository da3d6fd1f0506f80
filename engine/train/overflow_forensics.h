// Overflow forensics: on a skipped step, which layers' gradients held inf or NaN. The first named is the one nearest
// the loss, where backward met the overflow first; the others are usually where it spread.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"
#include "nn/layer.h"

namespace ampwb {

// "layer1.0.conv1.weight" -> "layer1.0.conv1": the layer a parameter belongs to.
std::string layer_of(const std::string& parameter_name);

// The layers among `params` (in model order) whose gradients hold an inf or a NaN, deduplicated, in backward order
// (the reverse of model order). Copies every gradient to the host: for skipped steps, not for every step.
std::vector<std::string> layers_with_nonfinite_gradients(Backend& backend, const std::vector<Parameter*>& params);

}  // namespace ampwb
