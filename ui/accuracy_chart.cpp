// AccuracyChart: train/validation top-1 and top-k per epoch.
#include "accuracy_chart.h"

#include <QChart>
#include <QLineSeries>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "chart_axis.h"
#include "chart_style.h"

namespace ampwb::ui {

AccuracyChart::AccuracyChart(QWidget* parent) : MetricChart("accuracy", tr("Accuracy"), parent) {}

QString AccuracyChart::topk_name(const RunList& runs, size_t i) const {
  const QString who = multi(runs) ? QString::fromStdString(runs[i]->label) + ": " : QString();
  return who + tr("validation top-%1").arg(runs[i]->config.topk);
}

void AccuracyChart::rebuild(const RunList& runs, const ChartOptions& options) {
  const XAxis axis = per_epoch(options.x_axis);
  x_ = new QValueAxis;
  x_->setTitleText(x_axis_title(axis));
  y_ = new QValueAxis;
  set_axis_titles(y_, tr("accuracy (%)"), tr("acc. (%)"));
  y_->setLabelFormat("%.0f");
  chart()->addAxis(x_, Qt::AlignBottom);
  chart()->addAxis(y_, Qt::AlignLeft);
  curves_.assign(runs.size(), Curves{});
  const bool many = multi(runs);
  // The k the legend and a comparison's title name: the first run's that reports a top-k.
  const auto reporting = std::find_if(runs.begin(), runs.end(), [](const RunSeries* r) { return r->reports_topk(); });
  const int topk = reporting == runs.end() ? 2 : (*reporting)->config.topk;
  for (size_t i = 0; i < runs.size(); ++i) {
    const QString who = many ? QString::fromStdString(runs[i]->label) + ": " : QString();
    const QColor c = run_color(runs[i]->colour_index(i));
    Curves& k = curves_[i];
    k.train = add_line(who + tr("train top-1"), curve_pen(many ? c : train_color(), 1.5, Qt::DashLine), x_, y_);
    k.validation = add_line(who + tr("validation top-1"), curve_pen(many ? c : validation_color(), 2.5), x_, y_);
    k.topk = add_line(topk_name(runs, i), curve_pen(many ? c : topk_color(), 1.5, Qt::DotLine), x_, y_);
    for (QLineSeries* s : {k.train, k.validation, k.topk}) {
      s->setPointsVisible(true);
      show_values_on_hover(s, x_axis_unit(axis), 4, "%");
    }
    if (many) {
      hide_from_legend(k.train);
      hide_from_legend(k.topk);
    }
  }
  if (many && reporting != runs.end())
    chart()->setTitle(tr("Accuracy: — validation · - - train · ··· top-%1").arg(topk));
  else if (many)
    chart()->setTitle(tr("Accuracy: — validation · - - train"));
  add_group_bands(runs, options, x_, y_, "%");  // the validation top-1 of each group
}

void AccuracyChart::refresh(const RunList& runs, const ChartOptions& options) {
  const XAxis axis = per_epoch(options.x_axis);
  int epochs = 1;
  double x_max = 0;
  double low = 100, high = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSeries& run = *runs[i];
    QList<QPointF> train, validation, topk;
    for (const EpochReport& e : run.epochs) {
      const double at = epoch_x(run, e.epoch, axis);
      if (!std::isfinite(at)) continue;
      x_max = std::max(x_max, at);
      train.append(QPointF(at, 100 * e.train_accuracy));
      low = std::min(low, 100 * e.train_accuracy);
      high = std::max(high, 100 * e.train_accuracy);
      if (!std::isfinite(e.validation_accuracy)) continue;  // a run without validation images measured none
      validation.append(QPointF(at, 100 * e.validation_accuracy));
      low = std::min(low, 100 * e.validation_accuracy);
      high = std::max(high, 100 * e.validation_accuracy);
      if (!run.reports_topk() || e.topk == 0 || !std::isfinite(e.validation_topk)) continue;
      topk.append(QPointF(at, 100 * e.validation_topk));
      high = std::max(high, 100 * e.validation_topk);
    }
    curves_[i].train->replace(train);
    curves_[i].validation->replace(validation);
    curves_[i].topk->replace(topk);
    curves_[i].topk->setVisible(run.reports_topk());  // its legend entry goes with it
    // The live run's k follows the setup until it starts (the series are built once for it).
    if (const QString name = topk_name(runs, i).toHtmlEscaped(); curves_[i].topk->name() != name)
      curves_[i].topk->setName(name);  // escaped, as add_line names it
    epochs = std::max({epochs, run.config.epochs, run.epochs.empty() ? 1 : run.epochs.back().epoch});
  }
  refresh_group_bands([](const EpochReport& e) { return e.validation_accuracy; }, 100, axis, low, high);
  if (axis == XAxis::Epoch)
    set_epoch_axis(x_, epochs);
  else
    set_nice_range(x_, 0, label_x_axis(x_, axis, x_max));
  // Zoomed to where the curves are (accuracies near 90 % are unreadable on 0..100), in steps of 10.
  if (high < low) low = 0, high = 100;
  const double bottom = std::max(0.0, std::floor(low / 10) * 10);
  const double top = std::min(100.0, std::max(bottom + 10, std::ceil(high / 10) * 10));
  set_nice_range(y_, bottom, top, 6);
}

}  // namespace ampwb::ui
