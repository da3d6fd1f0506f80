// The desktop workbench end to end, offscreen: a training set up and started through the window's own controls
// (dataset path, depth, precision, epochs… then the Train button), the charts receiving points, the run in the
// store, the event loop's responsiveness during training (p99 lateness < 50 ms), stop and resume of the same run,
// and settings remembered across windows.
#include <signal.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTextDocumentFragment>
#include <QValueAxis>
#include <QWheelEvent>
#include <QtTest>
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>

#include "chart_legend.h"
#include "chart_panel.h"
#include "gui_app.h"
#include "main_window.h"
#include "metric_chart.h"
#include "run_setup_panel.h"
#include "runs_model.h"
#include "runs_view.h"
#include "stall_meter.h"
#include "test_ui_util.h"
#include "train/scale_collapse.h"

#include "idx_util.h"

namespace ampwb::ui::test {

class TrainingThroughTheUi : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString data_;

  QString db(const QString& name) const { return dir_.filePath(name + ".sqlite"); }

  // Fills the setup panel the way a user does.
  static void set_up(MainWindow& w, const QString& data, int depth, const char* precision, int epochs, int steps) {
    auto* path = child<QLineEdit>(w, "datasetPath");
    path->clear();
    QTest::keyClicks(path, data);
    QTest::keyClick(path, Qt::Key_Return);  // editingFinished: the dataset is inspected
    auto* depth_box = child<QComboBox>(w, "depth");
    depth_box->setCurrentIndex(depth_box->findData(depth));
    auto* precision_box = child<QComboBox>(w, "precision");
    precision_box->setCurrentIndex(precision_box->findData(QString(precision)));
    child<QSpinBox>(w, "epochs")->setValue(epochs);
    child<QSpinBox>(w, "batchSize")->setValue(8);
    child<QSpinBox>(w, "imageSize")->setValue(16);
    child<QSpinBox>(w, "maxTrainImages")->setValue(0);
    child<QSpinBox>(w, "maxStepsPerEpoch")->setValue(steps);
    // One compute thread: with all (two) cores, a tiny run slows down 50-100x whenever another process is busy
    // on the machine (OpenMP barriers), which would make the test's duration depend on its neighbours.
    child<QSpinBox>(w, "threads")->setValue(1);
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    data_ = write_stripes(dir_.filePath("stripes"), 300, 16);
  }

  void validation_fraction_only_where_the_workbench_splits() {
    MainWindow w(db("split"));
    RunSetupPanel* panel = w.setup();
    QSignalSpy inspected(panel, &RunSetupPanel::dataset_inspected);
    auto* fraction = child<QDoubleSpinBox>(w, "validationFraction");
    const fs::path idx = make_stripes_idx("ui_split", 8, 8);  // IDX: its t10k files are the validation split
    panel->set_dataset_path(QString::fromStdString(idx.string()));
    QTRY_VERIFY_WITH_TIMEOUT(inspected.count() >= 1, 30000);
    QVERIFY(!fraction->isVisibleTo(panel));
    panel->set_dataset_path(data_);  // class folders: the workbench holds out a fraction
    QTRY_VERIFY_WITH_TIMEOUT(inspected.count() >= 2, 30000);
    QVERIFY(fraction->isVisibleTo(panel));
    fs::remove_all(idx);
    // Only the modes the chosen device can run are offered: no TF32 on the CPU, with the reason as tooltip.
    auto* precision = child<QComboBox>(w, "precision");
    const int tf32 = precision->findData(QString("tf32"));
    QVERIFY(!qobject_cast<QStandardItemModel*>(precision->model())->item(tf32)->isEnabled());
    QVERIFY(precision->itemData(tf32, Qt::ToolTipRole).toString().contains("NVIDIA GPUs"));
  }

  void first_launch_preselects_the_sample() {
    MainWindow w(db("first"));
    const TrainConfig c = w.setup()->config();
    QCOMPARE(c.depth, 18);
    QCOMPARE(c.epochs, 2);
    QCOMPARE(c.batch_size, 64);
    QCOMPARE(c.data.max_train_images, int64_t{2000});
    QCOMPARE(c.precision.mode, PrecisionMode::Fp32);
    if (QFileInfo::exists("/usr/share/datasets/fashion-mnist"))
      QCOMPARE(QString::fromStdString(c.data_dir), QString("/usr/share/datasets/fashion-mnist"));
    QVERIFY(child<QPushButton>(w, "trainButton")->isEnabled());
  }

  // Before a run starts, the Training tab's notes speak of the mode chosen, not of FP32 (an empty run's default).
  void the_empty_training_tab_speaks_of_the_chosen_precision() {
    MainWindow w(db("preview"));
    auto* precision = child<QComboBox>(w, "precision");
    auto* skipped = w.live_charts()->findChild<QLabel*>("skippedNote");
    auto* divergence = w.live_charts()->findChild<QLabel*>("divergenceCaption");
    precision->setCurrentIndex(precision->findData(QString("fp32")));
    QVERIFY2(skipped->text().startsWith("No loss scaling"), qPrintable(skipped->text()));
    QVERIFY2(divergence->text().startsWith("FP32 is its own reference"), qPrintable(divergence->text()));
    precision->setCurrentIndex(precision->findData(QString("amp-fp16")));
    QVERIFY2(skipped->text().startsWith("Dynamic loss scaling"), qPrintable(skipped->text()));
    QVERIFY2(divergence->text().startsWith("Measured once"), qPrintable(divergence->text()));
    auto* scale_kind = child<QComboBox>(w, "lossScaleKind");
    scale_kind->setCurrentIndex(scale_kind->findData(QString("off")));
    QVERIFY2(skipped->text().startsWith("No loss scaling"), qPrintable(skipped->text()));
  }

  // Before a run starts, the charts are drawn for its settings: as many epochs as chosen, and no top-2 curve in the
  // accuracy legend where the chosen data has two classes (every image would count).
  void the_empty_charts_follow_the_epochs_and_the_datas_classes() {
    MainWindow w(db("preview-axes"));
    MetricChart* accuracy = w.live_charts()->chart("accuracy");
    const auto topk_shown = [&] {
      const QList<QAbstractSeries*> series = accuracy->chart()->series();
      return std::any_of(series.begin(), series.end(), [](const QAbstractSeries* s) {
        return s->isVisible() && s->name().startsWith("validation top-") && s->name() != "validation top-1";
      });
    };
    child<QSpinBox>(w, "epochs")->setValue(7);
    const auto* epoch_axis = qobject_cast<QValueAxis*>(accuracy->chart()->axes(Qt::Horizontal).value(0));
    QVERIFY(epoch_axis);
    QCOMPARE(epoch_axis->max(), 7.0);
    child<QSpinBox>(w, "epochs")->setValue(3);
    QCOMPARE(qobject_cast<QValueAxis*>(accuracy->chart()->axes(Qt::Horizontal).value(0))->max(), 3.0);
    child<QSpinBox>(w, "topk")->setValue(3);  // the legend names the k chosen
    QVERIFY(topk_shown());                    // the classes not known yet, or the sample's 10
    const QList<QAbstractSeries*> series = accuracy->chart()->series();
    QVERIFY(std::any_of(series.begin(), series.end(),
                        [](const QAbstractSeries* s) { return s->name() == "validation top-3"; }));
    child<QSpinBox>(w, "topk")->setValue(2);
    w.setup()->set_dataset_path(data_);
    QTRY_COMPARE_WITH_TIMEOUT(w.setup()->dataset_classes(), 2, 30000);
    QVERIFY(!topk_shown());
  }

  // The memory estimate follows the settings: "≈ X of Y", and where it cannot fit, red with the batch size that does.
  void memory_estimate_follows_the_settings() {
    MainWindow w(db("memory"));
    auto* memory = child<QLabel>(w, "memoryEstimate");
    auto* depth = child<QComboBox>(w, "depth");
    depth->setCurrentIndex(depth->findData(18));
    child<QSpinBox>(w, "imageSize")->setValue(64);
    child<QSpinBox>(w, "batchSize")->setValue(16);
    const QString small = memory->text();
    QVERIFY2(small.startsWith("≈ ") && small.contains(" of ") && !small.contains("too much"), qPrintable(small));
    depth->setCurrentIndex(depth->findData(152));
    child<QSpinBox>(w, "imageSize")->setValue(1024);
    child<QSpinBox>(w, "batchSize")->setValue(65536);
    const QString big = memory->text();
    QVERIFY2(big != small && big.contains("too much"), qPrintable(big));
    QVERIFY2(memory->toolTip().contains("activations"), qPrintable(memory->toolTip()));
  }

  // Scrolling the setup panel over its fields changes none of them; a field takes the wheel once it has the focus.
  void the_wheel_changes_a_field_only_once_focused() {
    MainWindow w(db("wheel"));
    w.show();
    w.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&w));
    auto* batch = child<QSpinBox>(w, "batchSize");
    auto* depth = child<QComboBox>(w, "depth");
    const int batch_before = batch->value(), depth_before = depth->currentIndex();
    // As the window system delivers a turn of the wheel: spontaneous, to the innermost widget under the pointer
    // (a spin box's line edit), so that Qt first gives the focus to a field whose policy takes it by the wheel.
    const auto wheel_up = [](QWidget* field) {
      QWidget* under = field->childAt(field->rect().center());
      QWidget* target = under ? under : field;
      const QPointF at = target->mapFrom(field, QPointF(field->rect().center()));
      QWheelEvent event(at, target->mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                        Qt::NoScrollPhase, false);
      QSpontaneKeyEvent::setSpontaneous(&event);
      QApplication::instance()->notify(target, &event);
    };
    child<QLineEdit>(w, "runName")->setFocus();
    QTRY_VERIFY(child<QLineEdit>(w, "runName")->hasFocus());
    wheel_up(batch);
    wheel_up(depth);
    QCOMPARE(batch->value(), batch_before);
    QCOMPARE(depth->currentIndex(), depth_before);
    QVERIFY(!batch->hasFocus() && !depth->hasFocus());
    batch->setFocus();
    QTRY_VERIFY(batch->hasFocus());
    wheel_up(batch);
    QCOMPARE(batch->value(), batch_before + batch->singleStep());
  }

  // Wide-range values are typed and shown as people write them: "1e-3" is a learning rate of 0.001 (not 1, as when
  // the spin box dropped the 'e'), and stays written so (test_ui_fields: what is no number).
  void the_learning_rate_takes_scientific_notation() {
    MainWindow w(db("scientific"));
    w.show();
    w.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&w));
    auto* lr = child<QDoubleSpinBox>(w, "learningRate");
    auto* edit = lr->findChild<QLineEdit*>();
    const auto type = [&](const QString& text) {
      lr->setFocus();
      edit->selectAll();
      QTest::keyClicks(edit, text);
      QTest::keyClick(edit, Qt::Key_Return);
    };
    for (const auto& [typed, value] : {std::pair{"1e-3", 1e-3}, {"2.5E-4", 2.5e-4}, {"0.07", 0.07}, {"3e-6", 3e-6}}) {
      type(typed);
      QCOMPARE(w.setup()->config().lr, static_cast<float>(value));
      QCOMPARE(edit->text(), QString(typed));
    }
    type("5e-4");
    QCOMPARE(w.setup()->config().lr, 5e-4f);
    lr->setValue(0.02);  // set by the program (a preset, a stored run): its shortest form
    QCOMPARE(edit->text(), QString("0.02"));
  }

  // A folder that cannot be trained on says why in the line under the folder field, and Train waits, saying why
  // in its tooltip (the keyboard's Ctrl+R too); a folder that can be trained on clears both.
  void an_untrainable_dataset_says_why_and_train_waits() {
    MainWindow w(db("untrainable"));
    auto* status = child<QLabel>(w, "datasetStatus");
    auto* train = child<QPushButton>(w, "trainButton");
    QTemporaryDir dir;
    const QString one_class = write_stripes(dir.filePath("one"), 4, 12);
    QVERIFY(QDir(one_class + "/vertical").removeRecursively());
    const std::vector<std::string> errors = Dataset::inspect(one_class.toStdString(), {}).report().errors;
    QVERIFY(!errors.empty());
    const QString why = QString::fromStdString(errors.front());
    w.setup()->set_dataset_path(one_class);
    QTRY_VERIFY_WITH_TIMEOUT(status->text().startsWith("✘"), 60000);
    QVERIFY2(status->text().startsWith("✘ " + why), qPrintable(status->text()));
    QVERIFY(!train->isEnabled());
    const QString tip = QTextDocumentFragment::fromHtml(train->toolTip()).toPlainText();
    QVERIFY2(tip.startsWith("Cannot train: " + why), qPrintable(tip));
    QVERIFY(!w.start_training());
    const QString good = write_stripes(dir.filePath("good"), 4, 12);
    w.setup()->set_dataset_path(good);
    QTRY_VERIFY_WITH_TIMEOUT(status->text().startsWith("✔"), 60000);
    QVERIFY(train->isEnabled());
    QVERIFY(train->toolTip().isEmpty());
  }

  void trains_through_the_controls_and_records_the_run() {
    const QString path = db("train");
    MainWindow w(path);
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    set_up(w, data_, 20, "amp-fp16", 4, 0);
    QTRY_VERIFY_WITH_TIMEOUT(child<QWidget>(w, "datasetStatus")->property("text").toString().startsWith("✔"), 60000);

    QSignalSpy finished(&w, &MainWindow::run_finished);
    QSignalSpy messages(w.statusBar(), &QStatusBar::messageChanged);
    StallMeter meter(5);
    meter.start();
    timespec cpu0{}, cpu1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    QElapsedTimer wall;
    wall.start();
    QTest::mouseClick(child<QPushButton>(w, "trainButton"), Qt::LeftButton);
    QVERIFY(w.session()->running());
    QVERIFY(!child<QPushButton>(w, "trainButton")->isEnabled());
    // A real event loop until the run ends (QTRY_* would sleep 10 ms between event rounds and skew the figure).
    QVERIFY(finished.wait(600000));
    meter.stop();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
    const double ui_cpu = (cpu1.tv_sec - cpu0.tv_sec) + (cpu1.tv_nsec - cpu0.tv_nsec) / 1e9;
    qInfo("UI thread: %.2f s of CPU over %.2f s of training (%.0f %%)", ui_cpu, wall.elapsed() / 1e3,
          100 * ui_cpu / (wall.elapsed() / 1e3));

    // Responsiveness: the UI thread's event loop while the engine trained on its worker thread.
    qInfo("event-loop lateness during training (5 ms timer, %zu ticks): p50 %.2f ms, p99 %.2f ms, max %.2f ms",
          meter.ticks(), meter.percentile_ms(0.5), meter.percentile_ms(0.99), meter.max_ms());
    QVERIFY(meter.ticks() > 100);
    QVERIFY2(meter.percentile_ms(0.99) < 50.0, "the UI thread stalled for more than 50 ms (p99)");

    const int64_t id = finished.at(0).at(0).toLongLong();
    QCOMPARE(finished.at(0).at(1).toInt(), static_cast<int>(RunStatus::Finished));
    const RunSeries& live = *w.live_run();
    QCOMPARE(live.run_id, id);
    QCOMPARE(live.epochs.size(), size_t{4});
    QCOMPARE(live.steps.size(), size_t{4 * 60});  // 480 training images, batch 8
    QVERIFY(!live.histograms.empty());

    // The charts received points.
    ChartPanel* charts = w.live_charts();
    QVERIFY(charts->chart("loss")->point_count() > 0);
    // Train and validation top-1 each epoch; no top-2, which two classes would make 100% every epoch.
    QCOMPARE(charts->chart("accuracy")->point_count(), qsizetype{2 * 4});
    QStringList accuracy_entries;
    for (const ChartLegend::Entry& e : charts->chart("accuracy")->wrapping_legend()->entries())
      accuracy_entries << e.label;
    QCOMPARE(accuracy_entries, QStringList({"train top-1", "validation top-1"}));
    const auto epoch_4 = std::find_if(messages.begin(), messages.end(),
                                      [](const QList<QVariant>& m) { return m[0].toString().contains("Epoch 4/4"); });
    QVERIFY(epoch_4 != messages.end());
    const QString line = epoch_4->at(0).toString();
    QVERIFY2(line.contains("validation accuracy ") && !line.contains("top-"), qPrintable(line));
    QVERIFY(charts->chart("loss-scale")->point_count() > 0);
    QCOMPARE(charts->chart("epoch-time")->point_count(), qsizetype{2 * 4});
    QVERIFY(charts->chart("histogram")->point_count() > 0);
    QCOMPARE(child<QProgressBar>(w, "progress")->value(), 1000);
    QVERIFY(child<QLabel>(w, "scaleCollapseAlarm")->isHidden());  // a healthy run raises no alarm

    // The store holds the run as the controls described it.
    RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
    const RunRecord r = store.run(id);
    QCOMPARE(live.label, run_label(r));  // what its exported charts are captioned with, as the Runs tab's are
    QCOMPARE(r.status, RunStatus::Finished);
    QCOMPARE(r.depth, 20);
    QCOMPARE(r.precision_name(), std::string("amp-fp16"));
    QCOMPARE(r.dataset_path, data_.toStdString());
    // The dataset's report in the setup panel gives the fingerprint the run recorded (as ampwb show does).
    const QString report = child<QPlainTextEdit>(w, "datasetReport")->toPlainText();
    QVERIFY2(report.contains("fingerprint: " + QString::fromStdString(r.dataset_fingerprint)), qPrintable(report));
    QCOMPARE(store.epochs(id).size(), size_t{4});
    QCOMPARE(store.steps(id).size(), live.steps.size());
    QCOMPARE(store.histograms(id).size(), live.histograms.size());
    QCOMPARE(w.runs_view()->model()->rowCount(), 1);
    // A finished run's checkpoint folder is removed.
    QVERIFY(
        QDir(QFileInfo(path).absolutePath() + "/checkpoints").entryList(QDir::Dirs | QDir::NoDotAndDotDot).isEmpty());
  }

  void a_collapsing_scale_raises_the_alarm_naming_its_layers() {
    const QString path = db("collapse");
    MainWindow w(path);
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* alarm = child<QLabel>(w, "scaleCollapseAlarm");
    QVERIFY(alarm->isHidden());
    // As tests/test_diagnosis.cpp makes a run collapse: the first update blows the weights up, and every FP16 step
    // after it overflows whatever the scale.
    TrainConfig c = tiny_config(data_, 2, 10);
    c.lr = 1e4f;
    c.max_consecutive_skipped = 1000;
    const SweepVariant fp16{"amp-fp16", "amp-fp16", PrecisionMode::AmpFp16};
    QSignalSpy finished(&w, &MainWindow::run_finished);
    w.start_sweep(c, {fp16});
    QVERIFY(w.session()->running());
    // Raised while the run trains, not after it.
    bool seen_while_training = false;
    connect(w.session(), &TrainingSession::events, alarm, [&] { seen_while_training |= !alarm->isHidden(); });
    QVERIFY(finished.wait(600000));
    QVERIFY(!alarm->isHidden());  // (the sweep's end shows the Compare tab: hidden by its tab, not by itself)
    QVERIFY(seen_while_training);

    const int64_t id = finished.at(0).at(0).toLongLong();
    RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
    const std::vector<StepReport> steps = store.steps(id);
    // The stored steps hold the run of skips the banner reports.
    int64_t longest = 0, run = 0;
    for (const StepReport& s : steps) longest = std::max(longest, run = s.skipped ? run + 1 : 0);
    QVERIFY(longest >= kScaleCollapseRun);
    const QString text = alarm->text();
    QVERIFY2(text.contains(QStringLiteral("%1 consecutive steps skipped").arg(longest)), qPrintable(text));
    QVERIFY2(text.contains(QString::fromUtf8(kScaleCollapseAdvice)), qPrintable(text));
    // It names the layer where the stored overflow reports say most overflows started.
    std::map<std::string, int> first;
    for (const OverflowReport& o : store.overflows(id))
      if (!o.layers.empty()) ++first[o.layers.front()];
    QVERIFY(!first.empty());
    const auto most =
        std::max_element(first.begin(), first.end(), [](auto& a, auto& b) { return a.second < b.second; });
    QVERIFY2(text.contains(QString::fromStdString(most->first) + " ("), qPrintable(text));

    // The next run starts without it.
    w.start_sweep(tiny_config(data_, 1, 2), {fp16});
    QVERIFY(alarm->isHidden());
    QVERIFY(finished.wait(600000));
    QVERIFY(alarm->isHidden());
  }

  // Stopped in its first run, a sweep names the run it never started rather than saying it is done.
  void a_stopped_sweep_names_the_runs_it_did_not_start() {
    MainWindow w(db("stopped-sweep"));
    w.show();
    QSignalSpy done(&w, &MainWindow::sweep_finished);
    // Named by key, as the runs are: a label may hold a comma.
    const SweepVariant fp32{"fp32", "fp32", PrecisionMode::Fp32}, bf16{"amp-bf16", "amp, bf16", PrecisionMode::AmpBf16};
    auto* epochs = child<QSpinBox>(w, "epochs");
    auto* precision = child<QComboBox>(w, "precision");
    const int panel_epochs = epochs->value();
    QVERIFY(panel_epochs != 40);
    w.start_sweep(tiny_config(data_, 40, 2), {fp32, bf16});
    QTRY_VERIFY_WITH_TIMEOUT(!w.live_run()->steps.empty(), 300000);
    // The panel shows the run that trains, as for a single run, and the user's settings again afterwards.
    QCOMPARE(epochs->value(), 40);
    QCOMPARE(precision->currentData().toString(), QString("fp32"));
    QTest::mouseClick(child<QPushButton>(w, "stopButton"), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 300000);
    QCOMPARE(epochs->value(), panel_epochs);
    QCOMPARE(done.at(0).at(0).value<std::vector<int64_t>>().size(), size_t{1});
    QCOMPARE(w.statusBar()->currentMessage(), QString("Sweep stopped: 1 run compared, 1 not started (amp-bf16)"));
    QVERIFY(!w.session()->running());
  }

  // Stopped, its dataset folder moved, then resumed where the folder is now: the run goes on in its own row.
  void stop_then_resume_continues_the_same_run() {
    const QString path = db("resume");
    const QString data = dir_.filePath("resume-stripes"), moved = dir_.filePath("resume-stripes-moved");
    std::filesystem::copy(data_.toStdString(), data.toStdString(), std::filesystem::copy_options::recursive);
    MainWindow w(path);
    w.show();
    const size_t epochs = 8;  // enough that the Stop, clicked once a step is shown, lands before the last epoch ends
    set_up(w, data, 20, "fp32", epochs, 6);
    child<QCheckBox>(w, "checkpoints")->setChecked(true);
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QTest::mouseClick(child<QPushButton>(w, "trainButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!w.live_run()->steps.empty(), 300000);
    QTest::mouseClick(child<QPushButton>(w, "stopButton"), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 300000);
    const int64_t id = finished.at(0).at(0).toLongLong();
    QCOMPARE(finished.at(0).at(1).toInt(), static_cast<int>(RunStatus::Cancelled));
    w.runs_view()->reload();  // the Runs tab says the stopped run can go on
    RunsModel* runs = w.runs_view()->model();
    const QString status = runs->index(runs->row_of(id), RunsModel::Status).data().toString();
    QVERIFY2(status.startsWith("stopped (resumable, "), qPrintable(status));
    // The filter finds it by the store's word for it too (ampwb runs --json says "cancelled").
    w.runs_view()->set_filter("cancelled");
    QCOMPARE(w.runs_view()->findChild<QTableView*>("runsTable")->model()->rowCount(), 1);
    w.runs_view()->set_filter("");
    {
      RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
      QVERIFY(store.epochs(id).size() < epochs);
      QVERIFY(!store.checkpoints(id).empty());
    }

    std::filesystem::rename(data.toStdString(), moved.toStdString());
    const QString gone = w.resume_run(id);
    QVERIFY2(gone.contains(data) && gone.contains("not there now"), qPrintable(gone));
    QCOMPARE(finished.count(), 1);  // nothing started
    auto* precision = child<QComboBox>(w, "precision");
    precision->setCurrentIndex(precision->findData(QString("amp-fp16")));  // the panel set up for another run
    QCOMPARE(w.resume_run(id, moved), QString());
    // While it trains, the panel shows the resumed run's settings, where its data is now, and no name to reuse.
    QCOMPARE(w.setup()->config().precision.mode, PrecisionMode::Fp32);
    QCOMPARE(w.setup()->dataset_path(), moved);
    QCOMPARE(w.setup()->config().name, std::string());
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 300000);
    QCOMPARE(finished.at(1).at(0).toLongLong(), id);  // recorded into the same run
    QCOMPARE(finished.at(1).at(1).toInt(), static_cast<int>(RunStatus::Finished));
    RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
    QCOMPARE(store.runs().size(), size_t{1});
    QCOMPARE(store.run(id).status, RunStatus::Finished);
    QCOMPARE(store.epochs(id).size(), epochs);
    QCOMPARE(store.steps(id).size(), epochs * 6);
    QCOMPARE(w.live_run()->steps.size(), epochs * 6);  // the live charts continued from the stored steps
    // Once it ends, the panel holds the user's settings again, and says so: the next Train is theirs, not the
    // resumed run's.
    QCOMPARE(w.setup()->config().precision.mode, PrecisionMode::AmpFp16);
    const QString said = child<QLabel>(w, "statusLine")->text();
    QVERIFY2(said.contains("The Run setup panel shows your own settings again."), qPrintable(said));
    QVERIFY(w.resume_run(id).contains("nothing to resume"));
    w.runs_view()->reload();
    QCOMPARE(runs->index(runs->row_of(id), RunsModel::Status).data().toString(), QString("finished"));
  }

  // SIGTERM (a logout, a shutdown) ends the workbench as Quit does, without asking: the run training stops after its
  // step with a checkpoint, resumable, rather than die with the process mid-epoch.
  void a_termination_signal_quits_as_quit_does() {
    const QString path = db("signalled");
    MainWindow w(path);
    w.show();
    const size_t epochs = 8;
    set_up(w, data_, 20, "fp32", epochs, 6);
    child<QCheckBox>(w, "checkpoints")->setChecked(true);
    quit_on_signals(w);
    QTest::mouseClick(child<QPushButton>(w, "trainButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!w.live_run()->steps.empty(), 300000);
    ::raise(SIGTERM);
    QTRY_VERIFY_WITH_TIMEOUT(!w.isVisible(), 300000);
    QVERIFY(!w.session()->running());
    RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
    const RunRecord run = store.runs().at(0);
    QCOMPARE(run.status, RunStatus::Cancelled);
    QVERIFY(store.epochs(run.id).size() < epochs);
    QVERIFY(store.resumable(run.id));
  }

  // Stopped here, then resumed by `ampwb train --resume` in a terminal: the Training tab follows the run to its end
  // rather than offer it as resumable still; a run deleted elsewhere, stopped or finished, is said to be gone.
  void a_run_resumed_or_deleted_elsewhere_is_followed() {
    const QString path = db("elsewhere");
    MainWindow w(path);
    w.show();
    set_up(w, data_, 20, "fp32", 4, 6);
    child<QCheckBox>(w, "checkpoints")->setChecked(true);
    QSignalSpy finished(&w, &MainWindow::run_finished);
    auto* status = child<QLabel>(w, "statusLine");
    const auto train_and_stop = [&](int64_t& id) {  // QTRY_* return on failure: the id comes out through `id`
      QTest::mouseClick(child<QPushButton>(w, "trainButton"), Qt::LeftButton);
      QTRY_VERIFY_WITH_TIMEOUT(!w.live_run()->steps.empty(), 300000);
      QTest::mouseClick(child<QPushButton>(w, "stopButton"), Qt::LeftButton);
      QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 300000);
      id = finished.takeFirst().at(0).toLongLong();
      QVERIFY2(status->text().contains("resumable from"), qPrintable(status->text()));
    };
    int64_t resumed = 0;
    train_and_stop(resumed);
    if (QTest::currentTestFailed()) return;
    QProcess cli;
    cli.start(AMPWB_BINARY, {"train", "--resume", QString::number(resumed), "--db", path});
    QVERIFY(cli.waitForFinished(300000));
    QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
    QTRY_VERIFY_WITH_TIMEOUT(status->text().startsWith(QString("Run %1, resumed elsewhere, finished").arg(resumed)),
                             10000);
    // Its charts go on to where it ended, as the store holds it, not where it left this window.
    QCOMPARE(w.live_run()->run_id, resumed);
    QCOMPARE(w.live_run()->steps.size(), size_t{4 * 6});
    QCOMPARE(w.live_run()->epochs.size(), size_t{4});

    int64_t deleted = 0;
    train_and_stop(deleted);
    if (QTest::currentTestFailed()) return;
    RunStore(path.toStdString(), RunStore::Mode::Existing).remove(deleted);
    QTRY_COMPARE_WITH_TIMEOUT(
        status->text(), QString("Run %1 was deleted from the run store, and its charts with it").arg(deleted), 10000);

    // A finished run deleted elsewhere is said to be gone too, not shown as if the store still held it.
    QTest::mouseClick(child<QPushButton>(w, "trainButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 300000);
    const int64_t done = finished.takeFirst().at(0).toLongLong();
    QCOMPARE(RunStore(path.toStdString(), RunStore::Mode::ReadOnly).run(done).status, RunStatus::Finished);
    RunStore(path.toStdString(), RunStore::Mode::Existing).remove(done);
    QTRY_COMPARE_WITH_TIMEOUT(
        status->text(), QString("Run %1 was deleted from the run store, and its charts with it").arg(done), 10000);
    QCOMPARE(w.live_run()->run_id, int64_t{0});  // its charts went with it: nothing exports a run that is no more
    QVERIFY(w.live_run()->steps.empty());
  }

  // A run whose process was killed (a window killed while it trained) is said first when the workbench opens next,
  // with what can be done with it.
  void a_run_cut_off_is_said_at_the_next_start() {
    const QString path = db("cut_off");
    QProcess cli;
    cli.start(AMPWB_BINARY, {"train", "--db", path, "--data", data_, "--name", "cut", "--epochs", "50", "--depth", "20",
                             "--image-size", "16", "--batch-size", "8", "--threads", "1"});
    QVERIFY(cli.waitForStarted());
    const auto checkpointed = [&] {
      try {
        const RunStore store(path.toStdString(), RunStore::Mode::ReadOnly);
        return !store.checkpoints(1).empty();
      } catch (const std::exception&) {  // not made yet
        return false;
      }
    };
    QTRY_VERIFY_WITH_TIMEOUT(checkpointed(), 120000);
    cli.kill();  // SIGKILL: nothing records its end
    QVERIFY(cli.waitForFinished());
    MainWindow w(path);
    QCOMPARE(child<QLabel>(w, "statusLine")->text(),
             QString("Run 1 (cut) was cut off when the process training it ended: Resume in the Runs tab continues "
                     "it from its last checkpoint."));
  }

  // Paused, the run is shown paused in the window's Runs tab and, through the store, by `ampwb runs` beside it (its
  // status is running still), and running again once resumed.
  void a_paused_run_is_shown_paused() {
    const QString path = db("paused");
    MainWindow w(path);
    w.show();
    set_up(w, data_, 20, "fp32", 4, 6);
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QTest::mouseClick(child<QPushButton>(w, "trainButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!w.live_run()->steps.empty(), 300000);
    QTest::mouseClick(child<QPushButton>(w, "pauseButton"), Qt::LeftButton);
    const int64_t id = w.live_run()->run_id;
    QVERIFY(id != 0);
    w.runs_view()->reload();
    RunsModel* runs = w.runs_view()->model();
    const auto status = [&] { return runs->index(runs->row_of(id), RunsModel::Status).data().toString(); };
    QVERIFY2(status().startsWith("paused"), qPrintable(status()));
    // Not a frozen ETA, also once the step it paused after has reported.
    QTest::qWait(1000);
    QCOMPARE(child<QLabel>(w, "eta")->text(), QString("ETA: paused"));
    QCOMPARE(RunStore(path.toStdString(), RunStore::Mode::ReadOnly).run(id).status, RunStatus::Running);
    const auto cli = [&](const QStringList& arguments) {
      QProcess p;
      p.start(AMPWB_BINARY, arguments + QStringList{"--db", path});
      p.waitForFinished(60000);
      return QString::fromUtf8(p.readAllStandardOutput());
    };
    QTRY_VERIFY_WITH_TIMEOUT(cli({"runs", "--status", "paused"}).contains(QString(" %1 ").arg(id)), 10000);
    QVERIFY2(cli({"show", QString::number(id)}).contains("  status     paused since "), "ampwb show says paused");
    w.runs_view()->reload();  // the Runs tab has read the pause from the store: resumed, it is running at once
    QVERIFY2(status().startsWith("paused"), qPrintable(status()));
    QTest::mouseClick(child<QPushButton>(w, "pauseButton"), Qt::LeftButton);  // resumed
    QVERIFY2(status().startsWith("running"), qPrintable(status()));
    QTRY_VERIFY_WITH_TIMEOUT(!cli({"runs", "--status", "paused"}).contains(QString(" %1 ").arg(id)), 10000);
    QTest::mouseClick(child<QPushButton>(w, "stopButton"), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 300000);
  }

  void settings_and_layout_are_remembered() {
    {
      MainWindow w(db("settings"));
      w.show();
      child<QSpinBox>(w, "epochs")->setValue(7);
      auto* precision = child<QComboBox>(w, "precision");
      precision->setCurrentIndex(precision->findData(QString("amp-bf16")));
      w.close();
    }
    MainWindow again(db("settings"));
    QCOMPARE(again.setup()->config().epochs, 7);
    QCOMPARE(again.setup()->config().precision.mode, PrecisionMode::AmpBf16);
    QVERIFY(!QSettings().value("window/geometry").toByteArray().isEmpty());
    QVERIFY(!QSettings().value("window/state").toByteArray().isEmpty());
  }

  // Runs and Compare read stored runs: the Run setup panel gives them its width and comes back with Training and
  // Sweeps. Shown or hidden by the user, it stays so on that kind of tab, also in the next session.
  void the_setup_panel_leaves_the_reading_tabs_their_width() {
    const auto tab = [](MainWindow& w, int key) {
      QTest::keyClick(&w, static_cast<Qt::Key>(Qt::Key_0 + key), Qt::ControlModifier);
    };
    const QString path = db("setup-panel");
    {
      MainWindow w(path);
      w.show();
      QVERIFY(QTest::qWaitForWindowExposed(&w));
      auto* dock = child<QWidget>(w, "setupDock");
      QVERIFY(dock->isVisible());
      tab(w, 3);  // Compare
      QVERIFY(!dock->isVisible());
      tab(w, 4);  // Sweeps: a new sweep trains the panel's settings
      QVERIFY(dock->isVisible());
      tab(w, 2);  // Runs
      QVERIFY(!dock->isVisible());
      tab(w, 0);  // the user wants it beside the runs too
      QVERIFY(dock->isVisible());
      tab(w, 1);  // Training
      tab(w, 0);  // and not beside the live charts
      QVERIFY(!dock->isVisible());
      tab(w, 3);
      QVERIFY(dock->isVisible());
      w.close();
    }
    MainWindow again(path);
    again.show();
    QVERIFY(QTest::qWaitForWindowExposed(&again));
    auto* dock = child<QWidget>(again, "setupDock");
    QVERIFY(!dock->isVisible());
    tab(again, 2);
    QVERIFY(dock->isVisible());
    tab(again, 0);  // as at first, for the tests after this one
    tab(again, 1);
    tab(again, 0);
    QVERIFY(dock->isVisible());
    again.close();
  }

  // The optimizer's and the schedule's lists are their tables (core/choices.h): each row's title as the text and its
  // help as the tooltip; the row picked is what the configuration holds, and a configuration picks its row.
  void choice_lists_come_from_their_tables() {
    MainWindow w(db("choices"));
    auto* optimizer = child<QComboBox>(w, "optimizer");
    const auto& rows = ChoiceTable<OptimizerKind>::rows;
    QCOMPARE(optimizer->count(), static_cast<int>(rows.size()));
    for (int i = 0; i < optimizer->count(); ++i) {
      QCOMPARE(optimizer->itemText(i), QString::fromUtf8(rows[i].title));
      QCOMPARE(optimizer->itemData(i, Qt::ToolTipRole).toString(), QString::fromUtf8(rows[i].help));
    }
    optimizer->setCurrentIndex(optimizer->findText("AdamW"));
    QCOMPARE(w.setup()->config().optimizer.kind, OptimizerKind::AdamW);
    auto* schedule = child<QComboBox>(w, "schedule");
    QCOMPARE(schedule->count(), static_cast<int>(ChoiceTable<Schedule>::rows.size()));
    TrainConfig c = w.setup()->config();
    c.schedule = Schedule::Step;
    w.setup()->set_config(c);
    QCOMPARE(schedule->currentText(), QString("step decay (x0.1 every 30 epochs)"));
    QCOMPARE(w.setup()->config().schedule, Schedule::Step);
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) {
  return ampwb::ui::test::run_ui_test<ampwb::ui::test::TrainingThroughTheUi>(argc, argv);
}

#include "test_ui_training.moc"
