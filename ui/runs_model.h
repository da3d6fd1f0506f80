// Every stored run as a table row: name, date, dataset, depth, precision, device, status, best validation
// accuracy, time, whether it kept its final weights. Display text for the view; Qt::UserRole holds the raw value
// (numbers, ISO dates) so a QSortFilterProxyModel sorts numerically. Reloaded from the run store on demand.
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
    Weights,  // "yes" where the run kept its final weights (store/final_weights.h)
    Tags,
    ColumnCount
  };
  static constexpr int kSortRole = Qt::UserRole;
  static constexpr int kIdRole = Qt::UserRole + 1;

  explicit RunsModel(QObject* parent = nullptr);

  void reload(const RunStore& store);
  int64_t run_id(int row) const;
  const RunRecord& record(int row) const { return rows_[static_cast<size_t>(row)].record; }
  const RunSummary& summary(int row) const { return rows_[static_cast<size_t>(row)].summary; }
  int row_of(int64_t run_id) const;  // -1 when absent

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  struct Row {
    RunRecord record;
    RunSummary summary;
    bool resumable = false;  // a checkpoint continues it (ampwb train --resume, the Resume action)
  };
  std::vector<Row> rows_;
};

}  // namespace ampwb::ui
