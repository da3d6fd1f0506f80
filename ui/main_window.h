// The main window: the run-setup panel in a dock, and four tabs (Training: run controls and live charts; Runs:
// the run store's table; Sweeps: the store's sweeps and their points, live; Compare: stored runs overlaid). It wires
// these together and owns the training session, the run store connection of the UI thread and the precision sweep;
// the work itself lives in those classes.
#pragma once

#include <QMainWindow>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "run_series.h"
#include "sweep.h"
#include "sweep_command_line.h"
#include "sweep_timing.h"
#include "train/run_progress.h"
#include "train/scale_collapse.h"
#include "training_session.h"

class QAction;
class QProcess;
class QTabWidget;
class QTimer;
class QDockWidget;
class QLabel;

namespace ampwb::ui {

class ChartPanel;
class CompareView;
class RunControls;
class RunSetupPanel;
class RunsView;
class SweepView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // Opens (creating if needed) the run store at db_path; throws ampwb::Error when it cannot be used. A store this
  // user may only read opens read-only: its runs are shown, while Train, Resume and the sweeps say why not.
  explicit MainWindow(const QString& db_path, QWidget* parent = nullptr);
  ~MainWindow() override;

  // What the controls and menus do, callable directly (tests, the screenshot scenario).
  bool start_training();  // Train: the setup panel's configuration; false (and a message) when refused
  void toggle_pause();
  void stop_training();
  void start_sweep(const TrainConfig& base, const std::vector<SweepVariant>& variants);
  void show_sweep_dialog(bool seed_article_preset = false);
  // A grid beyond precisions, or one on Slurm: `ampwb sweep ... --db <this store> --on local|slurm` as a child
  // process, its sweep shown in the Sweeps tab once recorded. Returns why not (empty when it started); what the
  // child says when it fails comes in a message and cli_sweep_ended.
  QString start_cli_sweep(const TrainConfig& base, const SweepPlan& plan);
  bool cli_sweep_running() const { return sweep_process_ != nullptr; }
  // `ampwb sweep cancel ID` (scancel for a Slurm sweep), waited for; returns what it said when it failed.
  QString cancel_cli_sweep(int64_t sweep_id);
  // The ampwb the sweep's child runs: this program by default; tests name the CLI.
  void set_sweep_executable(QString path) { sweep_executable_ = std::move(path); }
  // Continues a stopped or interrupted run from its checkpoint, recorded into the same row; returns why not
  // (empty when it started). data_folder: where the run's dataset folder is now, if it moved (the same files, as
  // its fingerprint checks); empty: where the run had it. resume_run_interactive() asks for the folder where the
  // run's is not there any more, and says why not in a message box.
  QString resume_run(int64_t id, const QString& data_folder = {});
  void resume_run_interactive(int64_t id);
  bool open_runs(const std::vector<int64_t>& ids);  // in the Compare tab; false where they cannot be read
  QStringList export_csv(const std::vector<int64_t>& ids, const QString& folder);  // throws on failure
  void save_report(const std::vector<int64_t>& ids, const QString& file);          // HTML (ampwb report); throws
  // The runs a File menu action acts on: the Compare tab's (its baseline first, as a report takes it), else those
  // selected in the Runs view (the Compare tab's order where it compares the same runs, else by number), else the
  // live one.
  std::vector<int64_t> chosen_runs() const;
  // Quit without asking (a logout's SIGTERM, a closed terminal's SIGHUP): a run training stops after its step, as
  // Quit's Yes does, and every window closes.
  void quit_without_asking();

  RunSetupPanel* setup() const { return setup_; }
  RunControls* controls() const { return controls_; }
  ChartPanel* live_charts() const { return live_charts_; }
  RunsView* runs_view() const { return runs_view_; }
  CompareView* compare_view() const { return compare_; }
  SweepView* sweep_view() const { return sweep_view_; }
  QTabWidget* tabs() const { return tabs_; }
  TrainingSession* session() const { return session_; }
  const RunSeries* live_run() const { return live_.get(); }
  const QString& db_path() const { return db_path_; }

 Q_SIGNALS:
  void run_finished(qint64 run_id, int status);  // status: ampwb::RunStatus
  void sweep_finished(const std::vector<int64_t>& run_ids);
  void cli_sweep_started(qint64 sweep_id);
  // The sweep's child ended: its exit code and, when it failed, what it said, in the user's words.
  void cli_sweep_ended(qint64 sweep_id, int exit_code, const QString& message);

 protected:
  void closeEvent(QCloseEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void build_menus();
  bool reading_tab() const;     // Runs or Compare: the tabs that read stored runs rather than start them
  void place_setup_panel();     // the Run setup panel shown or hidden as the user last had it on this kind of tab
  void tell_of_runs_cut_off();  // in the status line, the runs the store found cut off as it opened
  // Starts a run; returns why not (empty when it started).
  // `processes` > 1: the run on that many processes of mpirun (`ampwb train --processes`), followed from its output.
  QString start_config(TrainConfig config, int64_t continue_run, std::unique_ptr<RunSeries> prefilled,
                       int processes = 1);
  void start_next_sweep_run();
  void restore_panel_after_sweep();
  bool restore_panel_after_resume();  // whether there was one to restore
  QString sweep_outcome(
      const std::vector<int64_t>& ids) const;  // the settings the panel showed before the sweep loaded each of its runs
  void time_sweep(const std::vector<int64_t>& ids);    // its configurations in alternation, then finish_sweep
  // Opens the comparison and says what the sweep did: its runs, those it never started, why it was not timed.
  void finish_sweep(const std::vector<int64_t>& ids, const QString& not_timed_because = {});
  bool busy() const;                                   // a run trains, or a sweep is being timed
  QString train_problem() const;  // why Train waits: the store cannot be written, or the setup's problem; empty if not
  QString sweep_process_problem() const;  // why no run may start beside the `ampwb sweep` started here; empty if none
  void update_train_blocked();
  void on_events(const EventBatch& batch);
  void label_live_run();
  void on_finished(qint64 run_id, const RunEnd& end, const QString& store_error);
  // Feeds the batch's steps and overflow reports to the watch; a collapse shows the banner, naming the layers.
  void update_collapse_alarm(const EventBatch& batch);
  void export_charts_of_runs(const std::vector<int64_t>& ids);  // opened in the Compare tab, then exported
  void export_charts_of_current_tab();
  void export_csv_interactive(std::vector<int64_t> ids);
  void save_report_interactive(std::vector<int64_t> ids);
  void update_actions();
  void read_sweep_output();
  void sweep_process_ended();
  void show_status(const QString& text, int timeout_ms = 0);
  // Shows, beside the store's path, where run names, their datasets or the inspected dataset hold characters no
  // installed font draws (missing_glyphs.h).
  void update_font_warning();
  std::string checkpoint_folder() const;
  // While the Training tab shows a run that ended resumable, every 3 s: where another process resumed it (ampwb
  // train --resume) or deleted it, the tab says so instead of offering it as resumable still.
  void follow_last_run();
  void preview_next_run();
  void forget_deleted_run();

  QString db_path_;
  std::unique_ptr<RunStore> store_;  // the UI thread's connection (the session opens its own)
  QString read_only_;                // why nothing can be recorded in the store; empty where it can
  TrainingSession* session_ = nullptr;
  Sweep sweep_;
  std::optional<TrainConfig> panel_before_sweep_;
  // What the Run setup panel held before a resumed run loaded its settings there: the user's again when it ends,
  // so that the next Train is not the resumed run's settings unasked.
  struct PanelSettings {
    TrainConfig config;
    int processes = 1;
  };
  std::optional<PanelSettings> panel_before_resume_;
  std::unique_ptr<SweepTiming> sweep_timing_;
  std::map<int, MachineLoad> epoch_loads_;  // the live run's, by epoch: one batch of events may hold several epochs
  std::unique_ptr<RunSeries> live_;
  // What the Training tab showed before a start the data may still refuse (a batch larger than its images): shown
  // again then, not lost to empty charts; dropped once the run starts.
  std::optional<RunSeries> before_start_;
  bool quitting_without_asking_ = false;
  bool live_in_child_ = false;  // the live run trains on many processes: its details come from the store at its end
  RunProgress progress_;
  ScaleCollapseWatch collapse_watch_;  // the live run's alarm (the diagnosis' scale_collapse rule, while it trains)
  std::string checkpoint_dir_;         // of the current run, removed when it finishes
  QTimer* follow_last_run_ = nullptr;  // runs follow_last_run() while the last run may go on elsewhere
  double last_run_seconds_ = 0;        // its wall time when it ended here

  RunSetupPanel* setup_ = nullptr;
  QLabel* font_warning_ = nullptr;  // hidden while every character is drawn
  QTimer* font_check_ = nullptr;    // update_font_warning() once for a burst of changes
  QDockWidget* setup_dock_ = nullptr;
  int setup_width_ = 0;  // the setup dock's width as laid out first or as the user dragged it, given back on a resize
  QSize laid_out_size_;  // the window's size at its last resizeEvent: a dock resized at another is the user's drag
  // Whether the user wants the Run setup panel beside the tabs that start runs (Training, Sweeps) and beside those
  // that read stored runs (Runs, Compare), which otherwise get its width for their tables and charts.
  bool setup_beside_starting_ = true;
  bool setup_beside_reading_ = false;
  bool placing_setup_ = false;  // the panel shown or hidden for a tab, not by the user
  RunControls* controls_ = nullptr;
  ChartPanel* live_charts_ = nullptr;
  RunsView* runs_view_ = nullptr;
  CompareView* compare_ = nullptr;
  SweepView* sweep_view_ = nullptr;
  QProcess* sweep_process_ = nullptr;  // `ampwb sweep` while it runs
  QString sweep_executable_;
  QString sweep_output_, sweep_errors_;
  qint64 cli_sweep_id_ = 0;
  bool cli_sweep_on_slurm_ = false;
  QTabWidget* tabs_ = nullptr;
  QWidget* training_tab_ = nullptr;
  QAction* train_action_ = nullptr;
  QAction* pause_action_ = nullptr;
  QAction* stop_action_ = nullptr;
  QAction* sweep_action_ = nullptr;
  QAction* paddle_sweep_action_ = nullptr;
};

}  // namespace ampwb::ui
