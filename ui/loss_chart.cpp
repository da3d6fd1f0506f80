// LossChart: per-step and per-epoch loss.
#include "loss_chart.h"

#include <QAreaSeries>
#include <QChart>
#include <QLineSeries>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "chart_style.h"
#include "decimate.h"
#include "epoch_bands.h"

namespace ampwb::ui {

LossChart::LossChart(QWidget* parent) : MetricChart("loss", tr("Loss"), parent) {}

void LossChart::rebuild(const RunList& runs, const ChartOptions& options) {
  x_ = new QValueAxis;
  x_->setTitleText(tr("step"));
  x_->setLabelFormat("%.0f");
  y_ = new QValueAxis;
  y_->setTitleText(tr("loss"));
  chart()->addAxis(x_, Qt::AlignBottom);
  chart()->addAxis(y_, Qt::AlignLeft);
  curves_.assign(runs.size(), Curves{});
  band_mean_ = band_low_ = band_high_ = nullptr;
  const bool many = multi(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    Curves& c = curves_[i];
    const QString who = many ? QString::fromStdString(runs[i]->label) + ": " : QString();
    const QColor color = many ? run_color(static_cast<int>(i)) : train_color();
    if (!many) {
      QColor faint = color;
      faint.setAlpha(70);
      c.raw = add_line(tr("per step"), curve_pen(faint, 1.0), x_, y_);
      show_values_on_hover(c.raw, tr("step"), 4);
    }
    c.smoothed =
        add_line(who + (options.smoothing > 0 ? tr("smoothed") : tr("per step")), curve_pen(color, 2.0), x_, y_);
    show_values_on_hover(c.smoothed, tr("step"), 4);
    c.train_epoch = add_line(who + tr("train (epoch)"),
                             curve_pen(many ? color : train_color().darker(140), 1.5, Qt::DashLine), x_, y_);
    c.train_epoch->setPointsVisible(true);
    show_values_on_hover(c.train_epoch, tr("step"), 4);
    c.validation_epoch =
        add_line(who + tr("validation"), curve_pen(many ? color : validation_color(), 2.0, Qt::DotLine), x_, y_);
    c.validation_epoch->setPointsVisible(true);
    show_values_on_hover(c.validation_epoch, tr("step"), 4);
    if (many) hide_from_legend(c.train_epoch);  // one entry per run and curve kind is enough
  }
  if (many) chart()->setTitle(tr("Loss: — per step · - - train · ··· validation"));
  if (options.bands && many) {
    auto* area = new QAreaSeries;
    band_low_ = new QLineSeries(area);  // owned by the area, deleted with it
    band_high_ = new QLineSeries(area);
    area->setUpperSeries(band_high_);
    area->setLowerSeries(band_low_);
    area->setName(tr("validation mean ± std"));
    QColor fill = palette_is_dark() ? QColor(255, 255, 255, 40) : QColor(0, 0, 0, 30);
    area->setBrush(fill);
    area->setPen(Qt::NoPen);
    attach(area, x_, y_);
    band_mean_ = add_line(tr("validation mean"), curve_pen(palette().color(QPalette::WindowText), 2.5), x_, y_);
    show_values_on_hover(band_mean_, tr("step"), 4);
  }
}

void LossChart::refresh(const RunList& runs, const ChartOptions& options) {
  double x_max = 1, y_min = INFINITY, y_max = -INFINITY;
  auto grow = [&](const QList<QPointF>& points) {
    for (const QPointF& p : points) {
      y_min = std::min(y_min, p.y());
      y_max = std::max(y_max, p.y());
    }
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSeries& run = *runs[i];
    Curves& c = curves_[i];
    const auto& steps = run.steps;
    const size_t n = steps.size();
    if (c.values.size() > n) c = Curves{c.raw, c.smoothed, c.train_epoch, c.validation_epoch, {}, {}, 0, 0};
    for (size_t k = c.values.size(); k < n; ++k) c.values.push_back(steps[k].loss);
    const double weight = std::clamp(options.smoothing, 0.0, 0.999);
    extend_smoothed(c.values, weight, c.smooth, c.state, c.debias);
    auto x = [&](size_t k) { return static_cast<double>(steps[k].step); };
    if (c.raw)
      c.raw->replace(decimate_min_max(
          n, x, [&](size_t k) { return c.values[k]; }, buckets()));
    const QList<QPointF> smooth = decimate_min_max(
        n, x, [&](size_t k) { return c.smooth[k]; }, buckets());
    c.smoothed->replace(smooth);
    grow(smooth);
    QList<QPointF> train, validation;
    for (const EpochReport& e : run.epochs) {
      const double at = run.epoch_end_step(e.epoch);
      train.append(QPointF(at, e.train_loss));
      if (std::isfinite(e.validation_loss)) validation.append(QPointF(at, e.validation_loss));
    }
    c.train_epoch->replace(train);
    c.validation_epoch->replace(validation);
    grow(train);
    grow(validation);
    if (n) x_max = std::max(x_max, static_cast<double>(steps.back().step));
    if (!run.epochs.empty()) x_max = std::max(x_max, run.epoch_end_step(run.epochs.back().epoch));
  }
  if (band_mean_) {
    const EpochBands bands = epoch_bands(runs, [](const EpochReport& e) { return e.validation_loss; });
    QList<QPointF> mean, low, high;
    for (const EpochBand& b : bands.points) {
      const double at = runs[0]->epoch_end_step(b.epoch);
      mean.append(QPointF(at, b.mean));
      low.append(QPointF(at, b.mean - b.std));
      high.append(QPointF(at, b.mean + b.std));
    }
    band_mean_->replace(mean);
    band_low_->replace(low);
    band_high_->replace(high);
    grow(low);
    grow(high);
  }
  set_nice_range(x_, 0, std::max(10.0, x_max));
  if (!std::isfinite(y_min)) y_min = 0, y_max = 1;
  const double pad = std::max(1e-3, (y_max - y_min) * 0.05);
  set_nice_range(y_, std::max(0.0, y_min - pad), y_max + pad);
}

}  // namespace ampwb::ui
