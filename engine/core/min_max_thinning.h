// The one thinning rule for every chart (the window's, exported files and the HTML report's SVG): a curve of any
// length drawn with a bounded number of points, each bucket of consecutive samples keeping its minimum and its
// maximum in step order, so a single-step spike (an overflow, a loss jump) survives at any length and zoom.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

namespace ampwb {

// Calls keep(i) for the samples of y(i), i in [0, n), that a chart draws, in ascending i: at most 2 * buckets of
// them, each bucket's smallest and largest finite y (one call where they are the same sample); non-finite y skipped.
// With no more samples than buckets, every finite one.
template <class Y, class Keep>
void thin_min_max(size_t n, Y y, size_t buckets, Keep keep) {
  if (n == 0 || buckets == 0) return;
  const size_t per = (n + buckets - 1) / buckets;
  for (size_t begin = 0; begin < n; begin += per) {
    const size_t end = std::min(n, begin + per);
    size_t lo = end, hi = end;
    for (size_t i = begin; i < end; ++i) {
      const double v = y(i);
      if (!std::isfinite(v)) continue;
      if (lo == end || v < y(lo)) lo = i;
      if (hi == end || v > y(hi)) hi = i;
    }
    if (lo == end) continue;
    keep(std::min(lo, hi));
    if (lo != hi) keep(std::max(lo, hi));
  }
}

// The points (x, y), x ascending, thinned by the rule above.
inline std::vector<std::pair<double, double>> thinned_min_max(const std::vector<std::pair<double, double>>& points,
                                                              size_t buckets) {
  std::vector<std::pair<double, double>> out;
  thin_min_max(
      points.size(), [&](size_t i) { return points[i].second; }, buckets, [&](size_t i) { out.push_back(points[i]); });
  return out;
}

}  // namespace ampwb
