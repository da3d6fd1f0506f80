// The Sweeps tab, offscreen, on a real run store: a sweep written by another writer (a second connection, as a Slurm
// task's process would write it, and a real `ampwb sweep --on local` child process) appears within seconds without
// any refresh by hand, each point in its state, the finished ones with their final validation accuracy; the grouped
// comparison's mean ± std over seeds equals the one computed here from the store's own records.
#include <QComboBox>
#include <QLabel>
#include <QProcess>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <nlohmann/json.hpp>

#include "main_window.h"
#include "store/sweep_record.h"
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
    return {mean, values.size() > 1 ? std::sqrt(ss / (values.size() - 1)) : 0.0};
  }

  // Each group of the view against the same statistics computed from the store: its runs' last epochs.
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
        double ips = 0;
        for (const EpochReport& e : epochs) ips += e.images_per_second;
        speed.push_back(ips / epochs.size());
      }
      const Spread a = spread(accuracy), l = spread(loss), s = spread(speed);
      QVERIFY(std::abs(r.groups[g].final_accuracy.mean - a.mean) < 1e-9);
      QVERIFY(std::abs(r.groups[g].final_accuracy.std - a.std) < 1e-9);
      QVERIFY(std::abs(r.groups[g].final_loss.mean - l.mean) < 1e-9);
      QVERIFY(std::abs(r.groups[g].final_loss.std - l.std) < 1e-9);
      QVERIFY(std::abs(r.groups[g].images_per_second.mean - s.mean) < 1e-6 * s.mean);
      const int row = static_cast<int>(g);
      QCOMPARE(table->item(row, 1)->text(), QString::number(accuracy.size()));
      QCOMPARE(table->item(row, 2)->text(), QStringLiteral("%1 ± %2").arg(a.mean, 0, 'f', 2).arg(a.std, 0, 'f', 2));
      QCOMPARE(table->item(row, 3)->text(), QStringLiteral("%1 ± %2").arg(l.mean, 0, 'f', 4).arg(l.std, 0, 'f', 4));
    }
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    data_ = write_stripes(dir_.filePath("stripes"), 48, 16);
  }

  // Written point by point through the sweep records from a second connection, as a job array's tasks write them.
  void points_written_elsewhere_appear_live() {
    MainWindow w(db("live"));
    w.resize(1280, 720);
    w.show();
    w.tabs()->setCurrentWidget(w.sweep_view());
    SweepView& view = *w.sweep_view();
    QCOMPARE(view.points_model()->rowCount(), 0);

    RunStore writer(db("live").toStdString(), RunStore::Mode::Existing);
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

    set_point_state(writer, id, 0, SweepPointState::Running);
    set_point_state(writer, id, 2, SweepPointState::Failed);
    set_point_state(writer, id, 5, SweepPointState::Requeued);
    QTRY_COMPARE_WITH_TIMEOUT(state_of(view, 5), QString("requeued"), 10000);
    QCOMPARE(state_of(view, 0), QString("running"));
    QCOMPARE(state_of(view, 2), QString("failed"));
    QCOMPARE(state_of(view, 1), QString("queued"));
    QCOMPARE(view.groups_table()->rowCount(), 0);  // nothing finished yet

    // Seeds 0 and 1 of both modes train to their end.
    for (int i : {0, 1, 3, 4}) {
      const int64_t run = train_into_store(db("live"), configs[static_cast<size_t>(i)]);
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

    QCOMPARE(view.results().groups.size(), size_t(2));
    QCOMPARE(view.groups_table()->item(0, 0)->text(), QString("precision = fp32"));
    QCOMPARE(view.groups_table()->item(1, 0)->text(), QString("precision = amp-bf16"));
    check_groups(view, db("live"));

    // Compare the finished points: their four runs open in the Compare tab.
    std::vector<int64_t> opened;
    connect(&view, &SweepView::open_requested, this, [&](const std::vector<int64_t>& ids) { opened = ids; });
    view.groups_table()->cellDoubleClicked(0, 0);
    QCOMPARE(opened, view.results().groups[0].run_ids);
  }

  // A real `ampwb sweep --on local` in another process: the view follows it to its end without a refresh by hand.
  void a_sweep_run_by_the_cli_appears_live() {
    MainWindow w(db("cli"));
    w.resize(1280, 720);
    w.show();
    w.tabs()->setCurrentWidget(w.sweep_view());
    SweepView& view = *w.sweep_view();
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
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) {
  return ampwb::ui::test::run_ui_test<ampwb::ui::test::SweepsThroughTheUi>(argc, argv);
}

#include "test_ui_sweeps.moc"
