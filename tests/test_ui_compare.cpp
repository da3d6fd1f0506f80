// Comparing runs in the desktop workbench, offscreen: stored runs overlaid on every chart (one series set per run),
// the side-by-side table with "differences only", speed-up against a chosen baseline, mean ± std bands for runs
// that differ only by seed and for groups of runs by any configuration key; the runs view's filter, sort and edits
// (rename, tag, note, delete with confirmation); and a precision sweep queued through the window that opens its
// comparison when done. The GUI's table and `ampwb compare --json` (the real binary) of the same runs agree cell for
// cell.
#include <QAbstractAxis>
#include <QAreaSeries>
#include <QChart>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QGraphicsTextItem>
#include <QInputDialog>
#include <QLabel>
#include <QLineSeries>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTextDocumentFragment>
#include <QXYSeries>
#include <QtTest>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "analysis/run_compare.h"
#include "analysis/run_report.h"
#include "analysis/run_speed.h"
#include "analysis/time_comparison.h"
#include "backend/cpu/cpu_backend.h"
#include "chart_axis.h"
#include "chart_panel.h"
#include "chart_style.h"
#include "compare_model.h"
#include "compare_view.h"
#include "diagnosis_panel.h"
#include "divergence_view.h"
#include "main_window.h"
#include "metric_chart.h"
#include "numerics_heatmap.h"
#include "run_controls.h"
#include "run_groups.h"
#include "runs_model.h"
#include "runs_view.h"
#include "store/run_store.h"
#include "store/sqlite.h"
#include "sweep.h"
#include "sweep_dialog.h"
#include "test_ui_util.h"

namespace ampwb::ui::test {

class CompareRuns : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString data_, db_;
  int64_t fp32_seed1_ = 0, fp32_seed2_ = 0, bf16_seed1_ = 0;

  // The Runs tab's action named `text` ("Notes…").
  static QAction* runs_action(RunsView* runs, const QString& text) {
    for (QAction* a : runs->findChildren<QAction*>())
      if (a->text() == text) return a;
    qFatal("the Runs tab has no action '%s'", qPrintable(text));
  }

  // Triggers `action` and answers each window it opens, as it comes, with `answer` (the dialog or the message box
  // shown). One that `answer` did not expect (it returns false) is cancelled or closed, so that the test fails, not
  // hangs; returns what was unexpected, empty where nothing was.
  static QString answering_windows(QAction* action, const std::function<bool(QInputDialog*, QMessageBox*)>& answer) {
    QString unexpected;
    int windows = 0;
    QTimer driver;
    driver.setInterval(20);
    connect(&driver, &QTimer::timeout, [&] {
      QWidget* modal = QApplication::activeModalWidget();
      if (!modal || !modal->isVisible()) return;
      auto* dialog = qobject_cast<QInputDialog*>(modal);
      auto* box = qobject_cast<QMessageBox*>(modal);
      if (answer(dialog, box)) {
        ++windows;
        return;
      }
      unexpected += " a window after " + QString::number(windows);
      if (dialog) dialog->reject();
      if (box) box->defaultButton() ? box->defaultButton()->click() : box->buttons().front()->click();
      if (!dialog && !box) modal->close();
    });
    driver.start();
    action->trigger();
    driver.stop();
    return unexpected;
  }

 private Q_SLOTS:
  void initTestCase() {
    data_ = write_stripes(dir_.filePath("stripes"), 24, 16);
    db_ = dir_.filePath("runs.sqlite");
    TrainConfig c = tiny_config(data_);
    c.batch_size = 4;  // 9 steps an epoch: steady steps to measure the speed on (analysis/run_speed.h)
    c.max_steps_per_epoch = 0;
    c.seed = 1;
    c.name = "fp32 seed 1";
    fp32_seed1_ = train_into_store(db_, c);
    c.seed = 2;
    c.name = "fp32 seed 2";
    fp32_seed2_ = train_into_store(db_, c);
    c.seed = 1;
    c.name = "bf16 seed 1";
    c.precision = precision_preset("amp-bf16");
    bf16_seed1_ = train_into_store(db_, c);
  }

  void overlays_runs_on_every_chart() {
    MainWindow w(db_);
    w.open_runs({fp32_seed1_, bf16_seed1_});
    CompareView* view = w.compare_view();
    QCOMPARE(view->series().size(), size_t{2});
    QVERIFY(!view->seed_only());
    // Each chart has the series of both runs, each run in its colour and in the legend.
    const MetricChart* loss = view->charts()->chart("loss");
    QVERIFY(loss->point_count() > 0);
    QCOMPARE(loss->series_count(), 2 * 3);  // smoothed, train per epoch, validation per epoch
    QCOMPARE(view->charts()->chart("accuracy")->point_count(), qsizetype{2 * 2 * 2});  // two classes: no top-2
    QCOMPARE(view->charts()->chart("loss-scale")->series_count(), 2 * 2);
    QCOMPARE(view->charts()->chart("epoch-time")->point_count(), qsizetype{2 * 2 * 2});
    QCOMPARE(view->charts()->chart("data-wait")->point_count(), qsizetype{2 * 2 * 2});
    QVERIFY(view->charts()->chart("histogram")->point_count() > 0);
  }

  // The per-layer numerics and the divergence are of one run, chosen under "Layers of": at first the bf16 run (FP32
  // is its own reference, nothing to show), then the one the user picks, kept when the runs are read again.
  void layers_show_the_chosen_run() {
    MainWindow w(db_);
    w.open_runs({fp32_seed1_, bf16_seed1_});
    ChartPanel* charts = w.compare_view()->charts();
    auto* chooser = charts->findChild<QComboBox*>("layersRun");
    QVERIFY(chooser && chooser->isVisibleTo(charts));
    QCOMPARE(charts->layers_run()->run_id, bf16_seed1_);
    QVERIFY2(charts->divergence()->caption()->text().startsWith("amp-bf16"),
             qPrintable(charts->divergence()->caption()->text()));
    chooser->setCurrentIndex(chooser->findData(QVariant::fromValue(fp32_seed1_)));
    QCOMPARE(charts->layers_run()->run_id, fp32_seed1_);
    QCOMPARE(charts->divergence()->caption()->text(), QString("FP32 is its own reference: nothing to compare."));
    w.compare_view()->reload();
    QCOMPARE(charts->layers_run()->run_id, fp32_seed1_);
    // FP8's measures, chosen for a run without FP8, say so instead of a column of dashes under an FP8 caption.
    charts->numerics()->set_measure(NumericsMeasure::Fp8Underflow);
    QVERIFY2(charts->numerics()->caption_text().startsWith("fp32 has no FP8 layers"),
             qPrintable(charts->numerics()->caption_text()));
    w.open_runs({bf16_seed1_});  // one run: nothing to choose
    QVERIFY(!chooser->isVisibleTo(charts));
    QCOMPARE(charts->layers_run()->run_id, bf16_seed1_);
  }

  // The Compare tab, while shown, follows what other programs do to its runs: a rename shows, and a run deleted
  // elsewhere leaves the comparison, the title saying so, rather than stay as a ghost that exports fail on.
  void follows_runs_renamed_or_deleted_elsewhere() {
    // In a folder of its own: a backup beside the fixture's store would share its runs' weights files.
    const QString db = dir_.filePath("followed/followed.sqlite");
    QDir().mkpath(dir_.filePath("followed"));
    RunStore(db_.toStdString(), RunStore::Mode::ReadOnly).backup_to(db.toStdString());
    MainWindow w(db);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.open_runs({fp32_seed1_, fp32_seed2_, bf16_seed1_});
    CompareView* view = w.compare_view();
    RunStore elsewhere(db.toStdString(), RunStore::Mode::Existing);
    elsewhere.rename(fp32_seed2_, "renamed elsewhere");
    QTRY_VERIFY_WITH_TIMEOUT(view->baseline()->itemText(1).contains("renamed elsewhere"), 10000);
    // A run with a long name, deleted: the title names it, wrapped, and the window stays as wide as it was.
    const int width = w.width();
    std::string long_name = "fp32_seed_1";  // no space to wrap at, as names of scripted runs go
    for (int i = 0; i < 12; ++i) long_name += "_of_a_name_that_goes_on";
    elsewhere.rename(fp32_seed1_, long_name);
    QTRY_VERIFY_WITH_TIMEOUT(view->baseline()->itemText(0).contains("goes_on"), 10000);
    QCoreApplication::processEvents();
    QCOMPARE(w.width(), width);
    elsewhere.remove(fp32_seed1_);
    QTRY_COMPARE_WITH_TIMEOUT(view->run_ids(), (std::vector<int64_t>{fp32_seed2_, bf16_seed1_}), 10000);
    const QString title = view->findChild<QLabel*>("compareTitle")->text();
    QVERIFY2(title.startsWith("Comparing 2 runs (" + QString::number(fp32_seed1_) + " · " +
                              QString::fromStdString(long_name) + " deleted from the run store, so no longer shown"),
             qPrintable(title));
    QCoreApplication::processEvents();
    QCOMPARE(w.width(), width);
    QCOMPARE(view->charts()->chart("loss")->series_count(), 2 * 3);
    // The runs left keep their colours: the third run's curves are drawn in the third colour still.
    QCOMPARE(view->series()[1]->colour_index(1), 2);
    int drawn = 0;
    for (QAbstractSeries* s : view->charts()->chart("accuracy")->chart()->series())
      if (auto* line = qobject_cast<QXYSeries*>(s);
          line && s->name().startsWith(QString::fromStdString(view->series()[1]->label))) {
        QCOMPARE(line->pen().color(), run_color(2));
        ++drawn;
      }
    QVERIFY(drawn > 0);
    elsewhere.remove(fp32_seed2_);
    elsewhere.remove(bf16_seed1_);
    QTRY_VERIFY_WITH_TIMEOUT(view->run_ids().empty(), 10000);
    QVERIFY(view->findChild<QLabel*>("compareTitle")->text().startsWith("No runs left to compare."));
    QVERIFY(w.chosen_runs().empty());
  }

  void says_where_the_step_time_changed() {
    MainWindow w(db_);
    w.open_runs({fp32_seed1_, bf16_seed1_});
    CompareView* view = w.compare_view();
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    auto timing = [&](int64_t run) { return run_timing(store.run(run), store.steps(run), store.epoch_times(run)); };
    const std::string sentence = compare_times(timing(fp32_seed1_), timing(bf16_seed1_)).sentence;
    QVERIFY(!sentence.empty());
    // The last line; a warning goes first when the machine was busy with other work during either run.
    QCOMPARE(view->time_summary()->text().split('\n').last(),
             QString::fromStdString("Step time, " + view->series()[1]->label + " against " + view->series()[0]->label +
                                    ": " + sentence));
    view->baseline()->setCurrentIndex(1);  // the other way round
    QVERIFY(view->time_summary()->text().split('\n').last().startsWith(
        QString::fromStdString("Step time, " + view->series()[0]->label)));
  }

  void table_shows_differences_and_speedup() {
    MainWindow w(db_);
    w.open_runs({fp32_seed1_, bf16_seed1_});
    CompareModel* model = w.compare_view()->table_model();
    QCOMPARE(model->columnCount(), 3);
    const QStringList all = model->row_labels();
    QVERIFY(all.contains("precision.mode"));
    QVERIFY(all.contains("depth"));
    QVERIFY(all.contains("best validation accuracy"));
    QVERIFY(all.contains("FP16 underflow, weight gradients (last epoch)"));
    QVERIFY(model->value("FP16 underflow, weight gradients (last epoch)", 0).endsWith("%"));
    QCOMPARE(model->value("precision.mode", 0), QString("fp32"));
    QCOMPARE(model->value("precision.mode", 1), QString("amp-bf16"));

    w.compare_view()->differences_only()->setChecked(true);
    const QStringList differing = model->row_labels();
    QVERIFY(differing.contains("precision.mode"));
    QVERIFY(!differing.contains("depth"));  // the same in both runs
    QVERIFY(differing.size() < all.size());

    // Speed-up against the chosen baseline: the baseline is 1.00×, the other its images/s ratio.
    w.compare_view()->differences_only()->setChecked(false);
    QCOMPARE(model->speedup(0).ratio, 1.0);
    w.compare_view()->baseline()->setCurrentIndex(1);
    QCOMPARE(model->baseline(), 1);
    QCOMPARE(model->speedup(1).ratio, 1.0);
    QVERIFY(model->speedup(0).known());
    QVERIFY(model->row_labels().filter("speed-up vs").size() == 1);
    QVERIFY(model->row_labels().contains("validation accuracy at epoch 2"));
  }

  // "Differences only" of a single run: it differs from nothing, so every row shows, not a table of headers alone.
  void a_single_run_shows_every_row_with_differences_only() {
    MainWindow w(db_);
    CompareView* view = w.compare_view();
    w.open_runs({fp32_seed1_});
    const QStringList every_row = view->table_model()->row_labels();
    QVERIFY(every_row.contains("best validation accuracy"));
    w.open_runs({fp32_seed1_, bf16_seed1_});
    const int both = view->table_model()->rowCount();
    view->differences_only()->setChecked(true);
    QVERIFY(view->table_model()->rowCount() < both);
    w.open_runs({fp32_seed1_});
    QVERIFY(view->differences_only()->isChecked());  // the choice waits for the next comparison
    QVERIFY(!view->differences_only()->isEnabled());
    QVERIFY2(tooltip_text(view->differences_only()->toolTip()).startsWith("A single run differs from nothing"),
             qPrintable(view->differences_only()->toolTip()));
    QCOMPARE(view->table_model()->row_labels(), every_row);
    w.open_runs({fp32_seed1_, bf16_seed1_});
    QVERIFY(view->differences_only()->isEnabled());
    QVERIFY(view->table_model()->rowCount() < both);
    view->differences_only()->setChecked(false);
  }

  // A new comparison starts the layers' measure and the metrics' epoch from their defaults, not from what was chosen
  // for other runs: an FP8 measure beside runs without FP8, an epoch they never reached.
  void a_new_comparison_opens_on_its_own_measure_and_last_common_epoch() {
    QDir().mkpath(dir_.filePath("fp8"));
    const QString db = dir_.filePath("fp8/fp8.sqlite");
    RunStore(db_.toStdString(), RunStore::Mode::ReadOnly).backup_to(db.toStdString());
    TrainConfig c = tiny_config(data_);
    c.name = "fp8";
    c.precision = precision_preset("amp-fp8");
    const int64_t fp8 = train_into_store(db, c);
    MainWindow w(db);
    CompareView* view = w.compare_view();
    NumericsHeatmap* numerics = view->charts()->numerics();
    auto* at_epoch = view->findChild<QSpinBox*>("atEpoch");
    QVERIFY(at_epoch);
    // What an amp-fp8 run opens on, picked by hand or not (docs/fp8.md).
    NumericsHeatmap alone;
    const RunSeries fp8_series = load_run_series(RunStore(db.toStdString(), RunStore::Mode::ReadOnly), fp8);
    alone.update_from({&fp8_series});
    const NumericsMeasure fp8_default = alone.measure();
    QVERIFY(fp8_default == NumericsMeasure::Fp8Saturated || fp8_default == NumericsMeasure::Fp8Underflow);

    w.open_runs({fp32_seed1_, fp8});
    QCOMPARE(view->charts()->layers_run()->run_id, fp8);
    QCOMPARE(numerics->measure(), fp8_default);
    numerics->set_measure(NumericsMeasure::Fp8Saturated);  // the user's choice for these runs
    at_epoch->setValue(1);
    QCOMPARE(view->table_model()->at_epoch(), 1);
    w.open_runs({fp32_seed1_, bf16_seed1_});  // neither has FP8
    QCOMPARE(view->charts()->layers_run()->run_id, bf16_seed1_);
    QCOMPARE(numerics->measure(), NumericsMeasure::ActivationHeadroom);
    QVERIFY2(!numerics->caption_text().contains("FP8"), qPrintable(numerics->caption_text()));
    QCOMPARE(at_epoch->value(), 0);
    QCOMPARE(at_epoch->text(), QString("last common"));
    QCOMPARE(view->table_model()->at_epoch(), 2);  // resolved: the last epoch both completed
    numerics->set_measure(NumericsMeasure::WeightGradUnderflow);
    w.open_runs({fp8, fp32_seed2_});
    QCOMPARE(view->charts()->layers_run()->run_id, fp8);
    QCOMPARE(numerics->measure(), fp8_default);
    // The same runs read again keep the user's choices.
    numerics->set_measure(NumericsMeasure::ActivationGradUnderflow);
    at_epoch->setValue(1);
    view->reload();
    w.open_runs({fp8, fp32_seed2_});
    QCOMPARE(numerics->measure(), NumericsMeasure::ActivationGradUnderflow);
    QCOMPARE(at_epoch->value(), 1);
  }

  // Three runs side by side at 1366×768, opened from the Training tab, and beside the setup panel where the user
  // shows it there: no run's column is as wide as its longest value (the device line), which shows whole in its
  // tooltip.
  void three_runs_fit_side_by_side_at_1366_by_768() {
    MainWindow w(db_);
    w.resize(1366, 768);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* table = w.compare_view()->findChild<QTableView*>("compareTable");
    QVERIFY(table);
    QWidget* dock = w.findChild<QWidget*>("setupDock");
    for (const bool setup_panel : {true, false}) {
      w.tabs()->setCurrentWidget(w.compare_view());
      dock->setVisible(setup_panel);  // the user's choice for this tab
      w.tabs()->setCurrentIndex(0);   // Training
      w.open_runs(setup_panel ? std::vector<int64_t>{fp32_seed2_, bf16_seed1_, fp32_seed1_}
                              : std::vector<int64_t>{fp32_seed1_, fp32_seed2_, bf16_seed1_});
      QCOMPARE(dock->isVisible(), setup_panel);
      QTRY_VERIFY(table->isVisible());
      QCOMPARE(table->model()->columnCount(), 4);
      const int right = table->columnViewportPosition(3) + table->columnWidth(3);
      QVERIFY2(right <= table->viewport()->width() && right > table->viewport()->width() / 2,
               qPrintable(QStringLiteral("setup panel %1: the third run ends at %2 px of %3")
                              .arg(setup_panel ? "shown" : "hidden")
                              .arg(right)
                              .arg(table->viewport()->width())));
    }
    const QStringList labels = w.compare_view()->table_model()->row_labels();
    // The first result shows without scrolling the table.
    const int best = static_cast<int>(labels.indexOf("best validation accuracy"));
    QVERIFY(best >= 0);
    QVERIFY2(table->rowViewportPosition(best) + table->rowHeight(best) <= table->viewport()->height(),
             qPrintable(QStringLiteral("the table shows %1 px of rows").arg(table->viewport()->height())));
    const int device = static_cast<int>(labels.indexOf("(device)"));
    QVERIFY(device >= 0);
    const QModelIndex cell = table->model()->index(device, 1);
    const QString value = cell.data().toString();
    QVERIFY2(table->fontMetrics().horizontalAdvance(value) > table->columnWidth(1), qPrintable(value));
    QCOMPARE(QTextDocumentFragment::fromHtml(cell.data(Qt::ToolTipRole).toString()).toPlainText(), value);
    const QAbstractItemModel& model = *table->model();
    QCOMPARE(
        QTextDocumentFragment::fromHtml(model.headerData(1, Qt::Horizontal, Qt::ToolTipRole).toString()).toPlainText(),
        model.headerData(1, Qt::Horizontal).toString());
    // A column the user widened stays so while the same runs are shown another way.
    table->setColumnWidth(2, 700);
    w.compare_view()->baseline()->setCurrentIndex(1);
    w.compare_view()->differences_only()->setChecked(true);
    QCOMPARE(table->columnWidth(2), 700);
    // Two runs leave room: their columns take what their values cut short want of it, the device line whole.
    w.open_runs({fp32_seed1_, bf16_seed1_});
    QTRY_COMPARE(table->model()->columnCount(), 3);
    const int right_now = table->columnViewportPosition(2) + table->columnWidth(2);
    QVERIFY2(right_now <= table->viewport()->width(),
             qPrintable(
                 QStringLiteral("the second run ends at %1 px of %2").arg(right_now).arg(table->viewport()->width())));
    const QAbstractItemView& cells = *table;  // where sizeHintForColumn is public
    for (int column : {1, 2})
      QVERIFY2(
          table->columnWidth(column) >= cells.sizeHintForColumn(column) || right_now >= table->viewport()->width() - 2,
          qPrintable(QStringLiteral("run %1 cut short with room to spare").arg(column)));
  }

  // One comparison in the engine (analysis/run_compare.h): the CLI prints its rows, the GUI shows them.
  void diagnosis_tab_lists_each_runs_findings_against_the_baseline() {
    MainWindow w(db_);
    w.open_runs({fp32_seed1_, bf16_seed1_});
    DiagnosisPanel* panel = w.compare_view()->diagnosis();
    QCOMPARE(panel->findings().size(), size_t{2});
    // The same findings as the engine's diagnosis of the stored runs, the second against the first.
    const RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    const RunEvidence fp32 = load_evidence(store, fp32_seed1_), bf16 = load_evidence(store, bf16_seed1_);
    auto rules = [](const std::vector<Finding>& findings) {
      QStringList out;
      for (const Finding& f : findings) out << QString::fromStdString(f.rule);
      return out;
    };
    QCOMPARE(rules(panel->findings()[0]), rules(diagnose(fp32)));
    QCOMPARE(rules(panel->findings()[1]), rules(diagnose(bf16, &fp32)));
    QVERIFY(rules(panel->findings()[1]).contains("speed_vs_baseline"));
    QVERIFY(panel->html().contains("Against the baseline, run " + QString::number(fp32_seed1_)));
    // Choosing the other run as the baseline diagnoses the first against it.
    w.compare_view()->baseline()->setCurrentIndex(1);
    QVERIFY(rules(panel->findings()[0]).contains("speed_vs_baseline"));
    QVERIFY(!rules(panel->findings()[1]).contains("speed_vs_baseline"));
  }

  // A comparison holding a run that another process still records reads it again while the tab shows it: the run's
  // end shows there without opening the comparison again.
  void a_compared_run_that_ends_elsewhere_shows_its_end() {
    const QString db = dir_.filePath("follow.sqlite");
    RunStore recorder(db.toStdString());  // the other process: it records the run until end_run
    TrainConfig config = tiny_config(data_);
    config.name = "recorded elsewhere";
    const int64_t id = recorder.begin_run(config, RunInfo{}, "");
    MainWindow w(db);
    w.resize(1366, 768);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.open_runs({id});
    w.tabs()->setCurrentWidget(w.compare_view());
    QCOMPARE(w.compare_view()->series().front()->status, RunStatus::Running);
    auto* table = w.compare_view()->findChild<QTableView*>("compareTable");
    table->setColumnWidth(1, 333);  // the user widens the run's column: reading the run again keeps it so
    recorder.end_run(id, RunEnd{RunStatus::Finished, ""}, {}, 1.0);
    QTRY_COMPARE_WITH_TIMEOUT(w.compare_view()->series().front()->status, RunStatus::Finished, 10000);
    QCOMPARE(table->columnWidth(1), 333);
  }

  void diagnosis_escapes_what_the_store_holds() {
    TrainConfig c = tiny_config(data_);
    c.name = "<script>alert(1)</script>";
    c.epochs = 1;
    const QString db = dir_.filePath("escape.sqlite");  // the other tests count the runs of theirs
    const int64_t id = train_into_store(db, c);
    MainWindow w(db);
    w.open_runs({id});
    const QString html = w.compare_view()->diagnosis()->html();
    QVERIFY2(!html.contains("<script>"), qPrintable(html));
    QVERIFY(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
  }

  // A damaged record only the diagnosis reads (a confusion matrix that is no JSON) leaves the run's charts and table
  // shown; its diagnosis says why it cannot be read.
  void a_damaged_diagnosis_record_leaves_the_charts() {
    const QString db = dir_.filePath("damaged.sqlite");
    const int64_t id = train_into_store(db, tiny_config(data_, 1, 2));
    {
      RunStore store(db.toStdString(), RunStore::Mode::Existing);
      SqlStatement(
          store.connection(),
          "INSERT INTO run_details(run_id, kind, epoch, step, body_json) VALUES (?, 'confusion', 1, 0, '{not')")
          .bind(1, id)
          .run();
    }
    MainWindow w(db);
    w.open_runs({id});
    QCOMPARE(w.compare_view()->run_ids(), std::vector<int64_t>{id});
    QVERIFY(w.compare_view()->charts()->chart("loss")->point_count() > 0);
    const QString html = w.compare_view()->diagnosis()->html();
    QVERIFY2(html.contains("Cannot be read: "), qPrintable(html));
  }

  void the_window_saves_the_report_of_the_runs_it_shows() {
    MainWindow w(db_);
    w.open_runs({fp32_seed1_, bf16_seed1_});
    w.tabs()->setCurrentWidget(w.compare_view());
    QCOMPARE(w.chosen_runs(), (std::vector<int64_t>{fp32_seed1_, bf16_seed1_}));
    // The report the File menu saves of the runs it would act on.
    const auto saved = [&](const QString& name) {
      const QString file = dir_.filePath(name);
      w.save_report(w.chosen_runs(), file);
      QFile f(file);
      return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
    };
    // The save dialog names the runs the report holds, baseline first, in its title and its file.
    QString title, proposed;
    QTimer::singleShot(0, &w, [&] {
      if (auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget())) {
        title = dialog->windowTitle();
        proposed = dialog->selectedFiles().value(0);
        dialog->reject();
      }
    });
    for (QAction* a : w.menuBar()->actions().front()->menu()->actions())
      if (a->text().startsWith("Save &report")) a->trigger();
    const QString runs = QString::number(fp32_seed1_) + "-" + QString::number(bf16_seed1_);
    QVERIFY2(proposed.endsWith("ampwb-report-" + runs + ".html"), qPrintable(proposed));
    QCOMPARE(title, QString("Save the report of runs %1, %2 (against %1)").arg(fp32_seed1_).arg(bf16_seed1_));
    // A name typed without its suffix is saved with the filter's, a file a browser opens.
    QTimer::singleShot(0, &w, [&] {
      if (auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget())) {
        dialog->setDirectory(dir_.path());
        dialog->selectFile("Bericht ü 报告");
        QMetaObject::invokeMethod(dialog, "accept");  // the Save button
      }
    });
    for (QAction* a : w.menuBar()->actions().front()->menu()->actions())
      if (a->text().startsWith("Save &report")) a->trigger();
    QVERIFY(QFileInfo(dir_.filePath("Bericht ü 报告.html")).size() > 0);
    QVERIFY(!QFileInfo::exists(dir_.filePath("Bericht ü 报告")));
    for (const QString typed : {"report.v2", "chart.png"}) {  // a suffix HTML is not: the file gets .html too
      QTimer::singleShot(0, &w, [&] {
        if (auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget())) {
          dialog->setDirectory(dir_.path());
          dialog->selectFile(typed);
          QMetaObject::invokeMethod(dialog, "accept");
        }
      });
      for (QAction* a : w.menuBar()->actions().front()->menu()->actions())
        if (a->text().startsWith("Save &report")) a->trigger();
      QVERIFY2(QFileInfo(dir_.filePath(typed + ".html")).size() > 0, qPrintable(typed));
      QVERIFY(!QFileInfo::exists(dir_.filePath(typed)));
    }
    const QString html = saved("new-folder/report.html");  // a missing folder is made, as the CLI makes it
    // The same document as `ampwb report` of these runs, made from the same store.
    const RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    const QString engine = QString::fromStdString(html_report(store, {fp32_seed1_, bf16_seed1_}));
    auto without_timestamp = [](QString h) { return h.remove(QRegularExpression("on \\d{4}-[0-9T:.Z-]+ from")); };
    QCOMPARE(without_timestamp(html), without_timestamp(engine));
    QVERIFY(html.contains("<h3>Diagnosis</h3>"));
    // With the other run chosen as the baseline, the report measures against it, as the tab shows.
    w.compare_view()->baseline()->setCurrentIndex(1);
    QCOMPARE(w.chosen_runs(), (std::vector<int64_t>{bf16_seed1_, fp32_seed1_}));
    const QString against_bf16 = saved("report-against-bf16.html");
    QVERIFY(against_bf16.contains("speed-up vs run " + QString::number(bf16_seed1_)));
    QVERIFY(!against_bf16.contains("speed-up vs run " + QString::number(fp32_seed1_)));
    // Each run keeps the colour the tab draws it in, whichever comes first as the baseline: its legend entries are
    // in that colour.
    const auto& series = w.compare_view()->series();
    for (const QString& report : {html, against_bf16})
      for (size_t i = 0; i < series.size(); ++i) {
        const QString colour = run_color(series[i]->colour_index(i)).name();
        const QString entry = QRegularExpression::escape("stroke=\"" + colour + "\"/>") + "<text[^>]*>" +
                              QString::number(series[i]->run_id) + " ";
        QVERIFY2(report.contains(QRegularExpression(entry)), qPrintable(entry));
      }
  }

  // At 1366×768, against the wall clock, the loss, accuracy, epoch-time and loss-scale charts say so under their x
  // axis: whole ("wall clock (s since the run started)", as an export says it), on two lines where the chart is
  // narrow, or "wall clock (s)" where even those do not fit; on the Training tab beside the setup panel, on a stored
  // run and on a comparison.
  void the_wall_clock_axis_is_titled_on_small_charts() {
    MainWindow w(db_);
    w.resize(1366, 768);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    // Whole beside the setup panel; the comparison's charts are lower, and one line may be all the room they have.
    const auto check_titled = [](ChartPanel* panel, const QString& where, bool whole) {
      panel->set_x_axis(XAxis::WallClock);
      QTest::qWait(300);
      for (const QString metric : {"loss", "accuracy", "epoch-time", "loss-scale"}) {
        MetricChart* c = panel->chart(metric);
        // In a comparison, whose legend takes a line more, the loss-scale chart above its note on skipped steps has
        // room for no x axis title at all ("step" neither): it is left to the Training tab and to one run there.
        if (!c->isVisibleTo(panel) || (where == "Comparison" && metric == "loss-scale")) continue;
        const QAbstractAxis* x = c->chart()->axes(Qt::Horizontal).front();
        const QString what = where + ", " + metric + ": \"" + x->titleText() + "\"";
        QVERIFY2(x->isTitleVisible(), qPrintable(what + " is hidden"));
        const QString shown = QTextDocumentFragment::fromHtml(x->titleText()).toPlainText().simplified();
        QVERIFY2(shown == x_axis_title(XAxis::WallClock) || (!whole && shown == x_axis_short_title(XAxis::WallClock)),
                 qPrintable(what));
        for (QGraphicsItem* item : c->scene()->items())  // nothing QtCharts cut short for want of room
          if (auto* text = dynamic_cast<QGraphicsTextItem*>(item);
              text && text->isVisible() && text->defaultTextColor().alpha() > 0)  // the chart's own title is clear
            QVERIFY2(!text->toPlainText().contains("...") && !text->toPlainText().contains(QChar(0x2026)),
                     qPrintable(what + ": \"" + text->toPlainText() + "\" is cut short"));
      }
    };
    w.tabs()->setCurrentIndex(0);  // Training, beside the setup panel
    check_titled(w.live_charts(), "Training tab", true);
    w.open_runs({bf16_seed1_});
    check_titled(w.compare_view()->charts(), "One stored run", false);
    w.open_runs({fp32_seed1_, fp32_seed2_, bf16_seed1_});
    check_titled(w.compare_view()->charts(), "Comparison", false);
  }

  // At 1366×768 every axis of every chart shown keeps a title that says what it measures, with its unit: whole, or
  // its short form ("s/epoch") where the chart is small; on the Training tab, a stored run and a comparison alike.
  // Two exceptions, for want of room QtCharts would give them: the epoch-time chart's two y axes (each gets 20 % of a
  // 200 px chart's width), whose units its legend and title say instead, and in the Compare tab's low charts the x
  // axes of the histogram and, beside several runs, of the loss-scale chart, whose step axis the loss chart titles.
  void every_axis_keeps_its_title_on_small_charts() {
    MainWindow w(db_);
    w.resize(1350, 720);  // a 1366×768 screen less the window's frame
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QStringList problems;
    const auto check_every_axis = [&problems](ChartPanel* panel, const QString& where) {
      QTest::qWait(300);
      for (MetricChart* c : panel->charts()) {
        if (!c->isVisibleTo(panel)) continue;
        const QString chart = where + ", " + c->metric_key();
        QStringList said{c->chart()->title()};
        for (const QAbstractSeries* series : c->chart()->series()) said << series->name();
        for (const QAbstractAxis* axis : c->chart()->axes()) {
          if (!axis->isVisible() || whole_axis_title(axis).isEmpty() || axis->isTitleVisible()) continue;
          const QString unit = axis->property(kShortTitle).toString();
          if (c->metric_key() == "epoch-time" && axis->orientation() == Qt::Vertical && said.join(' ').contains(unit))
            continue;
          if (where != "Training tab, no run yet" && axis->orientation() == Qt::Horizontal &&
              ((c->metric_key() == "loss-scale" && where == "Comparison") || c->metric_key() == "histogram"))
            continue;
          problems << chart + ": \"" + whole_axis_title(axis) + "\" is hidden";
        }
        for (QGraphicsItem* item : c->scene()->items())  // nothing QtCharts cut short for want of room
          if (auto* text = dynamic_cast<QGraphicsTextItem*>(item);
              text && text->isVisible() && text->defaultTextColor().alpha() > 0 &&
              (text->toPlainText().contains("...") || text->toPlainText().contains(QChar(0x2026))))
            problems << chart + ": \"" + text->toPlainText() + "\" is cut short";
      }
    };
    w.tabs()->setCurrentIndex(0);
    check_every_axis(w.live_charts(), "Training tab, no run yet");
    w.open_runs({bf16_seed1_});
    check_every_axis(w.compare_view()->charts(), "One stored run");
    w.open_runs({fp32_seed1_, fp32_seed2_, bf16_seed1_});
    check_every_axis(w.compare_view()->charts(), "Comparison");
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));
  }

  // The report measures against the baseline the Compare tab shows, saved from the Runs tab as from the Compare
  // tab, and its dialog says which run that is and why; runs not compared there are measured against the first.
  void the_report_says_its_baseline_whichever_tab_saves_it() {
    MainWindow w(db_);
    w.open_runs({fp32_seed1_, bf16_seed1_});
    w.compare_view()->baseline()->setCurrentIndex(1);  // the bf16 run
    const std::vector<int64_t> against_bf16{bf16_seed1_, fp32_seed1_};
    QCOMPARE(w.chosen_runs(), against_bf16);
    w.tabs()->setCurrentWidget(w.runs_view());
    w.runs_view()->select({fp32_seed1_, bf16_seed1_});
    QCOMPARE(w.chosen_runs(), against_bf16);
    const auto dialog_note = [&] {
      QString note;
      QTimer::singleShot(0, &w, [&] {
        if (auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget())) {
          if (auto* label = dialog->findChild<QLabel*>("saveNote"); label && label->isVisible()) note = label->text();
          dialog->reject();
        }
      });
      for (QAction* a : w.menuBar()->actions().front()->menu()->actions())
        if (a->text().startsWith("Save &report")) a->trigger();
      return note;
    };
    const RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    const auto label = [&](int64_t id) { return QString::fromStdString(run_label(store.run(id))); };
    QString note = dialog_note();
    QVERIFY2(note.contains("against run " + label(bf16_seed1_) + ", the Compare tab's baseline"), qPrintable(note));
    // Other runs than those compared: the first of them, and how to choose another.
    w.runs_view()->select({fp32_seed2_, bf16_seed1_});
    QCOMPARE(w.chosen_runs(), (std::vector<int64_t>{fp32_seed2_, bf16_seed1_}));
    note = dialog_note();
    QVERIFY2(note.contains("against run " + label(fp32_seed2_) + ", the first of these runs") &&
                 note.contains("Compare tab") && note.contains("Baseline"),
             qPrintable(note));
  }

  // A comparison read again every few seconds while a run trains keeps the charts' choices for its runs (the
  // histogram's epoch, the grouping); other runs start from their defaults.
  void the_same_runs_read_again_keep_the_charts_choices() {
    MainWindow w(db_);
    ChartPanel* charts = w.compare_view()->charts();
    auto* histogram_epoch = charts->findChild<QSpinBox*>("histogramEpoch");
    QVERIFY(histogram_epoch);
    w.open_runs({fp32_seed1_, fp32_seed2_});
    QCOMPARE(charts->options().group_by, QString(kAllButSeed));  // only the seed differs
    histogram_epoch->setValue(1);
    charts->set_group_by("");
    w.compare_view()->reload();  // what following a run still training does
    QCOMPARE(histogram_epoch->value(), 1);
    QCOMPARE(charts->options().histogram_epoch, 1);
    QCOMPARE(charts->options().group_by, QString());
    w.open_runs({fp32_seed1_, bf16_seed1_});
    QCOMPARE(histogram_epoch->value(), 0);
    QCOMPARE(histogram_epoch->text(), QString("latest"));
    w.open_runs({fp32_seed1_, fp32_seed2_});
    QCOMPARE(charts->options().group_by, QString(kAllButSeed));
  }

  // Four runs beside the setup panel at 1366×768: each run's training speed shows whole, its interquartile range on
  // a second line of the cell rather than cut mid-number, and the tooltip holds the value on one line.
  void four_runs_speeds_show_whole_at_1366_by_768() {
    QDir().mkpath(dir_.filePath("four"));
    const QString db = dir_.filePath("four/four.sqlite");
    RunStore(db_.toStdString(), RunStore::Mode::ReadOnly).backup_to(db.toStdString());
    TrainConfig c = tiny_config(data_);
    c.batch_size = 4;  // steady steps to measure the speed on, as the others
    c.max_steps_per_epoch = 0;
    c.seed = 2;
    c.name = "bf16 seed 2";
    c.precision = precision_preset("amp-bf16");
    const int64_t bf16_seed2 = train_into_store(db, c);
    MainWindow w(db);
    w.resize(1366, 768);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.tabs()->setCurrentWidget(w.compare_view());
    w.findChild<QWidget*>("setupDock")->setVisible(true);
    w.open_runs({fp32_seed1_, fp32_seed2_, bf16_seed1_, bf16_seed2});
    auto* table = w.compare_view()->findChild<QTableView*>("compareTable");
    QTRY_VERIFY(table->isVisible());
    QCOMPARE(table->model()->columnCount(), 5);
    const int speed =
        static_cast<int>(w.compare_view()->table_model()->row_labels().indexOf("training speed (steady state)"));
    QVERIFY(speed >= 0);
    for (int column = 1; column <= 4; ++column) {
      const QModelIndex cell = table->model()->index(speed, column);
      const QString shown = cell.data().toString();
      QFont font = table->font();
      font.setBold(cell.data(Qt::FontRole).value<QFont>().bold());
      const QFontMetrics metrics(font);
      const QStringList lines = shown.split('\n');
      QVERIFY2(lines.size() == 2 && lines[1].startsWith("(IQR "), qPrintable(shown));
      for (const QString& line : lines)
        QVERIFY2(metrics.horizontalAdvance(line) + 8 <= table->columnWidth(column),
                 qPrintable(QStringLiteral("\"%1\" in %2 px").arg(line).arg(table->columnWidth(column))));
      QVERIFY2(table->rowHeight(speed) >= 2 * metrics.height(), qPrintable(QString::number(table->rowHeight(speed))));
      QCOMPARE(QTextDocumentFragment::fromHtml(cell.data(Qt::ToolTipRole).toString()).toPlainText().section("\n", 0, 0),
               QString(shown).replace('\n', ' '));
    }
  }

  // The window as on a 1366×768 screen less its frame, on the Compare tab, the setup panel hidden as it is there.
  static bool shown_comparing_at_1366_by_768(MainWindow& w) {
    w.resize(1350, 720);
    w.show();
    if (!QTest::qWaitForWindowExposed(&w)) return false;
    w.tabs()->setCurrentWidget(w.compare_view());
    w.findChild<QWidget*>("setupDock")->setVisible(false);
    return true;
  }

  // At 1366×768 the per-layer table beside the charts shows every epoch of a 3-epoch run whole: its columns as wide
  // as their cells ("14.4"), not as a share's "100.00%", which left the third cut in the middle.
  void the_per_layer_table_shows_three_epochs_at_1366_by_768() {
    QDir().mkpath(dir_.filePath("three"));
    const QString db = dir_.filePath("three/three.sqlite");
    RunStore(db_.toStdString(), RunStore::Mode::ReadOnly).backup_to(db.toStdString());
    TrainConfig c = tiny_config(data_, 3);
    c.name = "fp16 3 epochs";
    c.precision = precision_preset("amp-fp16");
    const int64_t three = train_into_store(db, c);
    MainWindow w(db);
    QVERIFY(shown_comparing_at_1366_by_768(w));
    w.open_runs({fp32_seed1_, bf16_seed1_, three});
    ChartPanel* charts = w.compare_view()->charts();
    auto* chooser = charts->findChild<QComboBox*>("layersRun");
    chooser->setCurrentIndex(chooser->findData(QVariant::fromValue(three)));
    QCOMPARE(charts->numerics()->measure(), NumericsMeasure::ActivationHeadroom);
    QTableWidget* table = charts->numerics()->table();
    QTRY_VERIFY(table->isVisible());
    QTest::qWait(300);  // the headers laid out: the layers' names take their width
    QCOMPARE(table->columnCount(), 3);
    const QAbstractItemView& cells = *table;  // where sizeHintForColumn is public
    for (int column = 0; column < 3; ++column)
      QVERIFY2(table->columnWidth(column) >= cells.sizeHintForColumn(column), qPrintable(QString::number(column)));
    const int right = table->columnViewportPosition(2) + table->columnWidth(2);
    QVERIFY2(right <= table->viewport()->width(),
             qPrintable(QStringLiteral("epoch 3 ends at %1 px of %2").arg(right).arg(table->viewport()->width())));
  }

  // At 1366×768 the speed lines under the charts take as many lines as they have, up to four, and none without any:
  // the side-by-side table under them gets the rest, five rows at least beside two runs' one to three lines.
  void the_speed_lines_leave_their_unused_lines_to_the_table() {
    MainWindow w(db_);
    QVERIFY(shown_comparing_at_1366_by_768(w));
    auto* area = w.compare_view()->findChild<QScrollArea*>("compareTextArea");
    auto* time = w.compare_view()->findChild<QLabel*>("compareTime");
    auto* summary = w.compare_view()->findChild<QLabel*>("compareSummary");
    auto* table = w.compare_view()->findChild<QTableView*>("compareTable");
    QVERIFY(area && time && summary && table);
    const int line = time->fontMetrics().lineSpacing();
    const auto lines_shown = [&] {  // wrapped at the area's width
      int height = 0;
      for (QLabel* label : {summary, time})
        if (label->isVisibleTo(w.compare_view())) height += label->heightForWidth(area->width());
      return (height + line / 2) / line;
    };
    for (const std::vector<int64_t>& runs : {std::vector<int64_t>{fp32_seed1_, bf16_seed1_},
                                             std::vector<int64_t>{fp32_seed1_, fp32_seed2_, bf16_seed1_}}) {
      w.open_runs(runs);
      QTRY_VERIFY(table->isVisible());
      QTest::qWait(300);  // laid out at the window's width
      const int lines = lines_shown();
      const QString what = QStringLiteral("%1 runs, %2 lines in %3 px").arg(runs.size()).arg(lines).arg(area->height());
      QCOMPARE(area->isVisibleTo(w.compare_view()), lines > 0);
      if (lines > 0)
        QVERIFY2(area->height() >= std::min(lines, 4) * line && area->height() <= std::min(lines, 4) * line + 2,
                 qPrintable(what));
      if (runs.size() == 2) {
        QVERIFY2(lines <= 3, qPrintable(time->text()));  // two warnings at most, and one step-time line
        const int rows = table->viewport()->height() / table->rowHeight(0);
        QVERIFY2(rows >= 5, qPrintable(what + QStringLiteral(": %1 px of table").arg(table->viewport()->height())));
      }
    }
  }

  // A comparison's baseline is the FP32 run, whichever order the runs come in; the one chosen stays chosen while it is
  // compared, and a comparison without it starts again from its FP32 run.
  void the_baseline_is_the_fp32_run_until_another_is_chosen() {
    MainWindow w(db_);
    QComboBox* baseline = w.compare_view()->baseline();
    w.open_runs({bf16_seed1_, fp32_seed1_});
    QCOMPARE(baseline->currentData().toLongLong(), fp32_seed1_);
    QCOMPARE(w.compare_view()->table_model()->baseline(), 1);
    baseline->setCurrentIndex(0);
    w.open_runs({fp32_seed2_, bf16_seed1_, fp32_seed1_});
    QCOMPARE(baseline->currentData().toLongLong(), bf16_seed1_);
    QCOMPARE(w.compare_view()->table_model()->baseline(), 1);
    w.open_runs({fp32_seed2_, fp32_seed1_});
    QCOMPARE(baseline->currentData().toLongLong(), fp32_seed2_);
  }

  // One speed-up, defined once: the GUI's table, its step-time line and diagnosis, `ampwb compare`, `ampwb explain`
  // and the report give amp-bf16 over fp32 as the same number with the same interval.
  void the_speed_up_is_the_same_figure_everywhere() {
    MainWindow w(db_);
    w.open_runs({fp32_seed1_, bf16_seed1_});
    const CompareModel* model = w.compare_view()->table_model();
    const QString label = "speed-up vs run " + QString::number(fp32_seed1_);
    const QString gui = model->value(label, 1);  // "1.66× (1.50–1.80)", perhaps with ", within noise"
    const QString interval = gui.section('(', 1).section(')', 0, 0);
    QVERIFY2(interval.contains(QChar(0x2013)), qPrintable(gui));
    // As prose says it, without "not distinguishable from 1.0×".
    const QString figure = gui.section(' ', 0, 0) + " (95% interval " + interval + ")";
    QVERIFY2(w.compare_view()->time_summary()->text().contains("end to end " + figure),
             qPrintable(w.compare_view()->time_summary()->text()));
    QVERIFY2(w.compare_view()->diagnosis()->html().contains(figure.toHtmlEscaped()),
             qPrintable(w.compare_view()->diagnosis()->html()));

    auto cli = [&](const QStringList& args) {
      QProcess p;
      p.start(AMPWB_BINARY, args + QStringList{"--db", db_});
      if (!p.waitForFinished(120000)) qFatal("ampwb did not finish");
      return QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
    };
    const QString a = QString::number(fp32_seed1_), b = QString::number(bf16_seed1_);
    const nlohmann::json cmp = nlohmann::json::parse(cli({"compare", a, b, "--json"}).toStdString());
    const QString json_text = QString::fromStdString(cmp["runs"][1]["speedup"]["text"].get<std::string>());
    QVERIFY2(json_text.startsWith(figure), qPrintable(json_text));
    const QString explain = cli({"explain", b, a});
    QVERIFY2(explain.contains(figure), qPrintable(explain));
    const QString report_file = dir_.filePath("speed-report.html");
    cli({"report", a, b, "--out", report_file});
    QFile report(report_file);
    QVERIFY(report.open(QIODevice::ReadOnly));
    const QString html = QString::fromUtf8(report.readAll());
    QVERIFY2(html.contains(gui.toHtmlEscaped()), qPrintable(gui));
  }

  void cli_and_gui_comparisons_agree_cell_for_cell() {
    const std::vector<int64_t> ids{fp32_seed1_, bf16_seed1_, fp32_seed2_};
    MainWindow w(db_);
    w.open_runs(ids);
    const CompareModel* model = w.compare_view()->table_model();
    QVERIFY(!model->differences_only());

    QStringList args{"compare"};
    for (int64_t id : ids) args << QString::number(id);
    args << "--json"
         << "--db" << db_;
    QProcess cli;
    cli.start(AMPWB_BINARY, args);
    QVERIFY(cli.waitForFinished(120000));
    const QByteArray out = cli.readAllStandardOutput();
    QVERIFY2(cli.exitCode() == 0, (out + cli.readAllStandardError()).constData());
    const nlohmann::json cmp = nlohmann::json::parse(out.toStdString());

    const nlohmann::json& rows = cmp.at("rows");
    QCOMPARE(model->rowCount(), static_cast<int>(rows.size()));
    QCOMPARE(model->columnCount(), static_cast<int>(ids.size()) + 1);
    nlohmann::json differences = nlohmann::json::object();
    for (int i = 0; i < model->rowCount(); ++i) {
      const nlohmann::json& row = rows.at(static_cast<size_t>(i));
      const QString label = QString::fromStdString(row.at("label").get<std::string>());
      QCOMPARE(model->index(i, 0).data().toString(), label);
      for (int run = 0; run < static_cast<int>(ids.size()); ++run)  // a speed's IQR drawn on a line of its own
        QCOMPARE(model->index(i, run + 1).data().toString().replace('\n', ' '),
                 QString::fromStdString(row.at("values").at(static_cast<size_t>(run)).get<std::string>()));
      if (row.at("setting").get<bool>() && row.at("differs").get<bool>())
        differences[label.toStdString()] = row["values"];
    }
    QCOMPARE(cmp.at("differences").dump(), differences.dump());
    // The cases the two used to disagree on: a float setting's text, the device row's label.
    QCOMPARE(model->value("lr", 0), QString("0.05"));
    QVERIFY(model->row_labels().contains("(device)"));
    QVERIFY(cmp["differences"].contains("precision.mode"));
    QVERIFY(cmp["differences"].contains("seed"));
    QVERIFY(!cmp["differences"].contains("lr"));
  }

  void seed_only_runs_get_mean_and_std_bands() {
    MainWindow w(db_);
    w.open_runs({fp32_seed1_, fp32_seed2_});
    CompareView* view = w.compare_view();
    QVERIFY(view->seed_only());
    QCOMPARE(view->charts()->options().group_by, QString(kAllButSeed));  // the old seed-only band, by default
    // The accuracy chart gains the band (an area) and the mean line.
    QCOMPARE(view->charts()->chart("accuracy")->series_count(), 2 * 3 + 2);
    QCOMPARE(view->charts()->chart("loss")->series_count(), 2 * 3 + 2);
  }

  void groups_by_any_configuration_key_with_mean_and_std() {
    // Two precisions times two seeds, trained and stored.
    QTemporaryDir dir;
    const QString db = dir.filePath("groups.sqlite");
    std::map<std::pair<std::string, int>, int64_t> ids;
    std::vector<int64_t> order;
    for (const char* mode : {"fp32", "amp-bf16"})
      for (int seed : {1, 2}) {
        TrainConfig c = tiny_config(data_);
        c.batch_size = 4;  // 9 steps an epoch: steady steps, so that the groups have a speed
        c.max_steps_per_epoch = 0;
        c.precision = precision_preset(mode);
        c.seed = seed;
        c.name = std::string(mode) + " seed " + std::to_string(seed);
        order.push_back(ids[{mode, seed}] = train_into_store(db, c));
      }
    MainWindow w(db);
    w.open_runs(order);
    ChartPanel* charts = w.compare_view()->charts();
    auto* group_by = charts->findChild<QComboBox*>("groupBy");
    QVERIFY(group_by && group_by->isVisibleTo(charts));
    // Offered: the keys that vary among the runs, and everything but the seed; not those that do not vary.
    QVERIFY(group_by->findData(QString("precision.mode")) >= 0);
    QVERIFY(group_by->findData(QString("seed")) >= 0);
    QVERIFY(group_by->findData(QString(kAllButSeed)) >= 0);
    QCOMPARE(group_by->findData(QString("lr")), -1);
    QCOMPARE(group_by->findData(QString("batch_size")), -1);
    QCOMPARE(charts->options().group_by, QString());  // more than the seed differs: no groups until asked

    charts->set_group_by("precision.mode");
    const RunStore store(db.toStdString(), RunStore::Mode::ReadOnly);
    const MetricChart* accuracy = charts->chart("accuracy");
    auto series = [&](const QString& name) -> QAbstractSeries* {
      for (QAbstractSeries* s : accuracy->chart()->series())
        if (s->name() == name) return s;
      return nullptr;
    };
    for (const char* mode : {"fp32", "amp-bf16"}) {
      const QString label = QStringLiteral("precision = %1 (2 runs)").arg(mode);
      auto* mean = qobject_cast<QXYSeries*>(series(label));
      auto* band = qobject_cast<QAreaSeries*>(series(label + " ± std"));
      QVERIFY2(mean && band, qPrintable(label));
      // Mean and sample standard deviation of the two seeds' stored validation accuracy, epoch by epoch.
      const std::vector<EpochReport> a = store.epochs(ids[{mode, 1}]), b = store.epochs(ids[{mode, 2}]);
      QCOMPARE(a.size(), size_t{2});
      QCOMPARE(mean->count(), 2);
      for (size_t e = 0; e < a.size(); ++e) {
        const double x = a[e].validation_accuracy, y = b[e].validation_accuracy;
        const double m = (x + y) / 2, sd = std::sqrt(((x - m) * (x - m) + (y - m) * (y - m)) / (2 - 1));
        const int k = static_cast<int>(e);
        QCOMPARE(mean->at(k).x(), double(a[e].epoch));
        QVERIFY(std::abs(mean->at(k).y() - 100 * m) < 1e-9);
        QVERIFY(std::abs(band->upperSeries()->at(k).y() - 100 * (m + sd)) < 1e-9);
        QVERIFY(std::abs(band->lowerSeries()->at(k).y() - 100 * (m - sd)) < 1e-9);
      }
    }
    QVERIFY(series("precision = fp32 (2 runs)") != series("precision = amp-bf16 (2 runs)"));

    // ampwb compare --group-by: the same groups, and each group's best validation accuracy as mean ± sample std of
    // the runs' best stored epochs. By "precision", as the groups' labels name precision.mode.
    QStringList args{"compare"};
    for (int64_t id : order) args << QString::number(id);
    args << "--group-by"
         << "precision"
         << "--json"
         << "--db" << db;
    QProcess cli;
    cli.start(AMPWB_BINARY, args);
    QVERIFY(cli.waitForFinished(120000));
    const QByteArray out = cli.readAllStandardOutput();
    QVERIFY2(cli.exitCode() == 0, (out + cli.readAllStandardError()).constData());
    const nlohmann::json groups = nlohmann::json::parse(out.toStdString()).at("groups");
    QCOMPARE(groups.size(), size_t{2});
    for (const nlohmann::json& g : groups) {
      const std::string mode = g.at("value");
      QVERIFY(g.at("label").get<std::string>() == "precision = " + mode + " (2 runs)");
      QVERIFY(g.at("runs") == nlohmann::json::array({ids[{mode, 1}], ids[{mode, 2}]}));
      std::vector<double> best;
      for (int seed : {1, 2}) {
        double b = 0;
        for (const EpochReport& e : store.epochs(ids[{mode, seed}])) b = std::max(b, 100 * e.validation_accuracy);
        best.push_back(b);
      }
      const double m = (best[0] + best[1]) / 2;
      const double sd = std::sqrt((best[0] - m) * (best[0] - m) + (best[1] - m) * (best[1] - m));
      const nlohmann::json& metric = g.at("metrics").at("best validation accuracy (%)");
      QVERIFY(std::abs(metric.at("mean").get<double>() - m) < 1e-9);
      QVERIFY(std::abs(metric.at("std").get<double>() - sd) < 1e-9);
    }
    // The Groups tab shows the CLI's groups, row by row, with its numbers as mean ± std.
    CompareView* view = w.compare_view();
    QTabWidget* details = view->details();
    QTableWidget* table = view->groups();
    QVERIFY(details->isTabVisible(details->indexOf(table)));
    QCOMPARE(table->rowCount(), 2);
    const auto column = [&](const QString& header) {
      for (int c = 0; c < table->columnCount(); ++c)
        if (table->horizontalHeaderItem(c)->text() == header) return c;
      return -1;
    };
    int measured = 0;  // cells with a figure: the groups' speeds among them
    for (int row = 0; row < 2; ++row) {
      const nlohmann::json& g = groups[static_cast<size_t>(row)];
      QCOMPARE(table->item(row, column("group"))->text(), QString::fromStdString(g.at("label")));
      QCOMPARE(table->item(row, column("runs"))->text(),
               QStringLiteral("%1, %2").arg(g.at("runs")[0].get<int64_t>()).arg(g.at("runs")[1].get<int64_t>()));
      for (const auto& [header, metric, decimals] :
           {std::tuple{"best val. acc. (%)", "best validation accuracy (%)", 2},
            std::tuple{"final val. loss", "final validation loss", 4},
            std::tuple{"training images/s", "training images/s (steady state)", 0}}) {
        const nlohmann::json& m = g.at("metrics").at(metric);
        if (m.at("mean").is_null()) {  // runs too short for a steady speed
          QCOMPARE(table->item(row, column(header))->text(), QString("—"));
          continue;
        }
        ++measured;
        QCOMPARE(table->item(row, column(header))->text(), QStringLiteral("%1 ± %2")
                                                               .arg(m.at("mean").get<double>(), 0, 'f', decimals)
                                                               .arg(m.at("std").get<double>(), 0, 'f', decimals));
      }
    }
    QCOMPARE(measured, 2 * 3);
    QVERIFY(legend_words(charts->findChild<QLabel*>("runLegend")).contains("precision = amp-bf16 (2 runs)"));
    // The loss chart groups alike: two bands, two mean lines over its 4 runs' 3 curves.
    QCOMPARE(charts->chart("loss")->series_count(), 4 * 3 + 2 * 2);

    // By seed: each group mixes the precisions.
    charts->set_group_by("seed");
    QVERIFY(series("seed = 1 (2 runs)") && series("seed = 2 (2 runs)"));
    // A group of one run draws its mean line (its own curve) and no band.
    w.open_runs({ids[{"fp32", 1}], ids[{"fp32", 2}], ids[{"amp-bf16", 1}]});
    charts->set_group_by("precision.mode");
    QVERIFY(series("precision = amp-bf16 (1 run)"));
    QVERIFY(!series("precision = amp-bf16 (1 run) ± std"));
    QVERIFY(series("precision = fp32 (2 runs) ± std"));
    QCOMPARE(table->rowCount(), 2);
    QCOMPARE(table->item(1, column("best val. acc. (%)"))->text().count("±"), 0);  // one run: no spread to show
    charts->set_group_by("");
    QVERIFY(!details->isTabVisible(details->indexOf(table)));  // ungrouped: no groups to show
  }

  void runs_view_filters_sorts_and_edits() {
    MainWindow w(db_);
    RunsView* runs = w.runs_view();
    QCOMPARE(runs->model()->rowCount(), 3);
    // The actions on runs wait for a selection that suits them, their tooltips saying what to select.
    const auto action = [runs](const char* name) { return runs->findChild<QAction*>(name); };
    runs->select({});
    for (const char* name : {"openAction", "renameAction", "deleteAction", "predictAction", "exportCsvAction"}) {
      QVERIFY2(action(name) && !action(name)->isEnabled(), name);
      QCOMPARE(tooltip_text(action(name)->toolTip()), QString("Select a run first"));
    }
    runs->select({fp32_seed1_, bf16_seed1_});
    for (const char* name : {"openAction", "tagAction", "deleteAction", "exportCsvAction", "exportChartsAction"})
      QVERIFY2(action(name)->isEnabled(), name);
    for (const char* name : {"resumeAction", "renameAction", "notesAction", "predictAction"}) {
      QVERIFY2(!action(name)->isEnabled(), name);
      QCOMPARE(tooltip_text(action(name)->toolTip()), QString("Select only one run for this"));
    }
    runs->select({bf16_seed1_});
    for (const char* name : {"renameAction", "notesAction", "predictAction", "exportModelAction"})
      QVERIFY2(action(name)->isEnabled(), name);
    // A finished run has nothing to resume: the tooltip says so, where a click used to.
    QVERIFY(!action("resumeAction")->isEnabled());
    QCOMPARE(tooltip_text(action("resumeAction")->toolTip()),
             QString("Run %1 ('bf16 seed 1') finished: there is nothing to resume").arg(bf16_seed1_));
    // The Run menu's Resume follows it.
    auto* resume_menu = w.findChild<QAction*>("resumeMenuAction");
    QVERIFY(resume_menu && !resume_menu->isEnabled());
    QCOMPARE(tooltip_text(resume_menu->toolTip()), tooltip_text(action("resumeAction")->toolTip()));
    runs->set_filter("bf16");
    QCOMPARE(runs->proxy()->rowCount(), 1);
    runs->set_filter("");
    QCOMPARE(runs->proxy()->rowCount(), 3);
    runs->proxy()->sort(RunsModel::Id, Qt::AscendingOrder);
    QCOMPARE(runs->proxy()->index(0, RunsModel::Id).data().toLongLong(), fp32_seed1_);
    runs->proxy()->sort(RunsModel::Id, Qt::DescendingOrder);
    QCOMPARE(runs->proxy()->index(0, RunsModel::Id).data().toLongLong(), bf16_seed1_);

    QCOMPARE(runs->rename(bf16_seed1_, "renamed bf16"), QString());
    QCOMPARE(runs->add_tag(bf16_seed1_, "keep"), QString());
    QCOMPARE(runs->set_notes(bf16_seed1_, "a note"), QString());
    QVERIFY(!runs->rename(bf16_seed1_, "12").isEmpty());  // all digits would read as an id: refused
    // A very long name is cut in its column, whole in the tooltip: the other columns stay in sight.
    const QString long_name = QString("a very long run name ").repeated(12);
    QCOMPARE(runs->rename(fp32_seed2_, long_name), QString());
    runs->reload();
    auto* table = runs->findChild<QTableView*>();
    QVERIFY2(table->columnWidth(RunsModel::Name) <= 40 * table->fontMetrics().averageCharWidth(),
             qPrintable(QString::number(table->columnWidth(RunsModel::Name))));
    const int long_row = runs->model()->row_of(fp32_seed2_);
    const QString tip = runs->model()->index(long_row, RunsModel::Name).data(Qt::ToolTipRole).toString();
    QVERIFY2(QString(tip).replace(QChar::Nbsp, ' ').contains(long_name.trimmed()), qPrintable(tip));
    QCOMPARE(runs->rename(fp32_seed2_, "fp32 seed 2"), QString());
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    const RunRecord r = store.run(bf16_seed1_);
    QCOMPARE(r.name, std::string("renamed bf16"));
    QCOMPARE(r.tags, std::vector<std::string>{"keep"});
    QCOMPARE(r.notes, std::string("a note"));
    runs->set_filter("keep");
    QCOMPARE(runs->proxy()->rowCount(), 1);
    runs->set_filter("A NOTE");  // the notes, shown in the name's tooltip, are searched too
    QCOMPARE(runs->proxy()->rowCount(), 1);
    QCOMPARE(runs->proxy()->index(0, RunsModel::Id).data().toLongLong(), bf16_seed1_);
    runs->set_filter("");
  }

  // A run deleted by another process while the user writes its notes: the save says so, and what was typed is on
  // the clipboard rather than gone.
  void notes_of_a_run_deleted_meanwhile_go_to_the_clipboard() {
    const QString db = dir_.filePath("notes-deleted/notes-deleted.sqlite");
    QDir().mkpath(dir_.filePath("notes-deleted"));
    RunStore(db_.toStdString(), RunStore::Mode::ReadOnly).backup_to(db.toStdString());
    MainWindow w(db);
    w.runs_view()->select({fp32_seed2_});
    QString warning, failed;
    int stage = 0;
    const QString unexpected =
        answering_windows(runs_action(w.runs_view(), "Notes…"), [&](QInputDialog* dialog, QMessageBox* box) {
          if (dialog && stage == 0) {
            try {
              RunStore(db.toStdString()).remove(fp32_seed2_);
            } catch (const std::exception& e) {
              failed = e.what();
            }
            dialog->setTextValue("a paragraph worth keeping");
            dialog->accept();
          } else if (box && stage == 1) {
            warning = box->text();
            box->buttons().front()->click();
          } else {
            return false;
          }
          ++stage;
          return true;
        });
    QCOMPARE(unexpected + failed, QString());
    QCOMPARE(stage, 2);
    QVERIFY2(warning.contains("No run " + QString::number(fp32_seed2_)) &&
                 warning.contains("What you typed was not saved: it is on the clipboard."),
             qPrintable(warning));
    QCOMPARE(QGuiApplication::clipboard()->text(), QString("a paragraph worth keeping"));
  }

  // A name another run has: the refusal says so and the dialog comes back with what was typed, to change.
  void a_name_taken_comes_back_in_the_dialog() {
    const QString db = dir_.filePath("rename-taken/rename-taken.sqlite");
    QDir().mkpath(dir_.filePath("rename-taken"));
    RunStore(db_.toStdString(), RunStore::Mode::ReadOnly).backup_to(db.toStdString());
    const std::string taken = RunStore(db.toStdString(), RunStore::Mode::ReadOnly).run(bf16_seed1_).name;
    MainWindow w(db);
    w.runs_view()->select({fp32_seed2_});
    QString warning, offered_again;
    int stage = 0;
    const QString unexpected =
        answering_windows(runs_action(w.runs_view(), "Rename…"), [&](QInputDialog* dialog, QMessageBox* box) {
          if (dialog && stage == 0) {
            dialog->setTextValue(QString::fromStdString(taken));
            dialog->accept();
          } else if (box && stage == 1) {
            warning = box->text();
            box->buttons().front()->click();
          } else if (dialog && stage == 2) {
            offered_again = dialog->textValue();
            dialog->setTextValue(offered_again + " too");
            dialog->accept();
          } else {
            return false;
          }
          ++stage;
          return true;
        });
    QCOMPARE(unexpected, QString());
    QCOMPARE(stage, 3);
    QVERIFY2(warning.contains("Yours follows in the dialog, to change."), qPrintable(warning));
    QCOMPARE(offered_again, QString::fromStdString(taken));
    QCOMPARE(RunStore(db.toStdString(), RunStore::Mode::ReadOnly).run(fp32_seed2_).name, taken + " too");
  }

  // The dialog opens with the notes there and the cursor after them: what the user types adds to them (Qt's dialog
  // selected them all, and the first key pressed replaced them).
  void notes_typed_into_the_dialog_add_to_those_there() {
    RunStore(db_.toStdString()).set_notes(bf16_seed1_, "kept");
    MainWindow w(db_);
    w.runs_view()->select({bf16_seed1_});
    bool selected = true;
    int stage = 0;
    const QString unexpected =
        answering_windows(runs_action(w.runs_view(), "Notes…"), [&](QInputDialog* dialog, QMessageBox*) {
          auto* edit = dialog && stage == 0 ? dialog->findChild<QPlainTextEdit*>() : nullptr;
          if (!edit) return false;
          selected = edit->textCursor().hasSelection();
          QTest::keyClicks(edit, " and more");
          dialog->accept();
          ++stage;
          return true;
        });
    QCOMPARE(unexpected, QString());
    QVERIFY2(!selected, "the notes were selected: a key pressed would replace them");
    QCOMPARE(RunStore(db_.toStdString(), RunStore::Mode::ReadOnly).run(bf16_seed1_).notes,
             std::string("kept and more"));
  }

  // Notes changed by another process while the user edits them in the dialog: the save says so and shows theirs,
  // and the dialog comes back with theirs and the user's text to merge; nothing is written over, nothing lost. The
  // dialog is wide enough for a paragraph, and wraps its lines.
  void notes_changed_elsewhere_come_back_to_merge() {
    MainWindow w(db_);
    w.runs_view()->select({fp32_seed2_});
    int stage = 0;
    QString warning, returned, failed;
    bool wraps = false;
    int width = 0;
    const QString unexpected =
        answering_windows(runs_action(w.runs_view(), "Notes…"), [&](QInputDialog* dialog, QMessageBox* box) {
          if (dialog && stage == 0) {
            const auto* edit = dialog->findChild<QPlainTextEdit*>();
            wraps = edit && edit->isVisible() && edit->lineWrapMode() == QPlainTextEdit::WidgetWidth;
            width = dialog->width();
            try {
              RunStore(db_.toStdString()).set_notes(fp32_seed2_, "theirs");
            } catch (const std::exception& e) {
              failed = e.what();
            }
            dialog->setTextValue("mine");
            dialog->accept();
          } else if (box && stage == 1) {
            warning = box->text();
            box->defaultButton() ? box->defaultButton()->click() : box->buttons().front()->click();
          } else if (dialog && stage == 2) {
            returned = dialog->textValue();
            dialog->setTextValue("theirs\nmine");
            dialog->accept();
          } else {
            return false;
          }
          ++stage;
          return true;
        });
    QCOMPARE(unexpected + failed, QString());
    QCOMPARE(stage, 3);
    QVERIFY2(warning.contains("changed by another window or process meanwhile") && warning.contains("theirs"),
             qPrintable(warning));
    QCOMPARE(returned, QString("theirs\n\nmine"));  // both, to merge
    QVERIFY2(warning.startsWith("The notes of run") && warning.contains("Theirs and yours"), qPrintable(warning));
    QCOMPARE(RunStore(db_.toStdString(), RunStore::Mode::ReadOnly).run(fp32_seed2_).notes, std::string("theirs\nmine"));
    QVERIFY2(wraps, "the notes are a plain-text box whose lines wrap");
    QVERIFY2(width >= 560, qPrintable(QString::number(width)));
  }

  void delete_asks_first() {
    const QString db = dir_.filePath("delete.sqlite");
    const int64_t id = train_into_store(db, tiny_config(data_, 1, 2));
    MainWindow w(db);
    RunsView* runs = w.runs_view();
    QString asked;
    bool answer = false;
    runs->confirm = [&](const QString& question) {
      asked = question;
      return answer;
    };
    // The toolbar's Delete… action, as a click would trigger it.
    QAction* remove = runs_action(runs, RunsView::tr("Delete…"));
    runs->select({id});
    remove->trigger();
    QVERIFY2(asked.startsWith("Delete this run, everything recorded about it and its final weights?"),
             qPrintable(asked));
    // Its checkpoint went when it finished: nothing is said of checkpoint files. One on disk is said to stay.
    QVERIFY2(!asked.contains("checkpoint"), qPrintable(asked));
    const QString kept = dir_.filePath("kept-checkpoint.ampwb");
    QFile(kept).open(QIODevice::WriteOnly);
    RunStore(db.toStdString()).add_checkpoint(id, {1, 2, kept.toStdString()});
    remove->trigger();
    QVERIFY2(asked.contains("1 checkpoint file stays on disk, though nothing resumes from it once its run is "
                            "deleted."),
             qPrintable(asked));
    QCOMPARE(runs->model()->rowCount(), 1);  // declined: still there
    // The Delete key in the table asks the same; Enter opens the run.
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.tabs()->setCurrentWidget(runs);
    runs->select({id});
    QTableView* table = runs->findChild<QTableView*>();
    table->setFocus();
    table->setCurrentIndex(runs->proxy()->index(0, 0));
    QTest::keyClick(table, Qt::Key_Return);
    QCOMPARE(w.compare_view()->run_ids(), std::vector<int64_t>{id});
    w.tabs()->setCurrentWidget(runs);
    runs->select({id});
    table->setFocus();
    asked.clear();
    answer = true;
    QTest::keyClick(table, Qt::Key_Delete);
    QVERIFY2(asked.startsWith("Delete this run"), qPrintable(asked));
    QCOMPARE(runs->model()->rowCount(), 0);
    QCOMPARE(RunStore(db.toStdString(), RunStore::Mode::ReadOnly).runs().size(), size_t{0});
  }

  // Runs still training are found before the question: selected alone they are refused at once, by name; beside
  // others the question says which are deleted and which stay, and afterwards the status bar says what was done.
  void delete_leaves_runs_still_training_and_says_so_before_asking() {
    const QString db = dir_.filePath("training-delete/runs.sqlite");
    QDir().mkpath(dir_.filePath("training-delete"));
    RunStore recorder(db.toStdString());  // the CLI's `ampwb train`: it records its runs until end_run
    const auto run_named = [&](const char* name) {
      TrainConfig config;
      config.name = name;
      return recorder.begin_run(config, RunInfo{}, "");
    };
    const int64_t done = run_named("done-run");
    const int64_t busy = run_named("busy-run");
    const int64_t busier = run_named("busier-run");
    // done-run's file is recorded at each epoch, the same file; one more it named is gone from the disk already.
    recorder.end_run(done, {RunStatus::Finished, ""}, {}, 1.0);
    const QString kept = dir_.filePath("training-delete/kept.ampwb");
    QFile(kept).open(QIODevice::WriteOnly);
    recorder.add_checkpoint(done, {1, 2, kept.toStdString()});
    recorder.add_checkpoint(done, {2, 4, kept.toStdString()});
    recorder.add_checkpoint(done, {3, 6, dir_.filePath("training-delete/gone.ampwb").toStdString()});
    const QString busy_file = dir_.filePath("training-delete/busy.ampwb");  // stays with its run: not counted
    QFile(busy_file).open(QIODevice::WriteOnly);
    recorder.add_checkpoint(busy, {1, 2, busy_file.toStdString()});

    MainWindow w(db);
    RunsView* runs = w.runs_view();
    QStringList asked;
    runs->confirm = [&](const QString& question) {
      asked << question;
      return true;
    };
    QSignalSpy said(runs, &RunsView::status_message);
    QAction* remove = runs_action(runs, RunsView::tr("Delete…"));
    // One run training: refused at once, in the store's words, nothing asked.
    runs->select({busy});
    QString refusal;
    QString unexpected = answering_windows(remove, [&](QInputDialog*, QMessageBox* box) {
      if (!box || !refusal.isEmpty()) return false;
      refusal = box->text();
      box->buttons().front()->click();
      return true;
    });
    QCOMPARE(unexpected, QString());
    QVERIFY2(refusal.startsWith(QStringLiteral("Run %1 ('busy-run') is still training (process ").arg(busy)),
             qPrintable(refusal));
    QCOMPARE(asked, QStringList());
    // Two, both training: refused at once, each named.
    runs->select({busy, busier});
    refusal.clear();
    unexpected = answering_windows(remove, [&](QInputDialog*, QMessageBox* box) {
      if (!box || !refusal.isEmpty()) return false;
      refusal = box->text();
      box->buttons().front()->click();
      return true;
    });
    QCOMPARE(unexpected, QString());
    QVERIFY2(refusal.startsWith("None of these runs can be deleted now: they are still training.") &&
                 refusal.contains(QStringLiteral("%1 (busy-run): process ").arg(busy)) &&
                 refusal.contains(QStringLiteral("%1 (busier-run): process ").arg(busier)),
             qPrintable(refusal));
    QCOMPARE(asked, QStringList());
    QCOMPARE(said.count(), 0);
    // The finished one beside one training: the question counts and names the one deleted, says which stays and
    // why, and counts the one checkpoint file on disk of the run deleted; no window after the yes.
    runs->select({done, busy});
    unexpected = answering_windows(remove, [](QInputDialog*, QMessageBox*) { return false; });
    QCOMPARE(unexpected, QString());
    QCOMPARE(asked.size(), 1);
    const QString question = asked.front();
    QVERIFY2(question.startsWith(QStringLiteral("Delete this run and everything recorded about it?\n\n%1 (done-run)\n\n"
                                                "This run stays, as it is still training (stop it first to delete "
                                                "it):\n%2 (busy-run): process ")
                                     .arg(done)
                                     .arg(busy)),
             qPrintable(question));
    QVERIFY2(question.endsWith("\n\n1 checkpoint file stays on disk, though nothing resumes from it once its run is "
                               "deleted."),
             qPrintable(question));
    QCOMPARE(runs->model()->row_of(done), -1);
    QVERIFY(runs->model()->row_of(busy) >= 0);
    QCOMPARE(said.count(), 1);
    QCOMPARE(said.front().front().toString(),
             QStringLiteral("Deleted run %1; run %2 stays: it is still training").arg(done).arg(busy));
    recorder.end_run(busy, {RunStatus::Finished, ""}, {}, 1.0);
    recorder.end_run(busier, {RunStatus::Finished, ""}, {}, 1.0);
  }

  // A tag the store refuses brings the dialog back with what the user typed, as Rename does, and no run is tagged
  // meanwhile; a tag to remove goes from the runs that have it.
  void a_tag_refused_comes_back_in_the_dialog() {
    const QString db = dir_.filePath("tags/runs.sqlite");
    QDir().mkpath(dir_.filePath("tags"));
    std::vector<int64_t> ids;
    {
      RunStore store(db.toStdString());
      for (const char* name : {"first", "second"}) {
        TrainConfig config;
        config.name = name;
        ids.push_back(store.begin_run(config, RunInfo{}, ""));
        store.end_run(ids.back(), {RunStatus::Finished, ""}, {}, 1.0);
      }
      store.add_tag(ids[1], "solo");
    }
    MainWindow w(db);
    RunsView* runs = w.runs_view();
    runs->select(ids);
    QAction* tag = runs_action(runs, RunsView::tr("Tag…"));
    const auto tags_of = [&](int64_t id) { return RunStore(db.toStdString(), RunStore::Mode::ReadOnly).run(id).tags; };
    // Each answer in turn: the text typed into a dialog, or the warning read and closed.
    const auto answer = [&](const QStringList& typed, QStringList& warnings, QStringList& shown) {
      int stage = 0;
      return answering_windows(tag, [&](QInputDialog* dialog, QMessageBox* box) {
        if (dialog && stage % 2 == 0 && stage / 2 < typed.size()) {
          shown << dialog->textValue();
          dialog->setTextValue(typed[stage / 2]);
          dialog->accept();
        } else if (box && stage % 2 == 1) {
          warnings << box->text();
          box->buttons().front()->click();
        } else {
          return false;
        }
        ++stage;
        return true;
      });
    };
    QStringList warnings, shown;
    QCOMPARE(answer({"exp-a, exp b", "exp-a"}, warnings, shown), QString());
    QCOMPARE(warnings.size(), 1);
    QVERIFY2(warnings[0].startsWith("A tag cannot hold ',' or ';'") &&
                 warnings[0].endsWith("\n\nYours follows in the dialog, to change."),
             qPrintable(warnings[0]));
    QCOMPARE(shown, (QStringList{"", "exp-a, exp b"}));  // the user's text, back to change
    QCOMPARE(tags_of(ids[0]), std::vector<std::string>{"exp-a"});
    QCOMPARE(tags_of(ids[1]), (std::vector<std::string>{"solo", "exp-a"}));
    // A tag to remove that no run has is the user's to change too; one that some have goes from those.
    warnings.clear();
    shown.clear();
    QCOMPARE(answer({"-nope", "-solo"}, warnings, shown), QString());
    QCOMPARE(warnings,
             QStringList{"None of these 2 runs has the tag 'nope'\n\nYours follows in the dialog, to change."});
    QCOMPARE(shown, (QStringList{"", "-nope"}));
    QCOMPARE(tags_of(ids[0]), std::vector<std::string>{"exp-a"});
    QCOMPARE(tags_of(ids[1]), std::vector<std::string>{"exp-a"});
  }

  void precision_sweep_opens_its_comparison() {
    const QString db = dir_.filePath("sweep.sqlite");
    MainWindow w(db);
    QSignalSpy done(&w, &MainWindow::sweep_finished);
    std::vector<SweepVariant> variants;
    for (const SweepVariant& v : sweep_variants())
      if (v.key == "fp32" || v.key == "amp-bf16" || v.key == "amp-fp16-noscale") variants.push_back(v);
    w.start_sweep(tiny_config(data_, 1, 2), variants);
    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 600000);
    const auto ids = done.at(0).at(0).value<std::vector<int64_t>>();
    QCOMPARE(ids.size(), size_t{3});
    QCOMPARE(w.compare_view()->run_ids(), ids);
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(w.compare_view()));
    // The Training tab's line says how the sweep ended, not its timing's last round as if that went on.
    const QString said = child<QLabel>(w, "statusLine")->text();
    QVERIFY2(!said.contains("timing") && said == w.statusBar()->currentMessage(), qPrintable(said));
    RunStore store(db.toStdString(), RunStore::Mode::ReadOnly);
    QCOMPARE(store.run(ids[0]).precision_name(), std::string("fp32"));
    QCOMPARE(store.run(ids[1]).precision_name(), std::string("amp-bf16"));
    QCOMPARE(store.run(ids[2]).precision_name(), std::string("amp-fp16"));
    const TrainConfig noscale = store.run(ids[2]).config;
    QCOMPARE(noscale.precision.loss_scale.kind, LossScaleKind::Off);
    QCOMPARE(w.compare_view()->table_model()->value("precision.loss_scale.kind", 2), QString("off"));
    // Named by what varies, and found together by the sweep's tag.
    QCOMPARE(store.run(ids[0]).name, std::string("fp32 · seed 0"));
    QCOMPARE(store.run(ids[2]).name, std::string("amp-fp16-noscale · seed 0"));
    const std::vector<std::string> tags = store.run(ids[1]).tags;
    QCOMPARE(tags.size(), size_t{1});
    QVERIFY2(tags[0].starts_with("sweep "), tags[0].c_str());
    QCOMPARE(store.run(ids[0]).tags, tags);
    auto* baseline = w.compare_view()->findChild<QComboBox*>("baseline");
    QCOMPARE(baseline->itemText(0), QString::fromStdString(std::to_string(ids[0]) + " · fp32 · seed 0"));

    // After its trainings the sweep timed its configurations in alternation, and the comparison shows the result.
    const std::optional<AlternatingSpeed> timed = store.alternating_speed(ids[1]);
    QVERIFY(timed.has_value());
    QCOMPARE(timed->runs, ids);
    QCOMPARE(store.alternating_speed(ids[0])->images_per_second, timed->images_per_second);
    QCOMPARE(timed->images_per_second.size(), size_t{3});
    for (const std::vector<double>& rounds : timed->images_per_second) {
      QCOMPARE(rounds.size(), static_cast<size_t>(AlternatingOptions{}.rounds));
      for (double ips : rounds) QVERIFY(ips > 0);
    }
    const QString label = "speed-up vs run " + QString::number(ids[0]) + ", timed in alternation (sweep)";
    QCOMPARE(w.compare_view()->table_model()->value(label, 0), QString("baseline"));
    const SpeedUp bf16 = speed_up_over_rounds(timed->images_per_second[1], timed->images_per_second[0]);
    CompareModel* model = w.compare_view()->table_model();
    // Marked where the timing shared the machine with other work (a busy CI machine): the record says so.
    const std::string busy = alternation_warning(*timed).empty() ? "" : " \u26a0";
    QCOMPARE(model->value(label, 1), QString::fromStdString(speed_up_cell(bf16) + busy));
    // How it was timed, and what its interval is, in the tooltip of the row's values.
    const QString tip =
        tooltip_text(model->data(model->index(model->row_labels().indexOf(label), 2), Qt::ToolTipRole).toString());
    QVERIFY2(tip.contains(QString("%1 rounds of").arg(AlternatingOptions{}.rounds)) &&
                 tip.contains("synthetic 16 px images, batch 8") && tip.contains("97%"),
             qPrintable(tip));
    // Above the table, beside the trainings' own step times, as the figure the diagnosis goes by.
    const QString time = w.findChild<QLabel*>("compareTime")->text();
    QVERIFY2(time.contains("Timed in alternation after their sweep, " + QString::number(ids[1])) &&
                 time.contains(QString::fromStdString(speed_up_text(bf16))),
             qPrintable(time));
    QCOMPARE(w.findChild<RunControls*>()->state(), RunControls::State::Idle);  // the window is free again
  }

  void a_second_sweep_on_the_same_seed_takes_free_names() {
    const std::vector<SweepVariant> variants = {sweep_variants().at(0), sweep_variants().at(2)};
    std::set<std::string> taken;
    auto is_taken = [&](const std::string& name) { return taken.count(name) > 0; };
    using Names = std::vector<std::string>;
    QCOMPARE(sweep_run_names(variants, 7, is_taken), (Names{"fp32 · seed 7", "amp-fp16 · seed 7"}));
    taken.insert("amp-fp16 · seed 7");  // one name of the last sweep is enough to move on
    QCOMPARE(sweep_run_names(variants, 7, is_taken), (Names{"fp32 · seed 7 (2)", "amp-fp16 · seed 7 (2)"}));
    taken.insert("fp32 · seed 7 (2)");
    QCOMPARE(sweep_run_names(variants, 7, is_taken), (Names{"fp32 · seed 7 (3)", "amp-fp16 · seed 7 (3)"}));
    QCOMPARE(sweep_run_names(variants, 8, is_taken), (Names{"fp32 · seed 8", "amp-fp16 · seed 8"}));
  }

  void sweep_dialog_says_what_computes_each_mode_on_the_device() {
    const CpuBackend cpu;
    const Capabilities caps = cpu.capabilities();
    SweepDialog dialog(tiny_config(data_), caps);
    auto* tf32 = dialog.findChild<QCheckBox*>("variant-tf32");
    QVERIFY(tf32);
    QVERIFY(!tf32->isEnabled());
    QVERIFY2(tf32->toolTip().contains("tensor-core format of NVIDIA GPUs"), qPrintable(tf32->toolTip()));
    auto* device = dialog.findChild<QLabel*>("sweepDevice");
    QVERIFY(device);
    // The default variants include amp-bf16 and amp-fp16: the text names what computes each, as oneDNN answers.
    QVERIFY2(device->text().contains(QString::fromStdString("amp-bf16: BF16: " + caps.bf16.how)),
             qPrintable(device->text()));
    // The FP16 modes share one line and one note (amp-fp16-noscale runs amp-fp16's mode).
    QVERIFY2(device->text().contains("amp-fp16, fp16-pure: FP16: emulated by the engine"), qPrintable(device->text()));
    QCOMPARE(device->text().count("FP16 is emulated on the CPU"), 1);
    dialog.findChild<QCheckBox*>("variant-amp-bf16")->setChecked(false);
    QVERIFY2(!device->text().contains("amp-bf16"), qPrintable(device->text()));
    // How many runs the grid queues, and the settings every run shares, without those the grid sets.
    auto* shared = dialog.findChild<QLabel*>("sweepShared");
    dialog.findChild<QLineEdit*>("sweepSeeds")->setText("0, 1");
    const QString queued = QString::number(2 * dialog.chosen().size()) +
                           " runs: " + QString::number(dialog.chosen().size()) +
                           " precisions × 2 seeds × 1 depth × 1 batch size.";
    QVERIFY2(shared->text().startsWith("Queues " + queued), qPrintable(shared->text()));
    QVERIFY2(shared->text().contains("\nEvery run: "), qPrintable(shared->text()));
    QVERIFY2(!shared->text().contains("seed 0"), qPrintable(shared->text()));
    QVERIFY2(!shared->text().contains("process"), qPrintable(shared->text()));
    dialog.set_setup_processes(2);  // each point on one process all the same: said
    QVERIFY2(shared->text().endsWith("Each run trains on one process: the setup's 2 processes are for a single run."),
             qPrintable(shared->text()));
    dialog.findChild<QLineEdit*>("sweepSeeds")->setText("0");  // precisions alone: the sweep this process runs
    // What was ticked is what the next dialog ticks, once the runs were queued.
    dialog.findChild<QCheckBox*>("variant-fp16-pure")->setChecked(false);
    dialog.findChild<QCheckBox*>("variant-fp16-o2")->setChecked(true);
    dialog.findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok)->click();
    SweepDialog next(tiny_config(data_), caps);
    QStringList ticked;
    for (const SweepVariant& v : next.chosen()) ticked << QString::fromStdString(v.key);
    QCOMPARE(ticked, (QStringList{"fp32", "amp-fp16", "amp-fp16-noscale", "fp16-o2"}));
  }

  void seed_article_preset() {
    const TrainConfig c = seed_article_config("/data");
    QCOMPARE(c.depth, 18);
    QCOMPARE(c.optimizer.kind, OptimizerKind::Adam);
    QCOMPARE(c.lr, 0.001f);
    QCOMPARE(c.batch_size, 16);
    QCOMPARE(c.image_size, 224);
    QCOMPARE(c.epochs, 5);
    QCOMPARE(c.data.validation_fraction, 0.2);
    // The article's two; and AMP in BF16 where only BF16 is native, as on a CPU with AVX512-BF16 or AMX.
    Capabilities gpu, bf16_cpu;
    gpu.fp16.native = gpu.bf16.native = true;
    bf16_cpu.bf16.native = true;
    QCOMPARE(seed_article_variants(gpu), (std::vector<std::string>{"fp32", "amp-fp16"}));
    QCOMPARE(seed_article_variants(Capabilities{}), (std::vector<std::string>{"fp32", "amp-fp16"}));
    QCOMPARE(seed_article_variants(bf16_cpu), (std::vector<std::string>{"fp32", "amp-fp16", "amp-bf16"}));
  }

  // The seed article's experiment (FP32 against AMP, scaled down to the test's stripes) ends in a comparison whose
  // diagnosis says why AMP is or is not faster here, from what the runs measured.
  void seed_article_sweep_explains_its_speed() {
    const QString db = dir_.filePath("seed-article.sqlite");
    MainWindow w(db);
    QSignalSpy done(&w, &MainWindow::sweep_finished);
    std::vector<SweepVariant> variants;
    for (const std::string& key : seed_article_variants(Capabilities{}))  // the article's two
      for (const SweepVariant& v : sweep_variants())
        if (v.key == key) variants.push_back(v);
    QCOMPARE(variants.size(), size_t{2});
    TrainConfig config = tiny_config(data_, 2, 0);
    config.batch_size = 4;  // steady steps to measure the speed on
    w.start_sweep(config, variants);
    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 600000);
    const DiagnosisPanel* panel = w.compare_view()->diagnosis();
    QCOMPARE(panel->findings().size(), size_t{2});
    QStringList amp;
    for (const Finding& f : panel->findings()[1]) amp << QString::fromStdString(f.rule);
    QVERIFY2(amp.contains("speed_vs_baseline"), qPrintable(amp.join(", ")));
    QVERIFY2(amp.contains("fp16_emulated"), qPrintable(amp.join(", ")));  // on a CPU, the reason
    // The explanation by class of op names the convolutions; which class leads it depends on the host: a tiny
    // step's batch norm, preempted once, can outweigh its convolutions.
    const QString html = panel->html();
    QVERIFY2(html.contains(QRegularExpression("by class of op: [^;<]*convolutions")), qPrintable(html));
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) { return ampwb::ui::test::run_ui_test<ampwb::ui::test::CompareRuns>(argc, argv); }

#include "test_ui_compare.moc"
