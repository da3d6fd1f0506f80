// "Predict on images…" of the runs view: a finished run's final weights (store/final_weights.h) on image files the
// user picks, each image with its most likely classes and their probabilities: the engine's inference with the
// run's preprocessing, as `ampwb predict` runs it (train/predictor.h). The images are classified on a thread of the
// dialog's own, a few at a time, with a progress bar: hundreds of photos at 224 px take a while on a CPU.
#pragma once

#include <QDialog>
#include <QStringList>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "store/run_store.h"
#include "train/predictor.h"

class QLabel;
class QProgressBar;
class QTableWidget;

namespace ampwb::ui {

class PredictDialog : public QDialog {
  Q_OBJECT
 public:
  // `images`: files, or folders standing for every image file under them. `top`: the classes shown per image.
  PredictDialog(const RunStore& store, int64_t run, const QStringList& images, QWidget* parent = nullptr, int top = 5);
  ~PredictDialog() override;  // stops the classification after the images in hand

  // One row per image: its path, the top class, its probability, and the top classes with theirs; or, for a file
  // that cannot be read, why. Filled as the images are classified.
  QTableWidget* table() const { return table_; }
  // Why nothing was predicted (no final weights, a damaged weights file, no image found), or why the classification
  // stopped; empty otherwise.
  const QString& error() const { return error_; }
  // Every image classified (or the dialog failed).
  bool finished() const { return finished_; }

 private:
  void classify(ModelWeights weights);  // on worker_
  void show_rows(size_t first, const std::vector<ImageLogits>& results);
  void fit_columns();  // once the rows are in: the dialog widened to show every column whole, where the screen can
  void finish(const QString& error);

  QTableWidget* table_ = nullptr;
  QLabel* summary_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QString error_;
  bool finished_ = false;
  int top_ = 5;
  int64_t run_ = 0;
  int image_size_ = 0;
  std::vector<std::string> paths_, classes_;
  std::vector<std::string> left_out_;  // the folders' files that are no images by their names
  QString folder_;                     // the folder every image lies in, whose rows name them from there
  std::vector<int> unreadable_rows_;
  std::atomic<bool> stop_ = false;
  std::thread worker_;
};

}  // namespace ampwb::ui
