// MainWindow: layout, menus, and the wiring between the setup panel, the training session, the live charts, the
// runs view, the comparison and the sweep.
#include "main_window.h"

#include <algorithm>

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDir>
#include <QDockWidget>
#include <QFileInfo>
#include <QKeySequence>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QResizeEvent>
#include <QScopedValueRollback>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QStyle>
#include <QTabBar>
#include <QTabWidget>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>
#include <cmath>
#include <csignal>
#include <filesystem>

#include "about.h"
#include "analysis/csv_export.h"
#include "analysis/report_text.h"
#include "analysis/run_report.h"
#include "analysis/run_speed.h"
#include "chart_panel.h"
#include "compare_view.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/setting_error.h"
#include "file_dialogs.h"
#include "missing_glyphs.h"
#include "plain_text.h"
#include "run_controls.h"
#include "run_setup_panel.h"
#include "runs_view.h"
#include "store/run_resume.h"
#include "store/store_location.h"
#include "sweep_dialog.h"
#include "sweep_view.h"
#include "workbench_store.h"

namespace ampwb::ui {
namespace {

// Its numbers in the engine's text forms (printf's rounding), so that they read as `ampwb train` and `show` print them:
// Qt rounds an exact tie such as 28.125 up where printf rounds it to even.
QString epoch_line(const EpochReport& e, int epochs) {
  const auto text = [](const std::string& s) { return QString::fromStdString(s); };
  QString validation = QObject::tr("no validation images");
  if (std::isfinite(e.validation_accuracy) && e.topk > 0)
    validation = QObject::tr("validation accuracy %1 (top-%2 %3)")
                     .arg(text(percent_text(e.validation_accuracy)))
                     .arg(e.topk)
                     .arg(text(percent_text(e.validation_topk)));
  else if (std::isfinite(e.validation_accuracy))
    validation = QObject::tr("validation accuracy %1").arg(text(percent_text(e.validation_accuracy)));
  return QObject::tr("Epoch %1/%2: train loss %3, %4, %5 s, %6 images/s%7")
      .arg(e.epoch)
      .arg(epochs)
      .arg(text(fixed_text(e.train_loss, 4)))
      .arg(validation)
      .arg(text(fixed_text(e.seconds, 1)))
      .arg(text(fixed_text(e.images_per_second, 0)))
      .arg(e.skipped_steps ? QObject::tr(", %1 skipped steps").arg(e.skipped_steps) : QString());
}

}  // namespace

MainWindow::MainWindow(const QString& db_path, QWidget* parent) : QMainWindow(parent), db_path_(db_path) {
  setObjectName("mainWindow");
  setWindowTitle(tr("AMP Workbench"));
  store_ = open_workbench_store(db_path);
  read_only_ = read_only_reason(*store_);
  if (!read_only_.isEmpty()) setWindowTitle(tr("AMP Workbench (read-only run store)"));
  session_ = new TrainingSession(db_path, this);
  connect(session_, &TrainingSession::events, this, &MainWindow::on_events);
  connect(session_, &TrainingSession::finished, this, &MainWindow::on_finished);
  follow_last_run_ = new QTimer(this);
  follow_last_run_->setInterval(3000);
  connect(follow_last_run_, &QTimer::timeout, this, &MainWindow::follow_last_run);

  setup_ = new RunSetupPanel;
  auto* scroll = new QScrollArea;
  scroll->setWidget(setup_);
  scroll->setWidgetResizable(true);
  // As wide as the panel asks where there is room; on a small screen it narrows and scrolls rather than widen the
  // window.
  const int setup_width =
      setup_->sizeHint().width() + style()->pixelMetric(QStyle::PM_ScrollBarExtent) + 2 * scroll->frameWidth();
  scroll->setMinimumWidth(std::min(setup_width, 240));
  setup_dock_ = new QDockWidget(tr("Run setup"));
  setup_dock_->setObjectName("setupDock");
  setup_dock_->setWidget(scroll);
  setup_dock_->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable |
                           QDockWidget::DockWidgetClosable);
  addDockWidget(Qt::LeftDockWidgetArea, setup_dock_);
  setup_width_ = setup_width;
  setup_dock_->installEventFilter(this);

  controls_ = new RunControls;
  connect(controls_, &RunControls::train_clicked, this, &MainWindow::start_training);
  connect(controls_, &RunControls::pause_clicked, this, &MainWindow::toggle_pause);
  connect(controls_, &RunControls::stop_clicked, this, &MainWindow::stop_training);
  update_train_blocked();
  connect(setup_, &RunSetupPanel::dataset_problem_changed, this, &MainWindow::update_train_blocked);
  connect(setup_, &RunSetupPanel::settings_problem_changed, this, &MainWindow::update_train_blocked);
  // A folder checked again may be the fix of a refused start even where the panel saw no problem before it.
  connect(setup_, &RunSetupPanel::dataset_inspected, this, &MainWindow::update_train_blocked);
  live_charts_ = new ChartPanel;
  live_charts_->setObjectName("liveCharts");
  connect(live_charts_, &ChartPanel::status_message, this, [this](const QString& t) { show_status(t, 5000); });
  training_tab_ = new QWidget;
  auto* tl = new QVBoxLayout(training_tab_);
  tl->setContentsMargins(0, 0, 0, 0);
  tl->addWidget(controls_);
  tl->addWidget(live_charts_, 1);

  runs_view_ = new RunsView(*store_, nullptr, db_path.toStdString());
  connect(runs_view_, &RunsView::open_requested, this, &MainWindow::open_runs);
  connect(runs_view_, &RunsView::resume_requested, this, &MainWindow::resume_run_interactive);
  connect(runs_view_, &RunsView::export_csv_requested, this, &MainWindow::export_csv_interactive);
  connect(runs_view_, &RunsView::export_charts_requested, this, &MainWindow::export_charts_of_runs);
  connect(runs_view_, &RunsView::status_message, this, [this](const QString& t) { show_status(t, 5000); });
  compare_ = new CompareView(*store_, nullptr, db_path.toStdString());
  connect(compare_->charts(), &ChartPanel::status_message, this, [this](const QString& t) { show_status(t, 5000); });

  tabs_ = new QTabWidget;
  tabs_->setObjectName("tabs");
  tabs_->setDocumentMode(true);
  tabs_->addTab(training_tab_, tr("Training"));
  tabs_->addTab(runs_view_, tr("Runs"));
  sweep_view_ = new SweepView(*store_, nullptr, db_path.toStdString());
  connect(sweep_view_, &SweepView::open_requested, this, &MainWindow::open_runs);
  connect(sweep_view_, &SweepView::status_message, this, [this](const QString& t) { show_status(t, 5000); });
  connect(sweep_view_, &SweepView::cancel_requested, this, [this](qint64 id) {
    if (const QString why = cancel_cli_sweep(id); !why.isEmpty())
      plain_message(this, QMessageBox::Warning, tr("Cancel the sweep"), why);
  });
  connect(sweep_view_, &SweepView::stop_timing_requested, this, [this](qint64 id) {
    // As Ctrl-C on `ampwb sweep` while it times: it stops between two turns and records nothing.
    if (sweep_process_ && id == cli_sweep_id_) ::kill(static_cast<pid_t>(sweep_process_->processId()), SIGINT);
  });
  tabs_->addTab(compare_, tr("Compare"));
  tabs_->addTab(sweep_view_, tr("Sweeps"));
  setCentralWidget(tabs_);
  // The pages' tabs above the setup panel, not beside it: the panel comes and goes with the page, and tabs that
  // moved with it were clicked where another tab had just been.
  auto* pages = new QTabBar;
  pages->setObjectName("pageTabs");
  pages->setDocumentMode(true);
  pages->setExpanding(false);
  for (int i = 0; i < tabs_->count(); ++i) pages->addTab(tabs_->tabText(i));
  tabs_->tabBar()->hide();
  auto* page_bar = new QToolBar(tr("Pages"));
  page_bar->setObjectName("pageBar");
  page_bar->setMovable(false);
  page_bar->setFloatable(false);
  page_bar->toggleViewAction()->setVisible(false);  // no menu entry hides the pages
  page_bar->addWidget(pages);
  addToolBar(Qt::TopToolBarArea, page_bar);
  connect(pages, &QTabBar::currentChanged, tabs_, &QTabWidget::setCurrentIndex);
  connect(tabs_, &QTabWidget::currentChanged, pages, &QTabBar::setCurrentIndex);
  connect(tabs_, &QTabWidget::currentChanged, this, [this](int) {
    if (tabs_->currentWidget() == runs_view_) runs_view_->reload();
    place_setup_panel();
  });

  // A PostgreSQL URI may hold a password, which libpq alone sees.
  const QString store_shown =
      QDir::toNativeSeparators(QString::fromStdString(location_without_password(db_path.toStdString())));
  auto* store_label =
      new QLabel(read_only_.isEmpty() ? tr("Runs: %1").arg(store_shown) : tr("Runs: %1 (read-only)").arg(store_shown));
  store_label->setObjectName("storePath");
  store_label->setTextFormat(Qt::PlainText);  // a path, shown as written
  statusBar()->addPermanentWidget(store_label);
  // A message (a warning, an epoch's timing) takes the whole bar while it lasts; the store's path comes back after.
  connect(statusBar(), &QStatusBar::messageChanged, store_label,
          [store_label](const QString& message) { store_label->setVisible(message.isEmpty()); });
  // One longer than the bar is cut at its edge: the pointer on the bar reads all of it.
  connect(statusBar(), &QStatusBar::messageChanged, this, [this](const QString& message) {
    statusBar()->setToolTip(message.isEmpty() ? QString() : plain_tooltip(message));
  });

  font_warning_ = new QLabel;
  font_warning_->setObjectName("fontWarning");
  font_warning_->hide();
  statusBar()->addPermanentWidget(font_warning_);
  font_check_ = new QTimer(this);
  font_check_->setSingleShot(true);
  connect(font_check_, &QTimer::timeout, this, &MainWindow::update_font_warning);
  const auto check_fonts = [this] { font_check_->start(0); };
  connect(setup_, &RunSetupPanel::dataset_inspected, this, check_fonts);
  connect(setup_, &RunSetupPanel::dataset_problem_changed, this, check_fonts);  // also where the path was emptied
  RunsModel* runs_model = runs_view_->model();
  connect(runs_model, &QAbstractItemModel::modelReset, this, check_fonts);
  connect(runs_model, &QAbstractItemModel::rowsInserted, this, check_fonts);
  connect(runs_model, &QAbstractItemModel::rowsRemoved, this, check_fonts);
  connect(runs_model, &QAbstractItemModel::dataChanged, this, check_fonts);
  update_font_warning();

  build_menus();
  live_ = std::make_unique<RunSeries>();
  live_charts_->set_runs({live_.get()});
  setup_->load_settings();
  preview_next_run();
  connect(setup_, &RunSetupPanel::preview_changed, this, &MainWindow::preview_next_run);
  // The run the Training tab shows, deleted in the Runs tab: its charts go at once, not at the next look at the store.
  // The Runs tab follows the store, so this also catches `ampwb delete` while another tab is shown.
  connect(runs_model, &QAbstractItemModel::rowsRemoved, this, [this] {
    if (busy() || live_->run_id == 0 || runs_view_->model()->row_of(live_->run_id) >= 0) return;
    try {
      if (!store_->find_run(live_->run_id)) forget_deleted_run();
    } catch (const std::exception&) {  // the store out of reach: follow_last_run looks again
    }
  });
  runs_view_->reload();

  QSettings settings;
  if (!restoreGeometry(settings.value("window/geometry").toByteArray())) {
    // A first launch: roomy, but inside the screen's free area (a 1366×768 laptop, 1080p at 150 %), frame included.
    const QRect free = screen()->availableGeometry();
    const QSize size = QSize(1500, 950).boundedTo(free.size() - QSize(16, 48));
    setGeometry(QStyle::alignedRect(Qt::LeftToRight, Qt::AlignCenter, size, free));
  }
  if (!restoreState(settings.value("window/state").toByteArray()))
    resizeDocks({setup_dock_}, {setup_width}, Qt::Horizontal);
  setup_beside_starting_ = settings.value("window/setupBesideStarting", setup_dock_->isVisibleTo(this)).toBool();
  setup_beside_reading_ = settings.value("window/setupBesideReading", false).toBool();
  connect(setup_dock_->toggleViewAction(), &QAction::toggled, this, [this](bool shown) {
    if (!placing_setup_) (reading_tab() ? setup_beside_reading_ : setup_beside_starting_) = shown;
  });
  place_setup_panel();
  update_actions();
  tell_of_runs_cut_off();
}

// QMainWindow narrows the setup dock as the window shrinks but gives all the room back to the tabs as it grows, which
// left the panel clipping its fields: the dock gets back its width once the window has room for it.
void MainWindow::resizeEvent(QResizeEvent* event) {
  QMainWindow::resizeEvent(event);
  laid_out_size_ = size();
  if (setup_dock_->isFloating() || !setup_dock_->isVisible() || setup_dock_->width() >= setup_width_ ||
      event->size().width() <= event->oldSize().width())
    return;
  QTimer::singleShot(0, this, [this] {
    if (!setup_dock_->isFloating() && setup_dock_->width() < setup_width_)
      resizeDocks({setup_dock_}, {setup_width_}, Qt::Horizontal);
  });
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  // Resized while the window kept its size: the user dragged the separator, and that width is theirs.
  if (watched == setup_dock_ && event->type() == QEvent::Resize && size() == laid_out_size_ &&
      !setup_dock_->isFloating() && setup_dock_->isVisible())
    setup_width_ = setup_dock_->width();
  return QMainWindow::eventFilter(watched, event);
}

bool MainWindow::reading_tab() const {
  return tabs_->currentWidget() == runs_view_ || tabs_->currentWidget() == compare_;
}

void MainWindow::place_setup_panel() {
  if (setup_dock_->isFloating()) return;  // beside the window, it takes no tab's width
  const QScopedValueRollback placing(placing_setup_, true);
  setup_dock_->setVisible(reading_tab() ? setup_beside_reading_ : setup_beside_starting_);
}

void MainWindow::tell_of_runs_cut_off() {
  // Runs whose process ended without recording their end (this window killed, a crash, a power cut), found as the
  // store opened: the first thing to say, each with what can be done with it.
  QStringList said;
  for (const int64_t id : store_->recovered_runs()) {
    try {
      const RunRecord r = store_->run(id);
      const std::string refusal = resume_refusal(*store_, r);
      said << (refusal.empty() ? tr("Run %1 (%2) was cut off when the process training it ended: Resume in the Runs "
                                    "tab continues it from its last checkpoint.")
                                     .arg(id)
                                     .arg(QString::fromStdString(r.name))
                               : tr("Run %1 (%2) was cut off when the process training it ended: %3.")
                                     .arg(id)
                                     .arg(QString::fromStdString(r.name), QString::fromStdString(refusal)));
    } catch (const std::exception&) {  // deleted meanwhile
    }
  }
  if (!said.isEmpty()) controls_->set_status(said.join(' '));
}

MainWindow::~MainWindow() = default;

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("Choose &dataset folder…"), setup_, &RunSetupPanel::choose_dataset_folder);
  open->setShortcut(QKeySequence::Open);
  file->addAction(tr("Use the &sample dataset"), setup_, &RunSetupPanel::use_sample_dataset);
  file->addSeparator();
  QAction* charts = file->addAction(tr("Export &charts…"), this, &MainWindow::export_charts_of_current_tab);
  charts->setShortcut(QKeySequence(tr("Ctrl+E")));
  QAction* csv = file->addAction(tr("Export CS&V reports…"), this, [this] {
    if (const std::vector<int64_t> ids = chosen_runs(); !ids.empty())
      export_csv_interactive(ids);
    else
      show_status(tr("Select runs in the Runs view first"), 5000);
  });
  csv->setShortcut(QKeySequence(tr("Ctrl+Shift+E")));
  file->addAction(tr("Save &report (HTML)…"), this, [this] {
    if (const std::vector<int64_t> ids = chosen_runs(); !ids.empty())
      save_report_interactive(ids);
    else
      show_status(tr("Select runs in the Runs view first"), 5000);
  });
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  train_action_ = run->addAction(tr("&Train"), this, &MainWindow::start_training);
  train_action_->setShortcut(QKeySequence(tr("Ctrl+R")));
  pause_action_ = run->addAction(tr("&Pause / resume"), this, &MainWindow::toggle_pause);
  pause_action_->setShortcut(QKeySequence(tr("Ctrl+P")));
  stop_action_ = run->addAction(tr("&Stop"), this, &MainWindow::stop_training);
  stop_action_->setShortcut(QKeySequence(tr("Ctrl+.")));
  run->addSeparator();
  sweep_action_ = run->addAction(tr("S&weep…"), this, [this] { show_sweep_dialog(false); });
  sweep_action_->setObjectName("sweepAction");
  sweep_action_->setShortcut(QKeySequence(tr("Ctrl+Shift+S")));
  paddle_sweep_action_ = run->addAction(tr("ResNet-18 FP32 vs AMP, &as in the Paddle article…"), this,
                                        [this] { show_sweep_dialog(true); });
  run->addSeparator();
  QAction* resume = run->addAction(tr("&Resume the selected run"), this, [this] {
    if (const auto ids = runs_view_->selected_ids(); ids.size() == 1) resume_run_interactive(ids[0]);
  });
  resume->setObjectName("resumeMenuAction");
  run->setToolTipsVisible(true);  // a disabled Resume, Predict or Export model says why
  // Enabled as the Runs tab's Resume is, for the run selected there: a finished run has nothing to resume.
  const QAction* in_view = runs_view_->findChild<QAction*>("resumeAction");
  const auto follow = [resume, in_view] {
    resume->setEnabled(in_view->isEnabled());
    resume->setToolTip(in_view->toolTip());
  };
  connect(in_view, &QAction::changed, resume, follow);
  follow();
  // Predict and Export model, found where a user looks for them too, for the run selected in the Runs tab and enabled
  // as its buttons are; the buttons' tooltip only where it says why not (it speaks of the Predict button's arrow).
  const auto like_button = [this](QAction* entry, const char* name, const char* button_name) {
    entry->setObjectName(name);
    const QAction* button = runs_view_->findChild<QAction*>(button_name);
    const auto follow_button = [entry, button] {
      entry->setEnabled(button->isEnabled());
      entry->setToolTip(button->isEnabled() ? QString() : button->toolTip());
    };
    connect(button, &QAction::changed, entry, follow_button);
    follow_button();
  };
  QAction* predict =
      run->addAction(tr("Pre&dict on images with the selected run…"), runs_view_, &RunsView::predict_selected);
  predict->setShortcut(QKeySequence(tr("Ctrl+Shift+P")));
  like_button(predict, "predictMenuAction", "predictAction");
  like_button(run->addAction(tr("Predict on a &folder of images with the selected run…"), runs_view_,
                             &RunsView::predict_folder_selected),
              "predictFolderMenuAction", "predictAction");
  QAction* export_model =
      run->addAction(tr("E&xport the selected run's model…"), runs_view_, &RunsView::export_model_selected);
  export_model->setShortcut(QKeySequence(tr("Ctrl+Shift+M")));
  like_button(export_model, "exportModelMenuAction", "exportModelAction");

  QMenu* view = menuBar()->addMenu(tr("&View"));
  // Ctrl+1 to Ctrl+4 in the tabs' order.
  const QWidget* pages[] = {training_tab_, runs_view_, compare_, sweep_view_};
  const char* names[] = {QT_TR_NOOP("&Training"), QT_TR_NOOP("&Runs"), QT_TR_NOOP("&Compare"),
                         QT_TR_NOOP("S&weeps")};
  for (int i = 0; i < 4; ++i) {
    QAction* a = view->addAction(tr(names[i]), this,
                                 [this, page = pages[i]] { tabs_->setCurrentWidget(const_cast<QWidget*>(page)); });
    a->setShortcut(QKeySequence(QStringLiteral("Ctrl+%1").arg(i + 1)));
  }
  view->addSeparator();
  QAction* dock = setup_dock_->toggleViewAction();
  dock->setText(tr("Run &setup panel"));
  dock->setShortcut(QKeySequence(tr("Ctrl+0")));
  view->addAction(dock);
  QAction* refresh = view->addAction(tr("Re&fresh runs"), runs_view_, &RunsView::reload);
  refresh->setShortcut(QKeySequence::Refresh);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  QAction* documentation = help->addAction(tr("&Documentation…"), this, [this] { show_documentation(this); });
  documentation->setObjectName("documentationAction");
  documentation->setShortcut(QKeySequence::HelpContents);
  help->addAction(tr("&About AMP Workbench"), this, [this] { show_about(this, db_path_); });
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

bool MainWindow::busy() const { return session_->running() || sweep_timing_; }

QString MainWindow::sweep_process_problem() const {
  // Its points train on this machine and are then timed in alternation: a run beside them would slow them and spoil
  // that timing. A sweep on Slurm trains elsewhere.
  if (!sweep_process_ || cli_sweep_on_slurm_) return {};
  return cli_sweep_id_ ? tr("sweep %1, started from this window, is running on this machine (see the Sweeps tab)")
                             .arg(cli_sweep_id_)
                       : tr("a sweep started from this window is running on this machine (see the Sweeps tab)");
}

QString MainWindow::train_problem() const {
  if (!read_only_.isEmpty()) return read_only_;
  if (const QString sweep = sweep_process_problem(); !sweep.isEmpty()) return sweep;
  return setup_->train_problem();
}

// Train waits for a dataset that can be trained on, fields that hold values and no sweep of this window's running,
// saying why where the pointer is.
void MainWindow::update_train_blocked() {
  const QString problem = train_problem();
  controls_->set_train_blocked(problem.isEmpty() ? QString() : tr("Cannot train: %1").arg(problem));
  if (train_action_) update_actions();
}

void MainWindow::update_actions() {
  const bool running = busy();
  train_action_->setEnabled(!running && train_problem().isEmpty());
  sweep_action_->setEnabled(!running && !sweep_process_ && read_only_.isEmpty());  // one sweep at a time
  paddle_sweep_action_->setEnabled(!running && !sweep_process_ && read_only_.isEmpty());
  pause_action_->setEnabled(running);
  stop_action_->setEnabled(running);
  setup_->set_editable(!running);
}

void MainWindow::show_status(const QString& text, int timeout_ms) { statusBar()->showMessage(text, timeout_ms); }

void MainWindow::update_font_warning() {
  QStringList texts{setup_->dataset_path(), setup_->dataset_report()};
  const RunsModel* runs = runs_view_->model();
  for (int row = 0; row < runs->rowCount(); ++row)
    texts << QString::fromStdString(runs->record(row).name) << QString::fromStdString(runs->record(row).dataset_path);
  const QString warning = missing_font_warning(texts);
  font_warning_->setText(warning.isEmpty() ? QString() : tr("\u26a0 Some names show as boxes"));
  font_warning_->setToolTip(warning.isEmpty() ? QString() : plain_tooltip(as_sentence(warning)));
  font_warning_->setVisible(!warning.isEmpty());
}

std::string MainWindow::checkpoint_folder() const {
  // Beside the run store, one folder per run (as ampwb train): deleted when the run finishes, kept while it can be
  // resumed.
  return new_checkpoint_dir(db_path_.toStdString());
}

bool MainWindow::start_training() {
  if (busy()) return false;
  if (const QString problem = train_problem(); !problem.isEmpty()) {  // Ctrl+R while Train is disabled
    controls_->set_refusal(tr("Not started: %1").arg(problem));
    return false;
  }
  setup_->save_settings();
  sweep_.cancel();
  const QString problem = start_config(setup_->config(), 0, nullptr, setup_->processes());
  if (problem.isEmpty())
    setup_->clear_run_name();
  else if (isVisible())
    plain_message(this, QMessageBox::Warning, tr("Train"), problem);
  return problem.isEmpty();
}

QString MainWindow::start_config(TrainConfig config, int64_t continue_run, std::unique_ptr<RunSeries> prefilled,
                                 int processes) {
  if (!read_only_.isEmpty()) return read_only_;  // Train and Resume say so before; a sweep's runs end here
  if (const QString sweep = sweep_process_problem(); !sweep.isEmpty()) return sweep;  // Resume, while it runs
  if (continue_run == 0) config.checkpoint_dir = setup_->checkpoints_enabled() ? checkpoint_folder() : std::string();
  session_->set_keep_final_weights(setup_->keep_final_weights());
  try {
    if (continue_run == 0 && !config.name.empty()) store_->check_new_name(config.name);
    setup_->clear_setting_problem();
    if (processes > 1)
      session_->start_processes(config, processes, continue_run);
    else
      session_->start(config, continue_run);
  } catch (const SettingError& e) {  // the engine names the setting: the panel marks its field and says its label
    const QString problem = setup_->show_setting_problem(e.setting(), QString::fromUtf8(e.what()));
    controls_->set_refusal(tr("Not started: %1").arg(problem));
    return problem;
  } catch (const std::exception& e) {
    const QString problem = QString::fromUtf8(e.what());
    controls_->set_refusal(tr("Not started: %1").arg(problem));
    return problem;
  }
  live_in_child_ = processes > 1;
  follow_last_run_->stop();
  // Only folders made beside the store are removed when their run finishes (a folder the user named stays).
  checkpoint_dir_ = is_own_checkpoint_dir(db_path_.toStdString(), config.checkpoint_dir) && !config.keep_checkpoints
                        ? config.checkpoint_dir
                        : "";
  before_start_.emplace(std::move(*live_));  // refilled below
  // The same object, refilled: the live charts keep their series (no rebuild, no re-layout) from run to run.
  if (prefilled)
    live_->replace_with(std::move(*prefilled));
  else
    live_->replace_with(RunSeries());
  live_->config = config;
  live_->run_id = continue_run;
  live_->label = "live";
  live_charts_->refresh();
  live_charts_->set_export_prefix("run");
  progress_ = RunProgress{};
  collapse_watch_.reset();
  controls_->set_alarm({});
  controls_->clear_progress();
  controls_->set_notes({});
  controls_->set_state(RunControls::State::Preparing);
  controls_->set_status(sweep_.active() ? tr("Sweep run %1/%2 (%3): opening the dataset and building the model…")
                                              .arg(sweep_.index())
                                              .arg(sweep_.count())
                                              .arg(QString::fromStdString(sweep_.current_label()))
                                        : tr("Opening the dataset and building the model…"));
  tabs_->setCurrentWidget(training_tab_);
  update_actions();
  return {};
}

// Its name as the Runs tab and the exports of stored runs say it ("12 · resnet20-amp-fp16-1"), once it has a row.
void MainWindow::label_live_run() {
  try {
    if (live_->run_id != 0) live_->label = run_label(store_->run(live_->run_id));
  } catch (const std::exception&) {  // the store out of reach: the label waits for the next start
  }
}

void MainWindow::on_events(const EventBatch& batch) {
  live_->append(batch);
  if (batch.started) {
    before_start_.reset();
    const RunInfo& info = *batch.started;
    progress_.start(info, live_->config.epochs, live_->config.batch_size);
    epoch_loads_.clear();
    controls_->set_notes(info.notes);
    controls_->set_state(RunControls::State::Training);
    if (session_->in_child()) {  // mpirun's processes wait on each other: Stop leaves the run resumable instead
      controls_->pause_button()->setEnabled(false);
      controls_->pause_button()->setToolTip(tr("A run on many processes cannot be paused: Stop leaves it resumable"));
    }
    // The device's long description last: where the band scrolls, what it hides is its algorithm rules.
    controls_->set_status(
        tr("Run %1%2: %3 · %4 training and %5 validation images, %6 px%7 · on %8")
            .arg(live_->run_id)
            .arg(sweep_.active() ? tr(" (sweep %1/%2: %3)")
                                       .arg(sweep_.index())
                                       .arg(sweep_.count())
                                       .arg(QString::fromStdString(sweep_.current_label()))
                                 : QString())
            .arg(QString::fromStdString(info.model_summary))
            .arg(info.train_images)
            .arg(info.validation_images)
            .arg(info.image_size)
            .arg(info.world_size > 1
                     ? tr(" · %1 processes, batch %2 each").arg(info.world_size).arg(live_->config.batch_size)
                     : QString())
            .arg(QString::fromStdString(info.backend_description)));
    live_charts_->set_export_prefix(QStringLiteral("run-%1").arg(live_->run_id));
    label_live_run();
  }
  progress_.resumed(batch.paused_seconds);  // a pause ends just before the step that follows it
  for (const StepReport& s : batch.steps) progress_.step(s);
  for (const ValidationProgress& v : batch.validations) progress_.validation(v);
  update_collapse_alarm(batch);
  for (const EpochTimes& t : batch.times) epoch_loads_[t.epoch] = t.load;  // reported just before its epoch
  for (const EpochReport& e : batch.epochs) {
    progress_.epoch(e);
    // The epoch's time beside what else the machine did meanwhile, and a warning where that was much.
    QString line = epoch_line(e, live_->config.epochs);
    const MachineLoad load = epoch_loads_[e.epoch];
    if (load.known()) line += " · " + QString::fromStdString(machine_load_text(load));
    const std::string warning = timing_warning({{live_->run_id, load}});
    show_status(warning.empty() ? line : QStringLiteral("\u26a0 ") + QString::fromStdString(warning) + ": " + line);
  }
  if (batch.started || !batch.steps.empty() || !batch.validations.empty() || !batch.epochs.empty())
    controls_->show_progress(progress_);
  live_charts_->refresh_soon();
}

void MainWindow::update_collapse_alarm(const EventBatch& batch) {
  if (batch.steps.empty() && batch.overflows.empty()) return;
  const int before = collapse_watch_.collapses();
  // All steps first: a report is matched to its run of skips by step number, whatever batch it came in.
  for (const StepReport& s : batch.steps) collapse_watch_.step(s);
  for (const OverflowReport& o : batch.overflows) collapse_watch_.overflow(o);
  if (!collapse_watch_.collapsed()) return;
  const QString warning = QString::fromStdString(collapse_watch_.warning());
  controls_->set_alarm(as_sentence(warning));
  if (collapse_watch_.collapses() > before)  // a new run of skips: one after the initial scale's is said again
    show_status(tr("Warning: many steps skipped in a row (see above the charts)"), 10000);
}

// Until a run starts, the Training tab's notes (loss scaling, precision divergence) speak of the run it would start.
void MainWindow::preview_next_run() {
  if (busy() || live_->run_id != 0 || !live_->steps.empty()) return;
  RunSeries next;
  next.config = setup_->config();
  next.classes = setup_->dataset_classes();  // whether the top-k is reported (train/topk.h)
  live_->replace_with(std::move(next));
  live_charts_->refresh();
}

// The run the Training tab showed is no more: its charts, numerics and banner go with it, so that nothing shows or
// exports a run the store has not, and the tab previews the next run again.
void MainWindow::forget_deleted_run() {
  const int64_t id = live_->run_id;
  follow_last_run_->stop();
  live_->replace_with(RunSeries());
  live_charts_->set_export_prefix("run");
  collapse_watch_.reset();
  controls_->set_alarm({});
  controls_->clear_progress();
  controls_->set_notes({});
  preview_next_run();
  controls_->set_status(tr("Run %1 was deleted from the run store, and its charts with it").arg(id));
}

void MainWindow::follow_last_run() {
  if (busy() || live_->run_id == 0) {
    follow_last_run_->stop();
    return;
  }
  if (tabs_->currentWidget() != training_tab_) return;  // looked at again when it is
  const int64_t id = live_->run_id;
  std::optional<RunRecord> run;
  try {
    run = store_->find_run(id);
  } catch (const std::exception&) {  // the store out of reach for now: the next look may do
    return;
  }
  if (!run) {
    forget_deleted_run();
    return;
  }
  QString text;
  if (run->status == RunStatus::Running) {
    if (live_->status == RunStatus::Running) return;  // said already
    text = tr("Run %1 is training again elsewhere (process %2 on %3): the Runs and Compare tabs follow it")
               .arg(id)
               .arg(run->pid)
               .arg(QString::fromStdString(run->host));
    live_->status = run->status;
    controls_->clear_progress();
    controls_->set_status(text);
    return;  // and followed on, to its end
  } else if (live_->status != RunStatus::Running && run->duration_seconds == last_run_seconds_) {
    return;  // not trained since: a rename or a note changes its row, not its wall time
  } else {
    text = tr("Run %1, resumed elsewhere, %2")
               .arg(id)
               .arg(QString::fromStdString(run_end_words(run->status, run->end_reason)));
    try {  // its charts as the store now holds them, to where it ended, not where it left this window
      RunSeries stored = load_run_series(*store_, id);
      stored.label = live_->label;
      live_->replace_with(std::move(stored));
      live_charts_->refresh();
    } catch (const std::exception&) {  // the store out of reach: the charts stay as they were
    }
  }
  follow_last_run_->stop();
  controls_->clear_progress();
  controls_->set_status(text);
  runs_view_->reload();
}

void MainWindow::on_finished(qint64 run_id, const RunEnd& end, const QString& store_error) {
  controls_->pause_button()->setToolTip(QString());
  // A run on many processes sent only its progress: its histograms and per-layer numerics are in the store.
  if (live_in_child_ && run_id != 0) {
    try {
      const TrainConfig config = live_->config;
      live_->replace_with(load_run_series(*store_, run_id));
      live_->config = config;
      live_->run_id = run_id;
      label_live_run();
    } catch (const std::exception& e) {
      show_status(tr("Run %1's details could not be read: %2").arg(run_id).arg(QString::fromUtf8(e.what())), 10000);
    }
  }
  // A run refused before its row was written (its data cannot take its settings) never started: no run 0 failed.
  const bool not_started = run_id == 0 && end.status == RunStatus::Failed;
  const bool restored = not_started && before_start_;
  if (restored) {  // the run shown before, as it was: its status, its charts' file names, followed as it was
    live_->replace_with(std::move(*before_start_));
    if (live_->run_id != 0) live_charts_->set_export_prefix(QStringLiteral("run-%1").arg(live_->run_id));
  } else {
    live_->status = end.status;
  }
  before_start_.reset();
  runs_view_->model()->set_live_pause(0, false);
  const int64_t shown = restored ? live_->run_id : run_id;
  // Followed whatever its end: a stopped or failed run may go on elsewhere, and any run may be deleted elsewhere.
  if (shown != 0) {
    try {  // its wall time as recorded here: grown when it trained elsewhere
      if (const std::optional<RunRecord> run = store_->find_run(shown)) last_run_seconds_ = run->duration_seconds;
      follow_last_run_->start();
    } catch (const std::exception&) {  // the store out of reach: not followed
    }
  }
  live_charts_->refresh();  // whatever a deferred redraw still owed
  controls_->set_state(RunControls::State::Idle);
  QString text = not_started ? tr("Not started") : tr("Run %1").arg(run_id);
  // A setting the data refused (top-k above the classes, say) is named as the panel names it, its field marked.
  if (!end.setting.empty())
    text += (not_started ? QString() : " " + QString::fromUtf8(run_status_words(end.status))) + ": " +
            setup_->show_setting_problem(end.setting, QString::fromStdString(end.reason));
  else if (not_started)
    text += end.reason.empty() ? QString() : ": " + QString::fromStdString(end.reason);
  else
    text += " " + QString::fromStdString(run_end_words(end.status, end.reason));
  if (!store_error.isEmpty()) text += tr(" (not fully recorded: %1)").arg(store_error);
  if (end.status == RunStatus::Interrupted) {  // cut off (a process killed): say what is left of it
    try {
      if (store_->resumable(run_id)) text += tr(" It can be resumed from its last checkpoint: Resume in the Runs tab.");
    } catch (const std::exception&) {  // the store out of reach: nothing to add
    }
  }
  if (end.status == RunStatus::Finished && !live_->epochs.empty()) {
    double best = 0;
    for (const EpochReport& e : live_->epochs) best = std::max(best, e.validation_accuracy);
    text += tr(": best validation accuracy %1").arg(QString::fromStdString(percent_text(best)));
  }
  if (restore_panel_after_resume())
    text += (text.endsWith('.') ? " " : ". ") + tr("The Run setup panel shows your own settings again.");
  if (not_started)
    controls_->set_refusal(text);
  else
    controls_->set_status(text);
  show_status(text, 10000);
  // A finished run cannot be resumed: its checkpoint is only disk space, once the store holds its end.
  if (end.status == RunStatus::Finished && store_error.isEmpty() && !checkpoint_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(checkpoint_dir_, ec);
  }
  checkpoint_dir_.clear();
  runs_view_->reload();
  update_actions();
  Q_EMIT run_finished(run_id, static_cast<int>(end.status));

  if (sweep_.active()) {
    sweep_.finished(run_id);
    if (run_id != 0) {
      try {
        store_->add_tag(run_id, sweep_.tag());
        runs_view_->reload();
      } catch (const std::exception& e) {  // the run is recorded all the same; only its tag is missing
        show_status(tr("Could not tag run %1: %2").arg(run_id).arg(QString::fromUtf8(e.what())), 10000);
      }
    }
    if (end.status == RunStatus::Cancelled) sweep_.cancel();  // the user stopped it: the rest is not wanted
    start_next_sweep_run();
  }
}

void MainWindow::toggle_pause() {
  if (!session_->running()) return;
  if (session_->in_child()) {  // mpirun's processes wait on each other: Stop leaves the run resumable instead
    show_status(tr("A run on many processes cannot be paused; Stop ends it with a checkpoint to resume from"), 5000);
    return;
  }
  if (session_->paused()) {
    session_->resume();
    controls_->set_state(RunControls::State::Training);
    runs_view_->model()->set_live_pause(live_->run_id, false);
    show_status(tr("Resumed"), 3000);
  } else {
    session_->pause();
    controls_->set_state(RunControls::State::Paused);
    runs_view_->model()->set_live_pause(live_->run_id, true);
    show_status(tr("Paused after the current step"), 3000);
  }
}

void MainWindow::stop_training() {
  if (sweep_timing_) {
    sweep_timing_->stop();
    controls_->set_status(tr("Stopping the sweep's timing after the current configuration's turn…"));
    return;
  }
  if (!session_->running()) return;
  sweep_.cancel();
  session_->stop();
  controls_->set_state(RunControls::State::Stopping);
  controls_->set_status(tr("Stopping after the current step%1…")
                            .arg(live_->config.checkpoint_dir.empty() ? QString() : tr(" and saving a checkpoint")));
}

void MainWindow::show_sweep_dialog(bool seed_article_preset) {
  if (busy()) return;
  if (const QString problem = setup_->train_problem(); !problem.isEmpty()) {  // its runs take the panel's settings
    controls_->set_refusal(tr("Not started: %1").arg(problem));
    return;
  }
  const TrainConfig base = setup_->config();
  Capabilities caps;
  try {
    caps = make_backend(base.device, {base.threads})->capabilities();
  } catch (const Error& e) {
    plain_message(this, QMessageBox::Warning, tr("Sweep"), as_sentence(QString::fromStdString(e.what())));
    return;
  }
  SweepDialog dialog(base, caps, this);
  dialog.set_setup_processes(setup_->processes());
  if (seed_article_preset) dialog.apply_seed_article_preset();
  if (dialog.exec() != QDialog::Accepted) return;
  const SweepPlan plan = dialog.plan();
  if (plan.variants.empty()) return;
  if (!plan.needs_cli()) {
    start_sweep(with_single_values(dialog.base(), plan), plan.variants);
    return;
  }
  if (const QString why = start_cli_sweep(dialog.base(), plan); !why.isEmpty())
    plain_message(this, QMessageBox::Warning, tr("Sweep"), tr("The sweep was not started: %1").arg(why));
}

QString MainWindow::start_cli_sweep(const TrainConfig& base, const SweepPlan& plan) {
  if (!read_only_.isEmpty()) return read_only_;
  if (sweep_process_) return tr("a sweep started from here is still running (see the Sweeps tab)");
  SweepCommand command;
  try {
    command = sweep_command(base, plan, db_path_.toStdString());
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
  QStringList arguments;
  for (const std::string& a : command.arguments) arguments << QString::fromStdString(a);
  sweep_process_ = new QProcess(this);
  sweep_output_.clear();
  sweep_errors_.clear();
  cli_sweep_id_ = 0;
  cli_sweep_on_slurm_ = plan.on_slurm;
  connect(sweep_process_, &QProcess::readyReadStandardOutput, this, &MainWindow::read_sweep_output);
  connect(sweep_process_, &QProcess::readyReadStandardError, this,
          [this] { sweep_errors_ += QString::fromLocal8Bit(sweep_process_->readAllStandardError()); });
  connect(sweep_process_, &QProcess::finished, this, &MainWindow::sweep_process_ended);
  sweep_process_->start(sweep_executable_.isEmpty() ? QCoreApplication::applicationFilePath() : sweep_executable_,
                        arguments);
  if (!sweep_process_->waitForStarted(10000)) {
    const QString why = sweep_process_->errorString();
    sweep_process_->deleteLater();
    sweep_process_ = nullptr;
    return tr("ampwb sweep could not be started: %1").arg(why);
  }
  // The sweep file, settings whole, on its standard input (--sweep-file -).
  sweep_process_->write(QByteArray::fromStdString(command.sweep_file.dump()));
  sweep_process_->closeWriteChannel();
  show_status(plan.on_slurm ? tr("Submitting the sweep to Slurm…") : tr("Starting the sweep…"), 10000);
  update_train_blocked();
  return {};
}

QString MainWindow::cancel_cli_sweep(int64_t sweep_id) {
  QProcess cancel;
  cancel.start(sweep_executable_.isEmpty() ? QCoreApplication::applicationFilePath() : sweep_executable_,
               {QStringLiteral("sweep"), QStringLiteral("cancel"), QStringLiteral("--db"), db_path_,
                QString::number(sweep_id)});
  QString said;
  if (!cancel.waitForFinished(60000)) {
    cancel.kill();
    said = cancel.errorString();
  } else if (cancel.exitStatus() != QProcess::NormalExit || cancel.exitCode() != 0) {
    static const QRegularExpression error_line(QStringLiteral("^ampwb[^:]*: error: (.*)$"),
                                               QRegularExpression::MultilineOption);
    const QString errors = QString::fromLocal8Bit(cancel.readAllStandardError());
    const QRegularExpressionMatch m = error_line.match(errors);
    said = m.hasMatch() ? m.captured(1).trimmed() : errors.trimmed();
  }
  sweep_view_->reload();
  // What the command did, in its words: a sweep whose points ended meanwhile had nothing left to cancel.
  const QString done = QString::fromLocal8Bit(cancel.readAllStandardOutput()).section('\n', 0, 0).trimmed();
  const QString text = !said.isEmpty()  ? tr("Sweep %1: %2").arg(sweep_id).arg(said)
                       : done.isEmpty() ? tr("Sweep %1 cancelled").arg(sweep_id)
                                        : as_sentence(done);
  show_status(text, 10000);
  return said;
}

void MainWindow::read_sweep_output() {
  if (!sweep_process_) return;
  sweep_output_ += QString::fromLocal8Bit(sweep_process_->readAllStandardOutput());
  static const QRegularExpression recorded(QStringLiteral("^sweep (\\d+): \\d+ points"),
                                           QRegularExpression::MultilineOption);
  if (cli_sweep_id_ == 0) {
    if (const QRegularExpressionMatch m = recorded.match(sweep_output_); m.hasMatch()) {
      cli_sweep_id_ = m.captured(1).toLongLong();
      update_train_blocked();  // names the sweep now
      sweep_view_->set_running_here(cli_sweep_id_, {});
      sweep_view_->show_sweep(cli_sweep_id_);
      tabs_->setCurrentWidget(sweep_view_);
      Q_EMIT cli_sweep_started(cli_sweep_id_);
    }
  }
  static const QRegularExpression submitted(QStringLiteral("^submitted as Slurm job array (\\S+)"),
                                            QRegularExpression::MultilineOption);
  if (const QRegularExpressionMatch m = submitted.match(sweep_output_); m.hasMatch())
    show_status(tr("Sweep %1 submitted as Slurm job array %2").arg(cli_sweep_id_).arg(m.captured(1)), 10000);
  // Its points trained, it times their configurations in alternation ("sweep 3: timing its 2 configurations …",
  // then "  round 2/6"): the Sweeps tab says how far, not "not timed".
  static const QRegularExpression timing(QStringLiteral("^sweep \\d+: timing its"),
                                         QRegularExpression::MultilineOption);
  static const QRegularExpression round_line(QStringLiteral("^  round (\\d+/\\d+)$"),
                                             QRegularExpression::MultilineOption);
  if (cli_sweep_id_ && timing.match(sweep_output_).hasMatch()) {
    QString progress = tr("starting");
    for (QRegularExpressionMatchIterator i = round_line.globalMatch(sweep_output_); i.hasNext();)
      progress = tr("round %1").arg(i.next().captured(1));
    sweep_view_->set_running_here(cli_sweep_id_, progress);
  }
}

void MainWindow::sweep_process_ended() {
  if (!sweep_process_) return;
  read_sweep_output();
  sweep_errors_ += QString::fromLocal8Bit(sweep_process_->readAllStandardError());
  const int code = sweep_process_->exitStatus() == QProcess::NormalExit ? sweep_process_->exitCode() : -1;
  sweep_process_->deleteLater();
  sweep_process_ = nullptr;
  update_train_blocked();
  sweep_view_->set_running_here(0, {});
  // "ampwb sweep: error: sbatch failed: ..." reads "sbatch failed: ..." to whoever clicked the dialog's button.
  QString message;
  static const QRegularExpression error_line(QStringLiteral("^ampwb[^:]*: error: (.*)$"),
                                             QRegularExpression::MultilineOption);
  for (QRegularExpressionMatchIterator i = error_line.globalMatch(sweep_errors_); i.hasNext();)
    message = i.next().captured(1).trimmed();
  // The sweep's last count of its points' states ("sweep 6: 3 finished, 3 cancelled"), not its opening line.
  static const QRegularExpression summary(QStringLiteral("^sweep \\d+: (\\d+ .*)$"),
                                          QRegularExpression::MultilineOption);
  QString states;
  for (QRegularExpressionMatchIterator i = summary.globalMatch(sweep_output_); i.hasNext();)
    states = i.next().captured(1);
  if (states.contains("points, recorded")) states.clear();
  if (code != 0 && message.isEmpty())
    message = !states.isEmpty()                   ? states
              : sweep_errors_.trimmed().isEmpty() ? tr("ampwb sweep ended with code %1").arg(code)
                                                  : sweep_errors_.trimmed().section('\n', -1);
  sweep_view_->reload();
  if (code == 0) {
    if (!cli_sweep_on_slurm_)
      show_status(states.isEmpty() ? tr("Sweep %1 done").arg(cli_sweep_id_)
                                   : tr("Sweep %1 ended: %2").arg(cli_sweep_id_).arg(states),
                  10000);
  } else {
    const QString title = cli_sweep_id_ ? tr("Sweep %1").arg(cli_sweep_id_) : tr("Sweep not started");
    auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Ok, this);
    box->setTextFormat(Qt::PlainText);  // it quotes paths and the child's words
    box->setObjectName("sweepError");
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
    show_status(title + ": " + message, 10000);
  }
  Q_EMIT cli_sweep_ended(cli_sweep_id_, code, code == 0 ? QString() : message);
}

void MainWindow::start_sweep(const TrainConfig& base, const std::vector<SweepVariant>& variants) {
  if (busy() || !read_only_.isEmpty()) return;  // the menu's Sweep… is disabled in both cases
  // Names taken by an earlier sweep on the same seed are not given again: its runs would be refused.
  const std::vector<std::string> names = sweep_run_names(variants, base.seed, [&](const std::string& name) {
    try {
      store_->check_new_name(name);
      return false;
    } catch (const std::exception&) {
      return true;
    }
  });
  sweep_.plan(base, variants, names, "sweep " + QDateTime::currentDateTime().toString("MMdd-hhmmss").toStdString());
  panel_before_sweep_ = setup_->config();
  start_next_sweep_run();
}

void MainWindow::start_next_sweep_run() {
  while (const std::optional<TrainConfig> next = sweep_.next()) {
    setup_->set_config(*next);  // the panel shows what trains, as for a single run
    if (start_config(*next, 0, nullptr).isEmpty()) return;
    sweep_.finished(0);  // refused: go on with the next variant
  }
  restore_panel_after_sweep();
  const std::vector<int64_t> ids = sweep_.run_ids();
  if (ids.empty()) {  // refused, each with its reason shown; or stopped before its first run was recorded
    if (sweep_.stopped()) show_status(sweep_outcome(ids), 15000);
    return;
  }
  // Every run trained to its end: their speed-up is measured as benchmarks are, in alternation.
  const bool all_finished = std::all_of(ids.begin(), ids.end(), [&](int64_t id) {
    try {
      return store_->run(id).status == RunStatus::Finished;
    } catch (const std::exception&) {
      return false;
    }
  });
  if (all_finished && ids.size() >= 2)
    time_sweep(ids);
  else
    finish_sweep(ids);
}

void MainWindow::time_sweep(const std::vector<int64_t>& ids) {
  try {
    sweep_timing_ = std::make_unique<SweepTiming>(*store_, ids);
  } catch (const std::exception& e) {
    finish_sweep(ids, QString::fromUtf8(e.what()));
    return;
  }
  controls_->set_state(RunControls::State::Preparing);
  controls_->set_status(tr("Sweep: timing its configurations in alternation for their speed-up…"));
  update_actions();
  connect(sweep_timing_.get(), &SweepTiming::progress, this, [this](const QString& what) {
    controls_->set_status(tr("Sweep: timing its configurations in alternation for their speed-up, %1").arg(what));
  });
  connect(sweep_timing_.get(), &SweepTiming::finished, this,
          [this, ids](const AlternatingSpeed& timed, const QString& error) {
            const AlternatingOptions planned;
            const bool complete = error.isEmpty() && !timed.images_per_second.empty() &&
                                  timed.images_per_second.front().size() == static_cast<size_t>(planned.rounds);
            // No runs: they differ only in their seeds, and there is nothing to compare.
            const bool nothing_to_time = error.isEmpty() && timed.runs.empty();
            QString said = complete || nothing_to_time ? QString() : error.isEmpty() ? tr("stopped") : error;
            if (complete) {
              try {
                store_->add_alternating_speed(timed);
              } catch (const std::exception& e) {
                said = QString::fromUtf8(e.what());
              }
            }
            sweep_timing_.release()->deleteLater();  // its thread has ended; the object goes after this signal
            controls_->set_state(RunControls::State::Idle);
            update_actions();
            finish_sweep(ids, said);
          });
}

void MainWindow::restore_panel_after_sweep() {
  if (!panel_before_sweep_) return;
  setup_->set_config(*panel_before_sweep_);
  panel_before_sweep_.reset();
}

bool MainWindow::restore_panel_after_resume() {
  if (!panel_before_resume_) return false;
  setup_->set_config(panel_before_resume_->config);
  setup_->set_processes(panel_before_resume_->processes);
  panel_before_resume_.reset();
  return true;
}

// "Sweep done: 3 runs compared"; stopped, the runs it never started are named, so that none is taken for trained.
QString MainWindow::sweep_outcome(const std::vector<int64_t>& ids) const {
  const QString compared = ids.size() == 1 ? tr("1 run compared") : tr("%1 runs compared").arg(ids.size());
  if (!sweep_.stopped()) return tr("Sweep done: %1").arg(compared);
  QString text = tr("Sweep stopped: %1").arg(compared);
  if (const std::vector<std::string>& left = sweep_.not_started(); !left.empty()) {
    QStringList keys;
    for (const std::string& key : left) keys << QString::fromStdString(key);
    text += tr(", %1 not started (%2)").arg(left.size()).arg(keys.join(", "));
  }
  return text;
}

void MainWindow::finish_sweep(const std::vector<int64_t>& ids, const QString& not_timed_because) {
  open_runs(ids);
  QString text = sweep_outcome(ids);
  if (!not_timed_because.isEmpty()) text += tr("; not timed in alternation (%1)").arg(not_timed_because);
  controls_->set_status(text);  // not the timing's last round, as if it went on
  show_status(text, 15000);
  Q_EMIT sweep_finished(ids);
}

namespace {
// The dataset folder a resumable run trained on where it is not there any more (moved, or its disk not mounted);
// empty otherwise.
QString missing_dataset_folder(const RunStore& store, int64_t id) {
  try {
    const TrainConfig config = resume_config(store, id);
    if (std::error_code ec; !std::filesystem::is_directory(config.data_dir, ec))
      return QString::fromStdString(config.data_dir);
  } catch (const std::exception&) {  // not resumable: resume_run says why
  }
  return {};
}
}  // namespace

void MainWindow::resume_run_interactive(int64_t id) {
  QString folder;
  const bool may_resume = !session_->running() && read_only_.isEmpty();  // else resume_run says why not
  if (const QString gone = may_resume ? missing_dataset_folder(*store_, id) : QString(); !gone.isEmpty()) {
    const QString question = tr("Run %1 trained on the dataset folder %2, which is not there now.\n\nIf it moved, "
                                "choose where it is: the run goes on with the same files there.")
                                 .arg(id)
                                 .arg(gone);
    if (plain_message(this, QMessageBox::Question, tr("Resume"), question, QMessageBox::Open | QMessageBox::Cancel,
                      QMessageBox::Open) != QMessageBox::Open)
      return;
    folder = choose_folder(this, tr("Where the dataset folder is now"), QFileInfo(gone).absolutePath());
    if (folder.isEmpty()) return;
  }
  const QString problem = resume_run(id, folder);
  if (!problem.isEmpty()) plain_message(this, QMessageBox::Information, tr("Resume"), as_sentence(problem));
}

QString MainWindow::resume_run(int64_t id, const QString& data_folder) {
  if (session_->running()) return tr("A run is in progress.");
  if (!read_only_.isEmpty()) return tr("Run %1 cannot be resumed: %2").arg(id).arg(read_only_);
  QString problem;
  TrainConfig config;
  try {
    ResumeChanges changes;
    if (!data_folder.isEmpty()) changes.data_dir = data_folder.toStdString();
    config = resume_config(*store_, id, changes);  // the checks `ampwb train --resume` makes
    if (std::error_code ec; !std::filesystem::is_directory(config.data_dir, ec))
      problem = tr("Run %1 trained on the dataset folder %2, which is not there now: if it moved, resume it and "
                   "choose where it is")
                    .arg(id)
                    .arg(QString::fromStdString(config.data_dir));
  } catch (const std::exception& e) {
    problem = QString::fromUtf8(e.what());
  }
  if (!problem.isEmpty()) {
    show_status(problem, 10000);
    return problem;
  }
  // The run continues in its own row (StoreRecorder's continue_run): the charts start from what is stored.
  auto prefilled = std::make_unique<RunSeries>(load_run_series(*store_, id));
  // A run on many processes goes on with as many (`ampwb train --resume` refuses another number).
  const int processes = store_->run(id).info.world_size;
  const QString problem_starting = start_config(config, id, std::move(prefilled), processes);
  if (problem_starting.isEmpty()) {  // the panel shows the settings of the run it trains, its name left to that run
    panel_before_resume_ = PanelSettings{setup_->config(), setup_->processes()};
    setup_->set_config(config);
    setup_->clear_run_name();
    setup_->set_processes(processes);
  }
  return problem_starting;
}

bool MainWindow::open_runs(const std::vector<int64_t>& ids) {
  if (ids.empty()) return false;
  // The tab first, laid out at once: its table's columns are fitted to the width it has without the setup panel.
  QWidget* before = tabs_->currentWidget();
  tabs_->setCurrentWidget(compare_);
  layout()->activate();
  try {
    compare_->set_runs(ids);
    return true;
  } catch (const std::exception& e) {
    tabs_->setCurrentWidget(before);
    show_status(QString::fromUtf8(e.what()), 10000);
    return false;
  }
}

QStringList MainWindow::export_csv(const std::vector<int64_t>& ids, const QString& folder) {
  QStringList files;
  for (const std::string& f : ampwb::export_csv(*store_, ids, folder.toStdString())) files << QString::fromStdString(f);
  return files;
}

void MainWindow::export_csv_interactive(std::vector<int64_t> ids) {
  QSettings settings;
  const QString folder =
      choose_folder(this, tr("Export CSV reports into"), settings.value("export/folder", QDir::homePath()).toString());
  if (folder.isEmpty()) return;
  QStringList replaced;
  for (const std::string& f : csv_export_files(ids, folder.toStdString())) replaced << QString::fromStdString(f);
  if (!confirm_replacing(this, tr("Export CSV"), replaced)) return;
  settings.setValue("export/folder", folder);
  try {
    const std::vector<int64_t> earlier = runs_exported_before(folder.toStdString(), ids);
    const QStringList files = export_csv(ids, folder);
    QString done = tr("Wrote %1 CSV files into %2").arg(files.size()).arg(folder);
    if (!earlier.empty())
      done += tr(" (it also holds an earlier export of %1; runs-summary.csv lists only %2 exported now)")
                  .arg(QString::fromStdString(runs_phrase(earlier)))
                  .arg(ids.size() == 1 ? tr("the run") : tr("the %1 runs").arg(ids.size()));
    show_status(done, 15000);
  } catch (const std::exception& e) {
    plain_message(this, QMessageBox::Warning, tr("Export CSV"), as_sentence(QString::fromUtf8(e.what())));
  }
}

std::vector<int64_t> MainWindow::chosen_runs() const {
  if (tabs_->currentWidget() == compare_ && !compare_->run_ids().empty()) return compare_->run_ids_baseline_first();
  if (std::vector<int64_t> selected = runs_view_->selected_ids(); !selected.empty()) {
    // The runs the Compare tab compares, chosen again in the Runs tab: in its order, so that a report of them takes
    // the baseline it shows, whichever tab the report is saved from.
    std::vector<int64_t> compared = compare_->run_ids();
    std::sort(compared.begin(), compared.end());
    return compared == selected ? compare_->run_ids_baseline_first() : selected;
  }
  if (live_->run_id) return {live_->run_id};
  return {};
}

void MainWindow::save_report(const std::vector<int64_t>& ids, const QString& file) {
  // The runs compared here keep the colours the Compare tab draws them in, whichever is the baseline.
  const std::vector<size_t> colours =
      ids == compare_->run_ids_baseline_first() ? compare_->colours_baseline_first() : std::vector<size_t>{};
  // A missing folder is made, as `ampwb report --out` makes it.
  if (const QString folder = QFileInfo(file).absolutePath(); !QDir().mkpath(folder))
    throw Error("cannot make the folder '" + folder.toStdString() + "'");
  write_file_atomically(file.toStdString(), html_report(*store_, ids, colours));
}

void MainWindow::save_report_interactive(std::vector<int64_t> ids) {
  // The file and the dialog name the runs the report holds, the baseline first: "ampwb-report-3-2-4-5.html".
  QStringList numbers;
  for (int64_t id : ids) numbers << QString::number(id);
  const QString named = numbers.size() <= 6 ? numbers.join('-')
                                            : QStringLiteral("%1-and-%2-more").arg(numbers.front()).arg(ids.size() - 1);
  QSettings settings;
  const QString suggested = QDir(settings.value("export/folder", QDir::homePath()).toString())
                                .filePath(QStringLiteral("ampwb-report-%1.html").arg(named));
  const QString title = ids.size() == 1 ? tr("Save the report of run %1").arg(ids.front())
                                        : tr("Save the report of runs %1 (against %2)")
                                              .arg(numbers.mid(0, 6).join(", ") + (ids.size() > 6 ? ", ..." : ""))
                                              .arg(ids.front());
  // Which run the others are measured against, said inside the dialog (its title bar may not show the title), and
  // where it comes from, so that the user can choose another before saving.
  QString note;
  if (ids.size() > 1) {
    QString baseline = QString::number(ids.front());
    try {
      baseline = QString::fromStdString(run_label(store_->run(ids.front())));
    } catch (const std::exception&) {  // the store out of reach: its number says it; saving will say why not
    }
    note = ids == compare_->run_ids_baseline_first()
               ? tr("The report measures speed-ups and the diagnosis against run %1, the Compare tab's baseline.")
                     .arg(baseline)
               : tr("The report measures speed-ups and the diagnosis against run %1, the first of these runs. To "
                    "measure against another, open the runs in the Compare tab and choose its Baseline.")
                     .arg(baseline);
  }
  const QString file = choose_save_file(this, title, suggested, tr("HTML (*.html)"), nullptr, note);
  if (file.isEmpty()) return;
  settings.setValue("export/folder", QFileInfo(file).absolutePath());
  try {
    save_report(ids, file);
    show_status(
        (ids.size() == 1
             ? tr("Wrote the report of run %1 to %2").arg(ids.front()).arg(file)
             : tr("Wrote the report of %1 runs, against run %2, to %3").arg(ids.size()).arg(ids.front()).arg(file)) +
            tr(" (print it to PDF from a browser, or use ampwb report --out FILE.pdf)"),
        10000);
  } catch (const std::exception& e) {
    plain_message(this, QMessageBox::Warning, tr("Save report"), as_sentence(QString::fromUtf8(e.what())));
  }
}

void MainWindow::export_charts_of_runs(const std::vector<int64_t>& ids) {
  if (!open_runs(ids)) return;  // a run gone meanwhile: said in the status line, and nothing else exported
  // The folder dialog after a pass of the event loop: opened at once, it stood over the comparison's first, half
  // laid-out frame, two sets of axes over each other.
  QTimer::singleShot(0, compare_->charts(), &ChartPanel::export_all);
}

void MainWindow::export_charts_of_current_tab() {
  if (tabs_->currentWidget() == compare_ && !compare_->run_ids().empty()) {
    compare_->charts()->export_all();
  } else if (tabs_->currentWidget() == runs_view_ && !runs_view_->selected_ids().empty()) {
    export_charts_of_runs(runs_view_->selected_ids());
  } else {
    live_charts_->export_all();
  }
}

void MainWindow::quit_without_asking() {
  quitting_without_asking_ = true;
  QApplication::closeAllWindows();  // a dialog open meanwhile too, so that the event loop ends
  // A question this window was asking when the signal came (Quit's own) answered no as it closed: closed again.
  QTimer::singleShot(0, this, [this] {
    if (isVisible()) close();
  });
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (session_->running()) {
    const auto answer =
        quitting_without_asking_
            ? QMessageBox::Yes
            : QMessageBox::question(
                  this, tr("Quit"),
                  tr("A run is training. Stop it after the current step (resumable when checkpoints are on) "
                     "and quit?"));
    if (answer != QMessageBox::Yes) {
      event->ignore();
      return;
    }
    sweep_.cancel();
    session_->stop();
    session_->wait();
  }
  if (sweep_process_) {  // as Ctrl-C on `ampwb sweep`: its running points stop resumable, requeued
    sweep_process_->disconnect(this);
    ::kill(static_cast<pid_t>(sweep_process_->processId()), SIGINT);
    if (!sweep_process_->waitForFinished(60000)) sweep_process_->kill();
    sweep_process_ = nullptr;
  }
  restore_panel_after_sweep();  // the settings kept are the user's, not a sweep run's or a resumed one's
  restore_panel_after_resume();
  setup_->save_settings();
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  settings.setValue("window/setupBesideStarting", setup_beside_starting_);
  settings.setValue("window/setupBesideReading", setup_beside_reading_);
  event->accept();
}

}  // namespace ampwb::ui
