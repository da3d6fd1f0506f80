// Image files outside any dataset, prepared exactly as the validation loader prepares a dataset's images
// (data/transforms.h): decoded to 8-bit RGB, JPEGs at the largest reduction that keeps the shorter side at least S,
// the center square resized to S x S, normalized per channel. What ampwb predict feeds a trained network.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/normalization.h"

namespace ampwb {

struct PreparedImages {
  Tensor batch;                         // (n, 3, S, S) F32 in NHWC layout
  std::vector<std::string> unreadable;  // n: why image i could not be read (its pixels then zero), else ""
};

// The images of `paths` as one batch, normalized as a DataLoader's, decoded on `threads` threads. A file that is
// missing, unreadable, not an image or does not decode is named in `unreadable`, so that it costs only its own row.
PreparedImages prepare_image_files(const std::vector<std::string>& paths, int size, const Normalization& normalization,
                                   int threads = 1);

// The image files among `paths`, a folder standing for every image file under it (by extension, in sorted order,
// sub-folders included); a path that is no folder stays as it is, missing or not (prepare_image_files names why it
// cannot be read). The other files of the folders, hidden ones aside, go to `left_out`, to be said. Throws
// ampwb::Error naming a folder that cannot be listed or holds no image.
std::vector<std::string> image_files_in(const std::vector<std::string>& paths,
                                        std::vector<std::string>* left_out = nullptr);

}  // namespace ampwb
