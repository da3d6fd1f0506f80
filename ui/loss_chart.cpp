// LossChart: per-step and per-epoch loss.
#include "loss_chart.h"

#include <QChart>
#include <QLineSeries>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "chart_style.h"
#include "decimate.h"

namespace ampwb::ui {

LossChart::LossChart(QWidget* parent) : MetricChart("loss", tr("Loss"), parent) {}

void LossChart::rebuild(const RunList& runs, const ChartOptions& options) {
  const QString x_unit = x_axis_unit(options.x_axis);
  x_ = new QValueAxis;
  label_x_axis(x_, options.x_axis, 0);
  y_ = new QValueAxis;
  y_->setTitleText(tr("loss"));
  chart()->addAxis(x_, Qt::AlignBottom);
  chart()->addAxis(y_, Qt::AlignLeft);
  curves_.assign(runs.size(), Curves{});
  const bool many = multi(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    Curves& c = curves_[i];
    const QString who = many ? QString::fromStdString(runs[i]->label) + ": " : QString();
    c.who = who;
    const QColor color = many ? run_color(runs[i]->colour_index(i)) : train_color();
    if (!many) {
      QColor faint = color;
      faint.setAlpha(70);
      c.raw = add_line(tr("per step"), curve_pen(faint, 1.0), x_, y_);
      show_values_on_hover(c.raw, x_unit, 4);
    }
    c.smoothed = add_line(QString(), curve_pen(color, 2.0), x_, y_);  // named by name_step_curves
    show_values_on_hover(c.smoothed, x_unit, 4);
    c.train_epoch = add_line(who + tr("train (epoch)"),
                             curve_pen(many ? color : train_color().darker(140), 1.5, Qt::DashLine), x_, y_);
    c.train_epoch->setPointsVisible(true);
    show_values_on_hover(c.train_epoch, x_unit, 4);
    c.validation_epoch =
        add_line(who + tr("validation"), curve_pen(many ? color : validation_color(), 2.0, Qt::DotLine), x_, y_);
    c.validation_epoch->setPointsVisible(true);
    show_values_on_hover(c.validation_epoch, x_unit, 4);
    if (many) hide_from_legend(c.train_epoch);  // one entry per run and curve kind is enough
  }
  name_step_curves(options.smoothing);
  add_group_bands(runs, options, x_, y_, {});  // the validation loss of each group
}

void LossChart::name_step_curves(double smoothing) {
  const QString steps = smoothing > 0 ? tr("smoothed %1").arg(smoothing, 0, 'g', 3) : tr("per step");
  for (Curves& c : curves_) {
    c.smoothed->setName((c.who + steps).toHtmlEscaped());
    if (c.raw) c.raw->setVisible(smoothing > 0);  // unsmoothed, the two are one curve
  }
  if (curves_.size() > 1)  // the runs' legend names runs; the title, the curves
    chart()->setTitle(tr("Loss: — %1 · - - train · ··· validation")
                          .arg(smoothing > 0 ? tr("per step, smoothed %1").arg(smoothing, 0, 'g', 3) : steps));
}

void LossChart::refresh(const RunList& runs, const ChartOptions& options) {
  name_step_curves(options.smoothing);
  double x_max = 1, y_min = INFINITY, y_max = -INFINITY;
  auto grow = [&](const QList<QPointF>& points) {
    for (const QPointF& p : points)
      if (std::isfinite(p.y())) {
        y_min = std::min(y_min, p.y());
        y_max = std::max(y_max, p.y());
      }
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSeries& run = *runs[i];
    Curves& c = curves_[i];
    const auto& steps = run.steps;
    const size_t n = steps.size();
    if (c.values.size() > n) c = Curves{c.who, c.raw, c.smoothed, c.train_epoch, c.validation_epoch, {}, {}, 0, 0};
    for (size_t k = c.values.size(); k < n; ++k) c.values.push_back(steps[k].loss);
    const double weight = std::clamp(options.smoothing, 0.0, 0.999);
    extend_smoothed(c.values, weight, c.smooth, c.state, c.debias);
    auto x = [&](size_t k) { return step_x(run, steps[k], options.x_axis); };
    if (c.raw) {
      c.raw->replace(decimate_min_max(
          n, x, [&](size_t k) { return c.values[k]; }, buckets()));
      if (c.raw->isVisible()) grow(c.raw->points());  // the axis holds every step drawn, not just the smoothed line
    }
    const QList<QPointF> smooth = decimate_min_max(
        n, x, [&](size_t k) { return c.smooth[k]; }, buckets());
    c.smoothed->replace(smooth);
    grow(smooth);
    QList<QPointF> train, validation;
    for (const EpochReport& e : run.epochs) {
      const double at = epoch_x(run, e.epoch, options.x_axis);
      if (!std::isfinite(at)) continue;
      train.append(QPointF(at, e.train_loss));
      if (std::isfinite(e.validation_loss)) validation.append(QPointF(at, e.validation_loss));
    }
    c.train_epoch->replace(train);
    c.validation_epoch->replace(validation);
    grow(train);
    grow(validation);
    if (n) x_max = std::max(x_max, x(n - 1));
    if (!run.epochs.empty()) x_max = std::max(x_max, epoch_x(run, run.epochs.back().epoch, options.x_axis));
  }
  refresh_group_bands([](const EpochReport& e) { return e.validation_loss; }, 1, options.x_axis, y_min, y_max);
  set_nice_range(x_, 0, label_x_axis(x_, options.x_axis, x_max));
  if (!std::isfinite(y_min)) y_min = 0, y_max = 1;
  const double pad = std::max(1e-3, (y_max - y_min) * 0.05);
  set_nice_range(y_, std::max(0.0, y_min - pad), y_max + pad);
}

}  // namespace ampwb::ui
