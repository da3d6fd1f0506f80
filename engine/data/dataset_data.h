// The inside of a Dataset, shared (read-only) with its loaders: where each image comes from and the two splits.
// Internal to engine/data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image_file.h"

namespace ampwb::detail {

struct Sample {
  int64_t item = 0;   // index into DatasetData::paths/sizes, or into pixels.labels
  int32_t label = 0;  // in class_names
};

struct DatasetData {
  DatasetReport report;
  std::vector<std::string> class_names;
  std::string cache_dir;  // resolved; "" = none
  std::string split_key;  // the options that chose the training split (part of the statistics' cache key)

  // Images in files (folder layouts): the path to open, stored width and height, format.
  std::vector<std::string> paths;
  struct Size {
    int width = 0, height = 0;
    ImageFormat format = ImageFormat::Unknown;
  };
  std::vector<Size> sizes;
  // Images in memory (IDX, CIFAR): one size for all.
  bool in_memory = false;
  int pixel_height = 0, pixel_width = 0, pixel_channels = 0;
  bool planar = false;
  std::vector<uint8_t> pixels;

  std::vector<Sample> train, validation;
  int native_size = 0;

  const std::vector<Sample>& samples(Split s) const { return s == Split::Train ? train : validation; }
  int width_of(int64_t item) const { return in_memory ? pixel_width : sizes[static_cast<size_t>(item)].width; }
  int height_of(int64_t item) const { return in_memory ? pixel_height : sizes[static_cast<size_t>(item)].height; }
};

}  // namespace ampwb::detail
