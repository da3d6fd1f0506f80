// Follows a run store that other processes write into (a CLI `ampwb train`, a Slurm job's tasks, another window)
// from a thread of its own, on a connection of its own (a RunStore is one thread's at a time): each poll reads the
// store's change marker (RunStore::change_marker) and, only when it differs from the last one, the runs' rows.
// The UI thread never waits on the store, so a slow or unreachable PostgreSQL server leaves the window responsive:
// a poll still under way takes no other, and its error is delivered instead of rows.
#pragma once

#include <QObject>
#include <QString>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runs_model.h"

namespace ampwb::ui {

class RunsPoller : public QObject {
  Q_OBJECT
 public:
  // `location`: the store as it was opened (a PostgreSQL URI with its password, where it has one).
  explicit RunsPoller(std::string location, QObject* parent = nullptr);
  ~RunsPoller() override;  // waits a moment for a poll under way, then leaves it to end on its own

  // Starts one poll, unless one is under way; `reread` reads the rows even when the marker has not changed.
  void poll(bool reread = false);
  bool busy() const;

  // Delivered on the UI thread (the poller's), at most once a poll.
  std::function<void(std::vector<RunsModel::Row> rows)> on_changed;
  std::function<void(const QString& error)> on_failed;
  std::function<void()> on_unchanged;

 private:
  struct Shared;
  static void follow(std::shared_ptr<Shared> shared);  // the worker thread
  void deliver();
  std::shared_ptr<Shared> shared_;
};

}  // namespace ampwb::ui
