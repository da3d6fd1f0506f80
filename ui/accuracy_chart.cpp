// AccuracyChart: train/validation top-1 and top-k per epoch.
#include "accuracy_chart.h"

#include <QAreaSeries>
#include <QChart>
#include <QLineSeries>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "chart_style.h"
#include "epoch_bands.h"

namespace ampwb::ui {

void set_epoch_range(QValueAxis* axis, int epochs) {
  epochs = std::max(1, epochs);
  axis->setRange(epochs == 1 ? 0.5 : 1, epochs == 1 ? 1.5 : epochs);
  axis->setLabelFormat("%.0f");
  if (epochs <= 12) {
    axis->setTickType(QValueAxis::TicksFixed);
    axis->setTickCount(epochs == 1 ? 3 : epochs);
  } else {
    axis->applyNiceNumbers();
  }
}

AccuracyChart::AccuracyChart(QWidget* parent) : MetricChart("accuracy", tr("Accuracy"), parent) {}

void AccuracyChart::rebuild(const RunList& runs, const ChartOptions& options) {
  x_ = new QValueAxis;
  x_->setTitleText(tr("epoch"));
  y_ = new QValueAxis;
  y_->setTitleText(tr("accuracy (%)"));
  y_->setLabelFormat("%.0f");
  chart()->addAxis(x_, Qt::AlignBottom);
  chart()->addAxis(y_, Qt::AlignLeft);
  curves_.assign(runs.size(), Curves{});
  band_mean_ = band_low_ = band_high_ = nullptr;
  const bool many = multi(runs);
  const int topk = runs.empty() ? 2 : runs[0]->config.topk;
  for (size_t i = 0; i < runs.size(); ++i) {
    const QString who = many ? QString::fromStdString(runs[i]->label) + ": " : QString();
    const QColor c = run_color(static_cast<int>(i));
    Curves& k = curves_[i];
    k.train = add_line(who + tr("train top-1"), curve_pen(many ? c : train_color(), 1.5, Qt::DashLine), x_, y_);
    k.validation = add_line(who + tr("validation top-1"), curve_pen(many ? c : validation_color(), 2.5), x_, y_);
    k.topk =
        add_line(who + tr("validation top-%1").arg(topk), curve_pen(many ? c : topk_color(), 1.5, Qt::DotLine), x_, y_);
    for (QLineSeries* s : {k.train, k.validation, k.topk}) {
      s->setPointsVisible(true);
      show_values_on_hover(s, tr("epoch"), 4, "%");
    }
    if (many) {
      hide_from_legend(k.train);
      hide_from_legend(k.topk);
    }
  }
  if (many) chart()->setTitle(tr("Accuracy: — validation · - - train · ··· top-%1").arg(topk));
  if (options.bands && many) {
    auto* area = new QAreaSeries;
    band_low_ = new QLineSeries(area);
    band_high_ = new QLineSeries(area);
    area->setUpperSeries(band_high_);
    area->setLowerSeries(band_low_);
    area->setName(tr("validation mean ± std"));
    area->setBrush(palette_is_dark() ? QColor(255, 255, 255, 40) : QColor(0, 0, 0, 30));
    area->setPen(Qt::NoPen);
    attach(area, x_, y_);
    band_mean_ = add_line(tr("validation mean"), curve_pen(palette().color(QPalette::WindowText), 2.5), x_, y_);
    show_values_on_hover(band_mean_, tr("epoch"), 4, "%");
  }
}

void AccuracyChart::refresh(const RunList& runs, const ChartOptions&) {
  int epochs = 1;
  double low = 100, high = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSeries& run = *runs[i];
    QList<QPointF> train, validation, topk;
    for (const EpochReport& e : run.epochs) {
      train.append(QPointF(e.epoch, 100 * e.train_accuracy));
      validation.append(QPointF(e.epoch, 100 * e.validation_accuracy));
      topk.append(QPointF(e.epoch, 100 * e.validation_topk));
      low = std::min({low, 100 * e.train_accuracy, 100 * e.validation_accuracy});
      high = std::max({high, 100 * e.validation_topk, 100 * e.train_accuracy});
    }
    curves_[i].train->replace(train);
    curves_[i].validation->replace(validation);
    curves_[i].topk->replace(topk);
    epochs = std::max({epochs, run.config.epochs, run.epochs.empty() ? 1 : run.epochs.back().epoch});
  }
  if (band_mean_) {
    QList<QPointF> mean, lo, hi;
    for (const EpochBand& b : epoch_bands(runs, [](const EpochReport& e) { return e.validation_accuracy; }).points) {
      mean.append(QPointF(b.epoch, 100 * b.mean));
      lo.append(QPointF(b.epoch, 100 * (b.mean - b.std)));
      hi.append(QPointF(b.epoch, 100 * (b.mean + b.std)));
      low = std::min(low, 100 * (b.mean - b.std));
    }
    band_mean_->replace(mean);
    band_low_->replace(lo);
    band_high_->replace(hi);
  }
  set_epoch_range(x_, epochs);
  // Zoomed to where the curves are (accuracies near 90 % are unreadable on 0..100), in steps of 10.
  if (high < low) low = 0, high = 100;
  const double bottom = std::max(0.0, std::floor(low / 10) * 10);
  const double top = std::min(100.0, std::max(bottom + 10, std::ceil(high / 10) * 10));
  set_nice_range(y_, bottom, top, 6);
}

}  // namespace ampwb::ui
