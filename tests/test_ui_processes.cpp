// The run setup's "Processes" choice, offscreen, end to end: with 2 processes, Train runs `ampwb train --processes 2`
// (a real mpirun) as a child process, the live view follows its epochs, Stop stops it resumable, and the run is in
// the store with both processes; the choice and its data-parallel fields follow the machine and the count, and a
// child that cannot start mpirun says why in the status line.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QtTest>
#include <csignal>

#include "chart_panel.h"
#include "main_window.h"
#include "metric_chart.h"
#include "run_setup_panel.h"
#include "runs_model.h"
#include "runs_view.h"
#include "test_ui_util.h"
#include "training_session.h"

namespace ampwb::ui::test {

class ProcessesThroughTheUi : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString data_;

  QString db(const QString& name) const { return dir_.filePath(name + ".sqlite"); }
  // The tiny runs take seconds: a run not ended by then has hung (its processes are ended with the window), and the
  // test fails there rather than at QTest's own limit, which would leave the processes behind.
  static constexpr int kRunEnds = 120000;

  // The tiny run of tests/test_ui_util.h through the panel's own fields, on `processes` processes.
  void set_up(MainWindow& w, int epochs, int steps, int processes) {
    w.setup()->set_config(tiny_config(data_, epochs, steps));
    QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")->text().startsWith("✔"), 60000);
    child<QSpinBox>(w, "processes")->setValue(processes);
    w.session()->set_executable(AMPWB_BINARY);  // the test program is no ampwb: the child runs the CLI
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    QSettings().remove("setup/processes");  // the default, not what an earlier run of this program chose
    data_ = write_stripes(dir_.filePath("stripes"), 48, 16);
  }

  // Up to the cores here; the data-parallel fields only with more than one process, mapped to their settings.
  void the_choice_follows_the_machine_and_the_count() {
    MainWindow w(db("choice"));
    auto* processes = child<QSpinBox>(w, "processes");
    auto* sync = child<QCheckBox>(w, "syncBatchnorm");
    auto* allreduce = child<QComboBox>(w, "gradientAllreduce");
    const ProcessOffer offer = process_offer();
    QCOMPARE(processes->maximum(), offer.max_processes(DeviceChoice::cpu()));
    QVERIFY2(offer.max_processes(DeviceChoice::cpu()) >= 2, "this machine should offer two processes: MPI, mpirun");
    QCOMPARE(processes->value(), 1);
    QVERIFY(processes->isEnabled());
    QVERIFY(!sync->isEnabled());
    QVERIFY(!allreduce->isEnabled());
    QVERIFY(sync->toolTip().contains("more than one process"));
    processes->setValue(2);
    QVERIFY(sync->isEnabled());
    QVERIFY(allreduce->isEnabled());
    sync->setChecked(true);
    allreduce->setCurrentIndex(allreduce->findData("bf16"));
    const TrainConfig c = w.setup()->config();
    QVERIFY(c.data_parallel.sync_batchnorm);
    QCOMPARE(c.data_parallel.gradient_allreduce, GradientAllReduce::BF16);
    QCOMPARE(sync->property("ampwbSetting").toString(), QString("data_parallel.sync_batchnorm"));
    QCOMPARE(allreduce->property("ampwbSetting").toString(), QString("data_parallel.gradient_allreduce"));
    // A run in progress locks the panel; unlocked again, the fields stay as the count says.
    w.setup()->set_editable(false);
    QVERIFY(!processes->isEnabled() && !sync->isEnabled());
    processes->setValue(1);
    w.setup()->set_editable(true);
    QVERIFY(processes->isEnabled());
    QVERIFY(!sync->isEnabled());
  }

  // Without mpirun on PATH the choice is one process, saying why.
  void without_mpirun_the_choice_says_why() {
    const QByteArray path = qgetenv("PATH");
    qputenv("PATH", dir_.path().toUtf8());  // a folder with no mpirun
    MainWindow w(db("nompirun"));
    qputenv("PATH", path);
    auto* processes = child<QSpinBox>(w, "processes");
    QVERIFY(!processes->isEnabled());
    QCOMPARE(processes->maximum(), 1);
    QVERIFY2(processes->toolTip().contains("mpirun is not on PATH"), qPrintable(processes->toolTip()));
  }

  // Train with 2 processes: the live view follows the child's epochs, and the run is stored as trained by both.
  void two_processes_train_one_run_through_mpirun() {
    const QString path = db("two");
    MainWindow w(path);
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    set_up(w, 2, 0, 2);
    QSignalSpy finished(&w, &MainWindow::run_finished);
    int epochs_seen_live = 0;
    connect(w.session(), &TrainingSession::events, this,
            [&](const EventBatch& batch) { epochs_seen_live += static_cast<int>(batch.epochs.size()); });
    QTest::mouseClick(child<QPushButton>(w, "trainButton"), Qt::LeftButton);
    QVERIFY(w.session()->running());
    QVERIFY(w.session()->in_child());
    QVERIFY(!child<QPushButton>(w, "trainButton")->isEnabled());
    QVERIFY(finished.wait(kRunEnds));
    const QString status = child<QLabel>(w, "statusLine")->text();
    QCOMPARE(finished.at(0).at(1).toInt(), static_cast<int>(RunStatus::Finished));
    QVERIFY2(status.contains("finished"), qPrintable(status));
    QCOMPARE(epochs_seen_live, 2);

    const int64_t id = finished.at(0).at(0).toLongLong();
    QVERIFY(id > 0);
    const RunSeries& live = *w.live_run();
    QCOMPARE(live.run_id, id);
    QCOMPARE(live.epochs.size(), size_t{2});
    // 96 images, 4/5 for training (76), batch 8 per process: each process 38 images a epoch, 5 steps.
    RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
    const RunRecord r = store.run(id);
    QCOMPARE(r.status, RunStatus::Finished);
    QCOMPARE(r.info.world_size, 2);
    QCOMPARE(r.info.launcher, Launcher::Mpirun);
    QCOMPARE(store.steps(id).size(), live.steps.size());
    QCOMPARE(live.steps.size(), static_cast<size_t>(2 * r.info.steps_per_epoch));
    QVERIFY(w.live_charts()->chart("loss")->point_count() > 0);
    QCOMPARE(w.live_charts()->chart("accuracy")->point_count(), qsizetype{2 * 2});  // two classes: no top-2
    QCOMPARE(child<QProgressBar>(w, "progress")->value(), 1000);
    // The runs list says it: the device, times the processes.
    RunsModel* runs = w.runs_view()->model();
    QCOMPARE(runs->rowCount(), 1);
    QCOMPARE(runs->data(runs->index(0, RunsModel::Device), Qt::DisplayRole).toString(), QString("cpu × 2"));
  }

  // Stop on a run on two processes: both stop after the same step, the run is recorded stopped with a checkpoint, and
  // Resume goes on with two processes to the end.
  void stop_leaves_it_resumable_and_resume_takes_as_many() {
    const QString path = db("stop");
    MainWindow w(path);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    set_up(w, 20, 0, 2);  // long enough that the stop, sent at the first step, comes before the end
    QSignalSpy finished(&w, &MainWindow::run_finished);
    bool stopped = false;
    connect(w.session(), &TrainingSession::events, this, [&](const EventBatch& batch) {
      if (!stopped && !batch.steps.empty()) {
        stopped = true;
        QTest::mouseClick(child<QPushButton>(w, "stopButton"), Qt::LeftButton);
      }
    });
    QTest::mouseClick(child<QPushButton>(w, "trainButton"), Qt::LeftButton);
    QVERIFY(finished.wait(kRunEnds));
    QVERIFY(stopped);
    QCOMPARE(finished.at(0).at(1).toInt(), static_cast<int>(RunStatus::Cancelled));
    const int64_t id = finished.at(0).at(0).toLongLong();
    {
      RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
      QCOMPARE(store.run(id).status, RunStatus::Cancelled);
      QVERIFY(store.epochs(id).size() < 20);
    }
    QCOMPARE(w.resume_run(id), QString());
    QVERIFY(w.session()->in_child());
    QVERIFY(finished.wait(kRunEnds));
    QCOMPARE(finished.at(1).at(1).toInt(), static_cast<int>(RunStatus::Finished));
    RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
    QCOMPARE(store.run(id).status, RunStatus::Finished);
    QCOMPARE(store.epochs(id).size(), size_t{20});
    QCOMPARE(store.run(id).info.world_size, 2);
  }

  // A process of the run killed after its first checkpoint: the run is interrupted and resumable, as the store
  // records it and the Runs tab shows it, not failed.
  void a_killed_process_leaves_the_run_interrupted() {
    const QString path = db("killed");
    MainWindow w(path);
    set_up(w, 50, 0, 2);
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QVERIFY(w.start_training());
    int64_t id = 0;
    QTRY_VERIFY_WITH_TIMEOUT((id = w.session()->run_id()) != 0, kRunEnds);
    RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
    QTRY_VERIFY_WITH_TIMEOUT(!store.checkpoints(id).empty(), kRunEnds);
    const pid_t rank0 = static_cast<pid_t>(store.run(id).pid);
    QVERIFY(rank0 > 0);
    QCOMPARE(::kill(rank0, SIGKILL), 0);
    QVERIFY(finished.wait(kRunEnds));
    QCOMPARE(finished.at(0).at(1).toInt(), static_cast<int>(RunStatus::Interrupted));
    const QString status = child<QLabel>(w, "statusLine")->text();
    QVERIFY2(status.startsWith(QStringLiteral("Run %1 interrupted").arg(id)), qPrintable(status));
    QVERIFY2(status.endsWith("It can be resumed from its last checkpoint: Resume in the Runs tab."),
             qPrintable(status));
    QCOMPARE(store.run(id).status, RunStatus::Interrupted);
    QVERIFY(store.resumable(id));
  }

  // A child that cannot start mpirun fails with the CLI's own reason, shown in the status line.
  void the_childs_error_is_shown_in_its_words() {
    MainWindow w(db("error"));
    set_up(w, 1, 2, 2);
    QSignalSpy finished(&w, &MainWindow::run_finished);
    const QByteArray path = qgetenv("PATH");
    qputenv("PATH", dir_.path().toUtf8());  // the child finds no mpirun
    const bool started = w.start_training();
    qputenv("PATH", path);
    QVERIFY(started);
    QVERIFY(finished.wait(kRunEnds));
    QCOMPARE(finished.at(0).at(1).toInt(), static_cast<int>(RunStatus::Failed));
    const QString status = child<QLabel>(w, "statusLine")->text();
    QVERIFY2(status.contains("--processes starts Open MPI's mpirun, which cannot be run here"), qPrintable(status));
    QVERIFY2(!status.contains("ampwb train: error"), qPrintable(status));
  }
};

}  // namespace ampwb::ui::test

QTEST_MAIN(ampwb::ui::test::ProcessesThroughTheUi)
#include "test_ui_processes.moc"
