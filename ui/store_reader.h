// Reads a run store from a thread of its own, on a connection of its own (a RunStore is one thread's at a time), so
// the UI thread never waits on the store: a slow or unreachable PostgreSQL server leaves the window responsive.
// One read at a time; what it found is handed back on the UI thread.
//
//   auto found = std::make_shared<std::vector<RunRecord>>();
//   reader->start([found](RunStore& store) { *found = store.runs(); },          // on the reader's thread
//                 [found](const QString& error) { if (error.isEmpty()) show(*found); });  // on the UI thread
#pragma once

#include <QObject>
#include <QString>
#include <functional>
#include <memory>
#include <string>

#include "store/run_store.h"

namespace ampwb::ui {

class StoreReader : public QObject {
  Q_OBJECT
 public:
  // `location`: the store as it was opened (a PostgreSQL URI with its password, where it has one).
  explicit StoreReader(std::string location, QObject* parent = nullptr);
  ~StoreReader() override;  // waits half a second for a read under way, then leaves it to end on its own

  // Runs `read` on the reader's store (opened read-only at the first read, and again after one that threw), then
  // `done` on this object's thread with what `read` threw, empty when nothing. `read` may outlive the caller (a read
  // stuck on a server is left behind): it holds what it fills by shared pointer, never the caller itself. Refused
  // (false) while an earlier read's `done` has not run yet: the caller reads again at its next turn.
  bool start(std::function<void(RunStore&)> read, std::function<void(const QString& error)> done);
  bool busy() const { return static_cast<bool>(done_); }

 private:
  struct Shared;
  static void work(std::shared_ptr<Shared> shared);  // the reader's thread
  void deliver();
  std::shared_ptr<Shared> shared_;
  std::function<void(const QString&)> done_;  // the read under way's, until it is delivered
};

}  // namespace ampwb::ui
