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

NonfiniteGradients find_nonfinite_gradients(Backend& backend, const std::vector<Parameter*>& params) {
  NonfiniteGradients out;
  double sum_of_squares = 0;
  for (auto p = params.rbegin(); p != params.rend(); ++p) {
    int64_t nonfinite = 0;
    for (float v : to_float_vector(on_host(backend, fp32_gradient(backend, **p)))) {
      if (std::isfinite(v))
        sum_of_squares += static_cast<double>(v) * v;
      else
        ++nonfinite;
    }
    if (nonfinite == 0) continue;
    out.nonfinite_values += nonfinite;
    const std::string layer = layer_of((*p)->name);
    if (std::find(out.layers.begin(), out.layers.end(), layer) == out.layers.end()) out.layers.push_back(layer);
  }
  out.finite_norm = std::sqrt(sum_of_squares);
  return out;
}

}  // namespace ampwb
