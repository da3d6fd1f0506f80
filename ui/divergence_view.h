// The precision divergence of a run as a table: one row per conv, linear and batch-norm layer (forward order), the
// relative errors of its activation, activation gradient and weight gradient against FP32, the activation's cell
// coloured by how many units of the mode's rounding it is off, the first departing layer marked; above it, the
// sentence naming where the mode departs. Shows the first run of the list, as the numerics heat map beside it.
#pragma once

#include <QColor>
#include <QWidget>

#include "metric_chart.h"

class QLabel;
class QTableWidget;

namespace ampwb::ui {

// An activation error's colour: green within one rounding, through yellow, to red at the departure line and beyond.
QColor divergence_color(double relative_error, double unit_roundoff);

class DivergenceView : public QWidget {
  Q_OBJECT
 public:
  explicit DivergenceView(QWidget* parent = nullptr);

  // Redraws when the first run or its divergence changed (RunSeries::epoch_revision).
  void update_from(const RunList& runs);
  QTableWidget* table() const { return table_; }
  QLabel* caption() const { return caption_; }

 private:
  void rebuild();
  QLabel* caption_ = nullptr;
  QTableWidget* table_ = nullptr;
  const RunSeries* run_ = nullptr;
  uint64_t drawn_revision_ = ~uint64_t{0};
};

}  // namespace ampwb::ui
