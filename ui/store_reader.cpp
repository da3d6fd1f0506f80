// StoreReader: one worker thread, woken for each read, delivering back to the UI thread through its event queue.
#include "store_reader.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

namespace ampwb::ui {

struct StoreReader::Shared {
  std::string location;
  std::mutex mutex;
  std::condition_variable wake;
  StoreReader* receiver = nullptr;      // null once the reader is gone: nothing is delivered any more
  std::function<void(RunStore&)> read;  // the read asked for, until the worker takes it
  bool reading = false, stop = false;
  QString error;  // what the last read threw
  std::thread thread;
};

void StoreReader::work(std::shared_ptr<Shared> shared) {
  std::unique_ptr<RunStore> store;
  for (;;) {
    std::function<void(RunStore&)> read;
    {
      std::unique_lock lock(shared->mutex);
      shared->wake.wait(lock, [&] { return shared->read || shared->stop; });
      if (shared->stop) return;
      read = std::exchange(shared->read, nullptr);
      shared->reading = true;
    }
    QString error;
    try {
      if (!store) store = std::make_unique<RunStore>(shared->location, RunStore::Mode::ReadOnly);
      read(*store);
    } catch (const std::exception& e) {  // a store busy or out of reach: opened again at the next read
      store.reset();
      error = QString::fromUtf8(e.what());
      if (error.isEmpty()) error = QStringLiteral("the run store could not be read");
    } catch (...) {
      store.reset();
      error = QStringLiteral("the run store could not be read");
    }
    read = nullptr;
    std::lock_guard lock(shared->mutex);
    shared->reading = false;
    shared->error = error;
    shared->wake.notify_all();
    // Posted under the lock, so the receiver cannot go meanwhile; one destroyed later takes its posted events along.
    if (StoreReader* receiver = shared->receiver)
      QMetaObject::invokeMethod(
          receiver, [receiver] { receiver->deliver(); }, Qt::QueuedConnection);
  }
}

StoreReader::StoreReader(std::string location, QObject* parent) : QObject(parent), shared_(std::make_shared<Shared>()) {
  shared_->location = std::move(location);
  shared_->receiver = this;
  shared_->thread = std::thread(&StoreReader::work, shared_);
}

StoreReader::~StoreReader() {
  std::unique_lock lock(shared_->mutex);
  shared_->receiver = nullptr;
  shared_->stop = true;
  shared_->wake.notify_all();
  // A read of SQLite ends within moments; one stuck on an unreachable server is left to end on its own (a read holds
  // nothing of its caller's), so that a window closing with a hung server waits for none of its readers long.
  const bool ended = shared_->wake.wait_for(lock, std::chrono::milliseconds(500), [&] { return !shared_->reading; });
  lock.unlock();
  if (ended)
    shared_->thread.join();
  else
    shared_->thread.detach();
}

bool StoreReader::start(std::function<void(RunStore&)> read, std::function<void(const QString& error)> done) {
  if (busy()) return false;
  done_ = done ? std::move(done) : [](const QString&) {};
  std::lock_guard lock(shared_->mutex);
  shared_->read = std::move(read);
  shared_->wake.notify_all();
  return true;
}

void StoreReader::deliver() {
  QString error;
  {
    std::lock_guard lock(shared_->mutex);
    error = shared_->error;
  }
  std::exchange(done_, nullptr)(error);
}

}  // namespace ampwb::ui
