// Display decimation for the window's and exported charts: core/min_max_thinning.h's rule (the HTML report's too)
// turned into a chart series' points. The data model keeps every sample.
#pragma once

#include <QList>
#include <QPointF>
#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/min_max_thinning.h"

namespace ampwb::ui {

// Points (x(i), y(i)) for i in [0, n), x ascending, reduced to at most 2 * buckets points by thin_min_max.
template <class X, class Y>
QList<QPointF> decimate_min_max(size_t n, X x, Y y, int buckets) {
  QList<QPointF> out;
  if (buckets <= 0) return out;
  out.reserve(static_cast<qsizetype>(2 * std::min(n, static_cast<size_t>(buckets))));
  thin_min_max(n, y, static_cast<size_t>(buckets), [&](size_t i) { out.append(QPointF(x(i), y(i))); });
  return out;
}

// Exponential moving average with TensorBoard's debiasing (the first values are not pulled towards zero);
// extends `smoothed` from its current length to values.size(), so a live curve costs O(new points).
void extend_smoothed(const std::vector<double>& values, double weight, std::vector<double>& smoothed, double& state,
                     double& debias);

}  // namespace ampwb::ui
