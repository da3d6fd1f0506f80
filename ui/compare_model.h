// The side-by-side table of a comparison: one column per run; rows for the results (best, final and at-epoch
// metrics, time, speed-up against a chosen baseline) and for every setting. "Differences only" hides the rows
// where all runs agree.
#pragma once

#include <QAbstractTableModel>
#include <QStringList>
#include <vector>

#include "store/run_record.h"

namespace ampwb::ui {

class CompareModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  explicit CompareModel(QObject* parent = nullptr);

  // `histograms` (optional, one list per run) add what FP16 would lose of each run's last gradients.
  void set_runs(std::vector<RunRecord> records, std::vector<std::vector<EpochReport>> epochs,
                std::vector<std::vector<GradientHistogram>> histograms = {});
  void set_baseline(int index);  // the run speed-ups are measured against
  void set_at_epoch(int epoch);  // the epoch of the "at epoch" rows (0 = the last every run completed)
  void set_differences_only(bool on);
  bool differences_only() const { return differences_only_; }

  int baseline() const { return baseline_; }
  int at_epoch() const;  // resolved
  // Speed-up of run i against the baseline: its training images/s over the baseline's (0 when unknown).
  double speedup(int run) const;
  // The rows shown, for tests and export: (label, one value per run).
  QStringList row_labels() const;
  QString value(const QString& row_label, int run) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  struct Row {
    QString label;
    QStringList values;
    bool setting = false;
    bool differs = false;
  };
  void rebuild();
  std::vector<RunRecord> records_;
  std::vector<std::vector<EpochReport>> epochs_;
  std::vector<std::vector<GradientHistogram>> histograms_;
  std::vector<RunSummary> summaries_;
  std::vector<Row> rows_, shown_;
  int baseline_ = 0;
  int at_epoch_ = 0;
  bool differences_only_ = false;
};

}  // namespace ampwb::ui
