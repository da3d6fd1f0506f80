// run_colour: the palette, and its darker and lighter rounds made by scaling the colour's HSV value as
// QColor::darker and QColor::lighter do.
#include "analysis/run_colours.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace ampwb {
namespace {

constexpr std::array<Rgb, 8> kOkabeIto = {{{0, 114, 178},
                                           {230, 159, 0},
                                           {0, 158, 115},
                                           {204, 121, 167},
                                           {86, 180, 233},
                                           {213, 94, 0},
                                           {120, 120, 120},
                                           {240, 200, 50}}};

// The colour with its HSV value multiplied by `factor`; a value past full takes that much saturation away instead
// (lighter towards white), as QColor::lighter does.
Rgb scale_value(Rgb c, double factor) {
  const double r = c.red / 255.0, g = c.green / 255.0, b = c.blue / 255.0;
  const double max = std::max({r, g, b}), min = std::min({r, g, b}), chroma = max - min;
  double hue = 0;  // in sixths of the circle
  if (chroma > 0) {
    if (max == r)
      hue = std::fmod((g - b) / chroma + 6, 6);
    else if (max == g)
      hue = (b - r) / chroma + 2;
    else
      hue = (r - g) / chroma + 4;
  }
  double saturation = max > 0 ? chroma / max : 0, value = max * factor;
  if (value > 1) {
    saturation = std::max(0.0, saturation - (value - 1));
    value = 1;
  }
  const double top = value, bottom = value * (1 - saturation), span = top - bottom;
  const double f = hue - std::floor(hue / 2) * 2;  // position within a pair of sixths, 0 to 2
  const double middle = bottom + span * (1 - std::fabs(f - 1));
  // Which of the three levels red, green and blue take, sixth by sixth of the hue circle.
  constexpr int kLevelOf[6][3] = {{0, 1, 2}, {1, 0, 2}, {2, 0, 1}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}};
  const double levels[3] = {top, middle, bottom};
  const int* level = kLevelOf[std::min(5, static_cast<int>(hue))];
  auto byte = [](double x) { return static_cast<int>(std::lround(std::clamp(x, 0.0, 1.0) * 255)); };
  return {byte(levels[level[0]]), byte(levels[level[1]]), byte(levels[level[2]])};
}

}  // namespace

Rgb run_colour(size_t index) {
  const Rgb base = kOkabeIto[index % kOkabeIto.size()];
  switch (index / kOkabeIto.size() % 3) {
    case 1:
      return scale_value(base, 1 / 1.7);
    case 2:
      return scale_value(base, 1.45);
    default:
      return base;
  }
}

std::string hex_colour(Rgb colour) {
  char text[8];
  std::snprintf(text, sizeof text, "#%02x%02x%02x", colour.red, colour.green, colour.blue);
  return text;
}

}  // namespace ampwb
