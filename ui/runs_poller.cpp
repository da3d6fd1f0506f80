// RunsPoller: one worker thread, woken for each poll, delivering back to the UI thread through its event queue.
#include "runs_poller.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace ampwb::ui {

struct RunsPoller::Shared {
  std::string location;
  std::mutex mutex;
  std::condition_variable wake;
  RunsPoller* receiver = nullptr;  // null once the poller is gone: nothing is delivered any more
  bool requested = false, reread = false, busy = false, stop = false;
  // What the last poll found, for deliver() on the UI thread.
  enum class Found { Nothing, Unchanged, Changed, Failed } found = Found::Nothing;
  std::vector<RunsModel::Row> rows;
  QString error;
  std::thread thread;
};

// The worker: its own store (opened at the first poll, again after an error), the last marker and rows it read.
void RunsPoller::follow(std::shared_ptr<Shared> shared) {
  std::unique_ptr<RunStore> store;
  std::optional<RunStore::ChangeMarker> last;
  std::vector<RunsModel::Row> rows;
  for (;;) {
    bool reread = false;
    {
      std::unique_lock lock(shared->mutex);
      shared->wake.wait(lock, [&] { return shared->requested || shared->stop; });
      if (shared->stop) return;
      shared->requested = false;
      reread = std::exchange(shared->reread, false);
    }
    auto found = Shared::Found::Unchanged;
    QString error;
    try {
      if (!store) store = std::make_unique<RunStore>(shared->location, RunStore::Mode::ReadOnly);
      const RunStore::ChangeMarker marker = store->change_marker();
      if (reread || !last || !(marker == *last)) {
        rows = RunsModel::read_rows(*store, reread ? std::vector<RunsModel::Row>{} : rows);
        last = marker;
        found = Shared::Found::Changed;
      }
    } catch (const std::exception& e) {  // a store busy or out of reach: opened again at the next poll
      store.reset();
      last.reset();
      error = QString::fromUtf8(e.what());
      found = Shared::Found::Failed;
    }
    std::lock_guard lock(shared->mutex);
    shared->busy = false;
    shared->found = found;
    shared->error = error;
    if (found == Shared::Found::Changed) shared->rows = rows;
    shared->wake.notify_all();
    // Posted under the lock, so the receiver cannot go meanwhile; one destroyed later takes its posted events along.
    if (RunsPoller* receiver = shared->receiver)
      QMetaObject::invokeMethod(
          receiver, [receiver] { receiver->deliver(); }, Qt::QueuedConnection);
  }
}

RunsPoller::RunsPoller(std::string location, QObject* parent) : QObject(parent), shared_(std::make_shared<Shared>()) {
  shared_->location = std::move(location);
  shared_->receiver = this;
  shared_->thread = std::thread(&RunsPoller::follow, shared_);
}

RunsPoller::~RunsPoller() {
  std::unique_lock lock(shared_->mutex);
  shared_->receiver = nullptr;
  shared_->stop = true;
  shared_->wake.notify_all();
  // A poll of SQLite ends within its busy timeout; one stuck on an unreachable server is left to end on its own.
  const bool ended = shared_->wake.wait_for(lock, std::chrono::seconds(2), [&] { return !shared_->busy; });
  lock.unlock();
  if (ended)
    shared_->thread.join();
  else
    shared_->thread.detach();
}

void RunsPoller::poll(bool reread) {
  std::lock_guard lock(shared_->mutex);
  if (shared_->busy) return;
  shared_->busy = true;
  shared_->requested = true;
  shared_->reread = reread;
  shared_->wake.notify_all();
}

bool RunsPoller::busy() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->busy;
}

void RunsPoller::deliver() {
  Shared::Found found;
  std::vector<RunsModel::Row> rows;
  QString error;
  {
    std::lock_guard lock(shared_->mutex);
    found = std::exchange(shared_->found, Shared::Found::Nothing);
    rows = std::move(shared_->rows);
    shared_->rows.clear();
    error = shared_->error;
  }
  if (found == Shared::Found::Changed && on_changed) on_changed(std::move(rows));
  if (found == Shared::Found::Failed && on_failed) on_failed(error);
  if (found == Shared::Found::Unchanged && on_unchanged) on_unchanged();
}

}  // namespace ampwb::ui
