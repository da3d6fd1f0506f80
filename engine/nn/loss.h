// Softmax cross-entropy (optional label smoothing) and top-k accuracy: computed in FP32 from the logits.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace ampwb {

class SoftmaxCrossEntropy {
 public:
  SoftmaxCrossEntropy(Backend& backend, float label_smoothing = 0.0f)
      : backend_(backend), label_smoothing_(label_smoothing) {}

  // logits (N,K), labels (N) I32. Queues the loss and its gradient, scaled by grad_scale (loss scaling: a factor, or
  // a LossScaleState's scale on the device); the mean loss and the top-1 count wait on the device for
  // Backend::read_scalars(), so a step waits only once.
  void forward(const Tensor& logits, const Tensor& labels, GradScale grad_scale = 1.0f);
  // forward(), then the mean loss read back (a wait for the device): tests and one-off values.
  float forward_and_read(const Tensor& logits, const Tensor& labels);
  Tensor backward() const { return dlogits_; }  // (N,K): grad_scale * d(mean loss)/d(logits)

 private:
  Backend& backend_;
  float label_smoothing_;
  Tensor dlogits_;
};

// Samples whose label is among the k largest logits (ties count against the sample). logits (N,K) F32 on the CPU.
int64_t count_topk_correct(const Tensor& logits, const Tensor& labels, int k);

// Adds each sample to confusion[label * K + predicted] (K x K, row: the true class). The prediction is the largest
// logit; a label tied with another class counts as that class, as count_topk_correct counts it wrong.
void add_to_confusion(const Tensor& logits, const Tensor& labels, std::vector<int64_t>& confusion);

}  // namespace ampwb
