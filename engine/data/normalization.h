// Per-channel normalization of RGB pixel values v in [0, 1]: (v - mean) / stddev. The statistics are either
// ImageNet's or the dataset's own, computed once per dataset and split and then remembered: in this process's
// memory and in the cache folder (DatasetOptions::cache_dir), keyed by the dataset fingerprint and split options.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/choices.h"
#include "data/dataset.h"

namespace ampwb {

// A training run's choice of statistics (DataConfig::normalization); the loader also takes "none".
enum class NormalizationStats : uint8_t { Dataset, ImageNet };

template <>
struct ChoiceTable<NormalizationStats> {
  static constexpr const char* what = "normalization";
  static constexpr std::array<Choice<NormalizationStats>, 2> rows = {{
      {NormalizationStats::Dataset, "dataset", "the dataset's",
       "the training split's own mean and standard deviation per channel, computed once"},
      {NormalizationStats::ImageNet, "imagenet", "ImageNet's", "ImageNet's mean and standard deviation per channel"},
  }};
};

// NOTE: the same definition as data/image_folder.h's, token for token, while both files exist (the linker must see
// one definition); that file goes when the trainer moves to this pipeline, and this comment with it.
struct Normalization {
  float mean[3] = {0.485f, 0.456f, 0.406f};  // ImageNet's, until computed from the data
  float stddev[3] = {0.229f, 0.224f, 0.225f};
};

Normalization imagenet_normalization();
Normalization identity_normalization();  // mean 0, stddev 1: values stay in [0, 1]

// Mean and standard deviation per channel over the pixels of the training split: every image for IDX/CIFAR, up to
// 2048 evenly spaced training images for image folders (JPEGs decoded at a reduced scale, at least 32 px). Decodes
// on `threads` threads (core/parallel_for.h).
Normalization dataset_normalization(const Dataset& dataset, int threads = 2);

// "dataset", "imagenet" or "none"; throws ampwb::Error naming the choices otherwise.
Normalization normalization_by_name(const std::string& name, const Dataset& dataset, int threads = 2);

}  // namespace ampwb
