// A float as the double that prints as the float does. 0.9f widened to double is 0.8999999761581421, which JSON and
// CSV print in full though nobody typed it; the double nearest the float's shortest decimal prints "0.9" and narrows
// back to the same float.
#pragma once

#include <charconv>
#include <cmath>

namespace ampwb {

inline double float_as_decimal(float value) {
  if (!std::isfinite(value)) return value;
  char text[32];
  const char* end = std::to_chars(text, text + sizeof text, value).ptr;
  double decimal = 0;
  std::from_chars(text, end, decimal);
  return decimal;
}

}  // namespace ampwb
