// The side-by-side table of a comparison: one column per run; the rows are the engine's (analysis/run_compare.h, the
// same `ampwb compare` prints): results (best, final and at-epoch metrics, time, speed-up against a chosen
// baseline) and every setting. "Differences only" hides the rows where all runs agree (of two runs or more: a single
// run's table shows every row).
#pragma once

#include <QAbstractTableModel>
#include <QStringList>
#include <vector>

#include "analysis/run_compare.h"

namespace ampwb::ui {

class CompareModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  explicit CompareModel(QObject* parent = nullptr);

  void set_runs(std::vector<ComparedRun> runs);
  void set_baseline(int index);  // the run speed-ups are measured against
  void set_at_epoch(int epoch);  // the epoch of the "at epoch" rows (0 = the last every run completed)
  void set_differences_only(bool on);
  bool differences_only() const { return differences_only_; }

  int baseline() const { return static_cast<int>(comparison_.baseline); }
  int at_epoch() const { return comparison_.at_epoch; }  // resolved
  // Speed-up of run i against the baseline (analysis/run_speed.h; unknown when either speed is).
  SpeedUp speedup(int run) const;
  // The rows shown, for tests and export: (label, one value per run).
  QStringList row_labels() const;
  QString value(const QString& row_label, int run) const;
  const Comparison& comparison() const { return comparison_; }  // every row, whatever is shown

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  void rebuild();
  std::vector<ComparedRun> runs_;
  CompareOptions options_;
  Comparison comparison_;
  std::vector<const CompareRow*> shown_;  // into comparison_.rows
  bool differences_only_ = false;
};

}  // namespace ampwb::ui
