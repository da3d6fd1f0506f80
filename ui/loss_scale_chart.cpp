// LossScaleChart: the scale per step (log2 axis) and the skipped steps.
#include "loss_scale_chart.h"

#include <QChart>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "analysis/report_text.h"
#include "chart_style.h"
#include "decimate.h"

namespace ampwb::ui {

SkippedSteps count_skipped(const RunSeries& run, int64_t early) {
  SkippedSteps s;
  for (const StepReport& step : run.steps)
    if (step.skipped) {
      ++s.total;
      if (step.step < early) ++s.early;
    }
  return s;
}

LossScaleChart::LossScaleChart(QWidget* parent) : MetricChart("loss-scale", tr("Loss scale (log2)"), parent) {}

void LossScaleChart::rebuild(const RunList& runs, const ChartOptions& options) {
  x_ = new QValueAxis;
  label_x_axis(x_, options.x_axis, 0);
  y_ = new QLogValueAxis;
  y_->setBase(2);
  set_axis_titles(y_, tr("loss scale"), tr("scale"));
  chart()->addAxis(x_, Qt::AlignBottom);
  chart()->addAxis(y_, Qt::AlignLeft);
  scale_.clear();
  skipped_.clear();
  const bool many = multi(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    const QString who = many ? QString::fromStdString(runs[i]->label) + ": " : QString();
    const QColor color = many ? run_color(runs[i]->colour_index(i)) : train_color();
    QLineSeries* line = add_line(who + tr("scale"), curve_pen(color, 2.0), x_, y_);
    show_values_on_hover(line, x_axis_unit(options.x_axis), 8);
    scale_.push_back(line);
    auto* marks = new QScatterSeries;
    marks->setName((who + tr("skipped steps")).toHtmlEscaped());  // as add_line: legend names are HTML
    marks->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    marks->setMarkerSize(7);
    marks->setColor(many ? color.darker(130) : skipped_color());
    marks->setBorderColor(many ? color.darker(160) : skipped_color().darker(150));
    attach(marks, x_, y_);
    show_values_on_hover(marks, tr("skipped at %1").arg(x_axis_unit(options.x_axis)), 8);
    skipped_.push_back(marks);
  }
}

void LossScaleChart::refresh(const RunList& runs, const ChartOptions& options) {
  double x_max = 1, y_min = INFINITY, y_max = -INFINITY;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& steps = runs[i]->steps;
    const size_t n = steps.size();
    auto x = [&](size_t k) { return step_x(*runs[i], steps[k], options.x_axis); };
    const QList<QPointF> line = decimate_min_max(
        n, x, [&](size_t k) { return static_cast<double>(steps[k].loss_scale); }, buckets());
    scale_[i]->replace(line);
    for (const QPointF& p : line) {
      if (p.y() <= 0) continue;
      y_min = std::min(y_min, p.y());
      y_max = std::max(y_max, p.y());
    }
    // Skipped steps: all of them while few, else the first of each bucket (a solid band of marks says the same).
    std::vector<size_t> skipped;
    for (size_t k = 0; k < n; ++k)
      if (steps[k].skipped) skipped.push_back(k);
    QList<QPointF> marks;
    const size_t every = skipped.size() > kMaxMarkers ? (skipped.size() + kMaxMarkers - 1) / kMaxMarkers : 1;
    for (size_t j = 0; j < skipped.size(); j += every) {
      const StepReport& s = steps[skipped[j]];
      if (s.loss_scale > 0) marks.append(QPointF(x(skipped[j]), s.loss_scale));
    }
    skipped_[i]->replace(marks);  // (the count is in the panel's note: a changing legend would re-lay out the chart)
    if (n) x_max = std::max(x_max, x(n - 1));
  }
  set_nice_range(x_, 0, label_x_axis(x_, options.x_axis, x_max));
  set_power_of_two_range(y_, y_min, y_max);
  // A run that scales nothing multiplies by 1, drawn as a line at 1: the title says so, where an exported chart
  // shows it without the panel's note beside it. Here, not in rebuild: the live run's series is refilled, not rebuilt,
  // when the setup's precision changes or a run starts.
  std::vector<int64_t> unscaled;
  for (const RunSeries* r : runs)
    if (!r->config.precision.scales_loss()) unscaled.push_back(r->run_id);
  const QString title = unscaled.empty() ? this->title()
                        : !multi(runs)   ? tr("Loss scale (log2): none, a line at 1")
                                         : tr("Loss scale (log2): %1 %2")
                                             .arg(QString::fromStdString(runs_phrase(unscaled)))
                                             .arg(unscaled.size() == 1 ? tr("scales nothing (a line at 1)")
                                                                       : tr("scale nothing (lines at 1)"));
  if (chart()->title() != title) chart()->setTitle(title);
}

}  // namespace ampwb::ui
