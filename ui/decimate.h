// Display decimation: a curve of any length drawn with a bounded number of points. Each bucket of consecutive
// samples keeps its minimum and its maximum, in order, so spikes (an overflow, a loss jump) survive at any zoom
// while a 1,000,000-step run costs the chart a few thousand points. The data model keeps every sample.
#pragma once

#include <QList>
#include <QPointF>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace ampwb::ui {

// Points (x(i), y(i)) for i in [0, n), x ascending, reduced to at most 2 * buckets points; non-finite y skipped.
template <class X, class Y>
QList<QPointF> decimate_min_max(size_t n, X x, Y y, int buckets) {
  QList<QPointF> out;
  if (n == 0 || buckets <= 0) return out;
  const size_t per = (n + static_cast<size_t>(buckets) - 1) / static_cast<size_t>(buckets);
  out.reserve(static_cast<qsizetype>(per <= 1 ? n : 2 * ((n + per - 1) / per)));
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
    const size_t first = std::min(lo, hi), second = std::max(lo, hi);
    out.append(QPointF(x(first), y(first)));
    if (second != first) out.append(QPointF(x(second), y(second)));
  }
  return out;
}

// Exponential moving average with TensorBoard's debiasing (the first values are not pulled towards zero);
// extends `smoothed` from its current length to values.size(), so a live curve costs O(new points).
void extend_smoothed(const std::vector<double>& values, double weight, std::vector<double>& smoothed, double& state,
                     double& debias);

}  // namespace ampwb::ui
