// The Sweeps tab, offscreen, on a real run store: a sweep written by another writer (a second connection, as a Slurm
// task's process would write it, and a real `ampwb sweep --on local` child process) appears within seconds without
// any refresh by hand, each point in its state, the finished ones with their final validation accuracy; the grouped
// comparison's mean ± std over seeds equals the one computed here from the store's own records. The sweep dialog's
// grid and place start `ampwb sweep` as a child whose sweep the tab then follows, and a child's failure is said.
#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStatusBar>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QToolBar>
#include <QtTest>
#include <cmath>
#include <nlohmann/json.hpp>

#include "analysis/run_compare.h"
#include "backend/cpu/cpu_backend.h"
#include "column_widths.h"
#include "facade/run_setup.h"
#ifdef AMPWB_TEST_POSTGRES
#include "postgres_server.h"
#endif
#include "compare_view.h"
#include "main_window.h"
#include "run_setup_panel.h"
#include "runs_model.h"
#include "runs_view.h"
#include "store/sweep_record.h"
#include "sweep_command_line.h"
#include "sweep_dialog.h"
#include "sweep_points_model.h"
#include "sweep_view.h"
#include "test_ui_util.h"

namespace ampwb::ui::test {

class SweepsThroughTheUi : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString data_;

  QString db(const QString& name) const { return dir_.filePath(name + ".sqlite"); }

  static QString state_of(const SweepView& view, int point) {
    const SweepPointsModel* m = view.points_model();
    return m->data(m->index(point, m->column_of("state")), Qt::DisplayRole).toString();
  }

  // Mean and sample standard deviation, as a reader would compute them from the runs' stored epochs.
  struct Spread {
    double mean = 0, std = 0;
  };
  static Spread spread(const std::vector<double>& values) {
    double sum = 0, ss = 0;
    for (double v : values) sum += v;
    const double mean = sum / values.size();
    for (double v : values) ss += (v - mean) * (v - mean);
    return {mean, values.size() > 1 ? std::sqrt(ss / (values.size() - 1)) : std::nan("")};  // one run: none
  }

  // Every column of the points table shows its cells whole, the stretched last one aside: a column widens as its
  // contents grow ("queued" becoming "requeued" or "cancelled").
  static void check_cells_fit(const SweepView& view) {
    const QAbstractItemView* table = view.points_table();  // where sizeHintForColumn is public
    for (int c = 0; c + 1 < view.points_model()->columnCount(); ++c)
      QVERIFY2(view.points_table()->columnWidth(c) >= table->sizeHintForColumn(c),
               qPrintable(QString("column %1: %2 px for cells of %3 px")
                              .arg(c)
                              .arg(view.points_table()->columnWidth(c))
                              .arg(table->sizeHintForColumn(c))));
  }

  // Each group of the view against the same statistics computed from the store: its runs' last epochs and steps.
  static void check_groups(const SweepView& view, const QString& db_path) {
    const RunStore store(db_path.toStdString(), RunStore::Mode::ReadOnly);
    const SweepResults& r = view.results();
    QTableWidget* table = view.groups_table();
    QCOMPARE(table->rowCount(), static_cast<int>(r.groups.size()));
    for (size_t g = 0; g < r.groups.size(); ++g) {
      std::vector<double> accuracy, loss, speed;
      for (int64_t run : r.groups[g].run_ids) {
        const std::vector<EpochReport> epochs = store.epochs(run);
        QVERIFY(!epochs.empty());
        accuracy.push_back(100 * epochs.back().validation_accuracy);
        loss.push_back(epochs.back().validation_loss);
        const RunRecord record = store.run(run);  // its steady speed, as every other view says it; none too short
        const RunSpeed steady = run_timing(record, store.steps(run), {}).speed;
        if (steady.known()) speed.push_back(steady.images_per_second());
      }
      const Spread a = spread(accuracy), l = spread(loss), s = spread(speed);
      QVERIFY(std::abs(r.groups[g].final_accuracy.mean - a.mean) < 1e-9);
      QVERIFY(std::abs(r.groups[g].final_accuracy.std - a.std) < 1e-9 ||
              (std::isnan(a.std) && std::isnan(r.groups[g].final_accuracy.std)));
      QVERIFY(std::abs(r.groups[g].final_loss.mean - l.mean) < 1e-9);
      QVERIFY(std::abs(r.groups[g].final_loss.std - l.std) < 1e-9 ||
              (std::isnan(l.std) && std::isnan(r.groups[g].final_loss.std)));
      if (speed.empty())
        QVERIFY(std::isnan(r.groups[g].images_per_second.mean));
      else
        QVERIFY(std::abs(r.groups[g].images_per_second.mean - s.mean) < 1e-6 * s.mean);
      const int row = static_cast<int>(g);
      QCOMPARE(table->item(row, 1)->text(), QString::number(accuracy.size()));
      auto text = [](const Spread& v, int decimals) {  // the mean alone for a single run
        return std::isnan(v.std) ? QString::number(v.mean, 'f', decimals)
                                 : QStringLiteral("%1 ± %2").arg(v.mean, 0, 'f', decimals).arg(v.std, 0, 'f', decimals);
      };
      QCOMPARE(table->item(row, 2)->text(), text(a, 2));
      QCOMPARE(table->item(row, 3)->text(), text(l, 4));
    }
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    data_ = write_stripes(dir_.filePath("stripes"), 48, 16);
  }

  // The widths the Sweeps and Runs tabs keep: a cell that grows widens its column, a width the user chose stays
  // while the cells do not grow, and a column is never narrowed.
  void a_column_widens_as_its_cells_grow_and_keeps_a_chosen_width() {
    QStandardItemModel model(2, 2);
    model.setHorizontalHeaderLabels({"s", "t"});
    for (int row = 0; row < 2; ++row)
      for (int column = 0; column < 2; ++column) model.setItem(row, column, new QStandardItem("a"));
    QTableView table;
    table.setModel(&model);
    table.resize(600, 300);
    table.show();
    const QAbstractItemView& view = table;  // where sizeHintForColumn is public
    ColumnWidths widths;
    widths.fit(table);
    const int narrow = table.columnWidth(0);
    model.item(0, 0)->setText("cancelled, and then some");
    widths.widen_grown(table);
    QVERIFY(table.columnWidth(0) > narrow);
    QVERIFY(table.columnWidth(0) >= view.sizeHintForColumn(0));

    table.setColumnWidth(0, narrow);  // the user's choice
    model.item(1, 0)->setText("b");
    widths.widen_grown(table);
    QCOMPARE(table.columnWidth(0), narrow);

    table.setColumnWidth(1, 200);
    model.item(0, 1)->setText("");
    widths.widen_grown(table);
    QCOMPARE(table.columnWidth(1), 200);
  }

  // Written point by point through the sweep records from a second connection, as a job array's tasks write them.
  void points_written_elsewhere_appear_live() { check_points_written_elsewhere_appear(db("live")); }

#ifdef AMPWB_TEST_POSTGRES
  // The same against a real PostgreSQL server, the store a cluster's tasks write into.
  void points_written_elsewhere_appear_live_from_postgresql() {
    std::unique_ptr<ampwb::test::PostgresServer> server;
    try {
      server = std::make_unique<ampwb::test::PostgresServer>("ampwb_ui_sweeps");
    } catch (const std::exception& e) {
      QFAIL(e.what());  // a server that cannot start fails the test, saying why
    }
    check_points_written_elsewhere_appear(QString::fromStdString(server->uri()));
  }
#endif

 private:
  void check_points_written_elsewhere_appear(const QString& location) {
    MainWindow w(location);
    w.resize(1280, 720);
    w.show();
    w.tabs()->setCurrentWidget(w.sweep_view());
    SweepView& view = *w.sweep_view();
    QCOMPARE(view.points_model()->rowCount(), 0);

    RunStore writer(location.toStdString(), RunStore::Mode::Existing);
    const char* modes[] = {"fp32", "amp-bf16"};
    std::vector<std::string> points;
    std::vector<TrainConfig> configs;
    for (const char* mode : modes)
      for (int seed = 0; seed < 3; ++seed) {
        TrainConfig c = tiny_config(data_, 2, 2);
        c.precision = precision_preset(std::string_view(mode));
        c.seed = seed;
        nlohmann::ordered_json p;
        p["values"] = {{"precision", mode}, {"seed", std::to_string(seed)}};
        p["config"] = nlohmann::ordered_json::parse(config_to_json_text(c));
        points.push_back(p.dump());
        configs.push_back(c);
      }
    const std::string grid = R"({"name": "modes", "grid": {"precision": ["fp32", "amp-bf16"], "seed": [0, 1, 2]}})";
    const int64_t id = create_sweep(writer, "modes", grid, "slurm", points);
    QTRY_COMPARE_WITH_TIMEOUT(view.points_model()->rowCount(), 6, 10000);
    QCOMPARE(view.current_sweep(), id);
    QVERIFY(view.chooser()->currentText().contains("modes"));
    QVERIFY(view.points_model()->column_of("precision") == 1 && view.points_model()->column_of("seed") == 2);
    for (int i = 0; i < 6; ++i) QCOMPARE(state_of(view, i), QString("queued"));
    // Points count from 1, as `ampwb sweep status` and the progress lines count them (the store's index is 0).
    for (int i = 0; i < 6; ++i)
      QCOMPARE(view.points_model()->data(view.points_model()->index(i, 0), Qt::DisplayRole).toInt(), i + 1);

    set_point_state(writer, id, 0, SweepPointState::Running);
    set_point_state(writer, id, 2, SweepPointState::Failed);
    set_point_state(writer, id, 5, SweepPointState::Requeued);
    QTRY_COMPARE_WITH_TIMEOUT(state_of(view, 5), QString("requeued"), 10000);
    QCOMPARE(state_of(view, 0), QString("running"));
    QCOMPARE(state_of(view, 2), QString("failed"));
    QCOMPARE(state_of(view, 1), QString("queued"));
    check_cells_fit(view);
    QCOMPARE(view.groups_table()->rowCount(), 0);  // nothing finished yet

    // Seeds 0 and 1 of both modes train to their end.
    for (int i : {0, 1, 3, 4}) {
      const int64_t run = train_into_store(location, configs[static_cast<size_t>(i)]);
      set_point_run(writer, id, i, run);
      set_point_state(writer, id, i, SweepPointState::Finished);
    }
    QTRY_VERIFY_WITH_TIMEOUT(view.counts()->text().contains("4 finished"), 10000);
    QCOMPARE(state_of(view, 4), QString("finished"));
    QCOMPARE(state_of(view, 5), QString("requeued"));
    const SweepPointsModel* m = view.points_model();
    for (int i : {0, 1, 3, 4}) {
      const int64_t run = m->data(m->index(i, 0), SweepPointsModel::kRunRole).toLongLong();
      QVERIFY(run != 0);
      QCOMPARE(m->data(m->index(i, m->column_of("run")), Qt::DisplayRole).toString(), QString::number(run));
      const double final = 100 * writer.epochs(run).back().validation_accuracy;
      QCOMPARE(m->data(m->index(i, m->column_of("final val. acc. (%)")), Qt::DisplayRole).toString(),
               QString::number(final, 'f', 2));
    }
    QVERIFY(m->data(m->index(2, m->column_of("final val. acc. (%)")), Qt::DisplayRole).isNull());

    // A point whose run stopped after its first epoch shows where it got to, greyed, said not to be final.
    const int64_t stopped = writer.begin_run(configs[5], RunInfo{}, "");
    EpochReport first;
    first.epoch = 1;
    first.validation_accuracy = 0.375;
    writer.add_epoch(stopped, first, {}, 1.0);
    writer.end_run(stopped, {RunStatus::Cancelled, "stopped by the user"}, {}, 1.0);
    set_point_run(writer, id, 5, stopped);
    set_point_state(writer, id, 5, SweepPointState::Cancelled);
    QTRY_COMPARE_WITH_TIMEOUT(state_of(view, 5), QString("cancelled"), 10000);
    const QModelIndex partial = m->index(5, m->column_of("final val. acc. (%)"));
    QCOMPARE(m->data(partial, Qt::DisplayRole).toString(), QString("37.50"));
    QCOMPARE(tooltip_text(m->data(partial, Qt::ToolTipRole).toString()),
             QString("After 1 of 2 epochs: its run did not finish, so this is not a final accuracy"));
    QVERIFY(m->data(m->index(0, m->column_of("final val. acc. (%)")), Qt::ToolTipRole).isNull());
    QVERIFY(m->data(partial, SweepPointsModel::kSortRole).toDouble() < 0);  // below every final accuracy

    QCOMPARE(view.results().groups.size(), size_t(2));
    QCOMPARE(view.groups_table()->item(0, 0)->text(), QString("precision = fp32"));
    QCOMPARE(view.groups_table()->item(1, 0)->text(), QString("precision = amp-bf16"));
    check_groups(view, location);

    // Each group's speed-up over the first where the sweep was timed in alternation, with the load that shared it.
    QCOMPARE(view.groups_table()->item(1, 4)->text(), QString("not timed"));
    auto* title = view.findChild<QLabel*>("sweepGroupsTitle");
    QVERIFY(!title->text().contains("unreliable"));
    const std::vector<int64_t> fp32 = view.results().groups[0].run_ids, bf16 = view.results().groups[1].run_ids;
    const AlternatingSpeed timed{{fp32[0], bf16[0]},
                                 {{100, 101, 99, 100, 100, 100}, {150, 152, 149, 151, 150, 150}},
                                 6,
                                 "synthetic 16 px images, batch 8",
                                 {0.45, 0, 0}};
    writer.add_alternating_speed(timed);
    const QString bf16_speed_up = QString::fromStdString(speed_up_text(alternating_speed_up(timed, bf16[0], fp32[0])));
    QVERIFY(bf16_speed_up.startsWith("1.5"));
    QTRY_COMPARE_WITH_TIMEOUT(view.groups_table()->item(1, 4)->text(), bf16_speed_up, 10000);
    QCOMPARE(view.groups_table()->item(0, 4)->text(), QString("baseline"));
    QVERIFY2(title->text().contains("⚠ Timings unreliable: timed in alternation while the machine was 45% busy"),
             qPrintable(title->text()));

    // Compare the finished points: their four runs open in the Compare tab.
    std::vector<int64_t> opened;
    connect(&view, &SweepView::open_requested, this, [&](const std::vector<int64_t>& ids) { opened = ids; });
    view.groups_table()->cellDoubleClicked(0, 0);
    QCOMPARE(opened, view.results().groups[0].run_ids);

    // A finished point's run deleted elsewhere: the point says so where its run was.
    w.tabs()->setCurrentWidget(w.sweep_view());  // the double click opened the Compare tab
    writer.remove(m->data(m->index(0, 0), SweepPointsModel::kRunRole).toLongLong());
    QTRY_COMPARE_WITH_TIMEOUT(m->data(m->index(0, m->column_of("run")), Qt::DisplayRole).toString(), QString("deleted"),
                              10000);
    QCOMPARE(state_of(view, 0), QString("finished"));
    QVERIFY(
        m->data(m->index(0, m->column_of("run")), Qt::ToolTipRole).toString().contains("deleted from the run store"));
  }

 private Q_SLOTS:
  // A real `ampwb sweep --on local` in another process: the view follows it to its end without a refresh by hand.
  void a_sweep_run_by_the_cli_appears_live() {
    MainWindow w(db("cli"));
    w.resize(1280, 720);
    w.show();
    w.tabs()->setCurrentWidget(w.sweep_view());
    SweepView& view = *w.sweep_view();
    // Before any sweep, the empty table's headers are whole ("final val. acc. (%)", not "inal val. acc. (%").
    QTRY_VERIFY(view.counts()->text().startsWith("No sweeps in this store yet"));
    QVERIFY(!view.chooser()->isVisible());  // nothing to choose: no empty box before the sentence
    const QHeaderView* header = view.points_table()->horizontalHeader();
    for (int c = 0; c + 1 < view.points_model()->columnCount(); ++c)
      QVERIFY2(header->sectionSize(c) >= header->sectionSizeHint(c),
               qPrintable(QString("column %1: %2 px for a header of %3 px")
                              .arg(c)
                              .arg(header->sectionSize(c))
                              .arg(header->sectionSizeHint(c))));
    QProcess cli;
    cli.setProcessChannelMode(QProcess::MergedChannels);
    cli.start(AMPWB_BINARY, {"sweep",
                             "--db",
                             db("cli"),
                             "--on",
                             "local",
                             "--name",
                             "from the cli",
                             "--data",
                             data_,
                             "--precision",
                             "fp32,amp-bf16",
                             "--seed",
                             "0,1",
                             "--depth",
                             "20",
                             "--epochs",
                             "1",
                             "--batch-size",
                             "8",
                             "--image-size",
                             "16",
                             "--lr",
                             "0.05",
                             "--max-steps-per-epoch",
                             "2",
                             "--threads",
                             "1"});
    QVERIFY(cli.waitForStarted());
    QTRY_COMPARE_WITH_TIMEOUT(view.points_model()->rowCount(), 4, 30000);
    QVERIFY(view.chooser()->currentText().contains("from the cli"));
    QVERIFY(view.chooser()->isVisible());
    QTRY_VERIFY_WITH_TIMEOUT(view.counts()->text().contains("4 finished") || cli.state() == QProcess::NotRunning,
                             600000);
    if (cli.state() != QProcess::NotRunning) QVERIFY(cli.waitForFinished(60000));
    QCOMPARE(cli.exitStatus(), QProcess::NormalExit);
    QVERIFY2(cli.exitCode() == 0, cli.readAll().constData());
    QTRY_VERIFY_WITH_TIMEOUT(view.counts()->text().contains("4 finished"), 10000);
    QCOMPARE(view.results().groups.size(), size_t(2));
    for (const SweepGroupResult& g : view.results().groups) QCOMPARE(g.run_ids.size(), size_t(2));
    check_groups(view, db("cli"));
  }
  // The dialog's grid and place, and what `ampwb sweep` would be told.
  void the_dialog_takes_the_grid_and_where_it_runs() {
    const CpuBackend cpu;
    SweepDialog dialog(tiny_config(data_), cpu.capabilities());
    for (QCheckBox* box : dialog.findChildren<QCheckBox*>())  // whatever was ticked last time, or by default
      if (box->objectName().startsWith("variant-")) box->setChecked(false);
    dialog.findChild<QCheckBox*>("variant-fp32")->setChecked(true);
    dialog.findChild<QCheckBox*>("variant-amp-bf16")->setChecked(true);
    auto* seeds = dialog.findChild<QLineEdit*>("sweepSeeds");
    QCOMPARE(seeds->text(), QString("0"));  // the setup's own
    QVERIFY(!dialog.plan().needs_cli());    // precisions alone, here: the in-process sweep
    QVERIFY(dialog.problem().isEmpty());
    seeds->setText("0, 1,2");
    dialog.findChild<QLineEdit*>("sweepDepths")->setText("20,32");
    SweepPlan plan = dialog.plan();
    QCOMPARE(plan.seeds, (std::vector<std::string>{"0", "1", "2"}));
    QCOMPARE(plan.depths, (std::vector<std::string>{"20", "32"}));
    QVERIFY(plan.needs_cli());
    QVERIFY2(dialog.problem().isEmpty(), qPrintable(dialog.problem()));
    seeds->setText("0,x");
    QCOMPARE(dialog.problem(), QString("Seeds: 'x' is not a whole number"));
    QCOMPARE(dialog.findChild<QLabel*>("sweepProblem")->text(), dialog.problem());
    seeds->setText("0,1,");  // refused as `ampwb sweep --seed 0,1,` is, not read as two seeds
    QVERIFY2(dialog.problem().startsWith("Seeds: an empty value"), qPrintable(dialog.problem()));
    seeds->setText(" ");
    QCOMPARE(dialog.problem(), QString("Seeds: give at least one value"));
    seeds->setText("0,1");
    dialog.findChild<QCheckBox*>("variant-amp-fp16-noscale")->setChecked(true);  // no flag says it per point
    QVERIFY2(dialog.problem().contains("only in a precision sweep on this machine"), qPrintable(dialog.problem()));
    dialog.findChild<QCheckBox*>("variant-amp-fp16-noscale")->setChecked(false);

    auto* partition = dialog.findChild<QLineEdit*>("sweepPartition");
    QVERIFY(!partition->isEnabled());
    dialog.findChild<QRadioButton*>("sweepOnSlurm")->setChecked(true);
    QVERIFY(partition->isEnabled());
    QVERIFY(!dialog.findChild<QSpinBox*>("sweepParallel")->isEnabled());
    partition->setText("gpu");
    dialog.findChild<QLineEdit*>("sweepAccount")->setText("lab");
    dialog.findChild<QLineEdit*>("sweepTimeLimit")->setText("1:00:00");
    dialog.findChild<QSpinBox*>("sweepMaxParallel")->setValue(2);
    plan = dialog.plan();
    QVERIFY(plan.on_slurm);
    const SweepCommand command = sweep_command(dialog.base(), plan, "/tmp/runs.sqlite");
    const std::string line = [&] {
      std::string l;
      for (const std::string& a : command.arguments) l += a + " ";
      return l;
    }();
    for (const char* part : {"sweep --db /tmp/runs.sqlite --on slurm ", "--partition gpu ", "--account lab ",
                             "--time 1:00:00 ", "--max-parallel 2 ", "--sweep-file - "})
      QVERIFY2(line.find(part) != std::string::npos, (line + " lacks " + part).c_str());
    // The grid's lists of several values are its grid; the settings go whole, as the sweep file's "config".
    const nlohmann::ordered_json& file = command.sweep_file;
    QCOMPARE(QString::fromStdString(file["grid"].dump()),
             QString(R"({"precision":["fp32","amp-bf16"],"seed":["0","1"],"depth":["20","32"]})"));
    QCOMPARE(QString::fromStdString(file["settings"].dump()), QString(R"({"batch-size":"8"})"));
    QCOMPARE(file["config"].dump(), nlohmann::ordered_json::parse(config_to_json_text(dialog.base())).dump());
  }

  // A grid from the dialog runs as `ampwb sweep --on local` in a child: the Sweeps tab shows it, each point's run
  // has the setup's settings as they take effect (a data path with a comma too), and its end is reported.
  void a_grid_from_the_dialog_runs_as_ampwb_sweep() {
    MainWindow w(db("dialog"));
    w.resize(1280, 720);
    w.show();
    w.set_sweep_executable(AMPWB_BINARY);
    w.setup()->set_dataset_path(data_);
    QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")->text().startsWith("✔"), 60000);
    auto* train = child<QPushButton>(w, "trainButton");
    QVERIFY(train->isEnabled());
    TrainConfig base = tiny_config(write_stripes(dir_.filePath("stripes, with a comma"), 48, 16), 1, 2);
    base.lr = 0.07f;
    base.label_smoothing = 0.1f;
    base.data.validation_fraction = 0.25;
    PrecisionOverrides overrides;  // the setup panel's loss scaler, changed from its mode's preset
    overrides.init_scale = 1024;
    overrides.growth_interval = 100;
    base.precision = resolve_precision(PrecisionMode::AmpFp16, overrides);
    SweepPlan plan;
    for (const SweepVariant& v : sweep_variants())
      if (!v.loss_scaling_off && (v.key == "fp32" || v.key == "amp-bf16")) plan.variants.push_back(v);
    plan.seeds = {"0", "1"};
    plan.depths = {"20"};
    plan.batch_sizes = {"8"};
    QSignalSpy started(&w, &MainWindow::cli_sweep_started);
    QSignalSpy ended(&w, &MainWindow::cli_sweep_ended);
    QCOMPARE(w.start_cli_sweep(base, plan), QString());
    QVERIFY(w.cli_sweep_running());
    // Its points train and are timed on this machine: no run starts beside them, by Train, Ctrl+R or another sweep.
    QVERIFY(!train->isEnabled());
    QVERIFY2(tooltip_text(train->toolTip()).contains("started from this window, is running on this machine") ||
                 tooltip_text(train->toolTip()).contains("a sweep started from this window is running"),
             qPrintable(train->toolTip()));
    QVERIFY(!w.start_training());
    QVERIFY(!child<QAction>(w, "sweepAction")->isEnabled());
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 1, 30000);
    const qint64 id = started.at(0).at(0).toLongLong();
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(w.sweep_view()));
    QTRY_COMPARE_WITH_TIMEOUT(w.sweep_view()->current_sweep(), id, 10000);
    // Unnamed, it is named by what it sweeps.
    QVERIFY2(w.sweep_view()->chooser()->currentText().contains(QStringLiteral(" · precision × seed · this machine")),
             qPrintable(w.sweep_view()->chooser()->currentText()));
    QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, 600000);
    QCOMPARE(ended.at(0).at(1).toInt(), 0);
    QVERIFY(!w.cli_sweep_running());
    QTRY_VERIFY_WITH_TIMEOUT(w.sweep_view()->counts()->text().contains("4 finished"), 10000);
    QVERIFY(train->isEnabled());
    // The status bar says how its points ended, as the sweep's last line did.
    QCOMPARE(w.statusBar()->currentMessage(), QStringLiteral("Sweep %1 ended: 4 finished").arg(id));

    const RunStore store(db("dialog").toStdString(), RunStore::Mode::ReadOnly);
    for (const SweepPointResult& p : w.sweep_view()->results().points) {
      TrainConfig expected = base;
      for (const auto& [setting, value] : p.values) {
        if (setting == "seed") expected.seed = std::stoull(value);
        if (setting == "precision") expected.precision = resolve_precision(parse_precision_mode(value), overrides);
      }
      const TrainConfig got = store.run(p.point.run_id).config;
      const auto want = config_settings(effective_config(expected)), have = config_settings(got);  // as trained
      QCOMPARE(have.size(), want.size());
      for (size_t k = 0; k < want.size(); ++k)
        if (want[k].first != "name" && want[k].first != "checkpoint_dir")
          QVERIFY2(have[k] == want[k],
                   qPrintable(QStringLiteral("%1: %2, not %3")
                                  .arg(QString::fromStdString(want[k].first), QString::fromStdString(have[k].second),
                                       QString::fromStdString(want[k].second))));
    }
  }

  // A Slurm sweep where sbatch cannot run: the child's error comes in the user's words, and the sweep it recorded
  // shows as cancelled.
  void a_slurm_sweep_that_cannot_be_submitted_says_why() {
    MainWindow w(db("slurm"));
    w.resize(1280, 720);
    w.show();
    w.set_sweep_executable(AMPWB_BINARY);
    SweepPlan plan;
    for (const SweepVariant& v : sweep_variants())
      if (v.key == "fp32") plan.variants.push_back(v);
    plan.seeds = {"0", "1"};
    plan.depths = {"20"};
    plan.batch_sizes = {"8"};
    plan.on_slurm = true;
    plan.partition = "nowhere";
    QSignalSpy ended(&w, &MainWindow::cli_sweep_ended);
    const QByteArray path = qgetenv("PATH");
    qputenv("PATH", dir_.filePath("no-slurm-here").toLocal8Bit());  // no sbatch for the child to find
    const QString why = w.start_cli_sweep(tiny_config(data_), plan);
    qputenv("PATH", path);
    QCOMPARE(why, QString());
    QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, 60000);
    QVERIFY(ended.at(0).at(1).toInt() != 0);
    const QString message = ended.at(0).at(2).toString();
    QVERIFY2(message.startsWith("sbatch failed") && message.contains("is Slurm installed here?") &&
                 message.contains("recorded as cancelled"),
             qPrintable(message));
    auto* box = w.findChild<QMessageBox*>("sweepError");
    QVERIFY(box && box->isVisible());
    QCOMPARE(box->text(), message);
    box->close();
    w.tabs()->setCurrentWidget(w.sweep_view());
    QTRY_COMPARE_WITH_TIMEOUT(w.sweep_view()->points_model()->rowCount(), 2, 10000);
    QVERIFY(w.sweep_view()->chooser()->currentText().contains("cancelled"));
    QCOMPARE(state_of(*w.sweep_view(), 0), QString("cancelled"));
    check_cells_fit(*w.sweep_view());
  }

  // 72 of 256 images, 28.125%: an exact tie, which printf (the CLI's `runs`, `show`, `sweep status`, `compare`)
  // rounds to 28.12 and Qt's own number formatting to 28.13. Every GUI place says it as the CLI does.
  void a_tied_accuracy_reads_as_the_cli_prints_it() {
    RunStore writer(db("tie").toStdString());
    RunInfo info;
    info.validation_images = 256;
    std::vector<int64_t> runs;
    for (uint64_t seed : {0, 1}) {
      TrainConfig c;
      c.seed = seed;
      const int64_t run = writer.begin_run(c, info, "");
      EpochReport e;
      e.epoch = 1;
      e.validation_accuracy = 72.0 / 256;
      e.seconds = 1;
      writer.add_epoch(run, e, {}, 1.0);
      writer.end_run(run, {RunStatus::Finished, "", ""}, {}, 1.0);
      runs.push_back(run);
    }
    const std::string point = R"({"values": {"seed": "0"}, "config": {}})";
    const int64_t id = create_sweep(writer, "tie", R"({"grid": {"seed": [0, 1]}})", "local", {point, point});
    for (int i = 0; i < 2; ++i) {
      set_point_run(writer, id, i, runs[static_cast<size_t>(i)]);
      set_point_state(writer, id, i, SweepPointState::Finished);
    }
    MainWindow w(db("tie"));
    w.resize(1280, 720);
    w.show();
    w.tabs()->setCurrentWidget(w.sweep_view());
    const SweepPointsModel* points = w.sweep_view()->points_model();
    QTRY_COMPARE_WITH_TIMEOUT(points->rowCount(), 2, 10000);
    const int accuracy = points->column_of("final val. acc. (%)");
    QVERIFY(accuracy >= 0);
    QCOMPARE(points->data(points->index(0, accuracy), Qt::DisplayRole).toString(), QString("28.12"));
    const RunsModel* table = w.runs_view()->model();
    w.tabs()->setCurrentWidget(w.runs_view());
    QTRY_COMPARE_WITH_TIMEOUT(table->rowCount(), 2, 10000);
    QCOMPARE(table->index(table->row_of(runs[0]), RunsModel::BestAccuracy).data().toString(), QString("28.12%"));
    QVERIFY(w.open_runs(runs));
    const QString summary = w.compare_view()->findChild<QLabel*>("compareSummary")->text();
    QVERIFY2(summary.contains("28.12 ± 0.00%"), qPrintable(summary));
  }

  // After its points have trained, the window's `ampwb sweep` times their configurations in alternation for minutes
  // with real models: the tab says how far it got (not "not timed", which reads as final), and Cancel stops it. A
  // stand-in for `ampwb sweep` prints what the real one prints and waits for its Ctrl-C.
  void a_sweep_being_timed_says_so_and_can_be_stopped() {
    RunStore writer(db("timing").toStdString());
    RunInfo info;
    info.validation_images = 16;
    const std::string fp32 = R"({"values": {"precision": "fp32"}, "config": {}})";
    const std::string bf16 = R"({"values": {"precision": "amp-bf16"}, "config": {}})";
    const int64_t id =
        create_sweep(writer, "timed", R"({"grid": {"precision": ["fp32", "amp-bf16"]}})", "local", {fp32, bf16});
    std::vector<int64_t> runs;
    for (int i = 0; i < 2; ++i) {
      TrainConfig c;
      if (i == 1) c.precision = precision_preset("amp-bf16");
      const int64_t run = writer.begin_run(c, info, "");
      runs.push_back(run);
      EpochReport e;
      e.epoch = 1;
      e.validation_accuracy = 0.5;
      e.seconds = 1;
      writer.add_epoch(run, e, {}, 1.0);
      writer.end_run(run, {RunStatus::Finished, "", ""}, {}, 1.0);
      set_point_run(writer, id, i, run);
      set_point_state(writer, id, i, SweepPointState::Finished);
    }
    const QString script = dir_.filePath("timing-sweep.sh");
    {
      QFile f(script);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QStringLiteral("#!/bin/sh\n"
                             "echo 'sweep %1: 2 points, recorded in the store'\n"
                             "echo 'sweep %1: timing its 2 configurations in alternation for their speed-ups'\n"
                             "echo '  round 1/6'\n"
                             "echo '  round 2/6'\n"
                             "sleep 60 & waiting=$!\n"
                             "trap 'kill $waiting; echo \"sweep %1: stopped before its configurations were timed\"; "
                             "exit 0' INT\n"
                             "wait\n")
                  .arg(id)
                  .toUtf8());
      f.close();
      QVERIFY(f.setPermissions(f.permissions() | QFileDevice::ExeOwner));
    }
    MainWindow w(db("timing"));
    w.resize(1280, 720);
    w.show();
    w.set_sweep_executable(script);
    SweepView& view = *w.sweep_view();
    SweepPlan plan;
    for (const SweepVariant& v : sweep_variants())
      if (!v.loss_scaling_off && (v.key == "fp32" || v.key == "amp-bf16")) plan.variants.push_back(v);
    plan.seeds = {"0"};
    plan.depths = {"20"};
    plan.batch_sizes = {"8"};
    QSignalSpy ended(&w, &MainWindow::cli_sweep_ended);
    QCOMPARE(w.start_cli_sweep(tiny_config(data_, 1, 2), plan), QString());
    QTRY_COMPARE_WITH_TIMEOUT(view.current_sweep(), id, 10000);
    const int speed_up = 4;  // the groups table's "speed-up, timed in alternation"
    QTRY_COMPARE_WITH_TIMEOUT(view.groups_table()->rowCount(), 2, 10000);
    QTRY_COMPARE_WITH_TIMEOUT(view.groups_table()->item(1, speed_up)->text(), QString("timing, round 2/6…"), 10000);
    QVERIFY2(view.counts()->text().contains("timing its configurations in alternation, round 2/6"),
             qPrintable(view.counts()->text()));
    QVERIFY(view.cancel_action()->isEnabled());
    QString asked;
    view.confirm = [&](const QString& question) {
      asked = question;
      return true;
    };
    view.cancel_action()->trigger();
    QVERIFY2(asked.startsWith(QStringLiteral("Stop timing sweep %1?").arg(id)), qPrintable(asked));
    QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, 10000);
    QCOMPARE(ended.at(0).at(1).toInt(), 0);
    QTRY_COMPARE_WITH_TIMEOUT(view.groups_table()->item(1, speed_up)->text(), QString("not timed"), 10000);
    QVERIFY(!view.cancel_action()->isEnabled());  // every point ended, and nothing times them now

    // Timed later (ampwb sweep run): the speed-up's sentence wraps in its column, and every column is in view.
    AlternatingSpeed timed;
    timed.runs = runs;
    timed.images_per_second = {{100, 140, 60, 120, 80, 100}, {101, 61, 139, 79, 121, 99}};  // within the noise
    timed.steps_per_round = 20;
    timed.data = "synthetic 16 px images, batch 8";
    writer.add_alternating_speed(timed);
    view.reload();
    const QString said = view.groups_table()->item(1, speed_up)->text();
    QVERIFY2(said.contains("not distinguishable"), qPrintable(said));
    QTest::qWait(50);
    QCOMPARE(view.groups_table()->horizontalScrollBar()->maximum(), 0);
  }

  // Cancel the sweep, confirmed: `ampwb sweep cancel` marks every point not final cancelled, and the tab shows it.
  void cancelling_a_sweep_from_the_tab() {
    MainWindow w(db("cancel"));
    w.resize(1280, 720);
    w.show();
    w.set_sweep_executable(AMPWB_BINARY);
    w.tabs()->setCurrentWidget(w.sweep_view());
    SweepView& view = *w.sweep_view();
    RunStore writer(db("cancel").toStdString(), RunStore::Mode::Existing);
    const std::string point = R"({"values": {"seed": "0"}, "config": {}})";
    const int64_t id =
        create_sweep(writer, "to cancel", R"({"grid": {"seed": [0, 1, 2]}})", "local", {point, point, point});
    set_point_state(writer, id, 0, SweepPointState::Finished);
    QTRY_COMPARE_WITH_TIMEOUT(view.points_model()->rowCount(), 3, 10000);
    QString asked;
    view.confirm = [&](const QString& question) {
      asked = question;
      return true;
    };
    QSignalSpy requested(&view, &SweepView::cancel_requested);
    auto* bar = view.findChild<QToolBar*>();
    QAction* cancel = nullptr;
    for (QAction* a : bar->actions())
      if (a->text().startsWith("Cancel the sweep")) cancel = a;
    QVERIFY(cancel);
    QCOMPARE(cancel, view.cancel_action());
    QVERIFY(cancel->isEnabled());
    cancel->trigger();
    QVERIFY2(asked.contains(QStringLiteral("Cancel sweep %1?").arg(id)), qPrintable(asked));
    QCOMPARE(requested.count(), 1);
    QTRY_COMPARE_WITH_TIMEOUT(state_of(view, 2), QString("cancelled"), 10000);
    // The status bar says what the command did: two points cancelled, the finished one kept.
    QCOMPARE(w.statusBar()->currentMessage(), QStringLiteral("Sweep %1 cancelled: 2 points marked cancelled").arg(id));
    QCOMPARE(state_of(view, 1), QString("cancelled"));
    QCOMPARE(state_of(view, 0), QString("finished"));  // final points stay as they ended
    QVERIFY(view.chooser()->currentText().contains("cancelled"));
    QVERIFY(sweep(writer, id).cancelled);
    QVERIFY(!cancel->isEnabled());  // nothing is left to cancel, and the tooltip says so
    QCOMPARE(tooltip_text(cancel->toolTip()), QStringLiteral("Sweep %1 is cancelled already").arg(id));

    // A sweep whose every point ended, finished or failed, has nothing to cancel either.
    const int64_t ended = create_sweep(writer, "ended", R"({"grid": {"seed": [0, 1]}})", "local", {point, point});
    set_point_state(writer, ended, 0, SweepPointState::Finished);
    set_point_state(writer, ended, 1, SweepPointState::Running);
    view.show_sweep(ended);
    QCOMPARE(view.current_sweep(), ended);
    QVERIFY(cancel->isEnabled());
    // Its failed point's run says why it failed where the pointer is on its state.
    const int64_t failed = writer.begin_run(TrainConfig{}, RunInfo{}, "");
    writer.end_run(failed, {RunStatus::Failed, "out of memory: this run needs 9.9 GiB"}, {}, 1.0);
    set_point_run(writer, ended, 1, failed);
    set_point_state(writer, ended, 1, SweepPointState::Failed);
    view.reload();
    QVERIFY(!cancel->isEnabled());
    QVERIFY2(tooltip_text(cancel->toolTip()).contains("every point of sweep") &&
                 tooltip_text(cancel->toolTip()).contains("has ended"),
             qPrintable(cancel->toolTip()));
    // Cancelled all the same (its points ended after the click): the status bar does not claim it was.
    QCOMPARE(w.cancel_cli_sweep(ended), QString());
    QVERIFY2(
        w.statusBar()->currentMessage().startsWith(QStringLiteral("Sweep %1 has nothing left to cancel").arg(ended)),
        qPrintable(w.statusBar()->currentMessage()));
    const SweepPointsModel* m = view.points_model();
    QCOMPARE(tooltip_text(m->data(m->index(1, m->column_of("state")), Qt::ToolTipRole).toString()),
             QString("out of memory: this run needs 9.9 GiB"));

    // A sweep none of whose points finished has nothing to compare, and says so.
    const int64_t none = create_sweep(writer, "none finished", R"({"grid": {"seed": [0]}})", "local", {point});
    set_point_state(writer, none, 0, SweepPointState::Failed);
    view.show_sweep(none);
    QVERIFY(!view.compare_action()->isEnabled());
    QCOMPARE(view.compare_action()->toolTip(), QString("No point of this sweep has finished yet"));
  }

  // The seeds of the sweep queued last come back in the next dialog; depths and batch sizes follow the setup panel.
  // (Last: what it saves stays for the program.)
  void the_dialog_remembers_the_seeds_swept_last() {
    const CpuBackend cpu;
    {
      SweepDialog dialog(tiny_config(data_), cpu.capabilities());
      for (QCheckBox* box : dialog.findChildren<QCheckBox*>())  // seeds of FP32 against AMP BF16
        if (box->objectName().startsWith("variant-"))
          box->setChecked(box->objectName().endsWith("fp32") || box->objectName().endsWith("amp-bf16"));
      dialog.findChild<QLineEdit*>("sweepSeeds")->setText("3,4");
      QVERIFY2(dialog.problem().isEmpty(), qPrintable(dialog.problem()));
      dialog.findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok)->click();
      QCOMPARE(dialog.result(), int(QDialog::Accepted));
    }
    TrainConfig other = tiny_config(data_);
    other.depth = 32;
    SweepDialog again(other, cpu.capabilities());
    QCOMPARE(again.findChild<QLineEdit*>("sweepSeeds")->text(), QString("3,4"));
    QCOMPARE(again.findChild<QLineEdit*>("sweepDepths")->text(), QString("32"));
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) {
  return ampwb::ui::test::run_ui_test<ampwb::ui::test::SweepsThroughTheUi>(argc, argv);
}

#include "test_ui_sweeps.moc"
