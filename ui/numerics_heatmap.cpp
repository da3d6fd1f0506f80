// NumericsHeatmap: the layers x epochs table, its colours and its tooltips.
#include "numerics_heatmap.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "analysis/numerics_grid.h"
#include "analysis/report_text.h"
#include "run_series.h"
#include "text_lines_area.h"

namespace ampwb::ui {
namespace {

QString range_text(const ValueRange& r) {
  return QObject::tr("max |x| %1; %2 below 2^-24, %3 below 2^-14, %4 above 65504, %5 zero, %6 inf/NaN (%7 values)")
      .arg(QString::fromStdString(significant_text(r.max_abs, 6)))  // 65504 whole, not an FP16 value's every digit
      .arg(QString::fromStdString(percent_text(r.underflow_fraction)))
      .arg(QString::fromStdString(percent_text(r.below_normal_fraction)))
      .arg(QString::fromStdString(percent_text(r.overflow_fraction)))
      .arg(QString::fromStdString(percent_text(r.zero_fraction)))
      .arg(QString::fromStdString(percent_text(r.nonfinite_fraction)))
      .arg(r.count);
}

QString fp8_text(const char* role, const Fp8TensorNumerics& t) {
  if (t.count == 0) return {};
  return QObject::tr("\nFP8 %1 (max %2): scale %3, amax %4; %5 clipped, %6 made zero (%7 values)")
      .arg(QString::fromUtf8(role))
      .arg(t.format_max)
      .arg(QString::fromStdString(significant_text(t.scale, 4)))  // as `show` and the report give them
      .arg(QString::fromStdString(significant_text(t.amax, 4)))
      .arg(QString::fromStdString(percent_text(t.saturated_fraction)))
      .arg(QString::fromStdString(percent_text(t.underflow_fraction)))
      .arg(t.count);
}

QString tooltip(const LayerNumerics& n) {
  const double headroom = numerics_measure(n, NumericsMeasure::ActivationHeadroom);
  return QObject::tr(
             "%1 (%2, %3 → %4 channels), epoch %5, step %6\n"
             "forward in %7, backward in %8, %9\n"
             "activation headroom: %10 powers of two\n"
             "activation: %11\n"
             "activation gradient (× loss scale %12): %13\n"
             "weight gradient: %14")
             .arg(QString::fromStdString(n.layer), QString::fromStdString(n.kind))
             .arg(n.in_channels)
             .arg(n.out_channels)
             .arg(n.epoch)
             .arg(n.step)
             .arg(QString::fromStdString(n.forward_dtype), QString::fromStdString(n.backward_dtype))
             .arg(n.casts == 1 ? QObject::tr("1 cast") : QObject::tr("%1 casts").arg(n.casts))
             .arg(std::isinf(headroom) ? QObject::tr("unbounded (all zero)")
                                       : QString::fromStdString(fixed_text(headroom, 2)))
             .arg(range_text(n.activation))
             .arg(QString::fromStdString(number_text(n.loss_scale)))
             .arg(range_text(n.activation_grad))
             .arg(range_text(n.weight_grad)) +
         fp8_text("input", n.fp8_input) + fp8_text("weight", n.fp8_weight) +
         fp8_text("output gradient", n.fp8_output_grad);
}

QString cell_text(NumericsMeasure measure, double value) {
  if (std::isnan(value)) return QObject::tr("–");  // an FP8 measure of a layer without FP8
  if (measure != NumericsMeasure::ActivationHeadroom) return QString::fromStdString(percent_text(value));
  return std::isinf(value) ? QObject::tr("all 0") : QString::fromStdString(fixed_text(value, 1));  // as `show`
}

// An FP8 run opens on what went wrong in it: its clipped values where a cell shows more of them than delayed scaling
// clips on a new maximum's step (FP8's failure that ruins a run), else its underflow.
NumericsMeasure fp8_measure_to_show(const NumericsGrid& grid) {
  for (const auto& layer : grid.cells)
    for (const std::optional<LayerNumerics>& cell : layer)
      if (cell && numerics_measure(*cell, NumericsMeasure::Fp8Saturated) >= kFp8ClippedShareOfNote)  // NaN: no
        return NumericsMeasure::Fp8Saturated;
  return NumericsMeasure::Fp8Underflow;
}

}  // namespace

QColor numerics_color(NumericsMeasure measure, double value) {
  if (!std::isfinite(value)) return QColor(200, 200, 200);
  // 0 = bad (red), 1 = good (green).
  // Shares are red at 10%. FP8's clipped values, each the largest of its tensor, go by powers of ten: yellow at the
  // diagnosis's 0.1% (kFp8ClippedShareOfNote), red at 1%, so that a cell it warns of never reads green.
  double good = 0;
  if (measure == NumericsMeasure::ActivationHeadroom)
    good = std::clamp(value / 8.0, 0.0, 1.0);
  else if (measure == NumericsMeasure::Fp8Saturated)
    good = value <= 0 ? 1.0 : 0.5 - std::clamp(std::log10(value / kFp8ClippedShareOfNote) / 2, -0.5, 0.5);
  else
    good = 1.0 - std::clamp(value / 0.1, 0.0, 1.0);
  return QColor::fromHsvF(static_cast<float>(good / 3.0), 0.55f, 0.95f);  // hue 0 (red) to 1/3 (green)
}

NumericsHeatmap::NumericsHeatmap(QWidget* parent) : QWidget(parent) {
  setObjectName("numericsHeatmap");
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Per-layer numerics")));
  measure_ = new QComboBox;
  measure_->setObjectName("numericsMeasure");
  for (NumericsMeasure m : {NumericsMeasure::ActivationHeadroom, NumericsMeasure::ActivationGradUnderflow,
                            NumericsMeasure::ActivationGradBelowNormal, NumericsMeasure::WeightGradUnderflow,
                            NumericsMeasure::Fp8Saturated, NumericsMeasure::Fp8Underflow})
    measure_->addItem(tr(numerics_measure_name(m)), static_cast<int>(m));
  connect(measure_, &QComboBox::currentIndexChanged, this, &NumericsHeatmap::rebuild);
  connect(measure_, &QComboBox::activated, this, [this] { measure_chosen_ = true; });
  // Narrow beside three charts on a small screen: the choice shows what fits, the whole name when the list opens.
  measure_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  measure_->setMinimumContentsLength(14);
  top->addWidget(measure_, 1);
  layout->addLayout(top);
  caption_ = new QLabel;
  caption_->setObjectName("numericsCaption");
  caption_->setWordWrap(true);
  caption_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  // Three lines, scrolling: a long sentence never squeezes the table under it, nor runs into the title above.
  layout->addWidget(text_lines_area(caption_, 3));
  table_ = new QTableWidget;
  table_->setObjectName("numericsTable");
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 2);
  // Two rows at least (it scrolls), so that on a small screen the charts beside it keep their height.
  table_->setMinimumHeight(table_->horizontalHeader()->sizeHint().height() + 2 * (table_->fontMetrics().height() + 2) +
                           4);
  layout->addWidget(table_, 1);
  rebuild();
}

NumericsMeasure NumericsHeatmap::measure() const {
  return static_cast<NumericsMeasure>(measure_->currentData().toInt());
}

void NumericsHeatmap::set_measure(NumericsMeasure measure) {
  measure_chosen_ = true;
  measure_->setCurrentIndex(measure_->findData(static_cast<int>(measure)));
}

void NumericsHeatmap::follow_run() {
  measure_chosen_ = false;
  run_ = nullptr;  // whatever run comes next is drawn anew, with its own measure
}

void NumericsHeatmap::update_from(const RunList& runs) {
  const RunSeries* run = runs.empty() ? nullptr : runs.front();
  if (run == run_ && run && run->epoch_revision == drawn_revision_) return;
  run_ = run;
  if (!measure_chosen_) {
    const NumericsMeasure m = run && has_fp8_layers(run->layer_numerics)
                                  ? fp8_measure_to_show(numerics_grid(run->layer_numerics))
                                  : NumericsMeasure::ActivationHeadroom;
    const QSignalBlocker quiet(measure_);  // rebuilt once, below
    measure_->setCurrentIndex(measure_->findData(static_cast<int>(m)));
  }
  rebuild();
}

QString NumericsHeatmap::caption(NumericsMeasure m, bool empty, bool fp16_gradients, PrecisionMode mode) {
  if (empty) return tr("No per-layer numerics yet: they are measured on the last step of each epoch.");
  // The FP16 measures of a run in another format: what FP16 would meet, which the run itself does not.
  const QString yardstick = mode_info(mode).format == NumberFormat::Fp16
                                ? QString()
                                : tr("; FP16's limits, not this run's (%1)").arg(QString::fromUtf8(mode_name(mode)));
  const bool fp8_measure = m == NumericsMeasure::Fp8Saturated || m == NumericsMeasure::Fp8Underflow;
  if (fp8_measure && mode_info(mode).format != NumberFormat::Fp8)
    return tr("%1 has no FP8 layers: these shares are measured in amp-fp8 runs")
        .arg(QString::fromUtf8(mode_name(mode)));
  switch (m) {
    case NumericsMeasure::ActivationHeadroom:
      return tr("log2(65504 / max |activation|): powers of two left before FP16 overflows") + yardstick;
    case NumericsMeasure::ActivationGradBelowNormal:
      return tr("nonzero values below 2^-14, FP16's smallest normal: fewer bits, the edge of underflow") + yardstick;
    case NumericsMeasure::Fp8Saturated:
      return tr(
          "amp-fp8: the largest share of a layer's FP8 input, weight or output gradient clipped to the "
          "format's largest value beyond rounding; – where the layer has no FP8");
    case NumericsMeasure::Fp8Underflow:
      return tr(
          "amp-fp8: the largest share of a layer's FP8 input, weight or output gradient whose nonzero values "
          "became zero; – where the layer has no FP8");
    default:
      return fp16_gradients
                 ? tr("nonzero values below 2^-24; these gradients are stored in FP16, so those values are "
                      "zeros already: choose \"below 2^-14\"")
                 : tr("nonzero values below 2^-24 (FP16 flushes them to zero), as stored × loss scale") + yardstick;
  }
}

QString NumericsHeatmap::caption_text() const { return caption_->text(); }

void NumericsHeatmap::rebuild() {
  drawn_revision_ = run_ ? run_->epoch_revision : ~uint64_t{0};
  const NumericsMeasure m = measure();
  const std::vector<LayerNumerics> none;
  const std::vector<LayerNumerics>& records = run_ ? run_->layer_numerics : none;
  const NumericsGrid g = numerics_grid(records);
  caption_->setText(caption(m, g.layers.empty(), gradients_stored_in_fp16(records),
                            run_ ? run_->config.precision.mode : PrecisionMode::AmpFp16));
  table_->clear();
  table_->setRowCount(static_cast<int>(g.layers.size()));
  table_->setColumnCount(static_cast<int>(g.epochs.size()));
  QStringList rows, columns;
  for (const std::string& layer : g.layers) rows << QString::fromStdString(layer);
  for (int epoch : g.epochs) columns << tr("E%1").arg(epoch);
  table_->setVerticalHeaderLabels(rows);
  table_->setHorizontalHeaderLabels(columns);
  for (size_t l = 0; l < g.layers.size(); ++l)
    for (size_t e = 0; e < g.epochs.size(); ++e) {
      const std::optional<LayerNumerics>& cell = g.cells[l][e];
      if (!cell) continue;
      const double value = numerics_measure(*cell, m);
      auto* item = new QTableWidgetItem(cell_text(m, value));
      item->setBackground(numerics_color(m, value));
      item->setForeground(Qt::black);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      item->setToolTip(tooltip(*cell));
      table_->setItem(static_cast<int>(l), static_cast<int>(e), item);
    }
  // As wide as each epoch's cells: a headroom ("14.4") needs less than a share ("100.00%"), so that beside three
  // charts at 1366×768 a 3-epoch run's columns all show, none cut in the middle.
  table_->resizeColumnsToContents();
}

}  // namespace ampwb::ui
