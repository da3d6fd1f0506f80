// Inference on image files with a run's final weights.
#include "train/predictor.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

#include "data/image_input.h"
#include "nn/layer.h"

namespace ampwb {

struct ImagePredictor::State {
  ModelWeights weights;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<ResNet> model;
  int decode_threads = 1;
};

ImagePredictor::ImagePredictor(ModelWeights weights, DeviceChoice device, int threads) : s_(std::make_unique<State>()) {
  s_->weights = std::move(weights);
  s_->backend = make_backend(device, {threads});
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s_->decode_threads = std::min(8, threads > 0 ? threads : cores);
  s_->model = build_model(*s_->backend, s_->weights);
}

ImagePredictor::~ImagePredictor() = default;

const ModelWeights& ImagePredictor::weights() const { return s_->weights; }

std::string ImagePredictor::device_description() const { return s_->backend->description(); }

std::vector<ImageLogits> ImagePredictor::logits(const std::vector<std::string>& images, int batch_size) {
  const Preprocessing& p = s_->weights.preprocessing;
  Normalization normalization;
  std::copy(p.mean.begin(), p.mean.end(), normalization.mean);
  std::copy(p.stddev.begin(), p.stddev.end(), normalization.stddev);
  std::vector<ImageLogits> rows;
  for (size_t begin = 0; begin < images.size(); begin += static_cast<size_t>(batch_size)) {
    const std::vector<std::string> batch(
        images.begin() + static_cast<std::ptrdiff_t>(begin),
        images.begin() + static_cast<std::ptrdiff_t>(std::min(images.size(), begin + batch_size)));
    PreparedImages input = prepare_image_files(batch, p.image_size, normalization, s_->decode_threads);
    std::vector<float> values;  // (n, classes), when any image of the batch was read
    if (std::ranges::any_of(input.unreadable, &std::string::empty)) {
      Backend& backend = *s_->backend;
      values = to_float_vector(
          on_host(backend, cast(backend, s_->model->forward(backend.upload(input.batch), Mode::Eval), DType::F32)));
    }
    const size_t classes = values.size() / batch.size();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!input.unreadable[i].empty()) {
        rows.push_back({{}, std::move(input.unreadable[i])});
        continue;
      }
      rows.push_back({{values.begin() + static_cast<std::ptrdiff_t>(i * classes),
                       values.begin() + static_cast<std::ptrdiff_t>((i + 1) * classes)},
                      ""});
    }
  }
  return rows;
}

std::vector<double> softmax(const std::vector<float>& logits) {
  if (logits.empty()) return {};
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(static_cast<double>(logits[i]) - top);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<int> top_classes(const std::vector<float>& logits, int k) {
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t n = std::min(order.size(), static_cast<size_t>(std::max(0, k)));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&logits](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  order.resize(n);
  return order;
}

}  // namespace ampwb
