// The run-setup panel: everything a TrainConfig holds, as form controls. The dataset folder is checked on a worker
// thread as soon as it is chosen and its report shown right below it. The loss scaler and the rarer knobs sit
// behind "Advanced". Settings are remembered (QSettings); on first launch the built-in sample is preselected.
#pragma once

#include <map>

#include <QWidget>

#include "dataset_inspector.h"
#include "facade/devices.h"
#include "facade/processes.h"
#include "facade/run_setup.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QResizeEvent;
class QSpinBox;
class QTimer;
class QToolButton;

namespace ampwb::ui {

class WholeNumberBox;
class WideNumberBox;

class RunSetupPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunSetupPanel(QWidget* parent = nullptr);

  // The configuration the controls describe (not validated; checkpoint_dir is left to the caller).
  TrainConfig config() const;
  void set_config(const TrainConfig& config);
  bool checkpoints_enabled() const;
  // Whether a finished run keeps its final weights beside the store (for predicting and exporting).
  bool keep_final_weights() const;
  // How many processes train the run (1: this one, in-process; more: `ampwb train --processes N`), up to the cores
  // or GPUs here; the choice is disabled, saying why, where only one can (no MPI, no mpirun).
  int processes() const;
  void set_processes(int processes);
  void clear_run_name();  // a name is for one run: cleared once it has started

  void set_dataset_path(const QString& path);  // and inspect it
  QString dataset_path() const;
  QString dataset_report() const;  // the inspected dataset's report as shown (DatasetReport::to_text), or empty
  int dataset_classes() const { return data_classes_; }  // the inspected dataset's, 0 while not known
  QString dataset_problem() const { return dataset_problem_; }
  // Why a field's text is not a value it takes ("Epochs: “-5x” is not a whole number; ..."), "" when all are.
  QString settings_problem() const { return settings_problem_; }
  // What keeps these settings from training: the dataset's problem, else the first field's; "" when none.
  QString train_problem() const { return dataset_problem_.isEmpty() ? settings_problem_ : dataset_problem_; }
  // An engine error about `setting` (core/setting_error.h): marks the field that sets it (opening Advanced when it is
  // there) and returns `problem` named as the form names the field ("Batch size: the batch size must be ..."), or
  // `problem` alone when no field sets it. The mark stays until the next call or clear_setting_problem (the next
  // start), or until a number field's own check runs again on an edit.
  QString show_setting_problem(const std::string& setting, const QString& problem);
  void clear_setting_problem();
  void choose_dataset_folder();  // a native folder dialog
  void use_sample_dataset();

  void load_settings();  // the last configuration, or the first-launch one
  void save_settings() const;
  void set_editable(bool editable);  // locked while a run trains
  bool inspecting() const;

  // ResNet-18, 2 epochs, 2,000 training images, batch 64, FP32 on the built-in sample: a first run in minutes.
  static TrainConfig first_launch_config();

 Q_SIGNALS:
  void dataset_inspected(const ampwb::ui::InspectResult& result);
  // Why the chosen dataset cannot be trained on ("" when it can, or while it is being checked).
  void dataset_problem_changed(const QString& problem);
  void settings_problem_changed(const QString& problem);
  // A setting the empty Training tab previews a run by changed (the precision mode, the loss scaler, the epochs, the
  // top-k, the dataset's classes): its notes, axes and legends follow.
  void preview_changed();

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void build();
  QWidget* build_data_group();
  QWidget* build_model_group();
  QWidget* build_training_group();
  QWidget* build_advanced_group();
  void request_inspection();
  void show_inspection(const InspectResult& result);
  void forget_inspected_data();
  void set_dataset_problem(const QString& problem);
  // Gathers the problems of the fields, listed under the Training group, the first one for Train's tooltip.
  void update_settings_problem();
  void update_precision_help();
  void fit_precision_help();          // the precision note's height for its width, whole
  PrecisionMode chosen_mode() const;  // the precision combo box lists kPrecisionModes in order
  // Enables the precision modes the chosen device can run (the others say why) and explains the chosen one there.
  void update_precision_for_device();
  DeviceChoice chosen_device() const;
  const Capabilities& device_capabilities(DeviceChoice device);
  void apply_scaler_preset();
  // The FP8 scaling fields, shown only while AMP FP8 is chosen (the other modes ignore them).
  void update_fp8_fields();
  // The scaler's numbers take effect only where the loss is scaled (the kind chosen, else the mode's): elsewhere
  // they stay shown, greyed, as what scaling would start from.
  void update_scaler_fields();
  // The run's memory estimate against what is available (train/memory_estimate.h), as the settings change.
  void update_memory_estimate();
  // The Processes choice's limit and reason for the chosen device, and the data-parallel fields, usable only with
  // more than one process.
  void update_processes();

  DatasetInspector inspector_;
  QString dataset_problem_, settings_problem_;
  QLabel* settings_problems_ = nullptr;
  QTimer* inspect_later_ = nullptr;
  // Data
  QLineEdit* dataset_ = nullptr;
  QLabel* dataset_status_ = nullptr;
  QPlainTextEdit* dataset_report_ = nullptr;
  WideNumberBox* val_fraction_ = nullptr;
  QFormLayout* data_form_ = nullptr;  // holds val_fraction_'s row, hidden where the data brings its own split
  WholeNumberBox* max_images_ = nullptr;
  WholeNumberBox* max_validation_images_ = nullptr;
  // Model and precision
  QComboBox* depth_ = nullptr;
  QComboBox* precision_ = nullptr;
  QLabel* precision_help_ = nullptr;
  std::map<std::string, Capabilities> capabilities_;  // per device name, asked once
  QComboBox* device_ = nullptr;
  ProcessOffer process_offer_;
  WholeNumberBox* processes_ = nullptr;
  QCheckBox* sync_batchnorm_ = nullptr;
  QComboBox* gradient_allreduce_ = nullptr;
  bool editable_ = true;
  // Training
  WholeNumberBox* epochs_ = nullptr;
  WholeNumberBox* batch_ = nullptr;
  WholeNumberBox* image_size_ = nullptr;
  QComboBox* optimizer_ = nullptr;
  WideNumberBox* lr_ = nullptr;
  QComboBox* schedule_ = nullptr;
  WholeNumberBox* seed_ = nullptr;
  QCheckBox* checkpoints_ = nullptr;
  QCheckBox* keep_weights_ = nullptr;
  QLabel* memory_ = nullptr;
  int data_image_size_ = 0, data_classes_ = 0;  // from the last inspection: what "auto" and the model's output take
  QString inspected_root_;                      // the folder they are of
  // Advanced
  QToolButton* advanced_toggle_ = nullptr;
  QWidget* advanced_ = nullptr;
  QComboBox* scale_kind_ = nullptr;
  QComboBox* scaler_preset_ = nullptr;
  WideNumberBox* init_scale_ = nullptr;
  WideNumberBox* growth_factor_ = nullptr;
  WideNumberBox* backoff_factor_ = nullptr;
  WholeNumberBox* growth_interval_ = nullptr;
  WholeNumberBox* hysteresis_ = nullptr;
  WideNumberBox* min_scale_ = nullptr;
  WideNumberBox* max_scale_ = nullptr;
  QComboBox* master_weights_ = nullptr;
  QWidget* fp8_ = nullptr;  // the FP8 scaling group
  WholeNumberBox* fp8_history_ = nullptr;
  WholeNumberBox* fp8_margin_ = nullptr;
  QComboBox* fp8_rule_ = nullptr;
  QComboBox* fp8_formats_ = nullptr;
  QCheckBox* fp8_first_last_ = nullptr;
  WholeNumberBox* warmup_ = nullptr;
  WideNumberBox* momentum_ = nullptr;
  WideNumberBox* weight_decay_ = nullptr;
  WideNumberBox* label_smoothing_ = nullptr;
  WideNumberBox* grad_clip_ = nullptr;
  WholeNumberBox* topk_ = nullptr;
  QCheckBox* augment_ = nullptr;
  QComboBox* stem_ = nullptr;
  WholeNumberBox* threads_ = nullptr;
  WholeNumberBox* max_steps_ = nullptr;
  QLineEdit* name_ = nullptr;
  QWidget* marked_setting_ = nullptr;  // the field show_setting_problem marked
};

}  // namespace ampwb::ui
