// Accuracy per epoch: training top-1, validation top-1 and validation top-k, in percent, against the epoch or the
// wall clock at the epoch's end. Grouped by a configuration key, each group's validation top-1 as mean ± std.
#pragma once

#include "metric_chart.h"

class QValueAxis;

namespace ampwb::ui {

class AccuracyChart : public MetricChart {
  Q_OBJECT
 public:
  explicit AccuracyChart(QWidget* parent = nullptr);

 protected:
  void rebuild(const RunList& runs, const ChartOptions& options) override;
  void refresh(const RunList& runs, const ChartOptions& options) override;
  bool follows_steps() const override { return false; }

 private:
  // "validation top-5", after the run's label in a comparison ("fp32 seed 1: validation top-5").
  QString topk_name(const RunList& runs, size_t i) const;

  struct Curves {
    QLineSeries* train = nullptr;
    QLineSeries* validation = nullptr;
    QLineSeries* topk = nullptr;
  };
  std::vector<Curves> curves_;
  QValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
};

}  // namespace ampwb::ui
