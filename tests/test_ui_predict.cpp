// The runs view's final weights, offscreen: which runs kept them, and "Predict on images…" (PredictDialog) on real
// image files with a run trained here, against the engine's own inference of the same files.
#include <QTableView>
#include <QTableWidget>

#include "predict_dialog.h"
#include "runs_view.h"
#include "store/final_weights.h"
#include "test_ui_util.h"
#include "train/predictor.h"

namespace ampwb::ui::test {

class PredictImages : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString db_, data_;
  int64_t kept_ = 0, not_kept_ = 0;

  QStringList vertical_images() const {
    QStringList files;
    for (int i = 0; i < 5; ++i) files << QStringLiteral("%1/vertical/%2.png").arg(data_).arg(i);
    return files;
  }

 private Q_SLOTS:
  void initTestCase() {
    data_ = write_stripes(dir_.filePath("stripes"), 24, 16);
    db_ = dir_.filePath("runs.sqlite");
    const TrainConfig c = tiny_config(data_, 2, 3);
    kept_ = train_into_store(db_, c);
    RunStore store(db_.toStdString());
    StoreRecorder recorder(store, c, {.keep_final_weights = false});
    Trainer trainer(c, &recorder);
    QCOMPARE(trainer.run().status, RunStatus::Finished);
    not_kept_ = recorder.run_id();
  }

  void the_runs_table_says_which_runs_kept_weights() {
    RunStore store(db_.toStdString());
    RunsView view(store);
    view.reload();
    RunsModel* model = view.model();
    QCOMPARE(model->headerData(RunsModel::Weights, Qt::Horizontal, Qt::DisplayRole).toString(), QString("Weights"));
    QCOMPARE(model->index(model->row_of(kept_), RunsModel::Weights).data().toString(), QString("yes"));
    QCOMPARE(model->index(model->row_of(not_kept_), RunsModel::Weights).data().toString(), QString());
    // The tooltip names the file (its spaces are the tooltip's own, non-breaking).
    const QString file = QString::fromStdString(store.run(kept_).info.final_weights);
    QVERIFY(QFileInfo::exists(file));
    QVERIFY(model->index(model->row_of(kept_), RunsModel::Name).data(Qt::ToolTipRole).toString().contains(file));
  }

  void predict_shows_the_engines_top_classes_for_each_image() {
    RunStore store(db_.toStdString());
    RunsView view(store);
    view.reload();
    view.choose_images = [this] { return vertical_images(); };
    view.select({kept_});
    view.predict_selected();
    auto* dialog = view.findChild<PredictDialog*>("predictDialog");
    QVERIFY(dialog);
    QVERIFY(dialog->isVisible());
    QVERIFY2(dialog->error().isEmpty(), qPrintable(dialog->error()));
    QTableWidget* table = dialog->table();
    QCOMPARE(table->rowCount(), 5);

    ImagePredictor engine(load_final_weights(store, kept_));
    std::vector<std::string> paths;
    for (const QString& f : vertical_images()) paths.push_back(f.toStdString());
    const std::vector<std::vector<float>> logits = engine.logits(paths);
    const std::vector<std::string>& classes = engine.weights().preprocessing.class_names;
    for (int row = 0; row < 5; ++row) {
      const std::vector<double> p = softmax(logits[row]);
      const int best = top_classes(logits[row], 1)[0];
      QCOMPARE(table->item(row, 0)->text(), vertical_images()[row]);
      QCOMPARE(table->item(row, 1)->text(), QString::fromStdString(classes[best]));
      QCOMPARE(table->item(row, 2)->text(), QStringLiteral("%1 %").arg(100 * p[best], 0, 'f', 2));
      // Both classes, most likely first, each with its probability.
      const QString ranked = table->item(row, 3)->text();
      QVERIFY2(ranked.startsWith(QString::fromStdString(classes[best]) + " "), qPrintable(ranked));
      QVERIFY2(ranked.contains("horizontal") && ranked.contains("vertical") && ranked.count('%') == 2,
               qPrintable(ranked));
    }
    dialog->close();
  }

  void a_run_without_weights_or_an_unreadable_image_says_why() {
    RunStore store(db_.toStdString());
    PredictDialog none(store, not_kept_, vertical_images());
    QVERIFY2(none.error().contains("they were not kept, as its settings asked"), qPrintable(none.error()));
    QVERIFY(none.table()->isHidden());
    QFile text(dir_.filePath("notes.png"));
    QVERIFY(text.open(QIODevice::WriteOnly));
    text.write("not an image");
    text.close();
    PredictDialog bad(store, kept_, {dir_.filePath("notes.png")});
    QVERIFY2(bad.error().contains(dir_.filePath("notes.png")), qPrintable(bad.error()));
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) { return ampwb::ui::test::run_ui_test<ampwb::ui::test::PredictImages>(argc, argv); }

#include "test_ui_predict.moc"
