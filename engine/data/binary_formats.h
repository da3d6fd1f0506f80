// Readers for datasets stored as pixel arrays: MNIST-family IDX files (plain or gzip) and CIFAR-10 binary batches.
// Both hold images of one size; they are read whole into memory (Fashion-MNIST: 55 MB, CIFAR-10: 184 MB).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ampwb {

struct PixelImages {
  int height = 0, width = 0, channels = 0;  // channels 1 (IDX) or 3 (CIFAR)
  bool planar = false;                      // CIFAR stores R, G and B planes one after another
  std::vector<uint8_t> pixels;              // image i at i * height * width * channels
  std::vector<int32_t> labels;
  uint64_t content_hash = 0;  // of the files' bytes as stored, for the dataset fingerprint

  int64_t count() const { return static_cast<int64_t>(labels.size()); }
  size_t image_bytes() const { return static_cast<size_t>(height) * width * channels; }
};

// An IDX image file (magic 0x00000803: N x H x W bytes) with its label file (0x00000801: N bytes). Throws
// ampwb::Error naming the file and the problem: not IDX, truncated, counts that differ, bad gzip data.
PixelImages read_idx_pair(const std::string& images_path, const std::string& labels_path);

// Appends one CIFAR-10 binary batch (records of 1 label byte + 3 x 32 x 32 bytes) to `images`. Throws
// ampwb::Error naming the file when its size is not a whole number of records.
void read_cifar10_batch(const std::string& path, PixelImages& images);

}  // namespace ampwb
