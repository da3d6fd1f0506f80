// Image transforms of the loader, on 8-bit BGR cv::Mats (OpenCV's order; RGB appears only in the output tensor).
//
// Every output is an S x S crop: validation resizes the shorter side to S and takes the center; training either
// takes a random-resized crop (torchvision's RandomResizedCrop: area 8-100 %, aspect 3/4-4/3) or pads by S/8 and
// takes a random S x S crop (the CIFAR recipe), then flips horizontally with probability 1/2 when asked.
// Internal to engine/data.
#pragma once

#include <cstdint>

#include <opencv2/core.hpp>

#include "core/dtype.h"
#include "core/rng.h"
#include "data/dataset_data.h"
#include "data/normalization.h"

namespace ampwb::detail {

// The pixels of one sample as 8-bit BGR, decoding files (JPEGs at the largest reduction that keeps the shorter side
// at least `min_shorter_side`). Returns an empty Mat, and why in `why` when given, when a file vanished, shrank
// or changed since the dataset was read: unreadable, structurally broken, another size, or no longer decoding.
cv::Mat load_bgr(const DatasetData& data, int64_t item, int min_shorter_side, std::string* why = nullptr);

// The center square of the image, resized to S x S.
cv::Mat center_square(const cv::Mat& bgr, int size);
// The image resized so its shorter side is `side` (aspect kept; never enlarged past what is asked).
cv::Mat resize_shorter_side(const cv::Mat& bgr, int side);
// torchvision's RandomResizedCrop on `bgr`, resized to S x S.
cv::Mat random_resized_crop(const cv::Mat& bgr, int size, Rng& rng);

// Writes an S x S region of `bgr` (shifted by dx, dy: pixels outside are black, as padding) into out[S*S*3] as
// normalized RGB in NHWC order, mirrored when `flip`. `lut[c][v]` is channel c's normalized value of v.
struct NormalizeTable {
  float lut[3][256];
  explicit NormalizeTable(const Normalization& n);
};
void write_normalized(const cv::Mat& bgr, int size, int dx, int dy, bool flip, const NormalizeTable& table, DType dtype,
                      void* out);

}  // namespace ampwb::detail
