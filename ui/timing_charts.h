// Where the time goes, per epoch: EpochTimeChart (seconds per epoch and training images/s) and DataWaitChart
// (time spent waiting for data against time computing: stacked bars for one run, lines for a comparison).
#pragma once

#include "metric_chart.h"

class QBarSet;
class QCategoryAxis;
class QStackedBarSeries;
class QValueAxis;

namespace ampwb::ui {

class EpochTimeChart : public MetricChart {
  Q_OBJECT
 public:
  explicit EpochTimeChart(QWidget* parent = nullptr);

 protected:
  void rebuild(const RunList& runs, const ChartOptions& options) override;
  void refresh(const RunList& runs, const ChartOptions& options) override;
  bool follows_steps() const override { return false; }

 private:
  std::vector<QLineSeries*> seconds_, throughput_;
  QValueAxis* x_ = nullptr;
  QValueAxis* seconds_axis_ = nullptr;
  QValueAxis* throughput_axis_ = nullptr;
};

class DataWaitChart : public MetricChart {
  Q_OBJECT
 public:
  explicit DataWaitChart(QWidget* parent = nullptr);

 protected:
  void rebuild(const RunList& runs, const ChartOptions& options) override;
  void refresh(const RunList& runs, const ChartOptions& options) override;
  bool follows_steps() const override { return false; }

 private:
  void label_bars(const std::vector<EpochReport>& epochs, int planned);

  // One run: stacked bars, over an axis that labels as many epochs as fit.
  QStackedBarSeries* bars_ = nullptr;
  QBarSet* compute_ = nullptr;
  QBarSet* wait_ = nullptr;
  QCategoryAxis* bar_epochs_ = nullptr;
  int first_bar_epoch_ = 1;  // the epoch of the first bar: past 1 for a run shown from where it resumed
  // A comparison: lines.
  std::vector<QLineSeries*> compute_lines_, wait_lines_;
  QValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
};

}  // namespace ampwb::ui
