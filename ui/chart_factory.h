// The charts by metric name: the one list the panel, the exporters and `ampwb export chart` share.
#pragma once

#include <QString>
#include <QStringList>

class QWidget;

namespace ampwb::ui {

class MetricChart;

// loss, accuracy, loss-scale, epoch-time, data-wait, histogram, fp8-scaling (amp-fp8 runs)
const QStringList& chart_metrics();
// A new chart for `metric`; nullptr for an unknown name.
MetricChart* make_chart(const QString& metric, QWidget* parent = nullptr);

}  // namespace ampwb::ui
