// The model export dialog: a path, a format and a dtype, then the engine's exporters on the run's final weights.
#include "export_model_dialog.h"

#include <QApplication>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QStandardItemModel>
#include <QVBoxLayout>
#include <filesystem>

#include "core/error.h"
#include "export/exported_model.h"
#include "export/onnx_export.h"
#include "export/safetensors_export.h"
#include "file_dialogs.h"
#include "plain_text.h"
#include "store/final_weights.h"

namespace ampwb::ui {
namespace {
const QString kOnnxSuffix = QStringLiteral(".onnx");
const QString kSafetensorsSuffix = QStringLiteral(".safetensors");
}  // namespace

ExportModelDialog::ExportModelDialog(const RunStore& store, int64_t run, QWidget* parent)
    : QDialog(parent), store_(store), run_(run) {
  setWindowTitle(tr("Export the model of run %1").arg(run));
  setObjectName("exportModelDialog");

  path_ = new QLineEdit;
  path_->setObjectName("exportModelPath");
  auto* browse_button = new QPushButton(tr("Browse…"));
  connect(browse_button, &QPushButton::clicked, this, &ExportModelDialog::browse);
  auto* path_row = new QHBoxLayout;
  path_row->addWidget(path_, 1);
  path_row->addWidget(browse_button);

  format_ = new QComboBox;
  format_->setObjectName("exportModelFormat");
  format_->addItem(tr("ONNX (.onnx): ONNX Runtime, pixels 0–255 in"), QStringLiteral("onnx"));
  format_->addItem(tr("safetensors (.safetensors): PyTorch, torchvision's names"), QStringLiteral("safetensors"));
  if (!onnx_export_available()) {  // the reason stays on the item, and an .onnx path says it when exported
    auto* items = qobject_cast<QStandardItemModel*>(format_->model());
    items->item(0)->setEnabled(false);
    items->item(0)->setToolTip(QString::fromStdString(onnx_unavailable_reason()));
    format_->setCurrentIndex(1);
  }
  dtype_ = new QComboBox;
  dtype_->setObjectName("exportModelDtype");
  dtype_->addItem(tr("FP32 (exact)"), QStringLiteral("fp32"));
  dtype_->addItem(tr("FP16 (half the size)"), QStringLiteral("fp16"));
  dtype_->addItem(tr("BF16 (half the size)"), QStringLiteral("bf16"));

  message_ = new QLabel;
  message_->setObjectName("exportModelMessage");
  message_->setWordWrap(true);
  message_->setTextFormat(Qt::PlainText);  // paths and reasons as written

  auto* form = new QFormLayout;
  form->addRow(tr("File"), path_row);
  form->addRow(tr("Format"), format_);
  form->addRow(tr("Weights"), dtype_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Cancel);
  QPushButton* export_button = buttons->addButton(tr("Export"), QDialogButtonBox::AcceptRole);
  export_button->setObjectName("exportModelButton");
  export_button->setDefault(true);
  connect(buttons, &QDialogButtonBox::accepted, this, [this] {
    // A file chosen through Browse… was confirmed there; one typed is asked about here.
    if (path() != browsed_ && !confirm_replacing(this, windowTitle(), {path()})) return;
    if (export_model()) accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(message_);
  layout->addStretch(1);
  layout->addWidget(buttons);

  connect(path_, &QLineEdit::textEdited, this, &ExportModelDialog::follow_suffix);
  connect(path_, &QLineEdit::textChanged, this, [this] {  // what it said was of another file
    error_.clear();
    message_->clear();
  });
  connect(format_, &QComboBox::currentIndexChanged, this, [this] {  // the suggested name follows the format
    const QString wanted = format() == "onnx" ? kOnnxSuffix : kSafetensorsSuffix;
    QString p = path();
    for (const QString& suffix : {kOnnxSuffix, kSafetensorsSuffix})
      if (p.endsWith(suffix, Qt::CaseInsensitive)) p.chop(suffix.size());
    path_->setText(p + wanted);
  });
  const QString name = QString::fromStdString(store.run(run).name).replace(QRegularExpression("[^A-Za-z0-9._-]+"), "_");
  const QDir folder(QSettings().value("export/folder", QDir::homePath()).toString());  // where the last export went
  path_->setText(folder.filePath((name.isEmpty() ? QStringLiteral("run-%1").arg(run) : name) +
                                 (format() == "onnx" ? kOnnxSuffix : kSafetensorsSuffix)));
  resize(620, sizeHint().height());
}

void ExportModelDialog::set_path(const QString& path) {
  path_->setText(path);
  follow_suffix(path);
}
QString ExportModelDialog::path() const { return path_->text().trimmed(); }
QString ExportModelDialog::format() const { return format_->currentData().toString(); }
void ExportModelDialog::set_format(const QString& format) { format_->setCurrentIndex(format_->findData(format)); }
QString ExportModelDialog::dtype() const { return dtype_->currentData().toString(); }
void ExportModelDialog::set_dtype(const QString& dtype) { dtype_->setCurrentIndex(dtype_->findData(dtype)); }

void ExportModelDialog::follow_suffix(const QString& path) {
  const std::string named = export_format_named_by(path.trimmed().toStdString());
  const int index = format_->findData(QString::fromStdString(named));
  if (!named.empty() && index >= 0) {
    const QSignalBlocker keep_the_name(format_);  // the user's name stays as typed
    format_->setCurrentIndex(index);
  }
}

void ExportModelDialog::browse() {
  QString filter = format() == "onnx" ? tr("ONNX (*.onnx)") : tr("safetensors (*.safetensors)");
  const QString chosen = choose_save_file(this, tr("Export the model to"), path(),
                                          tr("ONNX (*.onnx);;safetensors (*.safetensors)"), &filter);
  if (chosen.isEmpty()) return;
  QString p = chosen;
  if (export_format_named_by(p.toStdString()).empty()) p += filter.contains("onnx") ? kOnnxSuffix : kSafetensorsSuffix;
  set_path(p);
  if (p == chosen) browsed_ = p;  // a suffix added makes another file, which the file dialog did not ask about
}

bool ExportModelDialog::export_model() {
  error_.clear();
  const QString file = path();
  const QString fmt = format();
  try {
    if (file.isEmpty()) throw Error("choose the file to write");
    if (fmt == "onnx" && !onnx_export_available()) throw Error(onnx_unavailable_reason());
    const DType type = *parse_export_dtype(dtype().toStdString());
    QApplication::setOverrideCursor(Qt::WaitCursor);
    struct RestoreCursor {
      ~RestoreCursor() { QApplication::restoreOverrideCursor(); }
    } restore;
    const ExportedModel model = exported_model(load_final_weights(store_, run_));
    // A missing folder is made, as `ampwb export model` makes it.
    const std::filesystem::path folder = QFileInfo(file).absolutePath().toStdString();
    if (std::error_code ec; !std::filesystem::create_directories(folder, ec) && ec)
      throw Error("cannot make the folder '" + folder.string() + "': " + ec.message());
    if (fmt == "onnx")
      export_onnx(model, type, file.toStdString());
    else
      export_safetensors(model, type, file.toStdString());
  } catch (const std::exception& e) {
    error_ = QString::fromUtf8(e.what());
    message_->setText(as_sentence(error_));
    return false;
  }
  message_->setText(tr("Wrote %1").arg(file));
  QSettings().setValue("export/folder", QFileInfo(file).absolutePath());
  Q_EMIT exported(file, fmt, dtype());
  return true;
}

}  // namespace ampwb::ui
