// DivergenceView: the caption, the layers' table, its colours and tooltips.
#include "divergence_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>

#include "analysis/divergence_text.h"
#include "run_series.h"
#include "text_lines_area.h"

namespace ampwb::ui {

QColor divergence_color(double relative_error, double unit_roundoff) {
  if (unit_roundoff <= 0) return QColor(200, 200, 200);
  // 1 = good (one rounding or less), 0 = bad (at the departure line or beyond).
  const double units = relative_error / unit_roundoff;
  const double good = 1.0 - std::clamp((units - 1.0) / (kDepartureUnits - 1.0), 0.0, 1.0);
  return QColor::fromHsvF(static_cast<float>(good / 3.0), 0.55f, 0.95f);  // hue 0 (red) to 1/3 (green)
}

DivergenceView::DivergenceView(QWidget* parent) : QWidget(parent) {
  setObjectName("divergenceView");
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(new QLabel(tr("Precision divergence from FP32")));
  caption_ = new QLabel;
  caption_->setObjectName("divergenceCaption");
  caption_->setWordWrap(true);
  caption_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  // Three lines, scrolling: a long sentence never squeezes the table under it, nor runs into the title above.
  layout->addWidget(text_lines_area(caption_, 3));
  table_ = new QTableWidget;
  table_->setObjectName("divergenceTable");
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 2);
  // Two rows at least (it scrolls), so that on a small screen the charts beside it keep their height.
  table_->setMinimumHeight(table_->horizontalHeader()->sizeHint().height() + 2 * (table_->fontMetrics().height() + 2) +
                           4);
  layout->addWidget(table_, 1);
  rebuild();
}

void DivergenceView::update_from(const RunList& runs) {
  const RunSeries* run = runs.empty() ? nullptr : runs.front();
  if (run == run_ && run && run->epoch_revision == drawn_revision_) return;
  run_ = run;
  rebuild();
}

void DivergenceView::rebuild() {
  drawn_revision_ = run_ ? run_->epoch_revision : ~uint64_t{0};
  table_->clear();
  table_->setColumnCount(4);
  table_->setHorizontalHeaderLabels({tr("activation"), tr("act. grad"), tr("weight grad"), tr("note")});
  if (!run_ || !run_->divergence) {
    table_->setRowCount(0);
    caption_->setText(!run_ ? tr("No run.")
                      : run_->config.precision.mode == PrecisionMode::Fp32
                          ? tr("FP32 is its own reference: nothing to compare.")
                          : tr("Measured once, at the end of a finished run in a low-precision mode."));
    return;
  }
  const PrecisionDivergence& d = *run_->divergence;
  caption_->setText(QString::fromStdString(divergence_sentence(d)));
  // The sentence whole too: in its three lines beside the charts it may have to be scrolled.
  caption_->setToolTip(caption_->text() + "\n\n" +
                       tr("One step in %1 against one in FP32 from the final weights and %2 images of a training "
                          "batch; relative L2 errors, gradients unscaled. Departure line (activations): %3.")
                           .arg(QString::fromStdString(d.mode))
                           .arg(d.samples)
                           .arg(QString::fromStdString(divergence_threshold_text(d))));
  table_->setRowCount(static_cast<int>(d.layers.size()));
  QStringList rows;
  for (int r = 0; r < static_cast<int>(d.layers.size()); ++r) {
    const LayerDivergence& l = d.layers[static_cast<size_t>(r)];
    rows << QString::fromStdString(l.layer);
    const TensorDivergence* errors[] = {&l.activation, &l.activation_grad, &l.weight_grad};
    for (int c = 0; c < 3; ++c) {
      auto* item = new QTableWidgetItem(QString::fromStdString(relative_error_text(*errors[c])));
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      item->setToolTip(tr("%1 (%2, in %3): %4 relative to FP32")
                           .arg(QString::fromStdString(l.layer), QString::fromStdString(l.kind),
                                QString::fromStdString(l.forward_dtype), item->text()));
      if (c == 0) {
        item->setBackground(errors[c]->measured() ? divergence_color(errors[c]->relative_error, d.unit_roundoff)
                                                  : QColor(230, 80, 80));
        item->setForeground(Qt::black);
      }
      table_->setItem(r, c, item);
    }
    auto* note = new QTableWidgetItem(QString::fromStdString(divergence_layer_note(d, l)));
    if (l.layer == d.first_departing) {
      QFont bold = note->font();
      bold.setBold(true);
      note->setFont(bold);
    }
    table_->setItem(r, 3, note);
  }
  table_->setVerticalHeaderLabels(rows);
  table_->resizeColumnsToContents();
}

}  // namespace ampwb::ui
