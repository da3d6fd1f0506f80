// MetricChart: change detection, series helpers, hover tooltips and the context menu.
#include "metric_chart.h"

#include <QAbstractAxis>
#include <QAreaSeries>
#include <QChart>
#include <QContextMenuEvent>
#include <QCursor>
#include <QFontMetricsF>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMenu>
#include <QTextDocumentFragment>
#include <QToolTip>
#include <QValueAxis>
#include <QXYSeries>
#include <algorithm>
#include <cmath>
#include <functional>

#include "chart_legend.h"
#include "chart_style.h"
#include "chart_title.h"
#include "epoch_bands.h"
#include "run_groups.h"

namespace ampwb::ui {

namespace {

// A value axis' label as QtCharts writes it (its printf format).
QString axis_label(const QString& label_format, double value) {
  const QByteArray format = label_format.toLatin1();
  return format.isEmpty() ? QString::number(value, 'f', 2) : QString::asprintf(format.constData(), value);
}
QString axis_label(const QValueAxis* axis, double value) { return axis_label(axis->labelFormat(), value); }

// The width of a value axis' widest label (its ends' labels), linear or logarithmic; 0 for other axes.
qreal widest_label(const QAbstractAxis* axis) {
  QString low, high;
  if (const auto* values = qobject_cast<const QValueAxis*>(axis)) {
    low = axis_label(values, values->min());
    high = axis_label(values, values->max());
  } else if (const auto* log = qobject_cast<const QLogValueAxis*>(axis)) {
    low = axis_label(log->labelFormat(), log->min());
    high = axis_label(log->labelFormat(), log->max());
  }
  const QFontMetricsF metrics(axis->labelsFont());
  return std::max(metrics.horizontalAdvance(low), metrics.horizontalAdvance(high));
}

// `text` broken at its spaces into the fewest lines each at most `width` long; none where a word is longer.
QStringList lines_within(const QString& text, const QFontMetricsF& metrics, qreal width) {
  QStringList lines;
  for (const QString& word : text.split(' ', Qt::SkipEmptyParts)) {
    if (metrics.horizontalAdvance(word) > width) return {};
    const QString longer = lines.isEmpty() ? QString() : lines.back() + ' ' + word;
    if (!lines.isEmpty() && metrics.horizontalAdvance(longer) <= width)
      lines.back() = longer;
    else
      lines << word;
  }
  return lines;
}

}  // namespace

MetricChart::MetricChart(QString metric, QString title, QWidget* parent)
    : QChartView(new QChart, parent), metric_(std::move(metric)), title_(std::move(title)) {
  setObjectName(metric_ + "Chart");
  setRenderHint(QPainter::Antialiasing);
  // Whole repaints: QtCharts' damage regions leave the rim of a point's marker behind when a refresh moves it (the
  // axis grew), a hollow ring where no value is. The charts are small; a whole repaint costs little.
  setViewportUpdateMode(QGraphicsView::FullViewportUpdate);
  // Readable on a 1280×720 screen beside the setup panel; the grid scrolls below that. The chart's own minimum too:
  // QChartView raises its minimum to the chart's (its title, legend and axes), and never lowers it again.
  setMinimumSize(190, 140);
  chart()->setMinimumSize(QSizeF(190, 140));
  apply_theme(chart());
  chart()->setTitle(title_);
  legend_ = new ChartLegend(chart());
  title_item_ = new ChartTitle(chart());
  // Ticks and axis titles follow the plot's size, known only once QtCharts has laid the chart out (after the
  // refresh that set the ranges): fit them again then, once the layout settles.
  connect(chart(), &QChart::plotAreaChanged, this, [this] {
    if (refit_pending_) return;
    refit_pending_ = true;
    QMetaObject::invokeMethod(
        this,
        [this] {
          refit_pending_ = false;
          if (!shown_runs_.empty()) refresh(shown_runs_, shown_options_);
          fit_axis_titles();
        },
        Qt::QueuedConnection);
  });
}

void MetricChart::update_from(const RunList& runs, const ChartOptions& options) {
  shown_runs_ = runs;
  shown_options_ = options;
  // What the series were built for: the runs (by address: a live run refills the same object) and the options.
  std::vector<uint64_t> signature;
  for (const RunSeries* r : runs) signature.push_back(reinterpret_cast<uintptr_t>(r));
  signature.push_back(std::hash<double>{}(options.smoothing));
  signature.push_back(qHash(options.group_by));
  signature.push_back(qHash(options.histogram_kind));
  signature.push_back(static_cast<uint64_t>(options.histogram_epoch));
  signature.push_back(static_cast<uint64_t>(options.x_axis));
  signature.push_back(qHash(options.fp8_tensor));
  std::vector<uint64_t> revisions;
  for (const RunSeries* r : runs) revisions.push_back(follows_steps() ? r->revision : r->epoch_revision);
  revisions.push_back(static_cast<uint64_t>(buckets()));

  if (signature != signature_) {
    reset_chart();
    rebuild(runs, options);
    // In a comparison the panel shows one legend of the runs' colours above all charts; titles key the styles.
    legend_->setVisible(!multi(runs));
    signature_ = std::move(signature);
    revisions_.clear();
  }
  if (revisions != revisions_) {
    refresh(runs, options);
    revisions_ = std::move(revisions);
  }
  legend_->relayout();      // names change with the data (the histogram's fractions)
  title_item_->relayout();  // and titles (the data wait's share)
  fit_axis_titles();
}

void MetricChart::fit_axis_titles() {
  const QRectF plot = chart()->plotArea();
  if (plot.isEmpty()) return;  // not laid out yet
  // Live runs call this with every batch: only a new plot, size or set of axes can change the answer (new ranges,
  // and so new label widths, move the plot).
  QString key = QStringLiteral("%1 %2 %3 %4 %5 %6 ")
                    .arg(plot.x())
                    .arg(plot.y())
                    .arg(plot.width())
                    .arg(plot.height())
                    .arg(chart()->size().width())
                    .arg(chart()->size().height());
  for (const QAbstractAxis* axis : chart()->axes()) key += QString::number(reinterpret_cast<quintptr>(axis), 16);
  if (key == fitted_axes_for_) return;
  fitted_axes_for_ = key;
  // QtCharts gives the axes on each side together at most 40 % of the chart's content (less its margins and
  // title), labels and titles, and cuts both short past that.
  const QMargins m = chart()->margins();
  const QSizeF content(
      chart()->size().width() - m.left() - m.right(),
      chart()->size().height() - m.top() - m.bottom() - QFontMetricsF(chart()->titleFont()).height() - 8);
  qsizetype vertical_axes = 0, horizontal_axes = 0;
  for (const QAbstractAxis* axis : chart()->axes())
    (axis->orientation() == Qt::Vertical ? vertical_axes : horizontal_axes)++;
  for (QAbstractAxis* axis : chart()->axes()) {
    const QString whole = whole_axis_title(axis);
    if (whole.isEmpty()) continue;
    const QFontMetricsF title(axis->titleFont());
    const bool horizontal = axis->orientation() == Qt::Horizontal;
    // A little slack before showing it again along the plot, so that the room it frees does not bring it straight back.
    const qreal slack = axis->isTitleVisible() ? 0 : 16;
    const qreal share = horizontal ? 0.4 * content.height() / std::max<qsizetype>(1, horizontal_axes)
                                   : 0.4 * content.width() / std::max<qsizetype>(1, vertical_axes);
    // An x axis' title on as many lines as it needs along the plot: a long one ("wall clock (s since the run
    // started)") on a small chart shows whole on two lines, and where those do not fit either, its short form
    // ("wall clock (s)"), rather than nothing. A y axis' title stays on one line, which keeps the plot's width for
    // the x axis' title. QtCharts cuts a title longer than the plot.
    QStringList lines;
    bool show = false;
    for (const QString& candidate : {whole, axis->property(kShortTitle).toString()}) {
      if (candidate.isEmpty()) continue;
      lines = lines_within(QTextDocumentFragment::fromHtml(candidate).toPlainText(), title,
                           (horizontal ? plot.width() : plot.height()) - 4 - slack);
      if (!horizontal && lines.size() > 1) lines.clear();
      // Across, it must fit within the axes' share with its labels and QtCharts' paddings around both (16 px: with
      // less, QtCharts cuts the labels short). The share does not change with the titles shown: no slack there.
      const qreal across = title.height() + (lines.size() - 1) * title.lineSpacing() + 16 +
                           (horizontal ? QFontMetricsF(axis->labelsFont()).height() : widest_label(axis));
      show = !lines.isEmpty() && across <= share;
      if (show) break;
    }
    QStringList escaped;
    for (const QString& line : lines) escaped << line.toHtmlEscaped();
    const QString shown = show ? escaped.join("<br>") : whole;
    if (axis->titleText() != shown) {
      axis->setProperty(kWholeTitle, whole);
      axis->setTitleText(shown);
    }
    if (show != axis->isTitleVisible()) axis->setTitleVisible(show);
  }
}

void MetricChart::reset_chart() {
  groups_.clear();
  legend_->forget_hidden();  // the series it names go
  fitted_axes_for_.clear();  // and the axes: new ones show their titles until fitted
  chart()->removeAllSeries();
  for (QAbstractAxis* axis : chart()->axes()) {
    chart()->removeAxis(axis);
    delete axis;
  }
  apply_theme(chart());
  chart()->setTitle(title_);
}

void MetricChart::set_power_of_two_range(QLogValueAxis* axis, double low, double high) {
  if (!std::isfinite(low)) low = high = 1;
  const int lo = static_cast<int>(std::floor(std::log2(low))) - 1,
            hi = static_cast<int>(std::ceil(std::log2(high))) + 1;
  const int intervals =
      std::max(1, ticks_that_fit(Qt::Vertical, QFontMetricsF(axis->labelsFont()).height() + 4, 9) - 1);
  // Ticks every 2^k, k itself a power of two: 1, 16, 256, 4096, 65536 rather than 1, 32, 1024, 32768 beside a
  // scale of 65536 (GradScaler's start) left unlabelled.
  int k = 1;
  while (k * intervals < hi - lo) k *= 2;
  // The range stays at the data's (with its spare octave), not widened out to whole multiples of 2^k: on a short
  // plot that would reach down to labels like 0.0009765625, too wide to show.
  const double base = std::exp2(k), bottom = std::exp2(lo), top = std::exp2(hi);
  if (axis->base() != base) axis->setBase(base);
  if (axis->min() != bottom || axis->max() != top) axis->setRange(bottom, top);
  // Powers of two as they are ("4096", "0.015625") where they stay as short as the rounded ones ("1.1e+12",
  // "1.68e+07") that wider ranges need, whose exact labels would be cut to "1.099511...".
  const char* format = bottom >= 1.0 / 64 && top <= 16777216 ? "%.10g" : "%.3g";
  if (axis->labelFormat() != format) axis->setLabelFormat(format);
}

void MetricChart::set_nice_range(QValueAxis* axis, double low, double high, int ticks) {
  if (!(high > low)) high = low + 1;
  const QFontMetricsF metrics(axis->labelsFont());
  if (axis->orientation() == Qt::Horizontal) {
    const qreal label =
        std::max(metrics.horizontalAdvance(axis_label(axis, low)), metrics.horizontalAdvance(axis_label(axis, high)));
    ticks = ticks_that_fit(Qt::Horizontal, label + 14, ticks);
  } else {
    ticks = ticks_that_fit(Qt::Vertical, metrics.height() + 4, ticks);
  }
  const double raw = (high - low) / std::max(1, ticks - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    // 2.5 only where it is whole (25, 250, ...): 2.5 or 0.25 would be labelled "3" or "0.3" in the axes' formats
    if (raw <= m * magnitude && (m != 2.5 || magnitude >= 10)) {
      step = m * magnitude;
      break;
    }
  const double nice_low = std::floor(low / step) * step, nice_high = std::ceil(high / step) * step;
  const int count = static_cast<int>(std::lround((nice_high - nice_low) / step)) + 1;
  if (axis->min() == nice_low && axis->max() == nice_high && axis->tickCount() == count) return;
  axis->setRange(nice_low, nice_high);
  axis->setTickCount(count);
}

void MetricChart::set_epoch_axis(QValueAxis* axis, int epochs) {
  const qreal label = QFontMetricsF(axis->labelsFont()).horizontalAdvance(QString::number(std::max(1, epochs)));
  set_epoch_range(axis, epochs, ticks_that_fit(Qt::Horizontal, label + 14, kMostEpochTicks));
}

int MetricChart::ticks_that_fit(Qt::Orientation along, qreal label_extent, int wanted) const {
  const QRectF plot = chart()->plotArea();
  const qreal length = along == Qt::Horizontal ? plot.width() : plot.height();
  if (!(length > 0)) return wanted;  // not laid out yet: the next refresh knows
  return std::clamp(static_cast<int>(length / label_extent) + 1, 2, std::max(2, wanted));
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
  series->setName(name.toHtmlEscaped());  // the legend draws names as HTML; a run's name is plain text
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
    // Series names are HTML already (escaped for the legend): the rest is escaped to join them.
    const QString values =
        QStringLiteral("%1 %2: %3%4")
            .arg(x_label, QString::number(p.x(), 'g', 6), QString::number(p.y(), 'g', y_decimals), y_unit);
    QToolTip::showText(QCursor::pos(), QStringLiteral("<p>%1<br>%2</p>").arg(series->name(), values.toHtmlEscaped()));
  });
}

void MetricChart::hide_from_legend(QAbstractSeries* series) {
  for (QLegendMarker* marker : chart()->legend()->markers(series)) marker->setVisible(false);
  legend_->hide_entry(series);
}

void MetricChart::add_group_bands(const RunList& runs, const ChartOptions& options, QAbstractAxis* x, QAbstractAxis* y,
                                  const QString& y_unit) {
  groups_.clear();
  if (options.group_by.isEmpty() || !multi(runs)) return;
  const std::string key = options.group_by.toStdString();
  for (const RunGroup& group : group_runs(runs, key)) {
    const int first = static_cast<int>(std::find(runs.begin(), runs.end(), group.runs.front()) - runs.begin());
    const QColor color = run_color(runs[static_cast<size_t>(first)]->colour_index(static_cast<size_t>(first)));
    const QString label = QString::fromStdString(group_label(key, group));
    GroupBand band;
    band.runs = group.runs;
    if (group.runs.size() > 1) {
      auto* area = new QAreaSeries;
      band.low = new QLineSeries(area);  // owned by the area, deleted with it
      band.high = new QLineSeries(area);
      area->setUpperSeries(band.high);
      area->setLowerSeries(band.low);
      area->setName((label + tr(" ± std")).toHtmlEscaped());  // as add_line: legend names are HTML
      QColor fill = color;
      fill.setAlpha(palette_is_dark() ? 70 : 50);
      area->setBrush(fill);
      area->setPen(Qt::NoPen);
      attach(area, x, y);
    }
    band.mean = add_line(label, curve_pen(color.darker(palette_is_dark() ? 80 : 130), 3.0), x, y);
    band.mean->setPointsVisible(true);
    show_values_on_hover(band.mean, x_axis_unit(options.x_axis), 4, y_unit);
    groups_.push_back(std::move(band));
  }
}

void MetricChart::refresh_group_bands(const std::function<double(const EpochReport&)>& metric, double y_scale,
                                      XAxis axis, double& y_low, double& y_high) {
  for (GroupBand& g : groups_) {
    QList<QPointF> mean, low, high;
    for (const EpochBand& b : epoch_bands(g.runs, metric, 1).points) {
      const double at = mean_epoch_x(g.runs, b.epoch, axis);
      if (!std::isfinite(at) || !std::isfinite(b.mean)) continue;
      mean.append(QPointF(at, y_scale * b.mean));
      low.append(QPointF(at, y_scale * (b.mean - b.std)));
      high.append(QPointF(at, y_scale * (b.mean + b.std)));
      y_low = std::min(y_low, y_scale * (b.mean - b.std));
      y_high = std::max(y_high, y_scale * (b.mean + b.std));
    }
    g.mean->replace(mean);
    if (g.low) {
      g.low->replace(low);
      g.high->replace(high);
    }
  }
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

void MetricChart::resizeEvent(QResizeEvent* event) {
  QChartView::resizeEvent(event);  // resizes the chart
  legend_->relayout();
  title_item_->relayout();
  fit_axis_titles();
}

void MetricChart::changeEvent(QEvent* event) {
  // The system switched between light and dark: redraw in the matching theme.
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::ThemeChange) force_rebuild();
  QChartView::changeEvent(event);
}

}  // namespace ampwb::ui
