// The Runs tab follows the run store while other processes write into it, offscreen, on a real store (SQLite, and a
// real PostgreSQL server where the build has libpq): a run that a real `ampwb train` child process records appears
// within a few seconds without any refresh by hand and ends showing its final state and accuracy; a run recorded
// epoch by epoch from another connection updates its row as it goes; a child killed mid-run turns interrupted; and
// through all of it the user's selection, sort order and scroll position stay where they were. A PostgreSQL server
// that stops answering leaves the window answering.
#include <QElapsedTimer>
#include <QHeaderView>
#include <QLabel>
#include <QProcess>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#ifdef AMPWB_TEST_POSTGRES
#include "postgres_server.h"
#endif
#include "compare_view.h"
#include "main_window.h"
#include "runs_view.h"
#include "test_ui_util.h"

namespace ampwb::ui::test {

class RunsViewFollowsTheStore : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString data_;

  static QString cell(const RunsView& view, int64_t run, int column) {
    const int row = view.model()->row_of(run);
    return row < 0 ? QString() : view.model()->data(view.model()->index(row, column), Qt::DisplayRole).toString();
  }

  // The id of the run named `name` in the view's rows, 0 while it has none.
  static int64_t row_named(const RunsView& view, const QString& name) {
    for (int row = 0; row < view.model()->rowCount(); ++row)
      if (QString::fromStdString(view.model()->record(row).name) == name) return view.model()->run_id(row);
    return 0;
  }

  // The id of the run named `name` in the store, 0 while it has none (read on a connection of the test's own).
  static int64_t stored_named(const RunStore& store, const std::string& name) {
    for (const RunRecord& r : store.runs())
      if (r.name == name) return r.id;
    return 0;
  }

  QStringList train_arguments(const QString& location, const QString& name, int epochs, int steps) const {
    return {"train",
            "--db",
            location,
            "--name",
            name,
            "--data",
            data_,
            "--depth",
            "20",
            "--epochs",
            QString::number(epochs),
            "--batch-size",
            "8",
            "--image-size",
            "16",
            "--lr",
            "0.05",
            "--max-steps-per-epoch",
            QString::number(steps),
            "--threads",
            "1"};
  }

  // How long after the store has the run named `name` the view shows it; fails after `limit_ms` of waiting for
  // either. The store is read every 50 ms, as often as the view's poll is not.
  static double seconds_until_shown(const RunsView& view, const RunStore& store, const QString& name, int limit_ms) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point give_up = Clock::now() + std::chrono::milliseconds(limit_ms);
    std::optional<Clock::time_point> stored;
    while (Clock::now() < give_up) {
      if (!stored && stored_named(store, name.toStdString()) != 0) stored = Clock::now();
      if (row_named(view, name) != 0) {
        if (!stored) return 0;  // seen by the view before the test's own read: within one poll anyway
        return std::chrono::duration<double>(Clock::now() - *stored).count();
      }
      QTest::qWait(50);
    }
    return -1;
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    data_ = write_stripes(dir_.filePath("stripes"), 24, 16);
  }

  void runs_written_elsewhere_appear_live() { check_runs_written_elsewhere_appear(dir_.filePath("live.sqlite")); }

#ifdef AMPWB_TEST_POSTGRES
  // The same against a real PostgreSQL server, the store a cluster's jobs write into.
  void runs_written_elsewhere_appear_live_from_postgresql() {
    std::unique_ptr<ampwb::test::PostgresServer> server;
    try {
      server = std::make_unique<ampwb::test::PostgresServer>("ampwb_ui_runs_poll");
    } catch (const std::exception& e) {
      QFAIL(e.what());  // a server that cannot start fails the test, saying why
    }
    check_runs_written_elsewhere_appear(QString::fromStdString(server->uri()));
    check_a_hung_server_leaves_the_window_responsive(*server);
  }
#endif

 private:
#ifdef AMPWB_TEST_POSTGRES
  // Every process of the server: its postmaster and the backends it forked.
  static std::vector<pid_t> server_processes(const ampwb::test::PostgresServer& server) {
    std::ifstream pid_file(server.socket_folder() / "data" / "postmaster.pid");
    pid_t postmaster = 0;
    pid_file >> postmaster;
    if (postmaster <= 0) return {};
    std::vector<pid_t> pids{postmaster};
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) continue;
      std::istringstream rest(line.substr(line.rfind(')') + 2));
      char state = 0;
      pid_t parent = 0;
      rest >> state >> parent;
      if (parent == postmaster) pids.push_back(static_cast<pid_t>(std::stol(entry.path().filename().string())));
    }
    return pids;
  }

  // Stops the server while each of the Runs, Compare and Sweeps tabs is shown in turn, for longer than any tab's pace
  // of reading the store (3 s at most), and fails where the window stops answering meanwhile for a second or more.
  static void check_answers_while_the_server_hangs(const ampwb::test::PostgresServer& server, MainWindow& w) {
    static constexpr int kShownMs = 3000 + 200;
    const std::vector<QWidget*> tabs{w.runs_view(), w.compare_view(), w.sweep_view()};
    const int hung_ms = static_cast<int>(tabs.size()) * kShownMs;
    const std::vector<pid_t> pids = server_processes(server);
    QVERIFY2(!pids.empty(), "no postmaster.pid");
    for (pid_t pid : pids) ::kill(pid, SIGSTOP);
    // Continued from another thread, so that a window that does wait on the server fails here instead of hanging.
    std::thread resume([&pids, hung_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(hung_ms + 300));
      for (pid_t pid : pids) ::kill(pid, SIGCONT);
    });
    QElapsedTimer clock;
    qint64 worst_ms = 0;
    QString worst_tab;
    for (QWidget* tab : tabs) {
      w.tabs()->setCurrentWidget(tab);
      for (int i = 0; i < kShownMs / 100; ++i) {  // in 100 ms waits
        clock.start();
        QTest::qWait(100);
        if (clock.elapsed() - 100 > worst_ms) {
          worst_ms = clock.elapsed() - 100;
          worst_tab = w.tabs()->tabText(w.tabs()->currentIndex());
        }
      }
    }
    resume.join();
    QVERIFY2(worst_ms < 1000, qPrintable(QStringLiteral("with the %1 tab shown, the window stopped answering for %2 ms")
                                             .arg(worst_tab)
                                             .arg(worst_ms)));
    QVERIFY(w.isVisible());
  }

  // The server stops answering while the Runs, Compare and Sweeps tabs are shown, each of which follows the store:
  // the window goes on answering (the polls wait on their own thread, one at a time), and once the server answers
  // again the Runs tab follows the store again.
  void check_a_hung_server_leaves_the_window_responsive(const ampwb::test::PostgresServer& server) {
    const QString location = QString::fromStdString(server.uri());
    MainWindow w(location);
    w.resize(1000, 600);
    w.show();
    w.tabs()->setCurrentWidget(w.runs_view());
    RunsView& view = *w.runs_view();
    QTRY_VERIFY_WITH_TIMEOUT(view.model()->rowCount() > 0, 10000);
    const int before = view.model()->rowCount();
    w.open_runs({view.model()->run_id(0)});  // the Compare tab has runs to follow
    QVERIFY(w.tabs()->currentWidget() == static_cast<QWidget*>(w.compare_view()));
    QTest::qWait(RunsView::kPollIntervalMs + 500);  // the poll that showing the tab started is over
    check_answers_while_the_server_hangs(server, w);
    w.tabs()->setCurrentWidget(w.runs_view());
    RunStore writer(location.toStdString(), RunStore::Mode::Existing);
    TrainConfig c = tiny_config(data_);
    c.name = "after the server came back";
    const int64_t id = writer.begin_run(c, RunInfo{}, "");
    writer.end_run(id, {RunStatus::Finished, "", ""}, {}, 1.0);
    QTRY_COMPARE_WITH_TIMEOUT(cell(view, id, RunsModel::Status), QString("finished"), 10000);
    QCOMPARE(view.model()->rowCount(), before + 1);
  }
#endif

  void check_runs_written_elsewhere_appear(const QString& location) {
    // Runs already there: enough of them that the table scrolls in a small window.
    {
      RunStore writer(location.toStdString(), RunStore::Mode::Create);
      for (int i = 0; i < 40; ++i) {
        TrainConfig c = tiny_config(data_);
        c.name = "earlier " + std::to_string(i);
        const int64_t id = writer.begin_run(c, RunInfo{}, "");
        writer.end_run(id, {RunStatus::Finished, "", ""}, {}, 1.0);
      }
    }
    MainWindow w(location);
    w.resize(1000, 600);
    w.show();
    w.tabs()->setCurrentWidget(w.runs_view());
    RunsView& view = *w.runs_view();
    QTableView* table = view.table();
    QTRY_COMPARE_WITH_TIMEOUT(view.model()->rowCount(), 40, 10000);

    // The user's view of the table: sorted by id, oldest first (new runs go below), scrolled, one run selected.
    table->sortByColumn(RunsModel::Id, Qt::AscendingOrder);
    QTest::qWait(50);
    QScrollBar* scroll = table->verticalScrollBar();
    QVERIFY2(scroll->maximum() > 10, "the table should scroll in a 1000×600 window");
    scroll->setValue(scroll->maximum() / 2);
    const int scrolled = scroll->value();
    const int64_t chosen = view.model()->run_id(20);
    view.select({chosen});
    table->horizontalHeader()->resizeSection(RunsModel::Name, 321);  // a width the user chose

    // A run recorded epoch by epoch from another connection, as a process on another machine would record it.
    RunStore writer(location.toStdString(), RunStore::Mode::Existing);
    TrainConfig c = tiny_config(data_, 3);
    c.name = "step by step";
    RunInfo info;
    info.validation_images = 16;
    const int64_t live = writer.begin_run(c, info, "");
    QTRY_VERIFY_WITH_TIMEOUT(view.model()->row_of(live) >= 0, 5000);
    QCOMPARE(cell(view, live, RunsModel::Status), QString("running (0/3)"));
    QCOMPARE(cell(view, live, RunsModel::BestAccuracy), QString("–"));
    EpochReport e;
    e.epoch = 1;
    e.validation_accuracy = 0.625;
    e.seconds = 1;
    writer.add_epoch(live, e, {}, 1.0);
    QTRY_COMPARE_WITH_TIMEOUT(cell(view, live, RunsModel::Status), QString("running (1/3)"), 5000);
    QCOMPARE(cell(view, live, RunsModel::BestAccuracy), QString("62.50%"));
    e.epoch = 2;
    e.validation_accuracy = 0.75;
    writer.add_epoch(live, e, {}, 2.0);
    QTRY_COMPARE_WITH_TIMEOUT(cell(view, live, RunsModel::BestAccuracy), QString("75.00%"), 5000);
    e.epoch = 3;
    e.validation_accuracy = 0.6875;
    writer.add_epoch(live, e, {}, 3.0);
    writer.end_run(live, {RunStatus::Finished, "", ""}, {}, 3.0);
    QTRY_COMPARE_WITH_TIMEOUT(cell(view, live, RunsModel::Status), QString("finished"), 5000);
    QCOMPARE(cell(view, live, RunsModel::BestAccuracy), QString("75.00%"));
    // Renamed by another process: the marker sees the edit too.
    writer.rename(live, "step by step, renamed");
    QTRY_COMPARE_WITH_TIMEOUT(cell(view, live, RunsModel::Name), QString("step by step, renamed"), 5000);

    // A real `ampwb train` in another process.
    QProcess cli;
    cli.setProcessChannelMode(QProcess::MergedChannels);
    cli.start(AMPWB_BINARY, train_arguments(location, "from the cli", 2, 2));
    QVERIFY(cli.waitForStarted());
    const double latency = seconds_until_shown(view, writer, "from the cli", 120000);
    qInfo("the CLI's run was shown %.2f s after it was in the store", latency);
    QVERIFY2(latency >= 0, qPrintable("the CLI's run never appeared: " + QString::fromUtf8(cli.readAll())));
    // One poll interval, and time for the poll itself on a busy two-core machine.
    QVERIFY2(latency < RunsView::kPollIntervalMs / 1000.0 + 3, qPrintable(QString::number(latency)));
    if (cli.state() != QProcess::NotRunning) QVERIFY(cli.waitForFinished(300000));  // false once it ended
    QVERIFY2(cli.exitStatus() == QProcess::NormalExit && cli.exitCode() == 0, cli.readAll().constData());
    const int64_t from_cli = row_named(view, "from the cli");
    QTRY_COMPARE_WITH_TIMEOUT(cell(view, from_cli, RunsModel::Status), QString("finished"), 5000);
    const std::vector<EpochReport> epochs = writer.epochs(from_cli);
    QCOMPARE(epochs.size(), size_t(2));
    double best = 0;
    for (const EpochReport& r : epochs) best = std::max(best, r.validation_accuracy);
    QCOMPARE(cell(view, from_cli, RunsModel::BestAccuracy), QStringLiteral("%1%").arg(100 * best, 0, 'f', 2));

    // A run whose process is killed mid-run: its row turns interrupted, though nothing wrote to the store.
    QProcess doomed;
    doomed.setProcessChannelMode(QProcess::MergedChannels);
    doomed.start(AMPWB_BINARY, train_arguments(location, "killed", 500, 4));
    QVERIFY(doomed.waitForStarted());
    QTRY_VERIFY_WITH_TIMEOUT(cell(view, row_named(view, "killed"), RunsModel::Status).startsWith("running"), 120000);
    // Stopped first, so that the view has read all it wrote (two polls later) and only its death is left to see.
    const int64_t killed = row_named(view, "killed");
    ::kill(static_cast<pid_t>(doomed.processId()), SIGSTOP);
    QTest::qWait(2 * RunsView::kPollIntervalMs + 500);
    QVERIFY(cell(view, killed, RunsModel::Status).startsWith("running"));
    ::kill(static_cast<pid_t>(doomed.processId()), SIGKILL);
    if (doomed.state() != QProcess::NotRunning) QVERIFY(doomed.waitForFinished(10000));
    QTRY_VERIFY_WITH_TIMEOUT(cell(view, killed, RunsModel::Status).startsWith("interrupted"), 10000);

    // Through all of it: the same run selected, the same sort, the same scroll position, the width the user chose.
    QCOMPARE(view.selected_ids(), std::vector<int64_t>{chosen});
    QCOMPARE(table->horizontalHeader()->sortIndicatorSection(), int(RunsModel::Id));
    QCOMPARE(table->horizontalHeader()->sortIndicatorOrder(), Qt::AscendingOrder);
    QCOMPARE(scroll->value(), scrolled);
    QCOMPARE(table->horizontalHeader()->sectionSize(RunsModel::Name), 321);
    QCOMPARE(view.proxy()->data(view.proxy()->index(42, RunsModel::Id)).toLongLong(), killed);  // the newest last
    QVERIFY(view.findChild<QLabel*>("runsCount")->text().startsWith("43 of 43 runs"));
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) {
  return ampwb::ui::test::run_ui_test<ampwb::ui::test::RunsViewFollowsTheStore>(argc, argv);
}

#include "test_ui_runs_poll.moc"
