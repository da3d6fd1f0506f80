// MetricChart: change detection, series helpers, hover tooltips and the context menu.
#include "metric_chart.h"

#include <QAbstractAxis>
#include <QChart>
#include <QContextMenuEvent>
#include <QCursor>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMenu>
#include <QToolTip>
#include <QValueAxis>
#include <QXYSeries>
#include <cmath>
#include <functional>

#include "chart_style.h"

namespace ampwb::ui {

MetricChart::MetricChart(QString metric, QString title, QWidget* parent)
    : QChartView(new QChart, parent), metric_(std::move(metric)), title_(std::move(title)) {
  setObjectName(metric_ + "Chart");
  setRenderHint(QPainter::Antialiasing);
  setMinimumSize(320, 220);
  apply_theme(chart());
  chart()->setTitle(title_);
}

void MetricChart::update_from(const RunList& runs, const ChartOptions& options) {
  // What the series were built for: the runs (by address: a live run refills the same object) and the options.
  std::vector<uint64_t> signature;
  for (const RunSeries* r : runs) signature.push_back(reinterpret_cast<uintptr_t>(r));
  signature.push_back(std::hash<double>{}(options.smoothing));
  signature.push_back(options.bands);
  signature.push_back(qHash(options.histogram_kind));
  signature.push_back(static_cast<uint64_t>(options.histogram_epoch));
  std::vector<uint64_t> revisions;
  for (const RunSeries* r : runs) revisions.push_back(follows_steps() ? r->revision : r->epoch_revision);
  revisions.push_back(static_cast<uint64_t>(buckets()));

  if (signature != signature_) {
    reset_chart();
    rebuild(runs, options);
    // In a comparison the panel shows one legend of the runs' colours above all charts; titles key the styles.
    chart()->legend()->setVisible(!multi(runs));
    signature_ = std::move(signature);
    revisions_.clear();
  }
  if (revisions != revisions_) {
    refresh(runs, options);
    revisions_ = std::move(revisions);
  }
}

void MetricChart::reset_chart() {
  chart()->removeAllSeries();
  for (QAbstractAxis* axis : chart()->axes()) {
    chart()->removeAxis(axis);
    delete axis;
  }
  apply_theme(chart());
  chart()->setTitle(title_);
}

void MetricChart::set_nice_range(QValueAxis* axis, double low, double high, int ticks) {
  if (!(high > low)) high = low + 1;
  const double raw = (high - low) / std::max(1, ticks - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * magnitude) {
      step = m * magnitude;
      break;
    }
  const double nice_low = std::floor(low / step) * step, nice_high = std::ceil(high / step) * step;
  const int count = static_cast<int>(std::lround((nice_high - nice_low) / step)) + 1;
  if (axis->min() == nice_low && axis->max() == nice_high && axis->tickCount() == count) return;
  axis->setRange(nice_low, nice_high);
  axis->setTickCount(count);
}

int MetricChart::series_count() const { return static_cast<int>(chart()->series().size()); }

qsizetype MetricChart::point_count() const {
  qsizetype n = 0;
  for (QAbstractSeries* s : chart()->series())
    if (auto* xy = qobject_cast<QXYSeries*>(s)) n += xy->count();
  return n;
}

QLineSeries* MetricChart::add_line(const QString& name, const QPen& pen, QAbstractAxis* x, QAbstractAxis* y) {
  auto* series = new QLineSeries;
  series->setName(name);
  series->setPen(pen);
  attach(series, x, y);
  return series;
}

void MetricChart::attach(QAbstractSeries* series, QAbstractAxis* x, QAbstractAxis* y) {
  chart()->addSeries(series);
  if (x) series->attachAxis(x);
  if (y) series->attachAxis(y);
}

void MetricChart::show_values_on_hover(QXYSeries* series, const QString& x_label, int y_decimals,
                                       const QString& y_unit) {
  connect(series, &QXYSeries::hovered, this, [series, x_label, y_decimals, y_unit](const QPointF& p, bool on) {
    if (!on) {
      QToolTip::hideText();
      return;
    }
    QToolTip::showText(QCursor::pos(), QStringLiteral("%1\n%2 %3: %4%5")
                                           .arg(series->name(), x_label)
                                           .arg(p.x(), 0, 'f', 0)
                                           .arg(p.y(), 0, 'g', y_decimals)
                                           .arg(y_unit));
  });
}

void MetricChart::hide_from_legend(QAbstractSeries* series) {
  for (QLegendMarker* marker : chart()->legend()->markers(series)) marker->setVisible(false);
}

int MetricChart::buckets() const {
  // One bucket (a minimum and a maximum) per two pixels: as sharp as the eye sees, half the points to lay out.
  const int width = static_cast<int>(chart()->plotArea().width());
  return std::max(150, (width > 0 ? width : this->width()) / 2);
}

void MetricChart::contextMenuEvent(QContextMenuEvent* event) {
  QMenu menu(this);
  menu.addAction(tr("Export this chart (PNG, SVG, PDF)…"), this, [this] { Q_EMIT export_requested(this); });
  menu.addAction(tr("Reset zoom"), this, [this] { chart()->zoomReset(); });
  menu.exec(event->globalPos());
}

void MetricChart::changeEvent(QEvent* event) {
  // The system switched between light and dark: redraw in the matching theme.
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::ThemeChange) force_rebuild();
  QChartView::changeEvent(event);
}

}  // namespace ampwb::ui
