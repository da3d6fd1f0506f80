// A stored run, or two or more overlaid: every chart with one colour per run, the side-by-side table (differences
// only, at-epoch metrics, speed-up against a chosen baseline), each run's diagnosis (against that baseline), and
// runs grouped by any configuration key with mean ± std bands (by everything but the seed when only the seed
// differs). Loads from the run store; owns the loaded series.
#pragma once

#include <QWidget>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "run_series.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QResizeEvent;
class QScrollArea;
class QShowEvent;
class QTimer;
class QTabWidget;
class QTableView;
class QTableWidget;

namespace ampwb::ui {

class WholeNumberBox;
class ChartPanel;
class CompareModel;
class DiagnosisPanel;
class StoreReader;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  // `location`: the store as it was opened (a PostgreSQL URI with its password), for the reader that follows it.
  explicit CompareView(RunStore& store, QWidget* parent = nullptr, const std::string& location = {});

  // Loads the runs (throws ampwb::Error naming a missing one). One run is shown alone. Runs other than those shown
  // open on the layers' measure and the metrics' epoch ("last common") chosen for them, not on the last runs' choices.
  void set_runs(const std::vector<int64_t>& ids);
  void reload();  // the same runs, read again (one may have grown)
  const std::vector<int64_t>& run_ids() const { return ids_; }
  // The runs compared, the baseline chosen first: the order in which `ampwb report` and its HTML take them.
  std::vector<int64_t> run_ids_baseline_first() const;
  std::vector<size_t> colours_baseline_first() const;  // their colours (run_colour's index), in that order
  const std::vector<std::unique_ptr<RunSeries>>& series() const { return series_; }

  ChartPanel* charts() const { return charts_; }
  CompareModel* table_model() const { return model_; }
  QCheckBox* differences_only() const { return differences_; }
  QComboBox* baseline() const { return baseline_; }
  DiagnosisPanel* diagnosis() const { return diagnosis_; }
  // The side-by-side table, the diagnosis and, while the charts are grouped, the groups' results.
  QTabWidget* details() const { return details_; }
  // Each group of the "Group by" choice with the mean ± std over its runs of their results, as `ampwb compare
  // --group-by` prints them.
  QTableWidget* groups() const { return groups_; }
  bool seed_only() const { return seed_only_; }
  // Each run's step time by class against the baseline's, in a sentence (analysis/time_comparison.h).
  QLabel* time_summary() const { return time_; }

 protected:
  void showEvent(QShowEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  // While the tab is shown, every 3 s: reads the runs again where one is still training (in a CLI or another
  // window) or was renamed, tagged or noted elsewhere, and drops a run deleted elsewhere, saying so in the title.
  void follow_store();
  void load(const std::vector<int64_t>& ids);  // set_runs keeping the runs dropped and the choices made
  // What the comparison shows of each run, read in one go; why a run's diagnosis could not be read, or empty.
  struct ReadRuns {
    std::vector<RunEvidence> runs;
    std::vector<QString> diagnosis_errors;
  };
  static ReadRuns read_runs(const RunStore& store, const std::vector<int64_t>& ids);
  void show_runs(ReadRuns read);
  // A compared run's row as far as the comparison shows it: what changes there makes it read the runs again.
  static std::string stamp(const RunRecord& r);
  void update_summary();
  void update_time();
  void update_groups();
  void fit_speed_lines();  // the speed lines' area as high as their lines
  RunStore& store_;
  StoreReader* reader_ = nullptr;  // follow_store's, on a connection of its own
  uint64_t reading_ = 0;           // counts the reads begun: a follow_store read that is not the last is stale
  std::vector<int64_t> ids_;
  std::vector<std::unique_ptr<RunSeries>> series_;
  std::vector<std::string> stamps_;  // stamp() of each run, as last read
  QStringList dropped_;              // the runs deleted (here or elsewhere) since the user chose these, by their labels
  bool seed_only_ = false;
  ChartPanel* charts_ = nullptr;
  CompareModel* model_ = nullptr;
  QTableView* table_ = nullptr;
  QTabWidget* details_ = nullptr;
  DiagnosisPanel* diagnosis_ = nullptr;
  QTableWidget* groups_ = nullptr;
  QCheckBox* differences_ = nullptr;
  QComboBox* baseline_ = nullptr;
  QTimer* follow_ = nullptr;
  WholeNumberBox* at_epoch_ = nullptr;
  QLabel* title_ = nullptr;
  QLabel* summary_ = nullptr;
  QLabel* time_ = nullptr;
  QScrollArea* speed_lines_ = nullptr;  // summary_ and time_, scrolling past four lines
};

}  // namespace ampwb::ui
