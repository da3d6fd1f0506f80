// gzip streams (the IDX files' compression), through the engine's reader (zlib, a size limit, its own errors).
#include "data/gzip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ampwb::gunzip(data, size, "fuzz input");
  } catch (const std::exception&) {
  }
  return 0;
}
