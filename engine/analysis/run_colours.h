// One colour per run, the same in the workbench's charts and in the HTML report: Okabe and Ito's eight, told apart
// with any colour vision and in print; past eight, each round again darker, then lighter, so that a ninth run does
// not look like the first.
#pragma once

#include <cstddef>
#include <string>

namespace ampwb {

struct Rgb {
  int red = 0, green = 0, blue = 0;  // 0 to 255
};

Rgb run_colour(size_t index);
std::string hex_colour(Rgb colour);  // "#0072b2"

}  // namespace ampwb
