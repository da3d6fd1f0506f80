#include "core/display_width.h"

#include <algorithm>
#include <iterator>

namespace ampwb {
namespace {

struct Range {
  char32_t first, last;
};

// Unicode's combining marks, format characters and Hangul's medial and final jamo, which take no column of their own.
constexpr Range kZeroWidth[] = {{0x0300, 0x036F}, {0x1160, 0x11FF}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF},
                                {0x200B, 0x200F}, {0x2060, 0x2064}, {0x20D0, 0x20FF}, {0x3099, 0x309A},
                                {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF}, {0xE0100, 0xE01EF}};
// East Asian Width "W" and "F" in the blocks names use: Hangul, CJK, kana, fullwidth forms, emoji.
constexpr Range kWide[] = {{0x1100, 0x115F},   {0x2E80, 0x303E},   {0x3041, 0x33FF},   {0x3400, 0x4DBF},
                           {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},
                           {0xFE30, 0xFE4F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x1F200, 0x1F2FF},
                           {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF}, {0x1F900, 0x1F9FF}, {0x1FA70, 0x1FAFF},
                           {0x20000, 0x3FFFD}};

template <size_t N>
bool in(const Range (&ranges)[N], char32_t c) {
  return std::any_of(std::begin(ranges), std::end(ranges), [c](Range r) { return c >= r.first && c <= r.last; });
}

bool continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

}  // namespace

size_t display_width(std::string_view s) {
  size_t columns = 0;
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const size_t length = lead >= 0xC2 && lead <= 0xDF   ? 2
                          : lead >= 0xE0 && lead <= 0xEF ? 3
                          : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                         : 1;
    size_t got = 1;  // a cut or bad sequence: its lead byte one column, as the replacement a terminal shows
    while (got < length && i + got < s.size() && continuation(static_cast<unsigned char>(s[i + got]))) ++got;
    if (got < length) {
      columns += 1;
      i += 1;
      continue;
    }
    char32_t c = length == 1 ? lead : lead & (0x3F >> (length - 1));
    for (size_t k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    columns += in(kZeroWidth, c) ? 0 : in(kWide, c) ? 2 : 1;
    i += length;
  }
  return columns;
}

}  // namespace ampwb
