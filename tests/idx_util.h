// Tiny IDX datasets written at test time (MNIST's format: no image codec needed): two classes of 8-bit grayscale
// stripes, horizontal and vertical, that any ResNet separates in a few steps.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/rng.h"

namespace ampwb {

namespace fs = std::filesystem;

// `root`/train-{images,labels}-idx* with 2 * per_class images, t10k-* with a quarter as many.
inline fs::path make_stripes_idx(const std::string& name, int per_class, int size) {
  const fs::path root = fs::temp_directory_path() / ("ampwb_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  Rng rng(5);
  auto big_endian = [](std::ofstream& out, uint32_t v) {
    const char bytes[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    out.write(bytes, 4);
  };
  for (const auto& [split, count] : {std::pair<std::string, int>{"train", 2 * per_class}, {"t10k", per_class / 2}}) {
    std::ofstream images(root / (split + "-images-idx3-ubyte"), std::ios::binary);
    std::ofstream labels(root / (split + "-labels-idx1-ubyte"), std::ios::binary);
    big_endian(images, 0x803), big_endian(images, count), big_endian(images, size), big_endian(images, size);
    big_endian(labels, 0x801), big_endian(labels, count);
    for (int i = 0; i < count; ++i) {
      const int cls = i % 2, phase = static_cast<int>(rng.below(4));
      std::vector<char> pixels(static_cast<size_t>(size * size));
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x) {
          const int base = (((cls ? x : y) + phase) / 2) % 2 ? 200 : 50;
          pixels[static_cast<size_t>(y * size + x)] =
              static_cast<char>(std::clamp(base + static_cast<int>(rng.normal() * 30), 0, 255));
        }
      images.write(pixels.data(), static_cast<std::streamsize>(pixels.size()));
      labels.put(static_cast<char>(cls));
    }
  }
  return root;
}

}  // namespace ampwb
