// A sweep's points as table rows: the point's number, its value of each varying setting, its state, its run and, once
// finished, its final validation accuracy. Re-read every few seconds by the sweep view: where the same points come
// back (the same sweep), their rows are updated in place so that a selection stays.
#pragma once

#include <QAbstractTableModel>

#include "sweep_results.h"

namespace ampwb::ui {

class SweepPointsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  static constexpr int kSortRole = Qt::UserRole;  // the raw value: numbers sort as numbers
  static constexpr int kRunRole = Qt::UserRole + 1;

  explicit SweepPointsModel(QObject* parent = nullptr);

  void set_results(const SweepResults& results);
  const SweepResults& results() const { return results_; }
  // The column of `header` ("state", "run", a varying setting), -1 when absent.
  int column_of(const QString& header) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  int dimensions() const { return static_cast<int>(results_.dimensions.size()); }
  SweepResults results_;
};

}  // namespace ampwb::ui
