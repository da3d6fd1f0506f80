// The sweeps view: the run store's sweeps (a chooser, newest first), the chosen sweep's points with their state, run
// and final validation accuracy, and its finished points grouped by everything but the seed (mean ± std over seeds).
// The points may be trained by other processes (`ampwb sweep --on local`, a Slurm job array's tasks on other
// machines), so while the view is shown it re-reads the store every kPollIntervalMs, on a thread of its own.
#pragma once

#include <QWidget>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "column_widths.h"
#include "store/run_store.h"
#include "sweep_results.h"

class QAction;
class QComboBox;
class QLabel;
class QSortFilterProxyModel;
class QTableView;
class QTableWidget;
class QTimer;

namespace ampwb::ui {

class StoreReader;
class SweepPointsModel;

class SweepView : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kPollIntervalMs = 2000;

  // `location`: the store as it was opened (a PostgreSQL URI with its password), for the reader that follows it.
  explicit SweepView(RunStore& store, QWidget* parent = nullptr, const std::string& location = {});

  void reload();                  // re-reads the sweeps and the chosen sweep's points
  void show_sweep(int64_t id);    // chooses the sweep (once it is in the store: the next reload finds it)
  int64_t current_sweep() const;  // 0 when the store has none
  const SweepResults& results() const;

  QComboBox* chooser() const { return chooser_; }
  SweepPointsModel* points_model() const { return model_; }
  QTableView* points_table() const { return table_; }
  QTableWidget* groups_table() const { return groups_; }
  QLabel* counts() const { return counts_; }
  // Disabled, its tooltip saying why, when nothing is left to cancel: no sweep, one cancelled, every point ended.
  QAction* cancel_action() const { return cancel_; }
  QAction* compare_action() const { return compare_; }

  // The sweep that this window's `ampwb sweep` process runs (0: none), and once its points have trained, how far its
  // timing in alternation has got ("round 2/6"; empty before). Its speed-ups are not final while that runs, and
  // Cancel stops the timing.
  void set_running_here(int64_t sweep_id, const QString& timing_progress);

  // Asks before cancelling a sweep; replaceable for tests.
  std::function<bool(const QString& question)> confirm;

 Q_SIGNALS:
  void open_requested(const std::vector<int64_t>& run_ids);  // the finished points' runs, for the Compare tab
  void cancel_requested(qint64 sweep_id);                    // confirmed: `ampwb sweep cancel` (its Slurm job too)
  void stop_timing_requested(qint64 sweep_id);  // confirmed: this window's `ampwb sweep` stops timing, keeping nothing
  void status_message(const QString& text);

 protected:
  void showEvent(QShowEvent* event) override;
  void hideEvent(QHideEvent* event) override;

 private:
  struct Reading {
    std::vector<SweepRecord> sweeps;
    SweepResults results;  // of the sweep chosen, else the newest
  };
  static Reading read(const RunStore& store, int64_t wanted);
  void follow();  // reload() on the reader's thread, while the view is shown
  void show_reading(const Reading& reading);
  void show_trouble(const QString& error);  // the last reading stays, the next may do
  void update_groups();
  void update_actions();

  RunStore& store_;
  StoreReader* reader_ = nullptr;  // follow()'s, on a connection of its own
  uint64_t reading_ = 0;           // counts the reads begun: a follow() read that is not the last is stale
  int64_t wanted_ = 0;  // the sweep chosen, kept across reloads
  QComboBox* chooser_ = nullptr;
  QLabel* counts_ = nullptr;
  QLabel* groups_title_ = nullptr;
  SweepPointsModel* model_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  ColumnWidths widths_;  // of table_
  QTableWidget* groups_ = nullptr;
  QTimer* poll_ = nullptr;
  QAction* cancel_ = nullptr;
  QAction* compare_ = nullptr;
  int64_t running_here_ = 0;  // set_running_here's
  QString timing_progress_;
  bool timing_here() const;  // the sweep shown has trained its points and is being timed by this window's process
};

}  // namespace ampwb::ui
