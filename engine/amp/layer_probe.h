// Per-layer numerics on a probed step (amp/layer_numerics.h): the statistics of one tensor against FP16's range,
// and the records the layers fill in, opened by forward in model order and completed by backward.
#pragma once

#include <vector>

#include "amp/layer_numerics.h"
#include "core/tensor.h"

namespace ampwb {

// The range of a host tensor's values (any floating dtype) against FP16's: a fraction of an empty tensor is 0.
ValueRange value_range(const Tensor& host);

class LayerProbe {
 public:
  // A layer's record, opened by its forward: the index its backward completes it by.
  size_t open(LayerNumerics record);
  LayerNumerics& at(size_t index) { return records_.at(index); }
  // The records since the last take(), in the order their layers ran forward, stamped with the step; resets.
  std::vector<LayerNumerics> take(int epoch, int64_t step, double loss_scale);

 private:
  std::vector<LayerNumerics> records_;
};

}  // namespace ampwb
