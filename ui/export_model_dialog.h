// "Export model…" of the runs view: a finished run's final weights (store/final_weights.h) written as an ONNX or
// safetensors file (export/onnx_export.h, export/safetensors_export.h), as `ampwb export model` writes them. The
// format follows the file's suffix (.onnx, .safetensors) and the weights' type is FP32, FP16 or BF16. The export
// runs on the UI thread under a busy cursor: a ResNet-50 (94 MB) loads and writes in under a second on two cores.
#pragma once

#include <QDialog>
#include <QString>
#include <cstdint>

#include "store/run_store.h"

class QComboBox;
class QLabel;
class QLineEdit;

namespace ampwb::ui {

class ExportModelDialog : public QDialog {
  Q_OBJECT
 public:
  ExportModelDialog(const RunStore& store, int64_t run, QWidget* parent = nullptr);

  // The file to write; a suffix .onnx or .safetensors chooses the format.
  void set_path(const QString& path);
  QString path() const;
  QString format() const;  // "onnx" or "safetensors"
  void set_format(const QString& format);
  QString dtype() const;  // "fp32", "fp16" or "bf16"
  void set_dtype(const QString& dtype);

  // Writes the file (what the Export button does); returns false and shows the reason in the user's words.
  bool export_model();
  // Why the last export failed; empty after one that succeeded.
  const QString& error() const { return error_; }

 Q_SIGNALS:
  void exported(const QString& path, const QString& format, const QString& dtype);

 private:
  void browse();
  void follow_suffix(const QString& path);

  const RunStore& store_;
  int64_t run_ = 0;
  QLineEdit* path_ = nullptr;
  QComboBox* format_ = nullptr;
  QComboBox* dtype_ = nullptr;
  QLabel* message_ = nullptr;
  QString error_;
  QString browsed_;  // the file last chosen through Browse…, whose replacing the file dialog asked about
};

}  // namespace ampwb::ui
