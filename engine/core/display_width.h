// How many terminal columns text takes, for tables whose cells hold names people typed in any script.
#pragma once

#include <cstddef>
#include <string_view>

namespace ampwb {

// Columns of UTF-8 text in a terminal: 2 for each East Asian wide or fullwidth character (Chinese, Japanese and
// Korean, fullwidth punctuation, emoji), 0 for combining marks and zero-width characters, 1 for any other.
size_t display_width(std::string_view utf8);

}  // namespace ampwb
