// "Predict on images…" of the runs view: a finished run's final weights (store/final_weights.h) on image files the
// user picks, each image with its most likely classes and their probabilities: the engine's inference with the
// run's preprocessing, as `ampwb predict` runs it (train/predictor.h). It runs on the UI thread when the dialog is
// made: a few images take a fraction of a second.
#pragma once

#include <QDialog>
#include <QStringList>

#include "store/run_store.h"

class QLabel;
class QTableWidget;

namespace ampwb::ui {

class PredictDialog : public QDialog {
  Q_OBJECT
 public:
  // `images`: files, or folders standing for every image file under them. `top`: the classes shown per image.
  PredictDialog(const RunStore& store, int64_t run, const QStringList& images, QWidget* parent = nullptr, int top = 5);

  // One row per image: its path, the top class, its probability, and the top classes with theirs; or, for a file
  // that cannot be read, why.
  QTableWidget* table() const { return table_; }
  // Why nothing was predicted (no final weights, a damaged weights file, no image found); empty otherwise.
  const QString& error() const { return error_; }

 private:
  QTableWidget* table_ = nullptr;
  QLabel* summary_ = nullptr;
  QString error_;
};

}  // namespace ampwb::ui
