// Loss: every step (raw and smoothed, decimated for display) and every epoch (training and validation means)
// on one x axis (step, epoch or wall clock). In a comparison, each run's smoothed and validation curves in its
// colour; grouped by a configuration key, each group's validation loss as mean ± std.
#pragma once

#include <map>

#include "metric_chart.h"

class QScatterSeries;
class QValueAxis;

namespace ampwb::ui {

class LossChart : public MetricChart {
  Q_OBJECT
 public:
  explicit LossChart(QWidget* parent = nullptr);

 protected:
  void rebuild(const RunList& runs, const ChartOptions& options) override;
  void refresh(const RunList& runs, const ChartOptions& options) override;

 private:
  // The legend's name of the curve against steps, and of a run set the title, say its smoothing: an exported chart
  // is read without the slider beside it.
  void name_step_curves(double smoothing);

  struct Curves {
    QString who;  // "run label: " where the chart holds several runs
    QLineSeries* raw = nullptr;
    QLineSeries* smoothed = nullptr;
    QLineSeries* train_epoch = nullptr;
    QLineSeries* validation_epoch = nullptr;
    // The smoothed curve, extended as steps arrive (O(new steps) per refresh).
    std::vector<double> values, smooth;
    double state = 0, debias = 0;
  };
  std::vector<Curves> curves_;
  QValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
};

}  // namespace ampwb::ui
