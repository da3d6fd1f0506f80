// IDX (MNIST-style) image and label files, plain or gzip: the first byte says which of the pair is the input;
// the other is a valid file for 2 images of 2 x 2 pixels.
#include "data/binary_formats.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t valid_images[] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8};
  const uint8_t valid_labels[] = {0, 0, 8, 1, 0, 0, 0, 2, 0, 1};
  const bool fuzz_images = data[0] & 1;
  const std::string images = fuzz_images ? ampwb::fuzz::write_input(data + 1, size - 1, "-images")
                                         : ampwb::fuzz::write_input(valid_images, sizeof valid_images, "-images");
  const std::string labels = fuzz_images ? ampwb::fuzz::write_input(valid_labels, sizeof valid_labels, "-labels")
                                         : ampwb::fuzz::write_input(data + 1, size - 1, "-labels");
  try {
    ampwb::read_idx_pair(images, labels);
  } catch (const std::exception&) {  // refused with a message: the expected answer to a bad file
  }
  return 0;
}
