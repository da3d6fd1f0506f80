// Choosing a sweep on the settings of the run-setup panel: its grid (precision variants, seeds, depths, batch sizes,
// as `ampwb sweep` takes them) and where it runs (this machine, or Slurm: partition, account, time limit, tasks at
// once), or the seed article's ready preset (ResNet-18, Adam 0.001, batch 16, 224 px, 5 epochs, 80/20 split, FP32
// against AMP).
#pragma once

#include <QDialog>
#include <vector>

#include "facade/devices.h"
#include "precision_modes.h"
#include "sweep_command_line.h"
#include "train/config.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QRadioButton;
class QSpinBox;

namespace ampwb::ui {

class SweepDialog : public QDialog {
  Q_OBJECT
 public:
  // `caps`: the capabilities of the device the runs will use (base.device), of kind "cpu" or "cuda": variants it
  // cannot run are disabled with the reason, and what computes each chosen mode there is said before it starts.
  SweepDialog(const TrainConfig& base, const Capabilities& caps, QWidget* parent = nullptr);

  void apply_seed_article_preset();
  // The run setup's processes: a sweep trains each point on one, which the dialog says where it is more.
  void set_setup_processes(int processes);
  std::vector<SweepVariant> chosen() const;
  // The grid and where it runs, as the dialog's fields say.
  SweepPlan plan() const;
  // Why the fields cannot start the sweep (a list that is no list of numbers, ...), empty when they can.
  QString problem() const;
  const TrainConfig& base() const { return base_; }  // the settings every run shares (the preset may change them)

 private:
  void describe_base();
  void describe_device();
  void update_where();
  TrainConfig base_;
  Capabilities caps_;
  int setup_processes_ = 1;
  std::vector<std::pair<QCheckBox*, SweepVariant>> boxes_;
  QLabel* base_text_ = nullptr;
  QLabel* device_text_ = nullptr;
  QLineEdit* seeds_ = nullptr;
  QLineEdit* depths_ = nullptr;
  QLineEdit* batch_sizes_ = nullptr;
  QRadioButton* on_local_ = nullptr;
  QRadioButton* on_slurm_ = nullptr;
  QSpinBox* parallel_ = nullptr;
  QLineEdit* partition_ = nullptr;
  QLineEdit* account_ = nullptr;
  QLineEdit* time_limit_ = nullptr;
  QSpinBox* max_parallel_ = nullptr;
  QLabel* problem_ = nullptr;
};

}  // namespace ampwb::ui
