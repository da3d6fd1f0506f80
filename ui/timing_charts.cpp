// EpochTimeChart and DataWaitChart.
#include "timing_charts.h"

#include <QBarSet>
#include <QCategoryAxis>
#include <QChart>
#include <QCursor>
#include <QFontMetricsF>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <QToolTip>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "chart_style.h"

namespace ampwb::ui {
namespace {

// Labels with as many decimals as the axis' tick step needs: "1200", "12.5", "0.25".
void label_decimals(QValueAxis* axis) {
  const double step = (axis->max() - axis->min()) / std::max(1, axis->tickCount() - 1);
  axis->setLabelFormat(step >= 1 ? "%.0f" : step >= 0.1 ? "%.1f" : "%.2f");
}

int epoch_count(const RunList& runs) {
  int epochs = 1;
  for (const RunSeries* r : runs)
    epochs = std::max({epochs, r->config.epochs, r->epochs.empty() ? 1 : r->epochs.back().epoch});
  return epochs;
}

}  // namespace

EpochTimeChart::EpochTimeChart(QWidget* parent) : MetricChart("epoch-time", tr("Epoch time and throughput"), parent) {}

void EpochTimeChart::rebuild(const RunList& runs, const ChartOptions& options) {
  const XAxis axis = per_epoch(options.x_axis);
  x_ = new QValueAxis;
  x_->setTitleText(x_axis_title(axis));
  seconds_axis_ = new QValueAxis;
  set_axis_titles(seconds_axis_, tr("seconds per epoch"), tr("s/epoch"));
  seconds_axis_->setLabelFormat("%.3g");
  throughput_axis_ = new QValueAxis;
  set_axis_titles(throughput_axis_, tr("training images/s"), tr("images/s"));
  throughput_axis_->setLabelFormat("%.0f");
  chart()->addAxis(x_, Qt::AlignBottom);
  chart()->addAxis(seconds_axis_, Qt::AlignLeft);
  chart()->addAxis(throughput_axis_, Qt::AlignRight);
  seconds_.clear();
  throughput_.clear();
  const bool many = multi(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    const QString who = many ? QString::fromStdString(runs[i]->label) + ": " : QString();
    const QColor c = run_color(runs[i]->colour_index(i));
    // Which axis is whose, and in what unit, also where a small chart has no room for the axes' titles (QtCharts
    // gives two y axes 20 % of its width each).
    QLineSeries* s = add_line(who + tr("s/epoch (left)"), curve_pen(many ? c : train_color(), 2.0), x_, seconds_axis_);
    QLineSeries* t = add_line(who + tr("images/s (right)"), curve_pen(many ? c : validation_color(), 2.0, Qt::DashLine),
                              x_, throughput_axis_);
    for (QLineSeries* l : {s, t}) l->setPointsVisible(true);
    show_values_on_hover(s, x_axis_unit(axis), 4, " s");
    show_values_on_hover(t, x_axis_unit(axis), 5, " images/s");
    if (many) hide_from_legend(t);
    if (many) chart()->setTitle(tr("Epoch time: s/epoch (—, left) · images/s (-\u00a0-, right)"));
    seconds_.push_back(s);
    throughput_.push_back(t);
  }
}

void EpochTimeChart::refresh(const RunList& runs, const ChartOptions& options) {
  const XAxis axis = per_epoch(options.x_axis);
  double top_seconds = 0, top_throughput = 0, x_max = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    QList<QPointF> s, t;
    for (const EpochReport& e : runs[i]->epochs) {
      const double at = epoch_x(*runs[i], e.epoch, axis);
      if (!std::isfinite(at)) continue;
      x_max = std::max(x_max, at);
      s.append(QPointF(at, e.seconds));
      t.append(QPointF(at, e.images_per_second));
      top_seconds = std::max(top_seconds, e.seconds);
      top_throughput = std::max(top_throughput, e.images_per_second);
    }
    seconds_[i]->replace(s);
    throughput_[i]->replace(t);
  }
  if (axis == XAxis::Epoch)
    set_epoch_axis(x_, epoch_count(runs));
  else
    set_nice_range(x_, 0, label_x_axis(x_, axis, x_max));
  set_nice_range(seconds_axis_, 0, top_seconds > 0 ? top_seconds * 1.05 : 1.0);  // empty: 0 to 1, not 0.00s
  set_nice_range(throughput_axis_, 0, top_throughput > 0 ? top_throughput * 1.05 : 1.0);
  label_decimals(seconds_axis_);
  label_decimals(throughput_axis_);
}

DataWaitChart::DataWaitChart(QWidget* parent) : MetricChart("data-wait", tr("Data wait against compute"), parent) {}

void DataWaitChart::rebuild(const RunList& runs, const ChartOptions&) {
  bars_ = nullptr;
  compute_ = wait_ = nullptr;
  bar_epochs_ = nullptr;
  x_ = nullptr;
  compute_lines_.clear();
  wait_lines_.clear();
  y_ = new QValueAxis;
  set_axis_titles(y_, tr("seconds per epoch"), tr("s/epoch"));
  y_->setLabelFormat("%.3g");
  if (!multi(runs)) {
    bar_epochs_ = new QCategoryAxis;
    bar_epochs_->setTitleText(tr("epoch"));
    bar_epochs_->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    bar_epochs_->setGridLineVisible(false);
    chart()->addAxis(bar_epochs_, Qt::AlignBottom);
    chart()->addAxis(y_, Qt::AlignLeft);
    bars_ = new QStackedBarSeries;
    compute_ = new QBarSet(tr("compute"));
    compute_->setColor(train_color());
    wait_ = new QBarSet(tr("data wait"));
    wait_->setColor(validation_color());
    bars_->append(compute_);
    bars_->append(wait_);
    bars_->setBarWidth(0.6);
    attach(bars_, bar_epochs_, y_);
    for (QBarSet* set : {compute_, wait_})
      connect(set, &QBarSet::hovered, this, [this, set](bool on, int index) {
        if (on)
          QToolTip::showText(
              QCursor::pos(),
              tr("%1\nepoch %2: %3 s").arg(set->label()).arg(first_bar_epoch_ + index).arg(set->at(index), 0, 'g', 4));
        else
          QToolTip::hideText();
      });
    return;
  }
  x_ = new QValueAxis;
  x_->setTitleText(tr("epoch"));
  chart()->addAxis(x_, Qt::AlignBottom);
  chart()->addAxis(y_, Qt::AlignLeft);
  for (size_t i = 0; i < runs.size(); ++i) {
    const QString who = QString::fromStdString(runs[i]->label) + ": ";
    const QColor c = run_color(runs[i]->colour_index(i));
    QLineSeries* compute = add_line(who + tr("compute"), curve_pen(c, 2.0), x_, y_);
    QLineSeries* wait = add_line(who + tr("data wait"), curve_pen(c, 2.0, Qt::DashLine), x_, y_);
    for (QLineSeries* l : {compute, wait}) {
      l->setPointsVisible(true);
      show_values_on_hover(l, tr("epoch"), 4, " s");
    }
    hide_from_legend(wait);
    compute_lines_.push_back(compute);
    wait_lines_.push_back(wait);
  }
}

void DataWaitChart::refresh(const RunList& runs, const ChartOptions&) {
  double top = 0;
  double total_wait = 0, total_compute = 0;
  if (bars_) {
    compute_->remove(0, compute_->count());
    wait_->remove(0, wait_->count());
    static const std::vector<EpochReport> none;
    const std::vector<EpochReport>& epochs = runs.empty() ? none : runs[0]->epochs;
    for (const EpochReport& e : epochs) {
      compute_->append(e.compute_seconds);
      wait_->append(e.data_wait_seconds);
      top = std::max(top, e.compute_seconds + e.data_wait_seconds);
      total_wait += e.data_wait_seconds;
      total_compute += e.compute_seconds;
    }
    label_bars(epochs, runs.empty() ? 0 : runs[0]->config.epochs);
  } else {
    for (size_t i = 0; i < runs.size(); ++i) {
      QList<QPointF> compute, wait;
      for (const EpochReport& e : runs[i]->epochs) {
        compute.append(QPointF(e.epoch, e.compute_seconds));
        wait.append(QPointF(e.epoch, e.data_wait_seconds));
        top = std::max({top, e.compute_seconds, e.data_wait_seconds});
        total_wait += e.data_wait_seconds;
        total_compute += e.compute_seconds;
      }
      compute_lines_[i]->replace(compute);
      wait_lines_[i]->replace(wait);
    }
    set_epoch_axis(x_, epoch_count(runs));
  }
  set_nice_range(y_, 0, top > 0 ? top * 1.05 : 1.0);  // empty: 0 to 1, not 0.00s
  label_decimals(y_);
  const double total = total_wait + total_compute;
  if (!bars_)
    chart()->setTitle(tr("Data wait (- -) against compute (—)"));
  else if (total > 0)
    chart()->setTitle(tr("Data wait vs compute: %1% waiting").arg(100 * total_wait / total, 0, 'f', 1));
  else
    chart()->setTitle(title());  // a new run's: not the last run's share
}

void DataWaitChart::label_bars(const std::vector<EpochReport>& epochs, int planned) {
  // Bar i stands at x = i, room left for the epochs still to come. A label for every epoch while they fit, else for
  // every 2nd, 5th, 10th, 20th, ...: QtCharts would cut labels that overlap to "…".
  const int done = static_cast<int>(epochs.size());
  first_bar_epoch_ = epochs.empty() ? 1 : epochs.front().epoch;
  const int bars = std::max({1, done, planned - first_bar_epoch_ + 1});
  const auto epoch_of = [&](int i) { return i < done ? epochs[i].epoch : first_bar_epoch_ + i; };
  const int last_epoch = epoch_of(bars - 1);
  const qreal label = QFontMetricsF(bar_epochs_->labelsFont()).horizontalAdvance(QString::number(last_epoch));
  const int fitting = ticks_that_fit(Qt::Horizontal, label + 14, bars);
  const int every = epoch_label_step(bars, fitting);
  QStringList labels;
  QList<double> at;
  for (int i = 0; i < bars; ++i) {
    if (const int epoch = epoch_of(i); epoch % every == 0) {
      labels << QString::number(epoch);
      at << i;
    }
  }
  if (bar_epochs_->categoriesLabels() == labels && bar_epochs_->max() == bars - 0.5) return;  // a relayout costs
  for (const QString& l : bar_epochs_->categoriesLabels()) bar_epochs_->remove(l);
  bar_epochs_->setStartValue(-0.5);
  for (int k = 0; k < labels.size(); ++k) bar_epochs_->append(labels[k], at[k]);
  bar_epochs_->setRange(-0.5, bars - 0.5);
}

}  // namespace ampwb::ui
