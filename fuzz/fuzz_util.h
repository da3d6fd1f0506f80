// Shared by the fuzz targets: the input as a file (the readers take paths), rewritten for each input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace ampwb::fuzz {

inline std::string write_input(const uint8_t* data, size_t size, const char* suffix = "") {
  const std::string path = "/tmp/ampwb-fuzz-" + std::to_string(::getpid()) + suffix;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace ampwb::fuzz
