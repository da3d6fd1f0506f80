// The loss scale of every step on a log2 axis, each skipped step (inf/NaN gradients: the optimizer step was
// skipped and the scale backed off) marked. A run without loss scaling draws a flat line at 1.
#pragma once

#include "metric_chart.h"

class QLogValueAxis;
class QScatterSeries;
class QValueAxis;

namespace ampwb::ui {

class LossScaleChart : public MetricChart {
  Q_OBJECT
 public:
  explicit LossScaleChart(QWidget* parent = nullptr);

  static constexpr int kMaxMarkers = 1500;  // beyond this, skipped steps are drawn one per bucket

 protected:
  void rebuild(const RunList& runs, const ChartOptions& options) override;
  void refresh(const RunList& runs, const ChartOptions& options) override;

 private:
  std::vector<QLineSeries*> scale_;
  std::vector<QScatterSeries*> skipped_;
  QValueAxis* x_ = nullptr;
  QLogValueAxis* y_ = nullptr;
};

// How many steps a run skipped, and how many of those in its first `early` steps (the scale calibrating).
struct SkippedSteps {
  int64_t total = 0, early = 0;
};
SkippedSteps count_skipped(const RunSeries& run, int64_t early = 50);

}  // namespace ampwb::ui
