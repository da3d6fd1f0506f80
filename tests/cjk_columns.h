// The tests' oracle for the terminal columns a line of Chinese and Latin text takes, independent of
// core/display_width.h, which it checks: a Chinese character (3 bytes in UTF-8) takes 2 columns, any other code
// point 1.
#pragma once

#include <cstddef>
#include <string_view>

namespace ampwb::testing {

inline size_t cjk_columns(std::string_view line) {
  size_t n = 0;
  for (const char c : line)
    if (const auto b = static_cast<unsigned char>(c); (b & 0xC0) != 0x80) n += b >= 0xE0 ? 2 : 1;
  return n;
}

}  // namespace ampwb::testing
