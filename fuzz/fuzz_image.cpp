// Image files as the loader meets them: the structure check, then OpenCV's decoding where the check passes.
#include <opencv2/core.hpp>

#include "data/image_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    if (ampwb::check_image(data, size).ok) ampwb::decode_bgr8(data, size, 1);
  } catch (const std::exception&) {
  }
  return 0;
}
