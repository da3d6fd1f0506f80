// Per-layer numerics as a heat map: layers (rows, model order) x epochs (columns, the last probed step of each),
// coloured by the measure the selector picks: activation headroom before FP16 overflows, or the fraction of
// activation or weight gradients FP16 would flush to zero. Each cell's tooltip has the layer's whole record.
// Shows the first run of the list (a comparison's first); live runs fill it as their probed steps arrive.
#pragma once

#include <QColor>
#include <QWidget>

#include "analysis/numerics_grid.h"
#include "metric_chart.h"

class QComboBox;
class QLabel;
class QTableWidget;

namespace ampwb::ui {

// A cell's colour: red where FP16 loses values (negative headroom, underflow of 10% and more), through yellow, to
// green where there is room (headroom of 8 powers of two and more, no underflow); grey when all values are zero.
// FP8's clipped share: yellow at the 0.1% the diagnosis warns of, red at 1%.
QColor numerics_color(NumericsMeasure measure, double value);

class NumericsHeatmap : public QWidget {
  Q_OBJECT
 public:
  explicit NumericsHeatmap(QWidget* parent = nullptr);

  // Redraws when the first run or its numerics changed (RunSeries::epoch_revision). Until a measure is chosen, it
  // follows the run: what FP8 made zero for a run with FP8 tensors, else FP16's activation headroom.
  void update_from(const RunList& runs);
  NumericsMeasure measure() const;
  void set_measure(NumericsMeasure measure);  // a choice, as the user's: kept for every run after
  // Forgets the measure chosen: the next run shown opens on its own, as if none had been (for other runs compared).
  void follow_run();
  QTableWidget* table() const { return table_; }
  QString caption_text() const;

 private:
  // `mode`: the run's precision mode, whose format the FP16 measures say are FP16's limits, not its own, unless FP16.
  static QString caption(NumericsMeasure m, bool empty, bool fp16_gradients, PrecisionMode mode);
  void rebuild();
  QComboBox* measure_ = nullptr;
  QLabel* caption_ = nullptr;
  QTableWidget* table_ = nullptr;
  const RunSeries* run_ = nullptr;
  uint64_t drawn_revision_ = ~uint64_t{0};
  bool measure_chosen_ = false;
};

}  // namespace ampwb::ui
