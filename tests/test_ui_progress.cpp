// Progress that says what is happening, offscreen: the ETA counts the validations to come before any has run, the
// bar says "validating 1,000/3,000, 4.0 s more" with that validation's own time, a resumed run's bar goes on from where
// the stopped one was instead of jumping back, a run validates on the subset the setup panel names and its notes
// say so, and a new run starts on empty charts.
#include <QAreaSeries>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QDir>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QXYSeries>
#include <QtTest>

#include "analysis/run_speed.h"
#include "chart_panel.h"
#include "event_queue.h"
#include "main_window.h"
#include "metric_chart.h"
#include "run_controls.h"
#include "run_series.h"
#include "run_setup_panel.h"
#include "runs_view.h"
#include "store/run_store.h"
#include "test_ui_util.h"
#include "train/observer_list.h"
#include "train/run_progress.h"
#include "training_session.h"

namespace ampwb::ui::test {

namespace {

StepReport step_at(int epoch, int64_t step, double wall_seconds) {
  StepReport s;
  s.epoch = epoch;
  s.step = step;
  s.wall_seconds = wall_seconds;
  return s;
}

// What a chart shows of runs: its title, its series' names, and how many points its curves and areas and values
// its bars draw. FP16's shaded range is drawn whatever the run, so its points are left out.
QString drawn(const MetricChart& chart) {
  qsizetype values = 0;
  QStringList names;
  for (QAbstractSeries* s : chart.chart()->series()) {
    names << s->name();
    if (auto* xy = qobject_cast<QXYSeries*>(s)) values += xy->count();
    if (auto* area = qobject_cast<QAreaSeries*>(s); area && area->name() != "FP16 range")
      values += area->upperSeries()->count();
    if (auto* bars = qobject_cast<QBarSeries*>(s))
      for (QBarSet* set : bars->barSets()) values += set->count();
  }
  return QStringLiteral("%1 | %2 | %3 values").arg(chart.chart()->title(), names.join(", ")).arg(values);
}

}  // namespace

class ProgressThroughTheUi : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString data_;

  QString db(const QString& name) const { return dir_.filePath(name + ".sqlite"); }

  // The setup panel holds `config`, and the dataset has been inspected (Train waits for that).
  static void set_up(MainWindow& w, const TrainConfig& config) {
    w.setup()->set_config(config);
    QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")->text().startsWith("✔"), 60000);
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    data_ = write_stripes(dir_.filePath("stripes"), 60, 16);  // 96 training and 24 validation images
  }

  // Before any validation, the ETA holds one per epoch left, from the training images/s (a validation image costs a
  // third of a training one); during the first, its own rate; after it, the time it took.
  void the_eta_counts_validation_from_the_start() {
    RunProgress p;
    RunInfo info;
    info.steps_per_epoch = 100;
    info.train_images = 6400;
    info.validation_images = 3000;
    p.start(info, 2, 64);
    for (int i = 0; i < 50; ++i) p.step(step_at(1, i, 0.1 * (i + 1)));
    // 150 steps left at 0.1 s; 640 training images/s, so 3,000 validation images take 3000 / (3 × 640) s, twice.
    const double validation = 3000.0 / (RunProgress::kValidationSpeedup * 640.0);
    QVERIFY2(std::abs(p.eta_seconds() - (15.0 + 2 * validation)) < 0.05, qPrintable(QString::number(p.eta_seconds())));
    for (int i = 50; i < 100; ++i) p.step(step_at(1, i, 0.1 * (i + 1)));
    QVERIFY(!p.validating());
    p.validation({1, 0, 3000, 0.0});
    QVERIFY(p.validating());
    QCOMPARE(p.validation_eta_seconds(), -1.0);  // nothing measured yet
    // A third done in 2 s: this validation takes 6 s, 4 s of it left, and the next is estimated at 6 s too.
    p.validation({1, 1000, 3000, 2.0});
    QCOMPARE(p.validation_eta_seconds(), 4.0);
    QVERIFY2(std::abs(p.eta_seconds() - (4.0 + 10.0 + 6.0)) < 0.05, qPrintable(QString::number(p.eta_seconds())));
    QCOMPARE(p.fraction(), 0.5);
    // The epoch's report: 10 s of steps and 7 s in all, so 7 s per validation from now on.
    EpochReport e;
    e.epoch = 1;
    e.seconds = 17.0;
    e.compute_seconds = 10.0;
    p.epoch(e);
    QVERIFY(!p.validating());
    for (int i = 100; i < 105; ++i) p.step(step_at(2, i, 17.0 + 0.1 * (i - 99)));
    QVERIFY2(std::abs(p.eta_seconds() - (9.5 + 7.0)) < 0.05, qPrintable(QString::number(p.eta_seconds())));
  }

  // A run resumed in its second epoch counts the first epoch's steps and those of the second before the stop.
  void a_resumed_run_counts_the_steps_before_it() {
    RunProgress p;
    RunInfo info;
    info.steps_per_epoch = 10;
    info.first_epoch = 2;
    p.start(info, 3, 8);
    QCOMPARE(p.fraction(), 10.0 / 30.0);
    p.step(step_at(2, 14, 30.0));  // the sixth step of epoch 2 (global steps count from 0)
    QCOMPARE(p.fraction(), 0.5);
    QCOMPARE(p.step_in_epoch(), int64_t{5});
    QCOMPARE(p.current_epoch(), 2);
  }

  // The bar names the validation under way, in the locale's digits, with its own time left; the ETA beside it is the
  // run's.
  void the_bar_says_validating_with_its_own_time_left() {
    RunControls controls;
    auto* bar = child<QProgressBar>(controls, "progress");
    auto* eta = child<QLabel>(controls, "eta");
    RunProgress p;
    RunInfo info;
    info.steps_per_epoch = 100;
    info.train_images = 6400;
    info.validation_images = 3000;
    p.start(info, 2, 64);
    for (int i = 0; i < 100; ++i) p.step(step_at(1, i, 0.1 * (i + 1)));
    controls.set_state(RunControls::State::Training);
    controls.show_progress(p);
    QCOMPARE(bar->text(), QString("epoch 1/2 · step 100/100 · 50%"));
    p.validation({1, 1000, 3000, 2.0});
    controls.show_progress(p);
    const QLocale locale;
    QCOMPARE(bar->text(), QStringLiteral("epoch 1/2 · validating %1/%2, 4.0 s more · 50%")
                              .arg(locale.toString(1000), locale.toString(3000)));
    QCOMPARE(eta->text(), QString("ETA 20 s"));
  }

  // Validation progress moves the bar, not the charts: a batch of it alone is handed over but redraws none.
  void validation_progress_alone_redraws_no_chart() {
    RunSeries run;
    EventBatch steps;
    steps.steps.push_back(step_at(1, 0, 0.1));
    run.append(steps);
    const uint64_t drawn = run.revision;
    EventBatch progress;
    progress.validations.push_back({1, 8, 20, 0.1});
    QVERIFY(!progress.empty());
    run.append(progress);
    QCOMPARE(run.revision, drawn);
  }

  // A run through the window validates on the number of images the setup panel names, says so in its notes, and
  // the window hears every validation batch: from none to all, once per epoch. Whenever the window drew a batch
  // that ended inside a validation, its bar said "validating".
  // Each epoch's line in the status bar says what else the machine did meanwhile, and warns where that was much.
  void each_epochs_line_says_what_else_the_machine_did() {
    MainWindow w(db("load"));
    w.show();
    set_up(w, tiny_config(data_, 2, 3));
    QStringList messages;
    connect(w.statusBar(), &QStatusBar::messageChanged, &w, [&](const QString& m) { messages << m; });
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QVERIFY(w.start_training());
    QVERIFY(finished.wait(600000));
    const int64_t run = finished.at(0).at(0).toLongLong();
    const std::vector<EpochTimes> times = RunStore(db("load").toStdString(), RunStore::Mode::ReadOnly).epoch_times(run);
    QCOMPARE(times.size(), size_t{2});
    for (const EpochTimes& t : times) {
      QVERIFY(t.load.known());
      const QStringList lines = messages.filter(QStringLiteral("Epoch %1/2:").arg(t.epoch));
      QCOMPARE(lines.size(), qsizetype{1});
      QVERIFY2(lines[0].contains(QString::fromStdString(machine_load_text(t.load))), qPrintable(lines[0]));
      QCOMPARE(lines[0].startsWith(QStringLiteral("\u26a0 timings unreliable")),
               !timing_warning({{run, t.load}}).empty());
    }
  }

  void a_run_validates_on_the_panels_subset_and_says_so() {
    MainWindow w(db("subset"));
    w.resize(1366, 768);
    w.show();
    set_up(w, tiny_config(data_, 2, 3));
    child<QSpinBox>(w, "maxValidationImages")->setValue(20);
    QCOMPARE(w.setup()->config().data.max_validation_images, int64_t{20});
    // The dataset line says what a run takes of what the data has.
    QTRY_VERIFY2_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")->text().contains("and 20 of 24 validation images"),
                              qPrintable(child<QLabel>(w, "datasetStatus")->text()), 60000);
    auto* bar = child<QProgressBar>(w, "progress");
    std::vector<ValidationProgress> heard;
    int inside = 0;
    connect(w.session(), &TrainingSession::events, bar, [&](const EventBatch& b) {
      heard.insert(heard.end(), b.validations.begin(), b.validations.end());
      if (!b.validations.empty() && b.epochs.empty() && !b.ended) {
        ++inside;
        QVERIFY2(bar->text().contains("validating"), qPrintable(bar->text()));
      }
    });
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QVERIFY(w.start_training());
    QVERIFY(finished.wait(600000));
    QCOMPARE(finished.at(0).at(1).toInt(), static_cast<int>(RunStatus::Finished));
    qInfo("%d of the window's event batches ended inside a validation", inside);
    QVERIFY2(child<QLabel>(w, "runNotes")->text().contains("validated on 20 of 24 images"),
             qPrintable(child<QLabel>(w, "runNotes")->text()));
    // Batches of 8: 0, 8, 16 and 20 images done, for each of the two epochs.
    QCOMPARE(heard.size(), size_t{8});
    for (size_t i = 0; i < heard.size(); ++i) {
      QCOMPARE(heard[i].epoch, static_cast<int>(i / 4) + 1);
      QCOMPARE(heard[i].images, int64_t{20});
      QCOMPARE(heard[i].images_done, std::min<int64_t>(20, 8 * static_cast<int64_t>(i % 4)));
    }
    QCOMPARE(bar->value(), 1000);
    RunStore store(db("subset").toStdString(), RunStore::Mode::ReadOnly);
    for (const ConfusionMatrix& m : store.confusion_matrices(finished.at(0).at(0).toLongLong())) {
      int64_t total = 0;
      for (int64_t c : m.counts) total += c;
      QCOMPARE(total, int64_t{20});
    }
  }

  // A run stopped in its second epoch (after 9 of its 18 steps: 50 %) and resumed in the window: every value the
  // bar shows while training is at least that (it used to restart from the resumed epoch: 50 % became 25 %).
  void progress_after_resume_does_not_jump_back() {
    const QString path = db("resume");
    TrainConfig c = tiny_config(data_, 3, 6);
    c.checkpoint_dir = dir_.filePath("resume-checkpoints").toStdString();
    int64_t id = 0;
    {
      // Stopped from the training thread after global step 8, as the Stop button does from the UI's.
      class StopAfter : public ObserverList {
       public:
        StopAfter(StoreRecorder& recorder, Trainer*& trainer) : ObserverList({&recorder}), trainer_(trainer) {}
        void on_step(const StepReport& s) override {
          ObserverList::on_step(s);
          if (s.step == 8) trainer_->stop();
        }

       private:
        Trainer*& trainer_;
      };
      RunStore store(path.toStdString());
      StoreRecorder recorder(store, c);
      Trainer* trainer = nullptr;
      StopAfter observer(recorder, trainer);
      Trainer stopped(c, &observer);
      trainer = &stopped;
      QCOMPARE(stopped.run().status, RunStatus::Cancelled);
      id = recorder.run_id();
    }
    MainWindow w(path);
    w.show();
    auto* bar = child<QProgressBar>(w, "progress");
    std::vector<int> shown;
    connect(w.session(), &TrainingSession::events, bar, [&] {
      if (w.controls()->state() == RunControls::State::Training) shown.push_back(bar->value());
    });
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QCOMPARE(w.resume_run(id), QString());
    QVERIFY(finished.wait(600000));
    QCOMPARE(finished.at(0).at(1).toInt(), static_cast<int>(RunStatus::Finished));
    QVERIFY(!shown.empty());
    for (size_t i = 0; i < shown.size(); ++i)
      QVERIFY2(shown[i] >= 500 && (i == 0 || shown[i] >= shown[i - 1]),
               qPrintable(QStringLiteral("%1 after %2").arg(shown[i]).arg(i ? shown[i - 1] : 500)));
    QCOMPARE(bar->value(), 1000);
  }

  // The previous run's curves, bars, histogram and titles do not stay under a new run: the live charts start as
  // they are before any run, the histogram's "none yet" over an empty plot.
  void charts_are_cleared_when_a_new_run_starts() {
    MainWindow w(db("cleared"));
    w.resize(1366, 768);
    w.show();
    std::map<QString, QString> before_any;
    for (MetricChart* c : w.live_charts()->charts()) before_any[c->metric_key()] = drawn(*c);
    set_up(w, tiny_config(data_, 2, 3));
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QVERIFY(w.start_training());
    QVERIFY(finished.wait(600000));
    for (MetricChart* c : w.live_charts()->charts())  // (the FP8 chart, hidden, draws nothing for a run without FP8)
      if (c->metric_key() != "fp8-scaling") QVERIFY2(drawn(*c) != before_any[c->metric_key()], qPrintable(drawn(*c)));

    QVERIFY(w.start_training());  // nothing of the new run has been drawn yet: its events come from the event loop
    for (MetricChart* c : w.live_charts()->charts()) QCOMPARE(drawn(*c), before_any[c->metric_key()]);
    QVERIFY2(w.live_charts()->chart("histogram")->chart()->title().contains("none yet"),
             qPrintable(w.live_charts()->chart("histogram")->chart()->title()));
    w.stop_training();
    QVERIFY(finished.wait(600000));
  }

  // The run the Training tab shows, deleted (from the Runs tab, or by `ampwb delete` while it is shown): its charts
  // go at once, back to the next run's preview, and Export charts has nothing of it to export.
  void a_deleted_run_leaves_the_training_tab() {
    MainWindow w(db("deleted"));
    w.resize(1366, 768);
    w.show();
    std::map<QString, QString> before_any;
    for (MetricChart* c : w.live_charts()->charts()) before_any[c->metric_key()] = drawn(*c);
    set_up(w, tiny_config(data_, 1, 2));
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QVERIFY(w.start_training());
    QVERIFY(finished.wait(600000));
    const int64_t run = finished.at(0).at(0).toLongLong();
    QVERIFY(drawn(*w.live_charts()->chart("loss")) != before_any["loss"]);
    w.tabs()->setCurrentWidget(w.runs_view());
    RunStore(db("deleted").toStdString(), RunStore::Mode::Existing).remove(run);
    auto* status = child<QLabel>(w, "statusLine");
    QTRY_COMPARE_WITH_TIMEOUT(status->text(),
                              QStringLiteral("Run %1 was deleted from the run store, and its charts with it").arg(run),
                              10000);
    for (MetricChart* c : w.live_charts()->charts()) QCOMPARE(drawn(*c), before_any[c->metric_key()]);
    QVERIFY(!w.live_charts()->findChild<QPushButton*>("exportCharts")->isEnabled());
    w.live_charts()->export_all();
    QVERIFY2(w.statusBar()->currentMessage().startsWith("Nothing to export yet"),
             qPrintable(w.statusBar()->currentMessage()));
  }

  // An epoch's line in the status bar says its numbers as `ampwb train` prints them: 72 of 256 validation images,
  // the exact tie 28.125%, reads 28.12% (printf rounds a tie to even; Qt's own formatting rounded it up).
  void an_epochs_line_rounds_as_the_cli() {
    MainWindow w(db("epoch line"));
    EventBatch batch;
    EpochReport e;
    e.epoch = 1;
    e.train_loss = 1.23455;
    e.validation_accuracy = 72.0 / 256;
    e.seconds = 2.25;
    e.images_per_second = 112.5;
    batch.epochs.push_back(e);
    Q_EMIT w.session()->events(batch);
    const QString line = w.statusBar()->currentMessage();
    QVERIFY2(line.contains("validation accuracy 28.12%") && line.contains("2.2 s") && line.contains("112 images/s"),
             qPrintable(line));
  }

  // A run refused for its dataset folder (gone since the panel checked it): once a folder is chosen again and
  // checked, the status line says what Train waits for again, not the refusal of a problem that is gone.
  void a_refused_start_is_not_said_after_its_fix() {
    MainWindow w(db("refused"));
    w.show();
    const QString gone = write_stripes(dir_.filePath("to go"), 8, 16);
    TrainConfig c = tiny_config(gone, 1, 2);
    set_up(w, c);
    QVERIFY(QDir(gone).removeRecursively());
    QSignalSpy finished(&w, &MainWindow::run_finished);
    auto* status = child<QLabel>(w, "statusLine");
    if (w.start_training()) QVERIFY(finished.wait(60000));  // refused on its thread, else at once
    QVERIFY2(status->text().startsWith("Not started") && status->text().contains("does not exist"),
             qPrintable(status->text()));
    c.data_dir = data_.toStdString();
    set_up(w, c);
    QTRY_COMPARE_WITH_TIMEOUT(status->text(), QString("Ready: click Train."), 10000);
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) {
  return ampwb::ui::test::run_ui_test<ampwb::ui::test::ProgressThroughTheUi>(argc, argv);
}

#include "test_ui_progress.moc"
