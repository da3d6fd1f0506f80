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

// The fastest of `runs` calls of f after a first, untimed one, in milliseconds: a probe's figure for a short piece
// of work on a shared machine, where slower runs are other programs' time.
template <class F>
double best_ms(F&& f, int runs) {
  f();
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const Clock::time_point start = Clock::now();
    f();
    best = std::min(best, seconds_since(start) * 1e3);
  }
  return best;
}

// The middle value (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace ampwb::bench
