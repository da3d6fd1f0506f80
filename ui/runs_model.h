// Every stored run as a table row: name, date, dataset, depth, precision, device, status, best validation
// accuracy, time, whether it kept its final weights. Display text for the view; Qt::UserRole holds the raw value
// (numbers, ISO dates) so a QSortFilterProxyModel sorts numerically. Reloaded from the run store on demand, or
// updated run by run from rows read elsewhere (RunsPoller).
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "store/run_record.h"
#include "store/run_store.h"

namespace ampwb::ui {

class RunsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Id,
    Name,
    Date,
    Dataset,
    Depth,
    Precision,
    Device,
    Status,
    BestAccuracy,
    Time,
    Weights,  // "yes" where the run kept its final weights, "missing" where their file is gone (store/final_weights.h)
    Tags,
    ColumnCount
  };
  static constexpr int kSortRole = Qt::UserRole;
  static constexpr int kIdRole = Qt::UserRole + 1;
  // What the filter matches: the text shown, a run's notes, and for a stopped run the CLI's word for it too
  // ("cancelled").
  static constexpr int kFilterRole = Qt::UserRole + 2;

  // A run as the table shows it: its record, its summary, and whether a checkpoint continues it.
  struct Row {
    RunRecord record;
    RunSummary summary;
    std::string resume_refusal;  // why Resume cannot continue it (store/run_resume.h); empty: a checkpoint can
    std::string weights;     // final_weights_state: "yes", "missing" or "", read with the row (not at each paint)
  };

  explicit RunsModel(QObject* parent = nullptr);

  // Every run of `store`, oldest first. A run whose row in `previous` is as recorded now (the same update time, wall
  // time and status) keeps that row's summary and resumability instead of re-reading them: a store following a
  // live run re-reads that run only. Touches no Qt object: any thread may call it with a store of its own.
  static std::vector<Row> read_rows(const RunStore& store, const std::vector<Row>& previous = {});
  void reload(const RunStore& store);  // everything read again
  // `rows` in place of the current ones, run by run: a run kept keeps its row (a view's selection, sort order and
  // scroll position stay) and says it changed only when it did, a new run is added, a run gone is removed.
  void set_rows(std::vector<Row> rows);
  const std::vector<Row>& rows() const { return rows_; }
  int64_t run_id(int row) const;
  const RunRecord& record(int row) const { return rows_[static_cast<size_t>(row)].record; }
  const RunSummary& summary(int row) const { return rows_[static_cast<size_t>(row)].summary; }
  int row_of(int64_t run_id) const;  // -1 when absent
  // This window's own run (0: none) and whether it is paused, shown at once: the store records a pause or a
  // resume only once the training thread reaches it.
  void set_live_pause(int64_t run_id, bool paused);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<Row> rows_;
  int64_t live_run_ = 0;
  bool live_paused_ = false;
};

}  // namespace ampwb::ui
