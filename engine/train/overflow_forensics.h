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

// What a skipped step's gradients held. Their norm is inf or NaN; the norm of their finite values says how large
// the rest were: near FP16's limit once multiplied by the loss scale, the scale was too high; small, and one layer
// blew up on its own.
struct NonfiniteGradients {
  std::vector<std::string> layers;  // whose gradients hold an inf or a NaN, deduplicated, in backward order
  int64_t nonfinite_values = 0;     // inf and NaN values over all gradients
  double finite_norm = 0;           // L2 norm of the finite values, as the gradients are (unscaled after unscale)
};

// `params` in model order. Copies every gradient to the host: for skipped steps, not for every step.
NonfiniteGradients find_nonfinite_gradients(Backend& backend, const std::vector<Parameter*>& params);

}  // namespace ampwb
