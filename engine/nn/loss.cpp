// Cross-entropy and accuracy.
#include "nn/loss.h"

#include "core/error.h"
#include "nn/layer.h"

namespace ampwb {

void SoftmaxCrossEntropy::forward(const Tensor& logits, const Tensor& labels, GradScale grad_scale) {
  Tensor logits32 = logits;
  if (logits.dtype() != DType::F32) {  // the loss is always FP32
    logits32 = Tensor::empty(logits.shape(), DType::F32, Layout::NCHW, logits.device());
    backend_.convert(logits, logits32);
  }
  dlogits_ = empty_like(logits32);
  backend_.softmax_cross_entropy(logits32, labels, label_smoothing_, grad_scale, dlogits_);
}

float SoftmaxCrossEntropy::forward_and_read(const Tensor& logits, const Tensor& labels) {
  forward(logits, labels);
  return static_cast<float>(backend_.read_scalars().loss);
}

int64_t count_topk_correct(const Tensor& logits, const Tensor& labels, int k) {
  AMPWB_CHECK(logits.rank() == 2 && logits.dtype() == DType::F32 && labels.numel() == logits.dim(0),
              "count_topk_correct: logits " << logits.describe() << " labels " << labels.describe());
  const int64_t N = logits.dim(0), K = logits.dim(1);
  const float* z = logits.data_as<float>();
  const int32_t* y = labels.data_as<int32_t>();
  int64_t correct = 0;
  for (int64_t n = 0; n < N; ++n) {
    const float target = z[n * K + y[n]];
    int64_t above = 0;  // classes scoring at least as high as the label, other than the label itself (NaN: all)
    for (int64_t j = 0; j < K; ++j)
      if (j != y[n] && !(z[n * K + j] < target)) ++above;
    if (above < k) ++correct;
  }
  return correct;
}

void add_to_confusion(const Tensor& logits, const Tensor& labels, std::vector<int64_t>& confusion) {
  AMPWB_CHECK(logits.rank() == 2 && logits.dtype() == DType::F32 && labels.numel() == logits.dim(0),
              "add_to_confusion: logits " << logits.describe() << " labels " << labels.describe());
  const int64_t N = logits.dim(0), K = logits.dim(1);
  confusion.resize(static_cast<size_t>(K * K), 0);
  const float* z = logits.data_as<float>();
  const int32_t* y = labels.data_as<int32_t>();
  for (int64_t n = 0; n < N; ++n) {
    int64_t predicted = y[n];
    for (int64_t j = 0; j < K; ++j)
      if (j != y[n] && z[n * K + j] >= z[n * K + predicted] &&
          (predicted == y[n] || z[n * K + j] > z[n * K + predicted]))
        predicted = j;
    ++confusion[static_cast<size_t>(y[n] * K + predicted)];
  }
}

}  // namespace ampwb
