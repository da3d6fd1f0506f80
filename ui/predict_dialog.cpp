// The prediction dialog: ImagePredictor on the chosen images, shown as a table.
#include "predict_dialog.h"

#include <QDialogButtonBox>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <vector>

#include "data/image_input.h"
#include "store/final_weights.h"
#include "train/predictor.h"

namespace ampwb::ui {
namespace {
QString percent(double p) { return QStringLiteral("%1 %").arg(100 * p, 0, 'f', 2); }
}  // namespace

PredictDialog::PredictDialog(const RunStore& store, int64_t run, const QStringList& images, QWidget* parent, int top)
    : QDialog(parent) {
  setWindowTitle(tr("Predictions of run %1").arg(run));
  setObjectName("predictDialog");
  auto* layout = new QVBoxLayout(this);
  summary_ = new QLabel;
  summary_->setObjectName("predictSummary");
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::PlainText);  // paths and class names as written
  table_ = new QTableWidget(0, 4);
  table_->setObjectName("predictions");
  table_->setHorizontalHeaderLabels({tr("Image"), tr("Class"), tr("Probability"), tr("Top %1").arg(top)});
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->hide();
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  layout->addWidget(summary_);
  layout->addWidget(table_);
  layout->addWidget(buttons);
  resize(760, 420);

  try {
    std::vector<std::string> paths;
    for (const QString& image : images) paths.push_back(image.toStdString());
    paths = image_files_in(paths);
    ImagePredictor predictor(load_final_weights(store, run));
    const std::vector<std::string>& classes = predictor.weights().preprocessing.class_names;
    const std::vector<ImageLogits> results = predictor.logits(paths);
    const int k = std::min(top, static_cast<int>(classes.size()));
    table_->setRowCount(static_cast<int>(paths.size()));
    std::vector<int> unreadable;
    for (size_t i = 0; i < paths.size(); ++i) {
      const int row = static_cast<int>(i);
      table_->setItem(row, 0, new QTableWidgetItem(QString::fromStdString(paths[i])));
      if (!results[i].unreadable.empty()) {
        unreadable.push_back(row);
        continue;
      }
      const std::vector<double> p = softmax(results[i].logits);
      const std::vector<int> best = top_classes(results[i].logits, k);
      QStringList ranked;
      for (int c : best) ranked << QStringLiteral("%1 %2").arg(QString::fromStdString(classes[c]), percent(p[c]));
      table_->setItem(row, 1, new QTableWidgetItem(QString::fromStdString(classes[best[0]])));
      table_->setItem(row, 2, new QTableWidgetItem(percent(p[best[0]])));
      table_->setItem(row, 3, new QTableWidgetItem(ranked.join(QStringLiteral(", "))));
    }
    table_->resizeColumnsToContents();
    for (int row : unreadable) {  // after the sizing, which would fit column 1 to the reason spanning three columns
      const std::string& why = results[static_cast<size_t>(row)].unreadable;
      table_->setItem(row, 1, new QTableWidgetItem(tr("not classified: %1").arg(QString::fromStdString(why))));
      table_->setSpan(row, 1, 1, 3);
    }
    QString summary =
        tr("%n image(s), run %1's final weights in FP32 (%2 classes, %3 px)", nullptr, static_cast<int>(paths.size()))
            .arg(run)
            .arg(classes.size())
            .arg(predictor.weights().preprocessing.image_size);
    if (!unreadable.empty())
      summary += tr("; %n could not be read (each row says why)", nullptr, static_cast<int>(unreadable.size()));
    summary_->setText(summary);
  } catch (const std::exception& e) {
    error_ = QString::fromUtf8(e.what());
    summary_->setText(error_);
    table_->hide();
  }
}

}  // namespace ampwb::ui
