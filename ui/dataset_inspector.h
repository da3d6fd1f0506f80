// Checks a dataset folder off the UI thread (Dataset::inspect decodes every image once), Mandelbrot-style: one
// worker thread that sleeps until asked; a new request supersedes a pending one, and only the answer to the
// latest request is delivered (as a queued, value-type signal). Destroying the inspector waits a few seconds for a
// scan in progress, never for the scan of a huge folder: past that, the worker finishes on its own.
#pragma once

#include <QObject>
#include <QString>
#include <memory>
#include <thread>

#include "data/dataset.h"

namespace ampwb::ui {

struct InspectResult {
  QString root;
  QString text;  // DatasetReport::to_text()
  bool trainable = false;
  QString problem;                  // why not, when not trainable: the first reason, and how many more the report lists
  bool split_by_workbench = false;  // class folders: the validation fraction decides the split (else the data's own)
  int native_image_size = 0;
  int classes = 0;
  qint64 train_images = 0, validation_images = 0;  // those a run takes, within its limits
  qint64 train_images_before_limit = 0, validation_images_before_limit = 0;
  qint64 skipped = 0;  // files and folders passed over (not images, damaged), each named in the report
};

class DatasetInspector : public QObject {
  Q_OBJECT
 public:
  explicit DatasetInspector(QObject* parent = nullptr);
  ~DatasetInspector() override;

  void inspect(const QString& root, const DatasetOptions& options);
  bool busy() const;

 Q_SIGNALS:
  void started(const QString& root);
  void finished(const ampwb::ui::InspectResult& result);

 private:
  struct Shared;  // the request queue, shared with the worker thread (which may outlive this object)
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace ampwb::ui

Q_DECLARE_METATYPE(ampwb::ui::InspectResult)
