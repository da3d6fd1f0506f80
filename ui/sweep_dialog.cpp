// SweepDialog: variant check boxes, the shared settings and the seed article's preset.
#include "sweep_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QGroupBox>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QVBoxLayout>
#include <algorithm>

#include "train/precision_support.h"

namespace ampwb::ui {

SweepDialog::SweepDialog(const TrainConfig& base, const Capabilities& caps, QWidget* parent)
    : QDialog(parent), base_(base), caps_(caps) {
  setWindowTitle(tr("Precision sweep"));
  setObjectName("sweepDialog");
  auto* layout = new QVBoxLayout(this);
  auto* intro =
      new QLabel(tr("One run per precision variant, on the same data, seed and settings, one after the "
                    "other. Their comparison opens when the last one ends."));
  intro->setWordWrap(true);
  layout->addWidget(intro);

  auto* group = new QGroupBox(tr("Variants"));
  auto* gl = new QVBoxLayout(group);
  // The variants ticked last time, else the usual five: all but TF32 (CUDA only) and FP16 O2.
  QStringList usual;
  for (const SweepVariant& v : sweep_variants())
    if (v.mode != PrecisionMode::Tf32 && v.mode != PrecisionMode::Fp16O2) usual << QString::fromStdString(v.key);
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
    gl->addWidget(box);
    boxes_.emplace_back(box, v);
  }
  layout->addWidget(group);

  base_text_ = new QLabel;
  base_text_->setTextFormat(Qt::PlainText);  // it quotes the dataset path: user text, never HTML
  base_text_->setWordWrap(true);
  base_text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(base_text_);
  device_text_ = new QLabel;
  device_text_->setObjectName("sweepDevice");
  device_text_->setWordWrap(true);
  device_text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(device_text_);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText(tr("Queue the runs"));
  auto* preset = buttons->addButton(tr("Seed article: FP32 vs AMP"), QDialogButtonBox::ResetRole);
  preset->setObjectName("seedArticlePreset");
  preset->setToolTip(tr("ResNet-18, Adam lr 0.001, batch 16, 224 px, 5 epochs, 80/20 split: FP32 against AMP FP16"));
  connect(preset, &QPushButton::clicked, this, &SweepDialog::apply_seed_article_preset);
  connect(buttons, &QDialogButtonBox::accepted, this, [this] {
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
  const std::vector<std::string> keys = seed_article_variants();
  for (auto& [box, v] : boxes_) box->setChecked(std::find(keys.begin(), keys.end(), v.key) != keys.end());
  describe_base();
}

std::vector<SweepVariant> SweepDialog::chosen() const {
  std::vector<SweepVariant> out;
  for (const auto& [box, v] : boxes_)
    if (box->isChecked() && box->isEnabled()) out.push_back(v);
  return out;
}

void SweepDialog::describe_base() {
  const TrainConfig& c = base_;
  base_text_->setText(
      tr("Shared settings: ResNet-%1, %2 epochs, batch %3, %4, %5 lr %6 (%7), seed %8, data %9%10")
          .arg(c.depth)
          .arg(c.epochs)
          .arg(c.batch_size)
          .arg(c.image_size ? tr("%1 px").arg(c.image_size) : tr("native image size"))
          .arg(QString::fromUtf8(choice_name(c.optimizer.kind)))
          .arg(c.lr)
          .arg(QString::fromUtf8(choice_name(c.schedule)))
          .arg(c.seed)
          .arg(QString::fromStdString(c.data_dir))
          .arg(c.data.max_train_images ? tr(" (first %1 training images)").arg(c.data.max_train_images) : QString()));
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
