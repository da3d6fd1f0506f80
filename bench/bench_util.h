// What the benchmark programs share: a steady clock and the median of repeated measurements.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace ampwb::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The middle value (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace ampwb::bench
