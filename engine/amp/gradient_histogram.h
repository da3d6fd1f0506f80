// The gradient histogram a run reports once per epoch (the paper's Fig. 3 on the user's own run): a value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ampwb {

// log2-magnitude histogram of gradient values, one bin per power of two from min_log2 to max_log2, plus zeros.
// Values are as stored during backward: multiplied by loss_scale when the run scales its loss, so the fractions
// say what FP16 storage really lost (or, for FP32 and BF16 runs, what it would have lost).
struct GradientHistogram {
  int epoch = 0;
  std::string kind;  // "activation" or "weight"
  double loss_scale = 1;
  int min_log2 = -40, max_log2 = 20;
  std::vector<int64_t> counts;  // max_log2 - min_log2 + 1 bins; bin i holds |g| in [2^(min_log2+i), 2^(min_log2+i+1))
  int64_t zeros = 0, nonfinite = 0, total = 0;
  double underflow_fraction = 0;  // nonzero and below 2^-24: zero in FP16
  double overflow_fraction = 0;   // above 65504: inf in FP16
};

}  // namespace ampwb
