// A trained network applied to image files: the run's preprocessing (data/image_input.h: the validation loader's),
// then the network in inference form (batch norm on its running statistics) in FP32, a batch at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/device_choice.h"
#include "train/model_weights.h"

namespace ampwb {

// One image's logits (one per class), or why its file could not be read (logits then empty).
struct ImageLogits {
  std::vector<float> logits;
  std::string unreadable;
};

class ImagePredictor {
 public:
  // Builds the network of `weights` on `device` (threads: CPU threads, 0 = all cores).
  explicit ImagePredictor(ModelWeights weights, DeviceChoice device = DeviceChoice::cpu(), int threads = 0);
  ~ImagePredictor();
  ImagePredictor(const ImagePredictor&) = delete;
  ImagePredictor& operator=(const ImagePredictor&) = delete;

  // Each image's logits, batch_size images through the network at once; a file that cannot be read says why instead.
  std::vector<ImageLogits> logits(const std::vector<std::string>& images, int batch_size = 64);

  const ModelWeights& weights() const;
  std::string device_description() const;  // the backend's: device and libraries

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Probabilities from logits (softmax, in double).
std::vector<double> softmax(const std::vector<float>& logits);
// The k highest logits' classes, highest first (ties: the lower class first, as argmax).
std::vector<int> top_classes(const std::vector<float>& logits, int k);

}  // namespace ampwb
