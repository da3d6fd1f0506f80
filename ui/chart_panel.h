// Every chart of a run (live or stored) or of a comparison, in one grid, with the controls they share: the x axis
// (step, epoch or wall clock), smoothing of the per-step curves, which gradient histogram to show, mean ± std bands,
// and export (one chart or all). Beside the gradient histogram, the per-layer numerics heat map and below it the
// precision divergence from FP32.
#pragma once

#include <QWidget>
#include <string>
#include <vector>

#include "metric_chart.h"

class QComboBox;
class QGridLayout;
class QLabel;
class QPushButton;
class QScrollArea;
class QSlider;
class QTimer;

namespace ampwb::ui {

class WholeNumberBox;
class NumericsHeatmap;
class DivergenceView;

class ChartPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ChartPanel(QWidget* parent = nullptr);

  // The runs to draw; the caller keeps them alive and calls refresh() after changing them. The same runs again (by
  // run id, read anew) keep the choices made for them.
  void set_runs(RunList runs);
  const RunList& runs() const { return runs_; }
  void refresh();  // redraws what changed, now
  // For live data: refresh(), unless the last one was expensive (a very long run on a busy machine), in which
  // case the redraw is deferred by twice its cost, so drawing never takes more than a third of the UI thread.
  void refresh_soon();

  ChartOptions options() const;
  void set_smoothing(double weight);
  void set_x_axis(XAxis axis);  // what every chart draws against (the "Against" choice)
  // The "Group by" choice: the configuration keys that vary among the runs (run_groups.h), with "everything but
  // the seed" where the seed varies (chosen when only the seed does); hidden when none vary. Called after
  // set_runs: the same runs again, offering the same keys, keep the choice made.
  void set_group_keys(const std::vector<std::string>& keys);
  void set_group_by(const QString& key);                               // a key offered, or kAllButSeed; "" for none
  void set_export_prefix(const QString& prefix) { prefix_ = prefix; }  // "run-12", "compare-3-4"
  const QString& export_prefix() const { return prefix_; }

  MetricChart* chart(const QString& metric) const;
  const std::vector<MetricChart*>& charts() const { return charts_; }
  NumericsHeatmap* numerics() const { return numerics_; }
  DivergenceView* divergence() const { return divergence_; }
  // The run whose layers the heat map and the divergence show: of several, the one chosen under "Layers of"
  // (at first the first in a low-precision mode, which has both to show).
  const RunSeries* layers_run() const;

  // With file dialogs: one chart to PNG/SVG/PDF, or all of them into a folder.
  void export_one(MetricChart* chart);
  void export_all();

 Q_SIGNALS:
  void status_message(const QString& text);
  void group_by_changed();  // the "Group by" choice, or the keys it offers

 protected:
  void resizeEvent(QResizeEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void update_skipped_note();
  void fit_skipped_note();    // the note on skipped steps as high as its lines
  void update_fp8_tensors();  // the tensors offered, and the FP8 chart shown only where a run has them
  void update_legend();       // the runs' colours and, when grouped, the groups
  void fit_legend();          // the legend as high as its lines, up to four
  void update_layers_runs();  // the "Layers of" choice: the runs offered, the one chosen kept
  // Three charts abreast with the layers beside them where the width allows; where it does not (a small or scaled
  // screen), two abreast with the layers below, rather than a page that scrolls sideways.
  void fit_columns();
  void place_cells();
  RunList runs_;
  std::vector<int64_t> run_ids_;          // of runs_, which may be gone when the next set_runs comes
  std::vector<int64_t> grouped_run_ids_;  // the runs the "Group by" keys were last offered for
  QTimer* throttle_ = nullptr;
  bool refresh_pending_ = false;
  std::vector<MetricChart*> charts_;
  QString prefix_ = "run";
  QSlider* smoothing_ = nullptr;
  QPushButton* export_button_ = nullptr;  // enabled while a chart has something drawn
  QLabel* smoothing_value_ = nullptr;
  QComboBox* x_axis_ = nullptr;
  QComboBox* histogram_kind_ = nullptr;
  WholeNumberBox* histogram_epoch_ = nullptr;
  QComboBox* group_by_ = nullptr;
  QLabel* group_by_label_ = nullptr;
  QWidget* group_by_box_ = nullptr;  // the label and the choice, one piece of the wrapping control row
  QLabel* skipped_note_ = nullptr;
  QGridLayout* grid_ = nullptr;
  QScrollArea* chart_scroll_ = nullptr;
  std::vector<QWidget*> cells_;  // the charts in grid order, but the FP8 chart, which takes one's place
  QWidget* layers_ = nullptr;    // the per-layer numerics and the precision divergence
  QWidget* fp8_in_place_of_ = nullptr;
  bool narrow_ = false;                 // two charts abreast, the layers below
  int wide_minimum_ = 0;                // the grid's minimum width three abreast, when last measured
  QWidget* loss_scale_cell_ = nullptr;  // the loss-scale chart and its note on skipped steps
  QWidget* fp8_chart_ = nullptr;        // the FP8 scaling chart
  QComboBox* fp8_tensor_ = nullptr;
  QWidget* fp8_tensor_box_ = nullptr;  // its label and the tensor choice, one piece of the control row
  QLabel* run_legend_ = nullptr;       // a comparison's runs and their colours, for every chart
  QScrollArea* legend_area_ = nullptr;  // run_legend_, scrolling past four lines
  QComboBox* layers_run_ = nullptr;    // by run id; shown for several runs
  QWidget* layers_run_box_ = nullptr;
  NumericsHeatmap* numerics_ = nullptr;
  DivergenceView* divergence_ = nullptr;
};

}  // namespace ampwb::ui
