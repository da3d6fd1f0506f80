// HistogramChart: log2-magnitude gradient histograms against FP16's range.
#include "histogram_chart.h"

#include <QAreaSeries>
#include <QChart>
#include <QLineSeries>
#include <QValueAxis>
#include <algorithm>
#include <set>

#include "chart_style.h"

namespace ampwb::ui {
namespace {

// The stepped outline of a histogram in percent of all values: x is log2 |g|.
QList<QPointF> outline(const GradientHistogram& h, double& top) {
  QList<QPointF> points;
  const double total = h.total > 0 ? static_cast<double>(h.total) : 1.0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    const double x0 = h.min_log2 + static_cast<double>(i), y = 100.0 * h.counts[i] / total;
    points.append(QPointF(x0, y));
    points.append(QPointF(x0 + 1, y));
    top = std::max(top, y);
  }
  return points;
}

// A run that does not compute in FP16 (fp32, tf32, amp-bf16) is shown against FP16's range as a what-if.
bool in_fp16(const RunSeries& run) { return mode_info(run.config.precision.mode).format == NumberFormat::Fp16; }

QString percent(double fraction) {
  return fraction > 0 && fraction < 0.001 ? QStringLiteral("%1%").arg(100 * fraction, 0, 'g', 2)
                                          : QStringLiteral("%1%").arg(100 * fraction, 0, 'f', 1);
}

}  // namespace

HistogramChart::HistogramChart(QWidget* parent)
    : MetricChart("histogram", tr("Gradient histogram against FP16's range"), parent) {}

const GradientHistogram* HistogramChart::pick(const RunSeries& run, const QString& kind, int epoch) {
  const GradientHistogram* found = nullptr;
  const std::string k = kind.toStdString();
  for (const GradientHistogram& h : run.histograms)
    if (h.kind == k && (epoch == 0 ? (!found || h.epoch >= found->epoch) : h.epoch == epoch)) found = &h;
  return found;
}

void HistogramChart::rebuild(const RunList& runs, const ChartOptions&) {
  x_ = new QValueAxis;
  set_axis_titles(x_, tr("log2 |gradient| × loss scale · shaded: FP16"), tr("log2 |gradient × scale|"));
  x_->setLabelFormat("%.0f");
  y_ = new QValueAxis;
  set_axis_titles(y_, tr("% of values"), tr("%"));
  y_->setLabelFormat("%.3g");
  chart()->addAxis(x_, Qt::AlignBottom);
  chart()->addAxis(y_, Qt::AlignLeft);

  fp16_range_ = new QAreaSeries;
  range_top_ = new QLineSeries(fp16_range_);
  range_bottom_ = new QLineSeries(fp16_range_);
  fp16_range_->setUpperSeries(range_top_);
  fp16_range_->setLowerSeries(range_bottom_);
  fp16_range_->setName(tr("FP16 range"));
  fp16_range_->setBrush(fp16_range_color());
  fp16_range_->setPen(QPen(fp16_range_color().darker(200), 1, Qt::DashLine));
  attach(fp16_range_, x_, y_);
  if (multi(runs)) hide_from_legend(fp16_range_);  // the legend is for the runs' fractions; the axis says it

  outlines_.clear();
  fill_ = nullptr;
  const bool many = multi(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    const QColor c = many ? run_color(runs[i]->colour_index(i)) : train_color();
    QLineSeries* line = add_line(QString::fromStdString(runs[i]->label), curve_pen(c, many ? 2.0 : 1.5), x_, y_);
    show_values_on_hover(line, tr("log2 |g|"), 3, "%");
    outlines_.push_back(line);
  }
  if (!many && !outlines_.empty()) {
    // The area shares the outline's points through a copy; the outline stays on top for hovering.
    fill_ = new QAreaSeries;
    auto* upper = new QLineSeries(fill_);
    fill_->setUpperSeries(upper);
    QColor c = train_color();
    c.setAlpha(110);
    fill_->setBrush(c);
    fill_->setPen(Qt::NoPen);
    attach(fill_, x_, y_);
    hide_from_legend(fill_);
  }
}

void HistogramChart::refresh(const RunList& runs, const ChartOptions& options) {
  double top = 0;
  int lo = -30, hi = 18;
  QStringList fractions;
  QString what;
  QStringList what_if;  // the runs shown that are not in FP16 ("#7")
  std::set<int> epochs;  // of the histograms drawn
  for (size_t i = 0; i < runs.size(); ++i) {
    const GradientHistogram* h = pick(*runs[i], options.histogram_kind, options.histogram_epoch);
    if (!h) {  // a new run, or an epoch without one: nothing drawn, the area under the last outline included
      outlines_[i]->clear();
      if (fill_) fill_->upperSeries()->clear();
      outlines_[i]->setName(multi(runs) ? QStringLiteral("#%1: none yet").arg(runs[i]->run_id) : tr("none yet"));
      continue;
    }
    const QList<QPointF> points = outline(*h, top);
    outlines_[i]->replace(points);
    if (fill_) fill_->upperSeries()->replace(points);
    // The visible x range: where values are, always including FP16's range.
    for (size_t b = 0; b < h->counts.size(); ++b)
      if (h->counts[b] > 0) {
        lo = std::min(lo, h->min_log2 + static_cast<int>(b) - 1);
        hi = std::max(hi, h->min_log2 + static_cast<int>(b) + 2);
      }
    // Short legend entries: what FP16 loses, or would lose ("if FP16"), per run (its id in a comparison).
    const bool fp16 = in_fp16(*runs[i]);
    if (!fp16) what_if << QStringLiteral("#%1").arg(runs[i]->run_id);
    const QString under = percent(h->underflow_fraction), over = percent(h->overflow_fraction);
    QString line;
    if (multi(runs))
      line = (fp16 ? QStringLiteral("#%1: %2 / %3") : tr("#%1 if FP16: %2 / %3")).arg(runs[i]->run_id).arg(under, over);
    else
      // Each share kept with its word where the legend wraps ("over" / "0.0%" read as two entries).
      line = (fp16 ? tr("in FP16: under\u00a0%1 · over\u00a0%2") : tr("if FP16: under\u00a0%1 · over\u00a0%2"))
                 .arg(under, over);
    fractions << line;
    outlines_[i]->setName(line);
    what = tr("epoch %1, scale %2").arg(h->epoch).arg(h->loss_scale, 0, 'g', 6);
    epochs.insert(h->epoch);
  }
  set_nice_range(x_, lo, hi, 8);
  set_nice_range(y_, 0, top > 0 ? top * 1.05 : 1);
  const double y_top = y_->max();  // the shading fills the plot's height
  range_top_->replace({QPointF(kFp16MinLog2, y_top), QPointF(kFp16MaxLog2, y_top)});
  range_bottom_->replace({QPointF(kFp16MinLog2, 0), QPointF(kFp16MaxLog2, 0)});
  const QString kind = options.histogram_kind == "activation" ? tr("Activation") : tr("Weight");
  if (fractions.isEmpty())
    chart()->setTitle(tr("%1 gradients: none yet (one per epoch)").arg(kind));
  else if (!multi(runs))
    chart()->setTitle(what_if.isEmpty() ? tr("%1 gradients (%2)").arg(kind, what)
                                        : tr("%1 gradients (%2): what FP16 would do").arg(kind, what));
  else {  // the legend says which runs' fractions are what FP16 would do ("#7 if FP16")
    // Each run's times its own loss scale, which a short chart's hidden axis title would otherwise alone say: an FP16
    // run's gradients sit 2^16 to the right of FP32's.
    const QString at = epochs.size() == 1 ? tr("epoch %1").arg(*epochs.begin()) : tr("each run's last epoch");
    chart()->setTitle(what_if.size() == static_cast<qsizetype>(fractions.size())
                          ? tr("%1 gradients × loss scale (%2): what FP16 would do").arg(kind, at)
                          : tr("%1 gradients × loss scale (%2) against FP16's range").arg(kind, at));
  }
}

}  // namespace ampwb::ui
