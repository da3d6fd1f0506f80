// A simple image-folder dataset: class sub-folders, or train/ and val|valid|test/ folders of class sub-folders.
// Images are decoded with OpenCV, converted to RGB, resized (shorter side) and center-cropped to a square, and
// cached in memory as 8-bit pixels when they fit the budget, so later epochs decode nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace ampwb {

struct ImageSample {
  std::string path;
  int32_t label = 0;
};

struct ImageDataset {
  std::string root;
  std::string layout;  // "class-folders" or "split-folders"
  std::vector<std::string> class_names;
  std::vector<ImageSample> train, validation;
};

struct ScanOptions {
  double validation_fraction = 0.2;  // for class-folders: a stratified split by this fraction
  uint64_t seed = 0;
  int64_t max_train_images = 0;      // 0 = all; else the first N in file-name order
};

// Throws ampwb::Error naming the problem when the folder cannot be trained on.
ImageDataset scan_image_folder(const std::string& root, const ScanOptions& options = {});

// The shorter side of the first decodable training image (to pick a default image size).
int probe_image_size(const ImageDataset& dataset);

struct Normalization {
  float mean[3] = {0.485f, 0.456f, 0.406f};  // ImageNet's, until computed from the data
  float stddev[3] = {0.229f, 0.224f, 0.225f};
};

class ImageBatcher {
 public:
  ImageBatcher(std::vector<ImageSample> samples, int image_size, Normalization norm, int threads,
               size_t cache_budget_bytes = size_t{2} << 30);

  int64_t size() const { return static_cast<int64_t>(samples_.size()); }
  int64_t batches(int batch_size) const { return (size() + batch_size - 1) / batch_size; }

  // Shuffles the order for an epoch (deterministically from the rng), or restores file order.
  void shuffle(Rng& rng);
  void unshuffle();

  // Batch b of the current order: images (n,3,S,S) FP32 NHWC normalised, labels (n) I32. The last batch may be
  // smaller.
  void batch(int64_t index, int batch_size, Tensor& images, Tensor& labels);

  // Per-channel mean and standard deviation of up to max_images images (pixel values in [0,1]).
  Normalization compute_statistics(int64_t max_images) ;

 private:
  const uint8_t* pixels(int64_t sample);  // S*S*3 RGB, from the cache or decoded into scratch

  std::vector<ImageSample> samples_;
  std::vector<int64_t> order_;
  int image_size_;
  Normalization norm_;
  int threads_;
  bool cache_enabled_;
  std::vector<std::vector<uint8_t>> cache_;  // per sample, empty until decoded
};

// Decodes one image to S*S*3 RGB bytes (shorter side resized to S, center crop). Throws on undecodable files.
std::vector<uint8_t> decode_square_rgb(const std::string& path, int size);

}  // namespace ampwb
