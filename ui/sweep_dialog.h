// Choosing a precision sweep: which variants to run on the settings of the run-setup panel, or the seed
// article's ready preset (ResNet-18, Adam 0.001, batch 16, 224 px, 5 epochs, 80/20 split, FP32 against AMP).
#pragma once

#include <QDialog>
#include <vector>

#include "facade/devices.h"
#include "precision_modes.h"
#include "train/config.h"

class QCheckBox;
class QLabel;

namespace ampwb::ui {

class SweepDialog : public QDialog {
  Q_OBJECT
 public:
  // `caps`: the capabilities of the device the runs will use (base.device), of kind "cpu" or "cuda": variants it
  // cannot run are disabled with the reason, and what computes each chosen mode there is said before it starts.
  SweepDialog(const TrainConfig& base, const Capabilities& caps, QWidget* parent = nullptr);

  void apply_seed_article_preset();
  std::vector<SweepVariant> chosen() const;
  const TrainConfig& base() const { return base_; }  // the settings every run shares (the preset may change them)

 private:
  void describe_base();
  void describe_device();
  TrainConfig base_;
  Capabilities caps_;
  std::vector<std::pair<QCheckBox*, SweepVariant>> boxes_;
  QLabel* base_text_ = nullptr;
  QLabel* device_text_ = nullptr;
};

}  // namespace ampwb::ui
