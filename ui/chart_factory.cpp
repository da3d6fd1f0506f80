// make_chart: metric name -> chart class.
#include "chart_factory.h"

#include "accuracy_chart.h"
#include "fp8_scaling_chart.h"
#include "histogram_chart.h"
#include "loss_chart.h"
#include "loss_scale_chart.h"
#include "timing_charts.h"

namespace ampwb::ui {

const QStringList& chart_metrics() {
  static const QStringList metrics = {"loss",      "accuracy",  "loss-scale", "epoch-time",
                                      "data-wait", "histogram", "fp8-scaling"};
  return metrics;
}

MetricChart* make_chart(const QString& metric, QWidget* parent) {
  if (metric == "loss") return new LossChart(parent);
  if (metric == "accuracy") return new AccuracyChart(parent);
  if (metric == "loss-scale") return new LossScaleChart(parent);
  if (metric == "epoch-time") return new EpochTimeChart(parent);
  if (metric == "data-wait") return new DataWaitChart(parent);
  if (metric == "histogram") return new HistogramChart(parent);
  if (metric == "fp8-scaling") return new Fp8ScalingChart(parent);
  return nullptr;
}

}  // namespace ampwb::ui
