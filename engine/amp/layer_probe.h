// Per-layer numerics on a probed step (amp/layer_numerics.h): the statistics of one tensor against FP16's range,
// and the records the layers fill in, opened by forward in model order and completed by backward.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "amp/layer_numerics.h"
#include "core/tensor.h"

namespace ampwb {

// The range of a host tensor's values (any floating dtype) against FP16's: a fraction of an empty tensor is 0.
ValueRange value_range(const Tensor& host);

// Which of a probed layer's tensors a tensor hook is handed.
enum class ProbedTensor { Activation, ActivationGrad, WeightGrad };

class LayerProbe {
 public:
  // Called, when set, with each record's index and the tensor itself as the layer holds it (on the backend's
  // device, in the dtype it computed in): the precision divergence (train/divergence_step.h) compares them.
  using TensorHook = std::function<void(size_t index, ProbedTensor which, const Tensor& t)>;
  void set_tensor_hook(TensorHook hook) { hook_ = std::move(hook); }
  void hand_over(size_t index, ProbedTensor which, const Tensor& t) const {
    if (hook_) hook_(index, which, t);
  }

  // A layer's record, opened by its forward: the index its backward completes it by.
  size_t open(LayerNumerics record);
  LayerNumerics& at(size_t index) { return records_.at(index); }
  // The records since the last take(), in the order their layers ran forward, stamped with the step; resets.
  std::vector<LayerNumerics> take(int epoch, int64_t step, double loss_scale);

 private:
  std::vector<LayerNumerics> records_;
  TensorHook hook_;
};

}  // namespace ampwb
