// The runs view's final weights, offscreen: which runs kept them, "Predict on images…" (PredictDialog) on real
// image files with a run trained here, against the engine's own inference of the same files, and "Export model…"
// (ExportModelDialog) writing the files `ampwb export model` writes; both in the Run menu too, their disabled reasons
// wrapped on a 1366×768 screen (the offscreen one, set up in main()), and the results fitting it.
#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QGuiApplication>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPointer>
#include <QPushButton>
#include <QRandomGenerator>
#include <QScreen>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTableView>
#include <QTableWidget>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <QTimer>
#include <QToolTip>

#include <tuple>

#include "export/exported_model.h"
#include "export/onnx_export.h"
#include "export/safetensors_export.h"
#include "export_model_dialog.h"
#include "main_window.h"
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

  // A folder: its images, sub-folders included, and the files that are no images said to be left out.
  void predict_on_a_folder_takes_its_images() {
    RunStore store(db_.toStdString());
    RunsView view(store);
    view.reload();
    const QString folder = dir_.filePath("to-predict");
    QDir().mkpath(folder + "/more");
    QFile::copy(vertical_images()[0], folder + "/a.png");
    QFile::copy(vertical_images()[1], folder + "/more/b.png");
    QFile notes(folder + "/notes.txt");
    QVERIFY(notes.open(QIODevice::WriteOnly));
    notes.write("taken on Tuesday");
    notes.close();
    view.choose_image_folder = [&folder] { return folder; };
    view.select({kept_});
    view.predict_folder_selected();
    auto* dialog = view.findChild<PredictDialog*>("predictDialog");
    QVERIFY(dialog);
    QTRY_VERIFY_WITH_TIMEOUT(dialog->finished(), 60000);
    QVERIFY2(dialog->error().isEmpty(), qPrintable(dialog->error()));
    QCOMPARE(dialog->table()->rowCount(), 2);
    QCOMPARE(dialog->table()->item(0, 0)->text(), QString("a.png"));
    QCOMPARE(dialog->table()->item(1, 0)->text(), QString("more/b.png"));
    const QString summary = dialog->findChild<QLabel*>("predictSummary")->text();
    QVERIFY2(summary.contains("; the images below " + folder), qPrintable(summary));
    QVERIFY2(summary.contains("; 1 file left out, not an image by its name (notes.txt)"), qPrintable(summary));
    dialog->close();
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
    // The images are classified on the dialog's thread: it shows, with its progress, before they are done.
    QVERIFY(!dialog->finished());
    QVERIFY(dialog->findChild<QLabel*>("predictSummary")->text().startsWith("Classifying 5 image"));
    QTRY_VERIFY_WITH_TIMEOUT(dialog->finished(), 60000);
    QVERIFY2(dialog->error().isEmpty(), qPrintable(dialog->error()));
    QTableWidget* table = dialog->table();
    QCOMPARE(table->rowCount(), 5);
    QCOMPARE(table->horizontalHeaderItem(3)->text(), QString("Top 2"));  // as many as the run has classes

    ImagePredictor engine(load_final_weights(store, kept_));
    std::vector<std::string> paths;
    for (const QString& f : vertical_images()) paths.push_back(f.toStdString());
    const std::vector<ImageLogits> results = engine.logits(paths);
    const std::vector<std::string>& classes = engine.weights().preprocessing.class_names;
    for (int row = 0; row < 5; ++row) {
      const std::vector<double> p = softmax(results[row].logits);
      const int best = top_classes(results[row].logits, 1)[0];
      // Named below their common folder, the whole path in the tooltip.
      QCOMPARE(table->item(row, 0)->text(), QStringLiteral("%1.png").arg(row));
      QCOMPARE(tooltip_text(table->item(row, 0)->toolTip()), vertical_images()[row]);
      QCOMPARE(table->item(row, 1)->text(), QString::fromStdString(classes[best]));
      QCOMPARE(table->item(row, 2)->text(), QStringLiteral("%1%").arg(100 * p[best], 0, 'f', 2));
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
    QVERIFY(none.finished());  // refused at once
    QVERIFY2(none.error().contains("they were not kept, as its settings asked"), qPrintable(none.error()));
    QVERIFY(none.table()->isHidden());
    QFile text(dir_.filePath("notes.png"));
    QVERIFY(text.open(QIODevice::WriteOnly));
    text.write("not an image");
    text.close();
    // The unreadable file says why in its row; the image beside it is still classified.
    PredictDialog bad(store, kept_, {vertical_images()[0], dir_.filePath("notes.png")});
    QTRY_VERIFY_WITH_TIMEOUT(bad.finished(), 60000);
    QVERIFY2(bad.error().isEmpty(), qPrintable(bad.error()));
    QCOMPARE(bad.table()->rowCount(), 2);
    QVERIFY(bad.table()->item(0, 2)->text().endsWith("%"));  // its probability
    const QString why = bad.table()->item(1, 1)->text();
    QVERIFY2(why.contains(dir_.filePath("notes.png")) && why.contains("not an image"), qPrintable(why));
    QCOMPARE(bad.table()->columnSpan(1, 1), 3);
    // The class column fits the classes, not the reason that spans it and the next two.
    QVERIFY(bad.table()->columnWidth(1) < bad.table()->fontMetrics().horizontalAdvance(why) / 2);
    const QString summary = bad.findChild<QLabel*>("predictSummary")->text();
    // The image classified is counted apart from the file that could not be read; the one reason is said whole
    // above the table too, and in its row's tooltip, where the row may cut it.
    QVERIFY2(summary.startsWith("1 image classified by run "), qPrintable(summary));
    QVERIFY2(summary.contains("; 1 could not be read: " + why.mid(QString("not classified: ").size())),
             qPrintable(summary));
    const QString tooltip = bad.table()->item(1, 1)->toolTip().replace(QChar::Nbsp, ' ');
    QVERIFY2(tooltip.contains("is not an image that can be read"), qPrintable(tooltip));
  }

  // Closing the dialog while it classifies (as the runs view makes it: deleted on close) stops its thread with
  // results still queued, and nothing reaches the deleted dialog.
  void closing_the_dialog_while_it_classifies_stops_it() {
    RunStore store(db_.toStdString());
    RunsView view(store);
    view.reload();
    QStringList many;
    for (int i = 0; i < 1000; ++i) many << vertical_images();
    view.choose_images = [&many] { return many; };
    view.select({kept_});
    view.predict_selected();
    QPointer<PredictDialog> dialog = view.findChild<PredictDialog*>("predictDialog");
    QVERIFY(dialog);
    QCOMPARE(dialog->table()->item(4999, 0)->text(), QString("4.png"));       // every row names its image at once
    QTRY_VERIFY_WITH_TIMEOUT(dialog->table()->item(0, 1) != nullptr, 60000);  // the first images are in
    QVERIFY2(!dialog->finished(), "5000 images take longer than the first eight");
    dialog->reject();
    QTRY_VERIFY_WITH_TIMEOUT(dialog.isNull(), 60000);
    QTest::qWait(100);  // anything the worker queued went with the dialog
  }

  void export_model_writes_the_runs_weights_in_the_chosen_format() {
    RunStore store(db_.toStdString());
    RunsView view(store);
    view.reload();
    view.select({kept_});
    QVERIFY(view.export_model_action()->isEnabled());
    QSignalSpy status(&view, &RunsView::status_message);
    view.export_model_action()->trigger();
    auto* dialog = view.findChild<ExportModelDialog*>("exportModelDialog");
    QVERIFY(dialog);
    QVERIFY(dialog->isVisible());
    const ExportedModel model = exported_model(load_final_weights(store, kept_));

    // safetensors in FP16, chosen by the file's suffix: the header lists every tensor of the run under its name.
    const QString tensors = dir_.filePath("model.safetensors");
    dialog->set_format("onnx");
    dialog->set_path(tensors);
    QCOMPARE(dialog->format(), QString("safetensors"));
    dialog->set_dtype("fp16");
    QVERIFY2(dialog->export_model(), qPrintable(dialog->error()));
    QCOMPARE(status.count(), 1);
    QVERIFY2(status.at(0).at(0).toString().contains(tensors), qPrintable(status.at(0).at(0).toString()));
    QFile file(tensors);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray bytes = file.readAll();
    QVERIFY(bytes.size() > 8);
    uint64_t header_size = 0;
    for (int i = 7; i >= 0; --i) header_size = header_size << 8 | static_cast<uint8_t>(bytes[i]);
    QVERIFY(8 + header_size <= static_cast<uint64_t>(bytes.size()));
    QJsonParseError parse{};
    const QJsonObject header = QJsonDocument::fromJson(bytes.mid(8, int(header_size)), &parse).object();
    QCOMPARE(parse.error, QJsonParseError::NoError);
    QVERIFY(model.weights.size() > 10);
    for (const auto& [name, weight] : model.weights) {
      const QJsonObject tensor = header.value(QString::fromStdString(name)).toObject();
      QVERIFY2(!tensor.isEmpty(), name.c_str());
      QCOMPARE(tensor.value("dtype").toString(), QString("F16"));
      QJsonArray shape;
      for (int64_t d : weight.shape()) shape.append(qint64(d));
      QCOMPARE(tensor.value("shape").toArray(), shape);
    }
    QVERIFY(header.value("__metadata__").toObject().value("class_names").toString().contains("vertical"));
    QCOMPARE(std::string(bytes.constData(), bytes.size()), safetensors_bytes(model, DType::F16));

    // ONNX in FP32: the bytes the CLI's exporter writes, or where this build has no ONNX, the reason.
    const QString onnx = dir_.filePath("model.onnx");
    dialog->set_path(onnx);
    QCOMPARE(dialog->format(), QString("onnx"));
    dialog->set_dtype("fp32");
    if (onnx_export_available()) {
      QVERIFY2(dialog->export_model(), qPrintable(dialog->error()));
      QFile written(onnx);
      QVERIFY(written.open(QIODevice::ReadOnly));
      const QByteArray proto = written.readAll();
      QCOMPARE(std::string(proto.constData(), proto.size()), onnx_bytes(model, DType::F32));
      QCOMPARE(status.count(), 2);
      QVERIFY(status.at(1).at(0).toString().contains(onnx));
    } else {
      QVERIFY(!dialog->export_model());
      QVERIFY2(dialog->error().contains("without ONNX"), qPrintable(dialog->error()));
      QVERIFY(!QFileInfo::exists(onnx));
    }

    // Export over a file typed in asks first: declined, the file stays as it was and the dialog open.
    const QFileInfo before(tensors);
    dialog->set_path(tensors);
    dialog->set_dtype("fp32");
    QString asked;
    QTimer::singleShot(0, [&asked] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      if (!box) return;
      asked = box->text();
      box->button(QMessageBox::No)->click();
    });
    dialog->findChild<QPushButton*>("exportModelButton")->click();
    QVERIFY2(asked.startsWith("model.safetensors already exists"), qPrintable(asked));
    QCOMPARE(QFileInfo(tensors).size(), before.size());
    QVERIFY(dialog->isVisible());

    // A folder that does not exist is made, as `ampwb export model` makes it.
    const QString made = dir_.filePath("made/for it/model.safetensors");
    dialog->set_path(made);
    QVERIFY2(dialog->export_model(), qPrintable(dialog->error()));
    QVERIFY(QFileInfo(made).size() > 0);
    // A file where its folder should be: the path in the reason, the dialog still open.
    const QString nowhere = tensors + "/model.safetensors";
    dialog->set_path(nowhere);
    QVERIFY(!dialog->export_model());
    QVERIFY2(dialog->error().contains(tensors), qPrintable(dialog->error()));
    QVERIFY(dialog->isVisible());
    auto* message = dialog->findChild<QLabel*>("exportModelMessage");
    QVERIFY2(message->text().startsWith("Cannot make the folder") && message->text().contains("Not a directory"),
             qPrintable(message->text()));
    dialog->set_path(tensors);  // another file: what was said of the last one goes
    QVERIFY(message->text().isEmpty());
    dialog->close();
    // The next export starts in the folder the last one went to.
    ExportModelDialog next(store, kept_);
    QCOMPARE(QFileInfo(next.path()).absolutePath(), QFileInfo(made).absolutePath());
  }

  void export_model_is_disabled_for_a_run_without_weights_with_the_reason() {
    RunStore store(db_.toStdString());
    RunsView view(store);
    view.reload();
    view.select({not_kept_});
    QVERIFY(!view.export_model_action()->isEnabled());
    // The tooltip's spaces are its own, non-breaking.
    const auto tooltip = [&view] { return view.export_model_action()->toolTip().replace(QChar::Nbsp, ' '); };
    QVERIFY2(tooltip().contains("they were not kept, as its settings asked"), qPrintable(tooltip()));
    // Predict needs the same weights, and says so alike.
    const QAction* predict = view.findChild<QAction*>("predictAction");
    QVERIFY(!predict->isEnabled());
    QVERIFY(predict->toolTip().replace(QChar::Nbsp, ' ').contains("they were not kept, as its settings asked"));
    view.select({kept_, not_kept_});
    QVERIFY(!view.export_model_action()->isEnabled());
    QVERIFY2(tooltip().contains("Select only one run"), qPrintable(tooltip()));
    view.select({kept_});
    QVERIFY(view.export_model_action()->isEnabled());
    QVERIFY(predict->isEnabled());

    ExportModelDialog dialog(store, not_kept_);
    dialog.set_path(dir_.filePath("none.safetensors"));
    QVERIFY(!dialog.export_model());
    QVERIFY2(dialog.error().contains("not kept"), qPrintable(dialog.error()));
    QVERIFY(!QFileInfo::exists(dir_.filePath("none.safetensors")));
  }

  // Why Predict and Export model are disabled wraps within the screen, the run's name whole on one line: its spaces
  // did not break, so it broke only at the name's hyphens and ran off the screen's right edge.
  void a_disabled_actions_reason_wraps_with_the_run_name_whole() {
    const QString name = "resnet20-amp-fp8 a/b-7";
    const std::string was = RunStore(db_.toStdString()).run(not_kept_).name;
    RunStore(db_.toStdString()).rename(not_kept_, name.toStdString());
    RunStore store(db_.toStdString());
    RunsView view(store);
    view.resize(1366, 768);
    view.show();
    view.reload();
    view.select({not_kept_});
    for (QAction* action : {view.export_model_action(), view.findChild<QAction*>("predictAction")}) {
      const QString tip = action->toolTip();
      QVERIFY2(tooltip_text(tip).contains("('" + name + "') has no final weights: they were not kept"),
               qPrintable(tooltip_text(tip)));
      QToolTip::showText(view.mapToGlobal(QPoint(view.width() - 10, 40)), tip, &view);
      const QLabel* shown = nullptr;
      for (QWidget* w : QApplication::topLevelWidgets())
        if (w->objectName() == "qtooltip_label" && w->isVisible()) shown = qobject_cast<QLabel*>(w);
      QVERIFY(shown);
      QVERIFY2(shown->width() <= shown->screen()->availableGeometry().width(),
               qPrintable(QString::number(shown->width())));
      QVERIFY2(shown->width() <= 90 * shown->fontMetrics().averageCharWidth(),
               qPrintable(QString::number(shown->width())));
      // Laid out as the tooltip lays it out, at its width and at one too narrow for "Run 2 ('name')" on a line: no
      // line starts inside the name.
      const int narrow = shown->fontMetrics().horizontalAdvance("('" + name + "') has");
      for (const int width : {shown->contentsRect().width(), narrow}) {
        QTextDocument doc;
        doc.setDefaultFont(shown->font());
        doc.setHtml(tip);
        doc.setTextWidth(width);
        QVERIFY2(doc.idealWidth() <= width, qPrintable(QString::number(width)));  // nothing runs past its edge
        const qsizetype at = doc.toPlainText().indexOf("('") + 2, end = doc.toPlainText().indexOf("')");
        QVERIFY(at >= 2 && end > at);
        int lines = 0;
        for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
          for (int i = 0; i < b.layout()->lineCount(); ++i, ++lines) {
            const qsizetype start = b.position() + b.layout()->lineAt(i).textStart();
            QVERIFY2(start <= at || start >= end, qPrintable(QString::number(width)));
          }
        QVERIFY2(lines >= 2, qPrintable(QString::number(width)));  // wrapped, not one line running off
      }
      QToolTip::hideText();
    }
    RunStore(db_.toStdString()).rename(not_kept_, was);
  }

  // Predict and Export model are in the Run menu too, for the run selected in the Runs tab, enabled as its buttons are.
  void the_run_menu_predicts_and_exports_the_selected_run() {
    MainWindow w(db_);
    RunsView* view = w.runs_view();
    const auto menu_action = [&w](const char* name) { return w.findChild<QAction*>(name); };
    const char* entries[] = {"predictMenuAction", "predictFolderMenuAction", "exportModelMenuAction"};
    const char* buttons[] = {"predictAction", "predictAction", "exportModelAction"};
    const QMenu* run_menu = nullptr;
    for (const QAction* a : w.menuBar()->actions())
      if (a->text() == "&Run") run_menu = a->menu();
    QVERIFY(run_menu);
    for (const char* name : entries) QVERIFY2(run_menu->actions().contains(menu_action(name)), name);
    for (const std::vector<int64_t>& chosen : {std::vector<int64_t>{}, {not_kept_}, {kept_, not_kept_}}) {
      view->select(chosen);
      for (int i = 0; i < 3; ++i) {
        const QAction* button = view->findChild<QAction*>(buttons[i]);
        QVERIFY2(!menu_action(entries[i])->isEnabled(), entries[i]);
        QCOMPARE(menu_action(entries[i])->toolTip(), button->toolTip());  // the reason why not
      }
    }
    view->select({not_kept_});
    QVERIFY(menu_action("exportModelMenuAction")->toolTip().replace(QChar::Nbsp, ' ').contains("were not kept"));
    view->select({kept_});
    for (const char* name : entries) QVERIFY2(menu_action(name)->isEnabled(), name);

    // Each opens what its button opens.
    view->choose_images = [this] { return vertical_images(); };
    menu_action("predictMenuAction")->trigger();
    auto* predicted = view->findChild<PredictDialog*>("predictDialog");
    QVERIFY(predicted && predicted->isVisible());
    QTRY_VERIFY_WITH_TIMEOUT(predicted->finished(), 60000);
    QCOMPARE(predicted->table()->rowCount(), 5);
    predicted->close();
    QTRY_VERIFY(!view->findChild<PredictDialog*>("predictDialog"));
    view->choose_image_folder = [this] { return data_ + "/vertical"; };
    menu_action("predictFolderMenuAction")->trigger();
    predicted = view->findChild<PredictDialog*>("predictDialog");
    QVERIFY(predicted);
    QTRY_VERIFY_WITH_TIMEOUT(predicted->finished(), 60000);
    QVERIFY(predicted->table()->rowCount() >= 5);
    predicted->close();
    menu_action("exportModelMenuAction")->trigger();
    auto* exporting = view->findChild<ExportModelDialog*>();
    QVERIFY(exporting && exporting->isVisible());
    exporting->close();
  }

  // On a 1366×768 screen the results show every column whole, without scrolling sideways, for a 2-class run and for
  // a 10-class run with Fashion-MNIST's class names: its Top 5 column needed a horizontal scroll bar at 760 px.
  void the_results_fit_the_screen_without_scrolling_sideways() {
    const QRect free = QGuiApplication::primaryScreen()->availableGeometry();
    QCOMPARE(free.size(), QSize(1366, 768));
    const QString ten = dir_.filePath("ten-classes");
    QRandomGenerator rng(3);
    QStringList ten_images;
    for (const char* name :
         {"T-shirt top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}) {
      QDir().mkpath(ten + "/" + name);
      for (int i = 0; i < 8; ++i) {
        QImage image(16, 16, QImage::Format_RGB32);
        for (int y = 0; y < 16; ++y)
          for (int x = 0; x < 16; ++x) image.setPixelColor(x, y, QColor::fromHsv(0, 0, rng.bounded(256)));
        const QString file = QStringLiteral("%1/%2/%3.png").arg(ten, name).arg(i);
        QVERIFY(image.save(file));
        if (i == 0) ten_images << file;
      }
    }
    const QString ten_db = dir_.filePath("ten-classes.sqlite");
    const int64_t ten_run = train_into_store(ten_db, tiny_config(ten, 1, 2));
    QWidget window;  // the main window, where the dialog opens
    window.resize(1366, 768);
    window.show();
    for (const auto& [db, run, images, classes] :
         {std::tuple{db_, kept_, vertical_images(), 2}, std::tuple{ten_db, ten_run, ten_images, 10}}) {
      RunStore store(db.toStdString());
      auto* dialog = new PredictDialog(store, run, images, &window);
      dialog->show();
      QTRY_VERIFY_WITH_TIMEOUT(dialog->finished(), 60000);
      QVERIFY2(dialog->error().isEmpty(), qPrintable(dialog->error()));
      QTableWidget* table = dialog->table();
      QCOMPARE(table->horizontalHeaderItem(3)->text(), QStringLiteral("Top %1").arg(std::min(classes, 5)));
      QTRY_VERIFY2(!table->horizontalScrollBar()->isVisible(), qPrintable(QString::number(dialog->width())));
      QCOMPARE(table->horizontalScrollBar()->maximum(), 0);
      // Each column whole: the last one as wide as its widest row, the image's name not cut.
      int columns = 0;
      for (int c = 0; c < 4; ++c) columns += table->columnWidth(c);
      QVERIFY(columns <= table->viewport()->width());
      QVERIFY(table->columnWidth(3) >= static_cast<const QAbstractItemView*>(table)->sizeHintForColumn(3));
      QVERIFY(table->columnWidth(0) >= static_cast<const QAbstractItemView*>(table)->sizeHintForColumn(0));
      QVERIFY2(free.contains(dialog->frameGeometry()),
               qPrintable(QStringLiteral("%1 %2").arg(dialog->x()).arg(dialog->width())));
      delete dialog;
    }
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) {
  // A 1366×768 laptop's screen, where the results dialog was too narrow: the offscreen platform's, from its file.
  static QTemporaryDir config;
  const QString file = config.filePath("screen.json");
  QFile json(file);
  if (!json.open(QIODevice::WriteOnly)) return 1;
  json.write(R"({"screens": [{"name": "laptop", "x": 0, "y": 0, "width": 1366, "height": 768, "dpr": 1}]})");
  json.close();
  ::setenv("QT_QPA_PLATFORM", qPrintable("offscreen:configfile=" + file), 1);
  return ampwb::ui::test::run_ui_test<ampwb::ui::test::PredictImages>(argc, argv);
}

#include "test_ui_predict.moc"
