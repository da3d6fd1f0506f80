// SweepDialog: variant check boxes, the shared settings and the seed article's preset.
#include "sweep_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QGroupBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QThread>
#include <QVBoxLayout>
#include <algorithm>

#include "core/error.h"
#include "text_lines_area.h"

#include "train/precision_support.h"

namespace ampwb::ui {

SweepDialog::SweepDialog(const TrainConfig& base, const Capabilities& caps, QWidget* parent)
    : QDialog(parent), base_(base), caps_(caps) {
  setWindowTitle(tr("Sweep"));
  setObjectName("sweepDialog");
  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(
      tr("One run per point of the grid, on the run setup's other settings. Precisions alone on this machine run "
         "one after the other here, and their comparison opens when the last one ends; a larger grid, or one on "
         "Slurm, is started as `ampwb sweep` and followed in the Sweeps tab."));
  intro->setWordWrap(true);
  layout->addWidget(intro);

  auto* group = new QGroupBox(tr("Variants"));
  auto* gl = new QVBoxLayout(group);
  // The variants ticked last time, else the usual five: all but TF32 (CUDA only), FP16 O2 and AMP FP8 (an opt-in:
  // it trains most layers with 3-bit mantissas, an experiment of its own rather than a usual comparison).
  QStringList usual;
  for (const SweepVariant& v : sweep_variants())
    if (v.mode != PrecisionMode::Tf32 && v.mode != PrecisionMode::Fp16O2 && v.mode != PrecisionMode::AmpFp8)
      usual << QString::fromStdString(v.key);
  const QStringList ticked = QSettings().value("sweep/variants", usual).toStringList();
  for (const SweepVariant& v : sweep_variants()) {
    auto* box = new QCheckBox(QString::fromStdString(v.label));
    box->setObjectName(QString::fromStdString("variant-" + v.key));
    box->setToolTip(QString::fromUtf8(mode_info(v.mode).description));
    const ModeSupport support = mode_support(v.mode, caps_);
    if (!support.supported) {
      box->setEnabled(false);
      box->setToolTip(QString::fromStdString(support.reason));
    }
    box->setChecked(ticked.contains(QString::fromStdString(v.key)));
    connect(box, &QCheckBox::toggled, this, &SweepDialog::describe_device);
    connect(box, &QCheckBox::toggled, this, &SweepDialog::describe_base);
    gl->addWidget(box);
    boxes_.emplace_back(box, v);
  }
  auto* columns = new QHBoxLayout;
  columns->addWidget(group, 1);
  layout->addLayout(columns);

  // The grid's other lists, as `ampwb sweep --seed 0,1,2 --depth 20,56 --batch-size 64,128` takes them.
  QSettings settings;
  auto* grid = new QGroupBox(tr("Grid (comma lists)"));
  auto* gf = new QFormLayout(grid);
  const auto list_field = [&](const char* name, const QString& value, const QString& tip) {
    auto* field = new QLineEdit(value);
    field->setObjectName(name);
    field->setToolTip(tip);
    connect(field, &QLineEdit::textChanged, this, &SweepDialog::update_where);
    connect(field, &QLineEdit::textChanged, this, &SweepDialog::describe_base);
    return field;
  };
  // The seeds swept last (a sweep's repeats, whatever it compares); depths and batch sizes are the setup panel's.
  seeds_ = list_field("sweepSeeds", settings.value("sweep/seeds", QString::number(base_.seed)).toString(),
                      tr("e.g. 0,1,2: the groups' mean ± std is over these"));
  depths_ = list_field("sweepDepths", QString::number(base_.depth), tr("ResNet depths, e.g. 20,56 or 18,50"));
  batch_sizes_ = list_field("sweepBatchSizes", QString::number(base_.batch_size), tr("e.g. 64,128"));
  gf->addRow(tr("Seeds"), seeds_);
  gf->addRow(tr("Depths"), depths_);
  gf->addRow(tr("Batch sizes"), batch_sizes_);

  auto* where = new QGroupBox(tr("Where"));
  auto* wf = new QGridLayout(where);
  on_local_ = new QRadioButton(tr("This machine"));
  on_local_->setObjectName("sweepOnLocal");
  on_slurm_ = new QRadioButton(tr("Slurm (one job array)"));
  on_slurm_->setObjectName("sweepOnSlurm");
  (settings.value("sweep/on").toString() == "slurm" ? on_slurm_ : on_local_)->setChecked(true);
  connect(on_slurm_, &QRadioButton::toggled, this, &SweepDialog::update_where);
  parallel_ = new QSpinBox;
  parallel_->setObjectName("sweepParallel");
  parallel_->setRange(1, std::max(1, QThread::idealThreadCount()));
  parallel_->setToolTip(tr("Points trained at once on this machine (each as its own process)"));
  partition_ = new QLineEdit(settings.value("sweep/partition").toString());
  partition_->setObjectName("sweepPartition");
  partition_->setPlaceholderText(tr("the cluster's default"));
  account_ = new QLineEdit(settings.value("sweep/account").toString());
  account_->setObjectName("sweepAccount");
  account_->setPlaceholderText(tr("your default"));
  time_limit_ = new QLineEdit(settings.value("sweep/time").toString());
  time_limit_->setObjectName("sweepTimeLimit");
  time_limit_->setPlaceholderText(tr("e.g. 2:00:00"));
  time_limit_->setToolTip(tr("Each task's time limit, as sbatch --time takes it"));
  max_parallel_ = new QSpinBox;
  max_parallel_->setObjectName("sweepMaxParallel");
  max_parallel_->setRange(0, 100000);
  max_parallel_->setSpecialValueText(tr("as Slurm allows"));
  max_parallel_->setValue(settings.value("sweep/maxParallel", 0).toInt());
  int row = 0;
  const auto field_row = [&](const QString& label, QWidget* field) {
    auto* text = new QLabel(label);
    text->setBuddy(field);
    wf->addWidget(text, row, 0);
    wf->addWidget(field, row++, 1);
  };
  wf->addWidget(on_local_, row++, 0, 1, 2);
  field_row(tr("Points at once"), parallel_);
  wf->addWidget(on_slurm_, row++, 0, 1, 2);
  field_row(tr("Partition"), partition_);
  field_row(tr("Account"), account_);
  field_row(tr("Time limit"), time_limit_);
  field_row(tr("Tasks at once"), max_parallel_);
  // Whole, not squeezed by the wrapped texts below them.
  grid->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
  where->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
  auto* right = new QVBoxLayout;
  right->addWidget(grid);
  right->addWidget(where);
  right->addStretch(1);
  columns->addLayout(right, 1);

  problem_ = new QLabel;
  problem_->setObjectName("sweepProblem");
  problem_->setTextFormat(Qt::PlainText);
  problem_->setWordWrap(true);
  problem_->setStyleSheet("color: #c01c28");
  layout->addWidget(problem_);

  base_text_ = new QLabel;
  base_text_->setObjectName("sweepShared");
  base_text_->setTextFormat(Qt::PlainText);  // it quotes the dataset path: user text, never HTML
  base_text_->setWordWrap(true);
  base_text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(base_text_);
  device_text_ = new QLabel;
  device_text_->setObjectName("sweepDevice");
  device_text_->setWordWrap(true);
  device_text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // A few lines high, scrolling: the grid's fields above keep their room on a 768-pixel screen.
  layout->addWidget(text_lines_area(device_text_, 7));

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText(tr("Queue the runs"));
  auto* preset = buttons->addButton(tr("As in the Paddle article"), QDialogButtonBox::ResetRole);
  preset->setObjectName("seedArticlePreset");
  preset->setToolTip(
      tr("The experiment of the article that found a Paddle ResNet-18 no faster in AMP than in FP32: "
         "ResNet-18, Adam lr 0.001, batch 16, 224 px, 5 epochs, FP32 against AMP FP16, and AMP BF16 where this "
         "device computes BF16 but not FP16 natively. A dataset without a validation split of its own is split "
         "80/20. At 224 px it is slow on a CPU: cap the training images for a first look."));
  connect(preset, &QPushButton::clicked, this, &SweepDialog::apply_seed_article_preset);
  connect(buttons, &QDialogButtonBox::accepted, this, [this] {
    if (const QString why = problem(); !why.isEmpty()) {
      problem_->setText(why);
      return;
    }
    QSettings s;
    s.setValue("sweep/on", on_slurm_->isChecked() ? "slurm" : "local");
    s.setValue("sweep/partition", partition_->text().trimmed());
    s.setValue("sweep/account", account_->text().trimmed());
    s.setValue("sweep/time", time_limit_->text().trimmed());
    s.setValue("sweep/maxParallel", max_parallel_->value());
    s.setValue("sweep/seeds", seeds_->text().trimmed());
    QStringList keys;
    for (const auto& [box, v] : boxes_)
      if (box->isChecked()) keys << QString::fromStdString(v.key);
    QSettings().setValue("sweep/variants", keys);
    accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  layout->addWidget(buttons);
  describe_base();
  describe_device();
  update_where();
  setMinimumWidth(680);  // the two columns side by side, the texts below in few lines
}

SweepPlan SweepDialog::plan() const {
  SweepPlan p;
  p.variants = chosen();
  p.seeds = comma_list(seeds_->text().toStdString());
  p.depths = comma_list(depths_->text().toStdString());
  p.batch_sizes = comma_list(batch_sizes_->text().toStdString());
  p.on_slurm = on_slurm_->isChecked();
  p.parallel = parallel_->value();
  p.partition = partition_->text().trimmed().toStdString();
  p.account = account_->text().trimmed().toStdString();
  p.time_limit = time_limit_->text().trimmed().toStdString();
  p.max_parallel = max_parallel_->value();
  return p;
}

QString SweepDialog::problem() const {
  const SweepPlan p = plan();
  if (p.variants.empty()) return tr("Tick at least one precision.");
  try {
    check_grid_lists(p);
    if (p.needs_cli()) sweep_command(base_, p, "-");  // what `ampwb sweep` could not be told
  } catch (const Error& e) {
    return QString::fromUtf8(e.what());
  }
  return {};
}

void SweepDialog::update_where() {
  const bool slurm = on_slurm_->isChecked();
  parallel_->setEnabled(!slurm);
  for (QWidget* w : std::initializer_list<QWidget*>{partition_, account_, time_limit_, max_parallel_})
    w->setEnabled(slurm);
  problem_->setText(problem());
}

void SweepDialog::apply_seed_article_preset() {
  const TrainConfig preset = seed_article_config(base_.data_dir);
  // The experiment's settings; where and how it runs (device, threads, data limits) stay as the user set them.
  TrainConfig c = base_;
  c.depth = preset.depth;
  c.optimizer = preset.optimizer;
  c.lr = preset.lr;
  c.schedule = preset.schedule;
  c.warmup_epochs = 0;
  c.batch_size = preset.batch_size;
  c.image_size = preset.image_size;
  c.epochs = preset.epochs;
  c.data.validation_fraction = preset.data.validation_fraction;
  base_ = c;
  depths_->setText(QString::number(c.depth));
  batch_sizes_->setText(QString::number(c.batch_size));
  const std::vector<std::string> keys = seed_article_variants(caps_);
  for (auto& [box, v] : boxes_) box->setChecked(std::find(keys.begin(), keys.end(), v.key) != keys.end());
  describe_base();
}

std::vector<SweepVariant> SweepDialog::chosen() const {
  std::vector<SweepVariant> out;
  for (const auto& [box, v] : boxes_)
    if (box->isChecked() && box->isEnabled()) out.push_back(v);
  return out;
}

void SweepDialog::set_setup_processes(int processes) {
  setup_processes_ = processes;
  describe_base();
}

void SweepDialog::describe_base() {
  const TrainConfig& c = base_;
  const SweepPlan p = plan();
  const size_t runs = p.variants.size() * p.seeds.size() * p.depths.size() * p.batch_sizes.size();
  // The grid's settings (seed, depth, batch size) are its fields' above, not the panel's.
  const auto count = [](size_t n, const QString& one, const QString& many) {
    return QStringLiteral("%1 %2").arg(n).arg(n == 1 ? one : many);
  };
  QString shared =
      tr("Every run: %1, %2, %3 lr %4 (%5), data %6%7")
          .arg(count(static_cast<size_t>(c.epochs), tr("epoch"), tr("epochs")))
          .arg(c.image_size ? tr("%1 px").arg(c.image_size) : tr("native image size"))
          .arg(QString::fromUtf8(choice_name(c.optimizer.kind)))
          .arg(c.lr)
          .arg(QString::fromUtf8(choice_name(c.schedule)))
          .arg(QString::fromStdString(c.data_dir))
          .arg(c.data.max_train_images ? tr(" (first %1 training images)").arg(c.data.max_train_images) : QString());
  if (setup_processes_ > 1)
    shared +=
        tr(".\nEach run trains on one process: the setup's %1 processes are for a single run.").arg(setup_processes_);
  base_text_->setText(runs == 0 ? shared
                                : tr("Queues %1: %2 × %3 × %4 × %5.")
                                          .arg(count(runs, tr("run"), tr("runs")))
                                          .arg(count(p.variants.size(), tr("precision"), tr("precisions")))
                                          .arg(count(p.seeds.size(), tr("seed"), tr("seeds")))
                                          .arg(count(p.depths.size(), tr("depth"), tr("depths")))
                                          .arg(count(p.batch_sizes.size(), tr("batch size"), tr("batch sizes"))) +
                                      "\n" + shared);
}

// What computes each chosen mode on the device, and the notes its runs will carry, before anything starts: once per
// number format, naming the modes that share it (amp-fp16, fp16-o2 and fp16-pure all compute in FP16).
void SweepDialog::describe_device() {
  struct Format {
    QStringList modes;
    ModeSupport support;
  };
  std::vector<Format> formats;
  for (const SweepVariant& v : chosen()) {
    const ModeSupport support = mode_support(v.mode, caps_);
    if (support.compute.empty()) continue;
    const QString mode = QString::fromUtf8(mode_name(v.mode));
    auto same = std::find_if(formats.begin(), formats.end(), [&](const Format& f) {
      return f.support.compute == support.compute && f.support.notes == support.notes;
    });
    if (same == formats.end())
      formats.push_back({{mode}, support});
    else if (!same->modes.contains(mode))
      same->modes << mode;
  }
  QStringList lines{
      tr("On %1 (%2):").arg(QString::fromStdString(caps_.device_name), QString::fromStdString(caps_.isa))};
  for (const Format& f : formats) {
    lines << QStringLiteral("• %1: %2").arg(f.modes.join(", "), QString::fromStdString(f.support.compute));
    for (const std::string& note : f.support.notes) lines << QStringLiteral("   %1").arg(QString::fromStdString(note));
  }
  device_text_->setText(lines.join('\n'));
}

}  // namespace ampwb::ui
