// Follows a run store that other processes write into (a CLI `ampwb train`, a Slurm job's tasks, another window)
// through a StoreReader: each poll reads the store's change marker (RunStore::change_marker) and, only when it
// differs from the last one, the runs' rows. A poll still under way takes no other, and its error is delivered
// instead of rows.
#pragma once

#include <QObject>
#include <QString>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runs_model.h"

namespace ampwb::ui {

class StoreReader;

class RunsPoller : public QObject {
  Q_OBJECT
 public:
  // `location`: the store as it was opened (a PostgreSQL URI with its password, where it has one).
  explicit RunsPoller(std::string location, QObject* parent = nullptr);

  // Starts one poll, unless one is under way; `reread` reads the rows even when the marker has not changed.
  void poll(bool reread = false);
  bool busy() const;

  // Delivered on the UI thread (the poller's), at most once a poll.
  std::function<void(std::vector<RunsModel::Row> rows)> on_changed;
  std::function<void(const QString& error)> on_failed;
  std::function<void()> on_unchanged;

 private:
  struct Seen;  // the last marker and rows read: the reader thread's alone
  StoreReader* reader_ = nullptr;
  std::shared_ptr<Seen> seen_;
};

}  // namespace ampwb::ui
