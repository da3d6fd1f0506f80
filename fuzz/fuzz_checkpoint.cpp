// Checkpoint files (header JSON, checksums, tensor table).
#include "fuzz_util.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ampwb::load_checkpoint(ampwb::fuzz::write_input(data, size));
  } catch (const std::exception&) {
  }
  return 0;
}
