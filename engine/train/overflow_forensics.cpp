// Overflow forensics: a host check of every gradient, run only on skipped steps.
#include "train/overflow_forensics.h"

#include <algorithm>
#include <cmath>

namespace ampwb {

std::string layer_of(const std::string& parameter_name) {
  for (const char* suffix : {".weight", ".bias"}) {
    const std::string s = suffix;
    if (parameter_name.size() > s.size() && parameter_name.ends_with(s))
      return parameter_name.substr(0, parameter_name.size() - s.size());
  }
  return parameter_name;
}

std::vector<std::string> layers_with_nonfinite_gradients(Backend& backend, const std::vector<Parameter*>& params) {
  std::vector<std::string> layers;
  for (auto p = params.rbegin(); p != params.rend(); ++p) {
    const std::vector<float> g = to_float_vector(on_host(backend, (*p)->grad));
    if (std::all_of(g.begin(), g.end(), [](float v) { return std::isfinite(v); })) continue;
    const std::string layer = layer_of((*p)->name);
    if (std::find(layers.begin(), layers.end(), layer) == layers.end()) layers.push_back(layer);
  }
  return layers;
}

}  // namespace ampwb
