// Choosing a precision sweep: which variants to run on the settings of the run-setup panel, or the seed
// article's ready preset (ResNet-18, Adam 0.001, batch 16, 224 px, 5 epochs, 80/20 split, FP32 against AMP).
#pragma once

#include <QDialog>
#include <vector>

#include "precision_modes.h"
#include "train/config.h"

class QCheckBox;
class QLabel;

namespace ampwb::ui {

class SweepDialog : public QDialog {
  Q_OBJECT
 public:
  SweepDialog(const TrainConfig& base, bool has_cuda, QWidget* parent = nullptr);

  void apply_seed_article_preset();
  std::vector<SweepVariant> chosen() const;
  const TrainConfig& base() const { return base_; }  // the settings every run shares (the preset may change them)

 private:
  void describe_base();
  TrainConfig base_;
  std::vector<std::pair<QCheckBox*, SweepVariant>> boxes_;
  QLabel* base_text_ = nullptr;
};

}  // namespace ampwb::ui
