// The charts' x axis: step, epoch or wall-clock seconds (time to accuracy is what AMP is for). Per-step curves
// (loss, loss scale) take any of the three; per-epoch curves (accuracy, epoch time) take the epoch or the wall-clock
// time at the epoch's end, the same definition as the HTML report's (train/epoch_wall_time.h).
#pragma once

#include <QString>
#include <vector>

#include "run_series.h"

class QAbstractAxis;
class QValueAxis;

namespace ampwb::ui {

enum class XAxis { Step, Epoch, WallClock };

// "step", "epoch", "wall clock": the chart panel's choices, in order.
QString x_axis_choice(XAxis axis);
// The axis title with its unit: "step", "epoch", "wall clock (s since the run started)".
QString x_axis_title(XAxis axis);
// The hover tooltip's name of an x value: "step", "epoch", "time (s)".
QString x_axis_unit(XAxis axis);
// What a per-epoch chart draws against: the epoch, unless wall-clock time is asked for.
inline XAxis per_epoch(XAxis axis) { return axis == XAxis::WallClock ? axis : XAxis::Epoch; }

// The x of a step: its number; the epochs completed after it, (step + 1) / steps per epoch, so the last step of
// epoch 2 sits at 2.0 beside that epoch's validation point; or its wall-clock seconds.
double step_x(const RunSeries& run, const StepReport& step, XAxis axis);
// The x of the end of `epoch`: its last step's number or wall-clock seconds, or the epoch. NaN when unknown (a
// wall-clock time for an epoch none of whose steps are held).
double epoch_x(const RunSeries& run, int epoch, XAxis axis);
// Where a band's point for `epoch` goes: the mean of the runs' epoch_x (on the wall clock each run reached the
// epoch at its own time); NaN when none is known.
double mean_epoch_x(const std::vector<const RunSeries*>& runs, int epoch, XAxis axis);

// The most ticks an epoch axis takes (a tick per epoch up to 13 epochs), and fewer where their labels would not fit.
constexpr int kMostEpochTicks = 13;
// The epochs between labelled ones, 1, 2, 5, 10, 20, 50, ...: the fewest that label `epochs` epochs with at most
// `fitting` labels.
int epoch_label_step(int epochs, int fitting);
// An epoch axis for `epochs` epochs: its ticks whole epochs, at most `fitting` of them (MetricChart::ticks_that_fit).
void set_epoch_range(QValueAxis* axis, int epochs, int fitting = kMostEpochTicks);

// The title an axis was given, whole: MetricChart::fit_axis_titles may show it broken into lines, keeping the whole
// one in the axis' property kWholeTitle.
inline constexpr char kWholeTitle[] = "wholeTitle";
QString whole_axis_title(const QAbstractAxis* axis);
// The short form of an axis' title, in its property kShortTitle, shown where the whole one does not fit even on
// several lines: "wall clock (s)". Empty for the others, whose titles are short.
inline constexpr char kShortTitle[] = "shortTitle";
QString x_axis_short_title(XAxis axis);
// Titles an axis whole ("seconds per epoch") and in its short form ("s/epoch"), shown where the whole one does not fit.
void set_axis_titles(QAbstractAxis* axis, const QString& whole, const QString& short_title);

// Sets the title and the label format for an axis reaching `high`; returns the top the axis should reach (at least
// 10 steps, 1 epoch or 1 second), for MetricChart::set_nice_range.
double label_x_axis(QValueAxis* axis, XAxis kind, double high);

}  // namespace ampwb::ui
