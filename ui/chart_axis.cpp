// The x axis of the charts: the value of a step or an epoch on each kind of axis, and the axis' titles.
#include "chart_axis.h"

#include <QAbstractAxis>
#include <QCoreApplication>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "train/epoch_wall_time.h"

namespace ampwb::ui {

int epoch_label_step(int epochs, int fitting) {
  int every = 1;
  while (epochs / every > std::max(1, fitting)) {
    int leading = every;  // its first digit: 1, 2 or 5
    while (leading >= 10) leading /= 10;
    every = leading == 2 ? every / 2 * 5 : every * 2;
  }
  return every;
}

void set_epoch_range(QValueAxis* axis, int epochs, int fitting) {
  epochs = std::max(1, epochs);
  axis->setLabelFormat("%.0f");
  if (epochs == 1) {  // epoch 1 in the middle, ticked alone: ticks at 0.5 and 1.5 would read "1" and "2"
    axis->setRange(0.5, 1.5);
    axis->setTickType(QValueAxis::TicksDynamic);
    axis->setTickAnchor(1);
    axis->setTickInterval(1);
    return;
  }
  axis->setRange(1, epochs);
  const int every = epoch_label_step(epochs, std::min(fitting, kMostEpochTicks));
  if (every == 1) {
    axis->setTickType(QValueAxis::TicksFixed);  // a live chart's axis may have held one epoch before
    axis->setTickCount(epochs);
  } else {  // at every 2nd, 5th, 10th, ... epoch: QtCharts cuts labels that overlap to "…"
    axis->setTickType(QValueAxis::TicksDynamic);
    axis->setTickAnchor(0);
    axis->setTickInterval(every);
  }
}

QString x_axis_choice(XAxis axis) {
  switch (axis) {
    case XAxis::Step:
      return QCoreApplication::translate("XAxis", "Step");
    case XAxis::Epoch:
      return QCoreApplication::translate("XAxis", "Epoch");
    case XAxis::WallClock:
      // Its unit here too: a small chart leaves out its axis title, and the choice above every chart stays.
      return QCoreApplication::translate("XAxis", "Wall clock (s)");
  }
  return {};
}

QString x_axis_title(XAxis axis) {
  switch (axis) {
    case XAxis::Step:
      return QCoreApplication::translate("XAxis", "step");
    case XAxis::Epoch:
      return QCoreApplication::translate("XAxis", "epoch");
    case XAxis::WallClock:
      return QCoreApplication::translate("XAxis", "wall clock (s since the run started)");
  }
  return {};
}

QString x_axis_unit(XAxis axis) {
  return axis == XAxis::WallClock ? QCoreApplication::translate("XAxis", "time (s)") : x_axis_title(axis);
}

double step_x(const RunSeries& run, const StepReport& step, XAxis axis) {
  switch (axis) {
    case XAxis::Step:
      return static_cast<double>(step.step);
    case XAxis::Epoch:
      // Without RunInfo (an old store row) the step's own epoch: whole numbers, still in order.
      return run.steps_per_epoch > 0 ? static_cast<double>(step.step + 1) / static_cast<double>(run.steps_per_epoch)
                                     : static_cast<double>(step.epoch);
    case XAxis::WallClock:
      return step.wall_seconds;
  }
  return 0;
}

double epoch_x(const RunSeries& run, int epoch, XAxis axis) {
  switch (axis) {
    case XAxis::Step:
      return run.epoch_end_step(epoch);
    case XAxis::Epoch:
      return epoch;
    case XAxis::WallClock: {
      const auto report = std::find_if(run.epochs.begin(), run.epochs.end(),
                                       [epoch](const EpochReport& e) { return e.epoch == epoch; });
      return report == run.epochs.end() ? std::nan("") : epoch_end_wall_seconds(run.steps, *report);
    }
  }
  return 0;
}

double mean_epoch_x(const std::vector<const RunSeries*>& runs, int epoch, XAxis axis) {
  double sum = 0;
  int known = 0;
  for (const RunSeries* run : runs)
    if (const double x = epoch_x(*run, epoch, axis); std::isfinite(x)) sum += x, ++known;
  return known ? sum / known : std::nan("");
}

QString whole_axis_title(const QAbstractAxis* axis) {
  const QVariant whole = axis->property(kWholeTitle);
  return whole.isValid() ? whole.toString() : axis->titleText();
}

QString x_axis_short_title(XAxis axis) {
  return axis == XAxis::WallClock ? QCoreApplication::translate("XAxis", "wall clock (s)") : QString();
}

void set_axis_titles(QAbstractAxis* axis, const QString& whole, const QString& short_title) {
  axis->setProperty(kWholeTitle, QVariant());
  axis->setTitleText(whole);
  axis->setProperty(kShortTitle, short_title);
}

double label_x_axis(QValueAxis* axis, XAxis kind, double high) {
  const QString title = x_axis_title(kind);
  if (whole_axis_title(axis) != title) {
    axis->setProperty(kWholeTitle, QVariant());
    axis->setTitleText(title);
  }
  if (const QString short_title = x_axis_short_title(kind); axis->property(kShortTitle).toString() != short_title)
    axis->setProperty(kShortTitle, short_title);
  const double least = kind == XAxis::Step ? 10 : 1;
  if (!(high >= least)) high = least;                // also NaN
  const char* format = high >= 5 ? "%.0f" : "%.1f";  // nice ticks are whole numbers from 5 up
  if (axis->labelFormat() != format) axis->setLabelFormat(format);
  return high;
}

}  // namespace ampwb::ui
