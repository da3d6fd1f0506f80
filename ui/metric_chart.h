// The base of every chart: a QChartView that draws one metric of one run, or of several runs overlaid (a
// comparison), from RunSeries. update_from() is cheap when nothing changed, so a live view can call it on every
// batch; a chart rebuilds its series only when the runs or the options change, and otherwise just replaces the
// (decimated) points. Hovering a curve shows its values; the context menu exports the chart.
#pragma once

#include <QChartView>
#include <QString>
#include <functional>
#include <vector>

#include "chart_axis.h"
#include "run_series.h"

class QAbstractAxis;
class QAbstractSeries;
class QLogValueAxis;
class QLineSeries;
class QValueAxis;
class QXYSeries;

namespace ampwb::ui {

class ChartLegend;
class ChartTitle;

struct ChartOptions {
  double smoothing = 0.6;             // EMA weight for per-step curves, 0 = raw
  QString group_by;                   // a configuration key (run_groups.h): each group's mean ± std; empty: none
  QString histogram_kind = "weight";  // "weight" or "activation"
  int histogram_epoch = 0;            // 0 = the latest
  XAxis x_axis = XAxis::Step;         // per-epoch charts read Step as Epoch
  QString fp8_tensor;                 // the fp8-scaling chart's tensor, "conv1:input"; empty: the runs' first
  bool operator==(const ChartOptions&) const = default;
};

using RunList = std::vector<const RunSeries*>;

class MetricChart : public QChartView {
  Q_OBJECT
 public:
  MetricChart(QString metric, QString title, QWidget* parent = nullptr);

  // "loss", "accuracy", ... (file names, the CLI); not metric(), which would hide QWidget::metric
  const QString& metric_key() const { return metric_; }
  const QString& title() const { return title_; }
  void update_from(const RunList& runs, const ChartOptions& options);
  void force_rebuild() { signature_.clear(); }

  // The legend under the plot (chart_legend.h): its entries wrap into rows rather than being cut short.
  ChartLegend* wrapping_legend() const { return legend_; }
  // The title as drawn (chart_title.h): on several lines where the chart is too narrow for one.
  ChartTitle* wrapping_title() const { return title_item_; }
  // Whether it draws the runs' groups (mean ± std by ChartOptions::group_by): the loss and accuracy charts do.
  bool draws_groups() const { return !groups_.empty(); }
  int series_count() const;
  qsizetype point_count() const;  // points drawn over all XY series (tests)

 Q_SIGNALS:
  void export_requested(ampwb::ui::MetricChart* chart);

 protected:
  virtual void rebuild(const RunList& runs, const ChartOptions& options) = 0;  // new series for new runs/options
  virtual void refresh(const RunList& runs, const ChartOptions& options) = 0;  // new points in the same series
  // Per-epoch charts redraw only when epochs arrive, not with every step.
  virtual bool follows_steps() const { return true; }

  // Sets a value axis to a range rounded out to nice tick values (1, 2, 2.5 or 5 times a power of ten), and only
  // when that range changes: every axis change makes QtCharts re-lay out every series on it. At most `ticks`, and
  // no more than the plot has room to label whole (QtCharts cuts crowded labels short: "-...").
  void set_nice_range(QValueAxis* axis, double low, double high, int ticks = 5);
  // Sets a log axis to the whole powers of two around [low, high] with one to spare on each side, so that a flat
  // line is not glued to the frame, and a tick every 2^k where the range is too wide to label each; [1, 1] where
  // low is not finite (nothing drawn).
  void set_power_of_two_range(QLogValueAxis* axis, double low, double high);
  // set_epoch_range (chart_axis.h) with as many ticks as their labels fit along the plot.
  void set_epoch_axis(QValueAxis* axis, int epochs);
  // How many ticks an axis along the plot can label whole, each label `label_extent` long along it; at most `wanted`.
  int ticks_that_fit(Qt::Orientation along, qreal label_extent, int wanted) const;

  // Helpers for subclasses: an axis pair, a series attached to them, hover tooltips, hidden legend entries.
  void reset_chart();
  // `name`: plain text (a run's label); the series holds it escaped, since QtCharts draws legend names as HTML.
  QLineSeries* add_line(const QString& name, const QPen& pen, QAbstractAxis* x, QAbstractAxis* y);
  void attach(QAbstractSeries* series, QAbstractAxis* x, QAbstractAxis* y);
  void show_values_on_hover(QXYSeries* series, const QString& x_label, int y_decimals, const QString& y_unit = {});
  void hide_from_legend(QAbstractSeries* series);
  int buckets() const;  // decimation buckets: about one per horizontal pixel of the plot
  bool multi(const RunList& runs) const { return runs.size() > 1; }
  // The groups of options.group_by (none without one, or for a single run): for each, a mean line in its first
  // run's colour and, where it has two runs or more, a ± std band; filled by refresh_group_bands with a per-epoch
  // metric times `y_scale`, widening [y_low, y_high] to what it draws.
  void add_group_bands(const RunList& runs, const ChartOptions& options, QAbstractAxis* x, QAbstractAxis* y,
                       const QString& y_unit);
  void refresh_group_bands(const std::function<double(const EpochReport&)>& metric, double y_scale, XAxis axis,
                           double& y_low, double& y_high);

  void contextMenuEvent(QContextMenuEvent* event) override;
  // Axis titles shown only where they fit beside their labels and along the plot (QtCharts would cut them short,
  // and their labels with them); the chart's title and legend still say what is drawn.
  void fit_axis_titles();
  void resizeEvent(QResizeEvent* event) override;
  void changeEvent(QEvent* event) override;

 private:
  QString metric_, title_;
  ChartLegend* legend_ = nullptr;
  ChartTitle* title_item_ = nullptr;
  RunList shown_runs_;  // what the last update_from drew (the caller keeps the runs alive while shown)
  ChartOptions shown_options_;
  bool refit_pending_ = false;       // a fit to a new plot size is queued
  QString fitted_axes_for_;          // the plot and axes the axis titles were last fitted to
  std::vector<uint64_t> signature_;  // runs and options of the series built
  std::vector<uint64_t> revisions_;  // data drawn
  struct GroupBand {
    std::vector<const RunSeries*> runs;
    QLineSeries* mean = nullptr;
    QLineSeries* low = nullptr;  // null for a group of one run
    QLineSeries* high = nullptr;
  };
  std::vector<GroupBand> groups_;
};

}  // namespace ampwb::ui
