// The gradient histogram of one epoch (the latest by default): how many gradient values fall in each power of two,
// as stored during backward (times the loss scale when the run scales its loss), with FP16's representable range
// (2^-24 … 65504) shaded and the fractions that FP16 would flush to zero (underflow) or to inf (overflow). For a run
// that does not compute in FP16 (fp32, tf32, amp-bf16) the title and legend say it is a what-if ("if FP16").
#pragma once

#include "metric_chart.h"

class QAreaSeries;
class QValueAxis;

namespace ampwb::ui {

class HistogramChart : public MetricChart {
  Q_OBJECT
 public:
  explicit HistogramChart(QWidget* parent = nullptr);

  static constexpr double kFp16MinLog2 = -24.0;        // smallest FP16 subnormal, 2^-24
  static constexpr double kFp16MaxLog2 = 15.99887294;  // log2(65504), the largest FP16 value

  // The histogram a run shows for `kind` at `epoch` (0 = the latest); nullptr when it has none.
  static const GradientHistogram* pick(const RunSeries& run, const QString& kind, int epoch);

 protected:
  void rebuild(const RunList& runs, const ChartOptions& options) override;
  void refresh(const RunList& runs, const ChartOptions& options) override;
  bool follows_steps() const override { return false; }

 private:
  QAreaSeries* fp16_range_ = nullptr;
  QLineSeries* range_top_ = nullptr;
  QLineSeries* range_bottom_ = nullptr;
  std::vector<QLineSeries*> outlines_;  // one stepped outline per run
  QAreaSeries* fill_ = nullptr;         // one run: the area under its outline
  QValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
};

}  // namespace ampwb::ui
