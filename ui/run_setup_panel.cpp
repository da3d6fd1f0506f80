// RunSetupPanel: the form, its mapping to and from TrainConfig, the dataset check and the remembered settings.
#include "run_setup_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>
#include <QUrl>
#include <QVBoxLayout>
#include <tuple>

#include "choice_box.h"
#include "core/error.h"
#include "facade/devices.h"
#include "facade/run_setup.h"
#include "field_problem.h"
#include "file_dialogs.h"
#include "plain_text.h"
#include "precision_modes.h"
#include "whole_number_box.h"
#include "wide_number_box.h"

namespace ampwb::ui {
namespace {

const char* const kScalerPresets[] = {"pytorch", "apex", "paddle", "paddle-2.2", "deepspeed", "megatron", "tensorflow"};

WideNumberBox* number_box(double min, double max, double step) { return new WideNumberBox(min, max, step); }

WholeNumberBox* int_box(int min, int max) { return new WholeNumberBox(min, max); }

// The property that names the setting a field sets (a config_settings key), so that an engine error about that
// setting marks the field and says its label (RunSetupPanel::show_setting_problem).
const char* const kSettingProperty = "ampwbSetting";

template <class Field>
Field* for_setting(Field* field, const char* setting) {
  field->setProperty(kSettingProperty, QString::fromUtf8(setting));
  return field;
}

void select_data(QComboBox* box, const QVariant& value) {
  const int i = box->findData(value);
  if (i >= 0) box->setCurrentIndex(i);
}

int two_lines(const QLabel* label) { return 2 * label->fontMetrics().lineSpacing(); }

QString depth_title(int depth) {
  return is_cifar_depth(depth) ? QStringLiteral("ResNet-%1 (CIFAR)").arg(depth)
                               : QStringLiteral("ResNet-%1").arg(depth);
}

}  // namespace

RunSetupPanel::RunSetupPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("runSetupPanel");
  build();
  connect(&inspector_, &DatasetInspector::finished, this, &RunSetupPanel::show_inspection);
}

TrainConfig RunSetupPanel::first_launch_config() {
  TrainConfig c;
  try {
    c.data_dir = builtin_sample_dataset();
  } catch (const std::exception&) {
    // Not installed: the user picks a folder; the dataset box says how to get the sample.
  }
  c.depth = 18;
  c.epochs = 2;
  c.batch_size = 64;
  c.data.max_train_images = 2000;
  return c;
}

void RunSetupPanel::build() {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(build_data_group());
  layout->addWidget(build_model_group());
  layout->addWidget(build_training_group());
  advanced_toggle_ = new QToolButton;
  advanced_toggle_->setObjectName("advancedToggle");
  advanced_toggle_->setText(tr("Advanced: loss scaler, optimizer details, data"));
  advanced_toggle_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  advanced_toggle_->setArrowType(Qt::RightArrow);
  advanced_toggle_->setCheckable(true);
  advanced_toggle_->setAutoRaise(true);
  layout->addWidget(advanced_toggle_);
  advanced_ = build_advanced_group();
  advanced_->setVisible(false);
  layout->addWidget(advanced_);
  connect(advanced_toggle_, &QToolButton::toggled, this, [this](bool open) {
    advanced_->setVisible(open);
    advanced_toggle_->setArrowType(open ? Qt::DownArrow : Qt::RightArrow);
  });
  // Below every field: shown or hidden as a value is typed, it moves no field under the pointer (the field itself
  // says its problem, in its tooltip, shown as it arises).
  settings_problems_ = new QLabel;
  settings_problems_->setObjectName("settingsProblem");
  settings_problems_->setTextFormat(Qt::PlainText);  // it quotes what was typed
  settings_problems_->setWordWrap(true);
  settings_problems_->setStyleSheet(QStringLiteral("color: #c0392b"));
  settings_problems_->setVisible(false);
  layout->addWidget(settings_problems_);
  layout->addStretch(1);

  inspect_later_ = new QTimer(this);
  inspect_later_->setSingleShot(true);
  inspect_later_->setInterval(400);  // typing a path or spinning a number inspects once, when it settles
  connect(inspect_later_, &QTimer::timeout, this, &RunSetupPanel::request_inspection);
  connect(val_fraction_, &QDoubleSpinBox::valueChanged, inspect_later_, qOverload<>(&QTimer::start));
  for (QSpinBox* box : {max_images_, max_validation_images_})
    connect(box, &QSpinBox::valueChanged, inspect_later_, qOverload<>(&QTimer::start));
  connect(seed_, &QSpinBox::valueChanged, inspect_later_, qOverload<>(&QTimer::start));
  for (QSpinBox* box : {batch_, image_size_, threads_})
    connect(box, &QSpinBox::valueChanged, this, &RunSetupPanel::update_memory_estimate);
  for (QComboBox* box : {depth_, precision_, device_, optimizer_, stem_, master_weights_})
    connect(box, &QComboBox::currentIndexChanged, this, &RunSetupPanel::update_memory_estimate);
  update_memory_estimate();
  for (auto* box : findChildren<WholeNumberBox*>())
    connect(box, &WholeNumberBox::problem_changed, this, &RunSetupPanel::update_settings_problem);
  for (auto* box : findChildren<WideNumberBox*>())
    connect(box, &WideNumberBox::problem_changed, this, &RunSetupPanel::update_settings_problem);
}

QWidget* RunSetupPanel::build_data_group() {
  auto* group = new QGroupBox(tr("Dataset"));
  auto* layout = new QVBoxLayout(group);
  auto* row = new QHBoxLayout;
  dataset_ = for_setting(new QLineEdit, "data_dir");
  dataset_->setObjectName("datasetPath");
  dataset_->setPlaceholderText(tr("an image folder, IDX or CIFAR-10 files"));
  connect(dataset_, &QLineEdit::editingFinished, this, &RunSetupPanel::request_inspection);
  auto* browse = new QToolButton;
  browse->setText(tr("…"));
  browse->setToolTip(tr("Choose a dataset folder (Ctrl+O)"));
  connect(browse, &QToolButton::clicked, this, &RunSetupPanel::choose_dataset_folder);
  auto* sample = new QToolButton;
  sample->setText(tr("Sample"));
  sample->setToolTip(tr("The built-in sample: Fashion-MNIST (Debian package dataset-fashion-mnist)"));
  connect(sample, &QToolButton::clicked, this, &RunSetupPanel::use_sample_dataset);
  row->addWidget(dataset_, 1);
  row->addWidget(browse);
  row->addWidget(sample);
  layout->addLayout(row);

  dataset_status_ = new QLabel;
  dataset_status_->setObjectName("datasetStatus");
  dataset_status_->setTextFormat(Qt::PlainText);  // it names the dataset folder: user text, never HTML
  dataset_status_->setWordWrap(true);
  dataset_status_->setMinimumHeight(two_lines(dataset_status_));  // most statuses take two lines
  layout->addWidget(dataset_status_);
  dataset_report_ = new QPlainTextEdit;
  dataset_report_->setObjectName("datasetReport");
  dataset_report_->setReadOnly(true);
  dataset_report_->setLineWrapMode(QPlainTextEdit::NoWrap);
  dataset_report_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  dataset_report_->setMinimumHeight(90);
  dataset_report_->setMaximumHeight(150);
  layout->addWidget(dataset_report_);

  auto* form = data_form_ = new QFormLayout;
  val_fraction_ = for_setting(number_box(0, 0.9, 0.05), "data.validation_fraction");
  val_fraction_->setObjectName("validationFraction");
  val_fraction_->setToolTip(tr("Held out per class when the data has no validation split of its own"));
  max_images_ = for_setting(int_box(0, 100000000), "data.max_train_images");
  max_images_->setObjectName("maxTrainImages");
  max_images_->set_minimum_text(tr("all"));
  max_images_->setSingleStep(500);
  max_images_->setToolTip(tr("Train on the first N images (round-robin over the classes): quick experiments"));
  form->addRow(tr("Validation fraction"), val_fraction_);
  form->addRow(tr("Training images"), max_images_);
  max_validation_images_ = for_setting(int_box(0, 100000000), "data.max_validation_images");
  max_validation_images_->setObjectName("maxValidationImages");
  max_validation_images_->set_minimum_text(tr("all"));
  max_validation_images_->setSingleStep(500);
  max_validation_images_->setToolTip(
      tr("Validate on at most N images each epoch, the same ones every epoch (round-robin over the classes). "
         "Default %1: a larger validation split would take longer than the training; the run's notes say how "
         "many of how many were used.")
          .arg(kDefaultMaxValidationImages));
  form->addRow(tr("Validation images"), max_validation_images_);
  layout->addLayout(form);
  return group;
}

QWidget* RunSetupPanel::build_model_group() {
  auto* group = new QGroupBox(tr("Model and precision"));
  auto* form = new QFormLayout(group);
  depth_ = for_setting(new QComboBox, "depth");
  depth_->setObjectName("depth");
  for (int d : supported_depths()) depth_->addItem(depth_title(d), d);
  precision_ = for_setting(new QComboBox, "precision.mode");
  precision_->setObjectName("precision");
  for (const PrecisionModeInfo& m : kPrecisionModes) precision_->addItem(QString::fromUtf8(m.title), m.name);
  precision_help_ = new QLabel;
  precision_help_->setObjectName("precisionHelp");
  precision_help_->setWordWrap(true);
  QFont small = precision_help_->font();
  small.setPointSizeF(small.pointSizeF() * 0.9);
  precision_help_->setFont(small);
  connect(precision_, &QComboBox::currentIndexChanged, this, &RunSetupPanel::update_precision_help);
  connect(precision_, &QComboBox::currentIndexChanged, this, &RunSetupPanel::preview_changed);
  device_ = new QComboBox;
  device_->setObjectName("device");
  for (const DeviceInfo& d : list_devices()) {
    device_->addItem(d.id.is_cpu() ? tr("CPU: %1").arg(QString::fromStdString(d.isa))
                                   : tr("GPU %1: %2 (%3 GiB)")
                                         .arg(d.id.index)
                                         .arg(QString::fromStdString(d.name))
                                         .arg(d.memory_bytes / double(1 << 30), 0, 'f', 0),
                     QString::fromStdString(d.id.name()));
    device_->setItemData(device_->count() - 1, QString::fromStdString(d.description), Qt::ToolTipRole);
  }
  form->addRow(tr("Model"), depth_);
  form->addRow(tr("Precision"), precision_);
  form->addRow(precision_help_);
  form->addRow(tr("Device"), device_);
  connect(device_, &QComboBox::currentIndexChanged, this, &RunSetupPanel::update_precision_for_device);
  update_precision_for_device();

  process_offer_ = process_offer();
  processes_ = int_box(1, 1);
  processes_->setObjectName("processes");
  sync_batchnorm_ = for_setting(new QCheckBox(tr("synchronised")), "data_parallel.sync_batchnorm");
  sync_batchnorm_->setObjectName("syncBatchnorm");
  gradient_allreduce_ = for_setting(new QComboBox, "data_parallel.gradient_allreduce");
  gradient_allreduce_->setObjectName("gradientAllreduce");
  add_choices<GradientAllReduce>(gradient_allreduce_);
  form->addRow(tr("Processes"), processes_);
  form->addRow(tr("Batch norm"), sync_batchnorm_);
  form->addRow(tr("Gradient all-reduce"), gradient_allreduce_);
  connect(processes_, &QSpinBox::valueChanged, this, &RunSetupPanel::update_processes);
  connect(device_, &QComboBox::currentIndexChanged, this, &RunSetupPanel::update_processes);
  update_processes();
  return group;
}

QWidget* RunSetupPanel::build_training_group() {
  auto* group = new QGroupBox(tr("Training"));
  auto* form = new QFormLayout(group);
  epochs_ = for_setting(int_box(1, 10000), "epochs");
  epochs_->setObjectName("epochs");
  connect(epochs_, &QSpinBox::valueChanged, this, &RunSetupPanel::preview_changed);
  batch_ = for_setting(int_box(2, 65536), "batch_size");
  batch_->setObjectName("batchSize");
  image_size_ = for_setting(int_box(0, 1024), "image_size");
  image_size_->setObjectName("imageSize");
  image_size_->set_minimum_text(tr("auto (the data's)"));
  image_size_->set_unit(tr(" px"));
  optimizer_ = for_setting(new QComboBox, "optimizer.kind");
  optimizer_->setObjectName("optimizer");
  add_choices<OptimizerKind>(optimizer_);
  lr_ = for_setting(new WideNumberBox(1e-6, 10, 0.001), "lr");
  lr_->setObjectName("learningRate");
  schedule_ = for_setting(new QComboBox, "schedule");
  schedule_->setObjectName("schedule");
  add_choices<Schedule>(schedule_);
  seed_ = for_setting(int_box(0, std::numeric_limits<int>::max()), "seed");
  seed_->setObjectName("seed");
  name_ = for_setting(new QLineEdit, "name");
  name_->setObjectName("runName");
  name_->setPlaceholderText(tr("automatic"));
  checkpoints_ = for_setting(new QCheckBox(tr("Save checkpoints (Stop leaves a resumable run)")), "checkpoint_dir");
  checkpoints_->setObjectName("checkpoints");
  keep_weights_ = new QCheckBox(tr("Keep the final weights (Predict, Export)"));
  keep_weights_->setObjectName("keepWeights");
  form->addRow(tr("Epochs"), epochs_);
  form->addRow(tr("Batch size"), batch_);
  form->addRow(tr("Image size"), image_size_);
  memory_ = new QLabel;
  memory_->setObjectName("memoryEstimate");
  memory_->setWordWrap(true);
  form->addRow(tr("Memory"), memory_);
  form->addRow(tr("Optimizer"), optimizer_);
  form->addRow(tr("Learning rate"), lr_);
  form->addRow(tr("Schedule"), schedule_);
  form->addRow(tr("Seed"), seed_);
  form->addRow(tr("Run name"), name_);
  form->addRow(checkpoints_);
  form->addRow(keep_weights_);
  return group;
}

QWidget* RunSetupPanel::build_advanced_group() {
  auto* box = new QWidget;
  box->setObjectName("advanced");
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);

  auto* scaler = new QGroupBox(tr("Loss scaler"));
  auto* sf = new QFormLayout(scaler);
  scale_kind_ = for_setting(new QComboBox, "precision.loss_scale.kind");
  scale_kind_->setObjectName("lossScaleKind");
  connect(scale_kind_, &QComboBox::currentIndexChanged, this, &RunSetupPanel::preview_changed);
  scale_kind_->addItem(tr("as the precision mode says"), "");
  add_choices<LossScaleKind>(scale_kind_);
  scaler_preset_ = new QComboBox;
  scaler_preset_->setObjectName("scalerPreset");
  for (const char* p : kScalerPresets) scaler_preset_->addItem(p, p);
  connect(scaler_preset_, &QComboBox::activated, this, &RunSetupPanel::apply_scaler_preset);
  init_scale_ = for_setting(new WideNumberBox(1e-6, 1e12, 1024), "precision.loss_scale.init_scale");
  growth_factor_ = for_setting(number_box(1.0001, 1000, 0.5), "precision.loss_scale.growth_factor");
  backoff_factor_ = for_setting(number_box(0.0001, 0.9999, 0.05), "precision.loss_scale.backoff_factor");
  growth_interval_ = for_setting(int_box(1, 100000000), "precision.loss_scale.growth_interval");
  hysteresis_ = for_setting(int_box(1, 1000), "precision.loss_scale.hysteresis");
  min_scale_ = for_setting(new WideNumberBox(0, 1e12, 1), "precision.loss_scale.min_scale");
  min_scale_->set_minimum_text(tr("none"));
  max_scale_ = for_setting(new WideNumberBox(0, 1e12, 1024), "precision.loss_scale.max_scale");
  max_scale_->set_minimum_text(tr("none"));
  master_weights_ = for_setting(new QComboBox, "precision.master_weights");
  master_weights_->addItem(tr("as the precision mode says"), "");
  master_weights_->addItem(tr("on (FP32 copy)"), "on");
  master_weights_->addItem(tr("off"), "off");
  sf->addRow(tr("Scaling"), scale_kind_);
  sf->addRow(tr("Defaults of"), scaler_preset_);
  sf->addRow(tr("Initial scale"), init_scale_);
  sf->addRow(tr("Growth factor"), growth_factor_);
  sf->addRow(tr("Backoff factor"), backoff_factor_);
  sf->addRow(tr("Growth interval"), growth_interval_);
  sf->addRow(tr("Hysteresis"), hysteresis_);
  sf->addRow(tr("Minimum scale"), min_scale_);
  sf->addRow(tr("Maximum scale"), max_scale_);
  sf->addRow(tr("Master weights"), master_weights_);
  layout->addWidget(scaler);

  // The ranges are the engine's (train/config.cpp validate()), so a value it would refuse is refused as typed.
  auto* fp8 = new QGroupBox(tr("FP8 scaling (AMP FP8)"));
  fp8->setObjectName("fp8Scaling");
  fp8_ = fp8;
  auto* ff = new QFormLayout(fp8);
  fp8_history_ = for_setting(int_box(1, 1000000), "precision.fp8.amax_history_length");
  fp8_history_->setObjectName("fp8AmaxHistory");
  fp8_history_->setToolTip(tr("The steps of amax history a tensor's scale comes from (Transformer Engine: 1024)"));
  fp8_margin_ = for_setting(int_box(-64, 64), "precision.fp8.margin");
  fp8_margin_->setObjectName("fp8Margin");
  fp8_margin_->setToolTip(tr("Powers of two kept between a scaled amax and the format's max (Transformer Engine: 0)"));
  fp8_rule_ = for_setting(new QComboBox, "precision.fp8.amax_rule");
  fp8_rule_->setObjectName("fp8AmaxRule");
  add_choices<AmaxRule>(fp8_rule_);
  fp8_formats_ = for_setting(new QComboBox, "precision.fp8.formats");
  fp8_formats_->setObjectName("fp8Formats");
  add_choices<Fp8Formats>(fp8_formats_);
  fp8_first_last_ = for_setting(new QCheckBox(tr("in FP8 too")), "precision.fp8.first_and_last");
  fp8_first_last_->setObjectName("fp8FirstLast");
  fp8_first_last_->setToolTip(
      tr("The first convolution and the last linear layer in FP8 too. Off: they stay in "
         "BF16, as is usual (the stem sees raw pixels, the head makes the logits)"));
  ff->addRow(tr("Amax history"), fp8_history_);
  ff->addRow(tr("Margin"), fp8_margin_);
  ff->addRow(tr("Amax rule"), fp8_rule_);
  ff->addRow(tr("Formats"), fp8_formats_);
  ff->addRow(tr("First and last layers"), fp8_first_last_);
  layout->addWidget(fp8);
  connect(precision_, &QComboBox::currentIndexChanged, this, &RunSetupPanel::update_fp8_fields);
  connect(precision_, &QComboBox::currentIndexChanged, this, &RunSetupPanel::update_scaler_fields);
  connect(scale_kind_, &QComboBox::currentIndexChanged, this, &RunSetupPanel::update_scaler_fields);
  update_fp8_fields();
  update_scaler_fields();

  auto* more = new QGroupBox(tr("Optimizer and data"));
  auto* mf = new QFormLayout(more);
  warmup_ = for_setting(int_box(0, 10000), "warmup_epochs");
  momentum_ = for_setting(number_box(0, 0.999, 0.01), "optimizer.momentum");
  weight_decay_ = for_setting(new WideNumberBox(0, 1, 0.0001), "optimizer.weight_decay");
  label_smoothing_ = for_setting(number_box(0, 0.99, 0.05), "label_smoothing");
  grad_clip_ = for_setting(number_box(0, 1e6, 0.5), "grad_clip_norm");
  grad_clip_->set_minimum_text(tr("off"));
  topk_ = for_setting(int_box(1, 100), "topk");
  topk_->setObjectName("topk");
  connect(topk_, &QSpinBox::valueChanged, this, &RunSetupPanel::preview_changed);
  augment_ = for_setting(new QCheckBox(tr("random crop and flip")), "data.augment");
  stem_ = for_setting(new QComboBox, "stem");
  stem_->addItem(tr("auto (small below 64 px)"), "auto");
  stem_->addItem(tr("ImageNet (7x7, max pool)"), "imagenet");
  stem_->addItem(tr("small (3x3, no pool)"), "small");
  threads_ = for_setting(int_box(0, 1024), "threads");
  threads_->setObjectName("threads");
  threads_->set_minimum_text(tr("all cores"));
  max_steps_ = for_setting(int_box(0, 100000000), "max_steps_per_epoch");
  max_steps_->setObjectName("maxStepsPerEpoch");
  max_steps_->set_minimum_text(tr("whole epoch"));
  mf->addRow(tr("Warm-up epochs"), warmup_);
  mf->addRow(tr("Momentum (SGD)"), momentum_);
  mf->addRow(tr("Weight decay"), weight_decay_);
  mf->addRow(tr("Label smoothing"), label_smoothing_);
  mf->addRow(tr("Gradient clipping"), grad_clip_);
  mf->addRow(tr("Top-k accuracy"), topk_);
  mf->addRow(tr("Augmentation"), augment_);
  mf->addRow(tr("Stem"), stem_);
  mf->addRow(tr("Threads"), threads_);
  mf->addRow(tr("Steps per epoch"), max_steps_);
  layout->addWidget(more);
  return box;
}

PrecisionMode RunSetupPanel::chosen_mode() const {
  return kPrecisionModes.at(static_cast<size_t>(std::max(0, precision_->currentIndex()))).mode;
}

void RunSetupPanel::update_precision_help() {
  const PrecisionMode mode = chosen_mode();
  QString text = QString::fromUtf8(mode_info(mode).description);
  const ModeSupport support = mode_support(mode, device_capabilities(chosen_device()));
  if (!support.compute.empty()) text += "\n" + tr("Here: %1").arg(QString::fromStdString(support.compute));
  precision_help_->setText(text);
  fit_precision_help();
}

void RunSetupPanel::fit_precision_help() {
  // QFormLayout gives a wrapped label the height of its size hint, worked out for another width: a note of more
  // lines would be cut, one of fewer stand in a gap. Its height is the one for the width it has (worked out free of
  // the last one set, which QLabel's own answer would keep as its least).
  if (precision_help_->width() <= 0) return;
  precision_help_->setMinimumHeight(0);
  precision_help_->setMaximumHeight(QWIDGETSIZE_MAX);
  precision_help_->setFixedHeight(precision_help_->heightForWidth(precision_help_->width()));
}

void RunSetupPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fit_precision_help();
}

DeviceChoice RunSetupPanel::chosen_device() const {
  return DeviceChoice::parse(device_->currentData().toString().toStdString()).value_or(DeviceChoice::cpu());
}

const Capabilities& RunSetupPanel::device_capabilities(DeviceChoice device) {
  auto it = capabilities_.find(device.name());
  // A GPU that cannot be used: nothing but FP32 is offered, with the reason.
  if (it == capabilities_.end()) it = capabilities_.emplace(device.name(), capabilities_or_reason(device)).first;
  return it->second;
}

void RunSetupPanel::update_precision_for_device() {
  const Capabilities& caps = device_capabilities(chosen_device());
  auto* items = qobject_cast<QStandardItemModel*>(precision_->model());
  for (int i = 0; i < precision_->count(); ++i) {
    const ModeSupport support = mode_support(kPrecisionModes.at(static_cast<size_t>(i)).mode, caps);
    items->item(i)->setEnabled(support.supported);
    precision_->setItemData(i, support.supported ? QString() : QString::fromStdString(support.reason), Qt::ToolTipRole);
  }
  if (!items->item(precision_->currentIndex())->isEnabled()) precision_->setCurrentIndex(precision_->findData("fp32"));
  update_precision_help();
}

void RunSetupPanel::update_memory_estimate() {
  if (!memory_) return;  // still being built
  const TrainConfig c = config();
  // As the trainer takes them: "auto" is the data's size (at most 224), the classes the data's (10 until inspected).
  const int image_size = c.image_size > 0 ? c.image_size : std::min(224, data_image_size_ > 0 ? data_image_size_ : 224);
  const int classes = std::max(2, data_classes_ > 0 ? data_classes_ : 10);
  const Capabilities& caps = device_capabilities(c.device);
  const MemoryEstimateInput input = memory_estimate_input(c, image_size, classes, caps);
  const MemoryEstimate estimate = estimate_training_memory(input);
  // The CPU's is what the host can give now; a GPU's, its memory (its free memory is read when the run starts).
  const bool cpu = c.device.is_cpu();
  const size_t available = cpu ? available_host_memory() : caps.memory_bytes;
  QString text =
      tr("≈ %1 of %2")
          .arg(QString::fromStdString(memory_text(estimate.total())), QString::fromStdString(memory_text(available)));
  if (!cpu) text += tr(" on the GPU");
  const bool fits = available == 0 || estimate.total() <= available;
  if (!fits) {
    const int largest = largest_batch_that_fits(input, available);
    text += largest >= 2 ? tr(": too much, batch size %1 or less fits").arg(largest)
                         : tr(": too much even at batch size 2; choose a smaller image size or model");
  }
  memory_->setText(text);
  memory_->setStyleSheet(fits ? QString() : QStringLiteral("color: #b00020"));
  memory_->setToolTip(QString::fromStdString(memory_summary(estimate, available)));
}

void RunSetupPanel::apply_scaler_preset() {
  const LossScaleConfig s = loss_scale_preset(scaler_preset_->currentData().toString().toStdString());
  init_scale_->setValue(s.init_scale);
  growth_factor_->setValue(s.growth_factor);
  backoff_factor_->setValue(s.backoff_factor);
  growth_interval_->setValue(static_cast<int>(s.growth_interval));
  hysteresis_->setValue(s.hysteresis);
  min_scale_->setValue(s.min_scale);
  max_scale_->setValue(s.max_scale);
}

void RunSetupPanel::update_fp8_fields() {
  if (!fp8_) return;  // still being built
  const bool fp8 = chosen_mode() == PrecisionMode::AmpFp8;
  fp8_->setVisible(fp8);
  fp8_->setEnabled(editable_ && fp8);
}

void RunSetupPanel::update_scaler_fields() {
  if (!max_scale_) return;  // still being built
  const LossScaleKind kind = scale_kind_->currentData().toString().isEmpty()
                                 ? mode_info(chosen_mode()).loss_scaling
                                 : chosen_choice<LossScaleKind>(scale_kind_);
  init_scale_->setEnabled(editable_ && kind != LossScaleKind::Off);
  for (QWidget* dynamic_only :
       {static_cast<QWidget*>(scaler_preset_), static_cast<QWidget*>(growth_factor_),
        static_cast<QWidget*>(backoff_factor_), static_cast<QWidget*>(growth_interval_),
        static_cast<QWidget*>(hysteresis_), static_cast<QWidget*>(min_scale_), static_cast<QWidget*>(max_scale_)})
    dynamic_only->setEnabled(editable_ && kind == LossScaleKind::Dynamic);
}

void RunSetupPanel::update_processes() {
  if (!processes_) return;  // still being built
  const DeviceChoice device = chosen_device();
  const int most = process_offer_.max_processes(device);
  processes_->setMaximum(most);
  const std::string why = process_offer_.why_one(device);
  processes_->setToolTip(
      why.empty() ? tr("1: trains here, in this program. More: one run on that many processes of mpirun (ampwb train "
                       "--processes N), each on its shard of every batch; the batch size is each one's. Up to the %1 "
                       "here.")
                        .arg(process_offer_.on_cpu(device) ? tr("cores") : tr("GPUs"))
                  : tr("One process only: %1.").arg(QString::fromStdString(why)));
  processes_->setEnabled(editable_ && most > 1);
  const bool many = processes_->value() > 1;
  sync_batchnorm_->setEnabled(editable_ && many);
  gradient_allreduce_->setEnabled(editable_ && many);
  const QString single = tr("For a run on more than one process (Processes)");
  sync_batchnorm_->setToolTip(many ? tr("Statistics over every process's batch, as one process at the global batch")
                                   : single);
  gradient_allreduce_->setToolTip(many ? QString() : single);
}

int RunSetupPanel::processes() const { return processes_->value(); }

void RunSetupPanel::set_processes(int processes) {
  processes_->setValue(std::clamp(processes, 1, processes_->maximum()));
  update_processes();
}

TrainConfig RunSetupPanel::config() const {
  TrainConfig c;
  c.name = name_->text().trimmed().toStdString();
  c.data_dir = dataset_path().toStdString();
  c.data.validation_fraction = val_fraction_->value();
  c.data.max_train_images = max_images_->value();
  c.data.max_validation_images = max_validation_images_->value();
  c.depth = depth_->currentData().toInt();
  c.device = chosen_device();
  c.epochs = epochs_->value();
  c.batch_size = batch_->value();
  c.image_size = image_size_->value();
  c.optimizer.kind = chosen_choice<OptimizerKind>(optimizer_);
  c.lr = static_cast<float>(lr_->value());
  c.schedule = chosen_choice<Schedule>(schedule_);
  c.seed = static_cast<uint64_t>(seed_->value());

  // The scaler's numbers are fields that always hold one; the kind and master weights may be left to the mode.
  PrecisionOverrides o;
  const QString kind = scale_kind_->currentData().toString();
  if (!kind.isEmpty()) o.loss_scale_kind = chosen_choice<LossScaleKind>(scale_kind_);
  const QString master = master_weights_->currentData().toString();
  if (!master.isEmpty()) o.master_weights = master == "on";
  o.init_scale = init_scale_->value();
  o.growth_factor = growth_factor_->value();
  o.backoff_factor = backoff_factor_->value();
  o.growth_interval = growth_interval_->value();
  o.hysteresis = hysteresis_->value();
  o.min_scale = min_scale_->value();
  o.max_scale = max_scale_->value();
  c.precision = resolve_precision(chosen_mode(), o);
  // Kept whatever the mode, as the CLI keeps its flags: the other modes ignore them.
  c.precision.fp8.scaling.history_length = fp8_history_->value();
  c.precision.fp8.scaling.margin = fp8_margin_->value();
  c.precision.fp8.scaling.rule = chosen_choice<AmaxRule>(fp8_rule_);
  c.precision.fp8.formats = chosen_choice<Fp8Formats>(fp8_formats_);
  c.precision.fp8.first_and_last = fp8_first_last_->isChecked();

  c.warmup_epochs = warmup_->value();
  c.optimizer.momentum = static_cast<float>(momentum_->value());
  c.optimizer.weight_decay = static_cast<float>(weight_decay_->value());
  c.label_smoothing = static_cast<float>(label_smoothing_->value());
  c.grad_clip_norm = static_cast<float>(grad_clip_->value());
  c.topk = topk_->value();
  c.data.augment = augment_->isChecked();
  const QString stem = stem_->currentData().toString();
  c.stem = stem == "imagenet" ? Stem::ImageNet : stem == "small" ? Stem::Small : Stem::Auto;
  c.threads = threads_->value();
  c.max_steps_per_epoch = max_steps_->value();
  c.data_parallel.sync_batchnorm = sync_batchnorm_->isChecked();
  c.data_parallel.gradient_allreduce = chosen_choice<GradientAllReduce>(gradient_allreduce_);
  return c;
}

void RunSetupPanel::set_config(const TrainConfig& c) {
  // The dataset is scanned again only where what its report depends on changed: a sweep loads each of its runs.
  const auto data_settings = [this] {
    return std::make_tuple(dataset_path(), val_fraction_->value(), seed_->value(), max_images_->value(),
                           max_validation_images_->value());
  };
  const auto data_before = data_settings();
  name_->setText(QString::fromStdString(c.name));
  dataset_->setText(QString::fromStdString(c.data_dir));
  val_fraction_->setValue(c.data.validation_fraction);
  max_images_->setValue(static_cast<int>(c.data.max_train_images));
  max_validation_images_->setValue(static_cast<int>(c.data.max_validation_images));
  select_data(depth_, c.depth);
  select_data(device_, QString::fromStdString(c.device.name()));
  epochs_->setValue(c.epochs);
  batch_->setValue(c.batch_size);
  image_size_->setValue(c.image_size);
  select_choice(optimizer_, c.optimizer.kind);
  lr_->setValue(c.lr);
  select_choice(schedule_, c.schedule);
  seed_->setValue(static_cast<int>(std::min<uint64_t>(c.seed, std::numeric_limits<int>::max())));

  select_data(precision_, QString::fromUtf8(mode_name(c.precision.mode)));
  update_precision_help();
  const PrecisionConfig preset = precision_preset(c.precision.mode);
  const LossScaleConfig& s = c.precision.loss_scale;
  select_data(scale_kind_, s.kind == preset.loss_scale.kind ? QString() : QString::fromUtf8(choice_name(s.kind)));
  init_scale_->setValue(s.init_scale);
  growth_factor_->setValue(s.growth_factor);
  backoff_factor_->setValue(s.backoff_factor);
  growth_interval_->setValue(static_cast<int>(s.growth_interval));
  hysteresis_->setValue(s.hysteresis);
  min_scale_->setValue(s.min_scale);
  max_scale_->setValue(s.max_scale);
  select_data(master_weights_, c.precision.master_weights == preset.master_weights
                                   ? QString()
                                   : QString(c.precision.master_weights ? "on" : "off"));
  const Fp8Config& fp8 = c.precision.fp8;
  fp8_history_->setValue(fp8.scaling.history_length);
  fp8_margin_->setValue(fp8.scaling.margin);
  select_choice(fp8_rule_, fp8.scaling.rule);
  select_choice(fp8_formats_, fp8.formats);
  fp8_first_last_->setChecked(fp8.first_and_last);
  update_fp8_fields();
  update_scaler_fields();

  warmup_->setValue(c.warmup_epochs);
  momentum_->setValue(c.optimizer.momentum);
  weight_decay_->setValue(c.optimizer.weight_decay);
  label_smoothing_->setValue(c.label_smoothing);
  grad_clip_->setValue(c.grad_clip_norm);
  topk_->setValue(c.topk);
  augment_->setChecked(c.data.augment);
  select_data(stem_, QString::fromUtf8(stem_name(c.stem)));
  threads_->setValue(c.threads);
  max_steps_->setValue(static_cast<int>(c.max_steps_per_epoch));
  sync_batchnorm_->setChecked(c.data_parallel.sync_batchnorm);
  select_choice(gradient_allreduce_, c.data_parallel.gradient_allreduce);
  if (data_settings() != data_before || dataset_report_->toPlainText().isEmpty()) request_inspection();
}

bool RunSetupPanel::checkpoints_enabled() const { return checkpoints_->isChecked(); }

bool RunSetupPanel::keep_final_weights() const { return keep_weights_->isChecked(); }

void RunSetupPanel::clear_run_name() { name_->clear(); }

void RunSetupPanel::set_dataset_path(const QString& path) {
  dataset_->setText(path);
  request_inspection();
}

QString RunSetupPanel::dataset_report() const { return dataset_report_->toPlainText(); }

// As typed or pasted: a path copied from a shell comes quoted, one dragged from a file manager as a file:// URL.
QString RunSetupPanel::dataset_path() const {
  QString path = dataset_->text().trimmed();
  if (path.size() >= 2 && (path.front() == '\'' || path.front() == '"') && path.back() == path.front())
    path = path.mid(1, path.size() - 2);
  if (path.startsWith(QStringLiteral("file://"))) path = QUrl(path).toLocalFile();
  return path;
}

void RunSetupPanel::choose_dataset_folder() {
  const QString folder = choose_folder(this, tr("Choose a dataset folder"), dataset_path());
  if (!folder.isEmpty()) set_dataset_path(folder);
}

void RunSetupPanel::use_sample_dataset() {
  try {
    set_dataset_path(QString::fromStdString(builtin_sample_dataset()));
  } catch (const std::exception& e) {
    plain_message(this, QMessageBox::Information, tr("Built-in sample"), QString::fromUtf8(e.what()));
  }
}

void RunSetupPanel::request_inspection() {
  inspect_later_->stop();
  const QString path = dataset_path();
  if (path != inspected_root_) forget_inspected_data();  // the last folder's classes and size are not this one's
  if (path.isEmpty()) {
    dataset_status_->setText(tr("Choose a dataset folder, or click Sample for Fashion-MNIST."));
    dataset_status_->setMinimumHeight(two_lines(dataset_status_));
    dataset_report_->clear();
    set_dataset_problem(tr("no dataset folder is chosen"));
    return;
  }
  set_dataset_problem(QString());  // the last folder's problem is not this one's
  DatasetOptions options;
  options.validation_fraction = val_fraction_->value();
  options.seed = static_cast<uint64_t>(seed_->value());
  options.max_train_images = max_images_->value();
  options.max_validation_images = max_validation_images_->value();
  // The check ends a moment later, after the user has moved on to the next field: the line keeps its height meanwhile,
  // so that the fields below do not move under a click (the last status took two lines, the check's one).
  const int shown = dataset_status_->isVisible() ? dataset_status_->height() : 0;  // not laid out yet: no height
  dataset_status_->setMinimumHeight(std::max(shown, two_lines(dataset_status_)));
  dataset_status_->setText(tr("Checking %1 …").arg(QFileInfo(path).fileName()));
  inspector_.inspect(path, options);
}

void RunSetupPanel::forget_inspected_data() {
  inspected_root_.clear();
  data_image_size_ = data_classes_ = 0;
  update_memory_estimate();
  Q_EMIT preview_changed();
}

void RunSetupPanel::show_inspection(const InspectResult& r) {
  if (r.root != dataset_path()) return;  // the user has moved on meanwhile
  dataset_report_->setPlainText(r.text);
  inspected_root_ = r.root;
  // IDX test files, CIFAR's test batch and val/ folders are the validation split: no fraction to choose then.
  data_form_->setRowVisible(val_fraction_, !r.trainable || r.split_by_workbench);
  data_image_size_ = r.trainable ? r.native_image_size : 0;
  data_classes_ = r.trainable ? r.classes : 0;
  update_memory_estimate();
  // "2,000 of 10,000 validation images": what a run takes, and what the data has where a limit leaves some out.
  const auto count = [](qint64 taken, qint64 all) {
    const QLocale english(QLocale::English);
    return taken < all ? tr("%1 of %2").arg(english.toString(taken), english.toString(all)) : english.toString(taken);
  };
  QString status = r.trainable ? tr("✔ %1 classes, %2 training and %3 validation images (%4 px)")
                                     .arg(r.classes)
                                     .arg(count(r.train_images, r.train_images_before_limit))
                                     .arg(count(r.validation_images, r.validation_images_before_limit))
                                     .arg(r.native_image_size)
                               : tr("✘ %1").arg(r.problem);
  // Files passed over are said where the eye falls, not only at the end of the report below.
  if (r.trainable && r.skipped > 0)
    status += r.skipped == 1 ? tr("; 1 file skipped, named in the report below")
                             : tr("; %1 files skipped, each named in the report below").arg(r.skipped);
  dataset_status_->setText(status);
  dataset_status_->setMinimumHeight(two_lines(dataset_status_));
  set_dataset_problem(r.trainable ? QString() : r.problem);
  Q_EMIT dataset_inspected(r);
  Q_EMIT preview_changed();
}

void RunSetupPanel::set_dataset_problem(const QString& problem) {
  if (problem == dataset_problem_) return;
  dataset_problem_ = problem;
  Q_EMIT dataset_problem_changed(problem);
}

void RunSetupPanel::update_settings_problem() {
  QStringList problems;
  // In the panel's order (its children's), each field named by its label as the form shows it.
  for (QAbstractSpinBox* field : findChildren<QAbstractSpinBox*>()) {
    const auto* whole = qobject_cast<WholeNumberBox*>(field);
    const auto* wide = qobject_cast<WideNumberBox*>(field);
    const QString problem = whole ? whole->problem() : wide ? wide->problem() : QString();
    if (problem.isEmpty()) continue;
    QString name = field->objectName();
    for (const QLabel* label : findChildren<QLabel*>())
      if (label->buddy() == field) name = label->text().remove('&');
    problems << tr("%1: %2").arg(name, problem);
    // Said where the user types, not only in the list at the panel's foot, out of view.
    if (field->hasFocus()) QToolTip::showText(field->mapToGlobal(QPoint(0, field->height())), problem, field);
  }
  settings_problems_->setText(problems.isEmpty() ? QString() : "✘ " + problems.join("\n✘ "));
  settings_problems_->setVisible(!problems.isEmpty());
  const QString first = problems.isEmpty() ? QString() : problems.front();
  if (first == settings_problem_) return;
  settings_problem_ = first;
  Q_EMIT settings_problem_changed(first);
}

QString RunSetupPanel::show_setting_problem(const std::string& setting, const QString& problem) {
  if (marked_setting_) mark_field_problem(marked_setting_, QString());
  marked_setting_ = nullptr;
  QWidget* field = nullptr;
  for (QWidget* w : findChildren<QWidget*>())
    if (w->property(kSettingProperty).toString().toStdString() == setting) field = w;
  if (!field) return problem;
  if (advanced_->isAncestorOf(field)) advanced_toggle_->setChecked(true);
  mark_field_problem(field, problem);
  marked_setting_ = field;
  // Named as the form shows it: its row's label, else the check box's own text.
  QString name;
  for (const QLabel* label : findChildren<QLabel*>())
    if (label->buddy() == field) name = label->text().remove('&');
  if (const auto* box = qobject_cast<QCheckBox*>(field); box && name.isEmpty()) name = box->text().remove('&');
  return name.isEmpty() ? problem : tr("%1: %2").arg(name, problem);
}

void RunSetupPanel::clear_setting_problem() {
  if (marked_setting_) mark_field_problem(marked_setting_, QString());
  marked_setting_ = nullptr;
}

bool RunSetupPanel::inspecting() const { return inspector_.busy(); }

void RunSetupPanel::set_editable(bool editable) {
  for (QWidget* w : findChildren<QWidget*>())
    if (w != advanced_toggle_ && w != advanced_ && !qobject_cast<QGroupBox*>(w) && !qobject_cast<QLabel*>(w) &&
        w != dataset_report_)
      w->setEnabled(editable);
  editable_ = editable;
  update_processes();  // what only many processes use stays off with one
  update_fp8_fields();
  update_scaler_fields();
}

void RunSetupPanel::load_settings() {
  QSettings settings;
  TrainConfig c = first_launch_config();
  const QString saved = settings.value("setup/config").toString();
  if (!saved.isEmpty()) {
    try {
      c = config_from_json_text(saved.toStdString());
    } catch (const std::exception&) {
      // A damaged entry falls back to the first-launch settings.
    }
  }
  checkpoints_->setChecked(settings.value("setup/checkpoints", true).toBool());
  keep_weights_->setChecked(settings.value("setup/keepWeights", true).toBool());
  advanced_toggle_->setChecked(settings.value("setup/advancedOpen", false).toBool());
  set_config(c);
  set_processes(settings.value("setup/processes", 1).toInt());
}

void RunSetupPanel::save_settings() const {
  QSettings settings;
  TrainConfig c = config();
  c.name.clear();  // a name is for one run
  settings.setValue("setup/config", QString::fromStdString(config_to_json_text(c)));
  settings.setValue("setup/checkpoints", checkpoints_->isChecked());
  settings.setValue("setup/keepWeights", keep_weights_->isChecked());
  settings.setValue("setup/advancedOpen", advanced_toggle_->isChecked());
  settings.setValue("setup/processes", processes_->value());
}

}  // namespace ampwb::ui
