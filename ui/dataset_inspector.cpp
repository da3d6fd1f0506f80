// DatasetInspector: the worker loop and the hand-back to the UI thread.
#include "dataset_inspector.h"

#include <QMetaObject>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "store/dataset_fingerprint.h"

namespace ampwb::ui {

struct DatasetInspector::Shared {
  struct Request {
    QString root;
    DatasetOptions options;
    uint64_t generation = 0;
  };
  std::mutex mutex;
  std::condition_variable wake;
  std::optional<Request> pending;
  uint64_t generation = 0;
  bool working = false, exited = false;
  DatasetInspector* owner = nullptr;  // nullptr once the inspector is gone: the worker then quits

  void loop();
};

DatasetInspector::DatasetInspector(QObject* parent) : QObject(parent), shared_(std::make_shared<Shared>()) {
  qRegisterMetaType<InspectResult>();
  shared_->owner = this;
  thread_ = std::thread([shared = shared_] {
    shared->loop();
    std::lock_guard lock(shared->mutex);
    shared->exited = true;
    shared->wake.notify_all();
  });
}

DatasetInspector::~DatasetInspector() {
  std::unique_lock lock(shared_->mutex);
  shared_->owner = nullptr;
  shared_->pending.reset();
  shared_->wake.notify_all();
  // A usual scan ends in well under a second (checked files are cached); a first scan of a huge folder may not.
  const bool exited = shared_->wake.wait_for(lock, std::chrono::seconds(3), [this] { return shared_->exited; });
  lock.unlock();
  if (exited)
    thread_.join();
  else
    thread_.detach();  // it quits after its scan; the shared state lives until then
}

void DatasetInspector::inspect(const QString& root, const DatasetOptions& options) {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->pending = Shared::Request{root, options, ++shared_->generation};
  }
  shared_->wake.notify_all();
  Q_EMIT started(root);
}

bool DatasetInspector::busy() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->working || shared_->pending.has_value();
}

void DatasetInspector::Shared::loop() {
  for (;;) {
    Request request;
    {
      std::unique_lock lock(mutex);
      working = false;
      wake.wait(lock, [this] { return !owner || pending.has_value(); });
      if (!owner) return;
      request = std::move(*pending);
      pending.reset();
      working = true;
    }
    InspectResult result;
    result.root = request.root;
    try {
      const Dataset dataset = Dataset::inspect(request.root.toStdString(), request.options);
      DatasetReport report = dataset.report();
      // The fingerprint runs record (ampwb show, compare, dataset inspect), not the scan cache's key.
      report.fingerprint = dataset_fingerprint(report.root);
      result.text = QString::fromStdString(report.to_text());
      result.trainable = report.trainable();
      if (!report.errors.empty()) {
        result.problem = QString::fromStdString(report.errors.front());
        if (report.errors.size() > 1)
          result.problem += QObject::tr(" (and %1 more: see the report)").arg(report.errors.size() - 1);
      }
      result.split_by_workbench = report.layout == "class-folders";
      result.classes = static_cast<int>(report.classes.size());
      result.train_images = report.train_images;
      result.validation_images = report.validation_images;
      result.train_images_before_limit = report.train_images_before_limit;
      result.skipped = static_cast<qint64>(report.skipped.size());
      result.validation_images_before_limit = report.validation_images_before_limit;
      if (result.trainable) result.native_image_size = dataset.native_image_size();
    } catch (const std::exception& e) {  // inspect() reports rather than throws; anything else lands here
      result.text = result.problem = QString::fromUtf8(e.what());
    }
    // Posted under the lock, so the owner cannot be destroyed in between (and ~QObject drops the posted call).
    // Only the answer to the newest request is worth showing.
    std::lock_guard lock(mutex);
    if (owner && request.generation == generation)
      QMetaObject::invokeMethod(
          owner, [o = owner, result] { Q_EMIT o->finished(result); }, Qt::QueuedConnection);
  }
}

}  // namespace ampwb::ui
