// CIFAR-10 binary batches.
#include "data/binary_formats.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ampwb::PixelImages images;
  try {
    ampwb::read_cifar10_batch(ampwb::fuzz::write_input(data, size), images);
  } catch (const std::exception&) {
  }
  return 0;
}
