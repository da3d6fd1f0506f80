// The setup panel's number fields never change what was typed, offscreen through the keyboard: text that is no
// value stays as typed, framed in red with why and the range it takes, listed at the panel's foot, and Train
// waits, saying why; a value out of range is refused with the range, never clamped. A setting the engine refuses is
// named as the form names it, and its field marked.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTextDocumentFragment>
#include <QToolButton>
#include <QToolTip>
#include <QUrl>
#include <QtTest>

#include "amp/precision.h"
#include "main_window.h"
#include "run_setup_panel.h"
#include "test_ui_util.h"
#include "whole_number_box.h"
#include "wide_number_box.h"

namespace ampwb::ui::test {

class FieldsKeepWhatWasTyped : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString data_;

  // Selects what the field holds and types `text` over it, then Return, as a user does.
  static void type(QAbstractSpinBox* field, const QString& text) {
    auto* edit = field->findChild<QLineEdit*>();
    field->setFocus();
    edit->selectAll();
    QTest::keyClick(edit, Qt::Key_Backspace);
    QTest::keyClicks(edit, text);
    QTest::keyClick(edit, Qt::Key_Return);
  }
  static QString text_of(QAbstractSpinBox* field) { return field->findChild<QLineEdit*>()->text(); }
  static QString plain(const QString& tooltip) { return QTextDocumentFragment::fromHtml(tooltip).toPlainText(); }
  // The setup field tagged with the setting `key` (as an engine error names it), or null.
  template <class Field>
  static Field* setting_field(MainWindow& w, const QString& key) {
    for (auto* field : w.findChildren<Field*>())
      if (field->property("ampwbSetting").toString() == key) return field;
    return nullptr;
  }

  // A window on a dataset that can be trained on, shown and active (typing needs the focus).
  void open(MainWindow& w) {
    w.setup()->set_dataset_path(data_);
    QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")->text().startsWith("✔"), 60000);
    w.show();
    w.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&w));
    QVERIFY(child<QPushButton>(w, "trainButton")->isEnabled());
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    data_ = write_stripes(dir_.filePath("stripes"), 4, 12);
  }

  // "-5x" in Epochs stays "-5x", even after the focus leaves; the value stays; Train waits, saying why.
  void text_that_is_no_number_stays_marked_and_train_waits() {
    MainWindow w(dir_.filePath("nonumber.sqlite"));
    open(w);
    auto* epochs = child<QSpinBox>(w, "epochs");
    auto* problems = child<QLabel>(w, "settingsProblem");
    auto* train = child<QPushButton>(w, "trainButton");
    const int before = epochs->value();
    const QString usual_tip = epochs->toolTip();
    QVERIFY(!problems->isVisibleTo(w.setup()));

    type(epochs, "-5x");
    child<QLineEdit>(w, "runName")->setFocus();  // the focus leaves: QSpinBox used to put a value in then
    QTRY_VERIFY(child<QLineEdit>(w, "runName")->hasFocus());
    QCOMPARE(text_of(epochs), QString("-5x"));
    QCOMPARE(epochs->value(), before);
    QCOMPARE(w.setup()->config().epochs, before);
    const QString why = "“-5x” is not a whole number; it takes 1 to 10,000";
    QCOMPARE(plain(epochs->toolTip()), why);
    QVERIFY(epochs->styleSheet().contains("border"));
    QVERIFY(problems->isVisibleTo(w.setup()));
    QCOMPARE(problems->text(), "✘ Epochs: " + why);
    QVERIFY(!train->isEnabled());
    QCOMPARE(plain(train->toolTip()), "Cannot train: Epochs: " + why);
    QVERIFY(!w.start_training());  // Ctrl+R too

    type(epochs, "3");
    QCOMPARE(epochs->value(), 3);
    QCOMPARE(text_of(epochs), QString("3"));
    QCOMPARE(epochs->toolTip(), usual_tip);
    QVERIFY(epochs->styleSheet().isEmpty());
    QVERIFY(!problems->isVisibleTo(w.setup()));
    QVERIFY(train->isEnabled());
    QVERIFY(train->toolTip().isEmpty());
  }

  // A batch of 99999999 is refused with the range, not clamped to the maximum; two fields wrong are both listed.
  void out_of_range_is_refused_with_the_range() {
    MainWindow w(dir_.filePath("range.sqlite"));
    open(w);
    auto* batch = child<QSpinBox>(w, "batchSize");
    auto* lr = child<QDoubleSpinBox>(w, "learningRate");
    type(batch, "99999999");
    QCOMPARE(text_of(batch), QString("99999999"));
    QVERIFY(batch->value() != batch->maximum());  // the last value it could take on the way, never the maximum
    QCOMPARE(plain(batch->toolTip()), QString("99999999 is out of range; it takes 2 to 65,536"));
    auto* seed = child<QSpinBox>(w, "seed");
    type(seed, "x");
    QCOMPARE(plain(seed->toolTip()), QString("“x” is not a whole number; it takes 0 to 2,147,483,647"));
    type(seed, "0");
    type(lr, "20");
    QCOMPARE(text_of(lr), QString("20"));
    QVERIFY(w.setup()->config().lr <= 10);  // the last value it could take on the way ("2"), never 20 nor 10
    QCOMPARE(plain(lr->toolTip()), QString("20 is out of range; it takes 1e-6 to 10, written 1e-3 or 0.001"));
    const QString listed = child<QLabel>(w, "settingsProblem")->text();
    QCOMPARE(listed.count("✘"), 2);
    QVERIFY2(listed.contains("Batch size: 99999999 is out of range") && listed.contains("Learning rate: 20 is out"),
             qPrintable(listed));
    QVERIFY(!child<QPushButton>(w, "trainButton")->isEnabled());
    type(lr, "5e-4x");  // no longer dropped as it is typed: kept and explained
    QCOMPARE(text_of(lr), QString("5e-4x"));
    QVERIFY(plain(lr->toolTip()).startsWith("“5e-4x” is not a number"));
    type(lr, "5e-4");
    type(batch, "32");
    QCOMPARE(w.setup()->config().lr, 5e-4f);
    QCOMPARE(w.setup()->config().batch_size, 32);
    QVERIFY(child<QPushButton>(w, "trainButton")->isEnabled());
  }

  // Before any run, the status line says what Train waits for, and that it waits for nothing once the data is fine.
  void before_a_run_the_status_line_says_what_train_waits_for() {
    MainWindow w(dir_.filePath("ready.sqlite"));
    auto* status = child<QLabel>(w, "statusLine");
    w.setup()->set_dataset_path(QString());
    QCOMPARE(status->text(), QString("Cannot train: no dataset folder is chosen."));
    w.setup()->set_dataset_path(data_);
    QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")->text().startsWith("✔"), 60000);
    QCOMPARE(status->text(), QString("Ready: click Train."));
    QVERIFY(!child<QLabel>(w, "datasetStatus")->text().contains("skipped"));
    // A path pasted from a shell, quoted, or dragged from a file manager, as a URL (%20 for its space, its Chinese
    // percent-encoded): the folder it names.
    const QString spaced = write_stripes(dir_.filePath("我的 数据"), 4, 12);
    for (const QString& pasted :
         {"'" + spaced + "'", " \"" + spaced + "\" ", QString::fromUtf8(QUrl::fromLocalFile(spaced).toEncoded())}) {
      w.setup()->set_dataset_path(pasted);
      QCOMPARE(w.setup()->dataset_path(), spaced);
      QCOMPARE(QString::fromStdString(w.setup()->config().data_dir), spaced);
    }
    QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")->text().startsWith("✔"), 60000);
    // A file the data holds that is no image is said on the status line, not only at the report's end.
    const QString damaged = dir_.filePath("damaged");
    const QString copied = write_stripes(damaged, 24, 16);
    QString class_folder;
    for (const QFileInfo& f : QDir(copied).entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot))
      class_folder = f.filePath();
    QFile junk(class_folder + "/junk.png");
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("not an image");
    junk.close();
    w.setup()->set_dataset_path(copied);
    QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")
                                 ->text()
                                 .contains("; 1 file skipped, named in "
                                           "the report below"),
                             60000);
  }

  // A field's change checks the data again a moment later, when the user may be clicking the next field: the status
  // line keeps its height while "Checking …" takes one line of its two, so that nothing below it moves.
  void the_fields_stay_put_while_the_data_is_checked() {
    MainWindow w(dir_.filePath("put.sqlite"));
    w.resize(1366, 768);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* status = child<QLabel>(w, "datasetStatus");
    w.setup()->set_dataset_path(data_);
    QTRY_VERIFY_WITH_TIMEOUT(status->text().startsWith("✔"), 60000);
    QTest::qWait(50);  // laid out
    const int lines = status->height() / status->fontMetrics().lineSpacing();
    QVERIFY2(lines >= 2, qPrintable(QString("the status takes %1 line(s): this width tests nothing").arg(lines)));
    const QWidget* below = child<QSpinBox>(w, "maxValidationImages");
    const QPoint at = below->mapTo(&w, QPoint(0, 0));
    const int height = status->height();
    w.setup()->set_dataset_path(data_);  // checked again at once, as after a field's change
    QVERIFY(status->text().startsWith("Checking"));
    QVERIFY2(status->minimumHeight() >= height,
             qPrintable(QString("%1 < %2").arg(status->minimumHeight()).arg(height)));
    QTRY_VERIFY_WITH_TIMEOUT(status->text().startsWith("✔"), 60000);
    QTest::qWait(50);
    QCOMPARE(below->mapTo(&w, QPoint(0, 0)), at);
  }

  // The engine refuses warm-up epochs beyond the epochs, naming the setting by its key in neutral words: the GUI says
  // it with the field's label, marks that field (opening Advanced, where it sits), and an edit clears the mark.
  void a_setting_the_engine_refuses_is_named_by_its_field() {
    MainWindow w(dir_.filePath("refused.sqlite"));  // not shown: a refused start then says so without a dialog
    w.setup()->set_dataset_path(data_);
    QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")->text().startsWith("✔"), 60000);
    auto* warmup = setting_field<QSpinBox>(w, "warmup_epochs");
    QVERIFY(warmup);
    QVERIFY(!warmup->isVisibleTo(w.setup()));  // Advanced is closed
    child<QSpinBox>(w, "epochs")->setValue(2);
    warmup->setValue(5);
    QVERIFY(!w.start_training());
    const QString why = "the warm-up epochs must be in [0, epochs], got 5 of 2";
    QCOMPARE(child<QLabel>(w, "statusLine")->text(), "Not started: Warm-up epochs: " + why);
    QVERIFY(warmup->isVisibleTo(w.setup()));
    QVERIFY(warmup->styleSheet().contains("border"));
    QCOMPARE(plain(warmup->toolTip()), why);
    warmup->setValue(1);
    QVERIFY(warmup->styleSheet().isEmpty());
    QVERIFY(!plain(warmup->toolTip()).contains(why));
    w.setup()->save_settings();  // Train remembered the refused settings: the next window opens on valid ones
  }

  // A setting only the data can refuse (top-k above its two classes) ends the run on its worker thread before it
  // starts; the status names the field's label before the engine's words, and the field is marked. The charts keep
  // the run they showed.
  void a_setting_the_data_refuses_is_named_by_its_field() {
    MainWindow w(dir_.filePath("data-refused.sqlite"));
    w.setup()->set_dataset_path(data_);
    QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(w, "datasetStatus")->text().startsWith("✔"), 60000);
    auto* depth = child<QComboBox>(w, "depth");
    depth->setCurrentIndex(depth->findData(20));
    child<QSpinBox>(w, "epochs")->setValue(1);
    child<QSpinBox>(w, "batchSize")->setValue(4);
    setting_field<QSpinBox>(w, "warmup_epochs")->setValue(0);
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QVERIFY2(w.start_training(), qPrintable(child<QLabel>(w, "statusLine")->text()));
    QVERIFY(finished.wait(60000));
    const int64_t shown = w.live_run()->run_id;
    const size_t steps = w.live_run()->steps.size();
    QVERIFY(shown > 0 && steps > 0);
    auto* topk = setting_field<QSpinBox>(w, "topk");
    QVERIFY(topk);
    topk->setValue(5);
    QVERIFY2(w.start_training(), qPrintable(child<QLabel>(w, "statusLine")->text()));
    QVERIFY(finished.wait(60000));
    QCOMPARE(w.live_run()->run_id, shown);
    QCOMPARE(w.live_run()->steps.size(), steps);
    QCOMPARE(w.live_run()->status, RunStatus::Finished);
    const QString status = child<QLabel>(w, "statusLine")->text();
    // Refused before the run had a row in the store: it never started, and says so (not "Run 0 failed").
    QVERIFY2(status.startsWith("Not started: Top-k accuracy: top-k 5 is more than the dataset's 2 classes"),
             qPrintable(status));
    QVERIFY(!status.contains("--"));
    QVERIFY(topk->styleSheet().contains("border"));
  }

  // The loss scaler's numbers are live only where the loss is scaled, by the mode or by the kind chosen: an FP32 or
  // AMP FP8 run greys them, a static scale leaves only its initial value, and choosing dynamic scaling wakes them.
  void scaler_fields_follow_whether_the_loss_is_scaled() {
    MainWindow w(dir_.filePath("scaler.sqlite"));
    open(w);
    child<QToolButton>(w, "advancedToggle")->setChecked(true);
    auto* precision = child<QComboBox>(w, "precision");
    auto* kind = child<QComboBox>(w, "lossScaleKind");
    QWidget* init = setting_field<QWidget>(w, "precision.loss_scale.init_scale");
    QWidget* growth = setting_field<QWidget>(w, "precision.loss_scale.growth_factor");
    QVERIFY(init && growth);
    for (const char* mode : {"fp32", "amp-bf16", "amp-fp8"}) {
      precision->setCurrentIndex(precision->findData(mode));
      QVERIFY2(!init->isEnabled() && !growth->isEnabled(), mode);
    }
    precision->setCurrentIndex(precision->findData("amp-fp16"));
    QVERIFY(init->isEnabled() && growth->isEnabled());
    kind->setCurrentIndex(kind->findData("static"));
    QVERIFY(init->isEnabled() && !growth->isEnabled());
    precision->setCurrentIndex(precision->findData("amp-bf16"));
    kind->setCurrentIndex(kind->findData("dynamic"));
    QVERIFY(init->isEnabled() && growth->isEnabled());
  }

  // AMP FP8's scaling fields show only while that mode is chosen; what they hold is what config() gives, set_config()
  // shows it back, a history of 0 steps is refused as typed with the engine's range, and an engine refusal of one
  // of them marks it and names its label.
  void fp8_fields_follow_the_mode_and_round_trip() {
    MainWindow w(dir_.filePath("fp8.sqlite"));
    open(w);
    child<QToolButton>(w, "advancedToggle")->setChecked(true);
    auto* precision = child<QComboBox>(w, "precision");
    auto* group = child<QWidget>(w, "fp8Scaling");
    auto* history = setting_field<QSpinBox>(w, "precision.fp8.amax_history_length");
    auto* margin = setting_field<QSpinBox>(w, "precision.fp8.margin");
    auto* rule = setting_field<QComboBox>(w, "precision.fp8.amax_rule");
    auto* formats = setting_field<QComboBox>(w, "precision.fp8.formats");
    auto* first_last = setting_field<QCheckBox>(w, "precision.fp8.first_and_last");
    QVERIFY(history && margin && rule && formats && first_last);
    precision->setCurrentIndex(precision->findData("fp32"));
    QVERIFY(!group->isVisibleTo(w.setup()));
    QVERIFY(!history->isEnabled());
    precision->setCurrentIndex(precision->findData("amp-fp8"));
    QVERIFY(group->isVisibleTo(w.setup()));
    QVERIFY(history->isEnabled());
    QCOMPARE(history->value(), 1024);  // Transformer Engine's defaults until changed
    QCOMPARE(margin->value(), 0);

    type(history, "16");
    type(margin, "-2");
    rule->setCurrentIndex(rule->findData("most-recent"));
    QCOMPARE(formats->currentData().toString(), QString("hybrid"));
    formats->setCurrentIndex(formats->findData("e4m3"));
    first_last->setChecked(true);
    TrainConfig c = w.setup()->config();
    QCOMPARE(c.precision.mode, PrecisionMode::AmpFp8);
    QCOMPARE(c.precision.fp8.scaling.history_length, 16);
    QCOMPARE(c.precision.fp8.scaling.margin, -2);
    QCOMPARE(c.precision.fp8.scaling.rule, AmaxRule::MostRecent);
    QCOMPARE(c.precision.fp8.formats, Fp8Formats::E4M3);
    QVERIFY(c.precision.fp8.first_and_last);

    TrainConfig other = c;  // another run's settings, then these again: each shown as it was
    other.precision.mode = PrecisionMode::AmpBf16;
    other.precision.fp8 = Fp8Config{};
    w.setup()->set_config(other);
    QVERIFY(!group->isVisibleTo(w.setup()));
    QCOMPARE(history->value(), 1024);
    QVERIFY(!first_last->isChecked());
    w.setup()->set_config(c);
    QVERIFY(group->isVisibleTo(w.setup()));
    QCOMPARE(text_of(history), QString("16"));
    QCOMPARE(text_of(margin), QString("-2"));
    QCOMPARE(rule->currentData().toString(), QString("most-recent"));
    QCOMPARE(formats->currentData().toString(), QString("e4m3"));
    QVERIFY(first_last->isChecked());
    QCOMPARE(config_to_json_text(w.setup()->config()), config_to_json_text(c));

    type(history, "0");
    QCOMPARE(text_of(history), QString("0"));
    QCOMPARE(w.setup()->config().precision.fp8.scaling.history_length, 16);
    QCOMPARE(plain(history->toolTip()), QString("0 is out of range; it takes 1 to 1,000,000"));
    QVERIFY(history->styleSheet().contains("border"));
    const QString listed = child<QLabel>(w, "settingsProblem")->text();
    QVERIFY2(listed.contains("Amax history: 0 is out of range"), qPrintable(listed));
    QVERIFY(!child<QPushButton>(w, "trainButton")->isEnabled());
    type(history, "16");
    QVERIFY(history->styleSheet().isEmpty());

    // As the engine says it (train/config.cpp): the field named by its label and marked.
    const QString why = "the FP8 scaling margin must be between -64 and 64 powers of two, got 65";
    QCOMPARE(w.setup()->show_setting_problem("precision.fp8.margin", why), "Margin: " + why);
    QVERIFY(margin->styleSheet().contains("border"));
    w.setup()->clear_setting_problem();
    QVERIFY(margin->styleSheet().isEmpty());
  }

  // Fields whose minimum reads as a word ("all cores") keep text they cannot take even while holding the minimum,
  // take the word and a unit typed or not, and the arrow keys step from the value held.
  void words_units_and_steps() {
    MainWindow w(dir_.filePath("words.sqlite"));
    open(w);
    auto* threads = child<QSpinBox>(w, "threads");
    auto* image_size = child<QSpinBox>(w, "imageSize");
    type(threads, "0");
    QCOMPARE(text_of(threads), QString("all cores"));
    type(threads, "two");
    QCOMPARE(text_of(threads), QString("two"));
    QCOMPARE(threads->value(), 0);
    QVERIFY(plain(threads->toolTip()).contains("it takes 0 (all cores) to 1,024"));
    QTest::keyClick(threads->findChild<QLineEdit*>(), Qt::Key_Up);  // steps from the value held: 1
    QCOMPARE(threads->value(), 1);
    QCOMPARE(text_of(threads), QString("1"));
    QVERIFY(threads->styleSheet().isEmpty());
    type(threads, "all cores");
    QCOMPARE(threads->value(), 0);
    type(image_size, "32 px");
    QCOMPARE(image_size->value(), 32);
    QCOMPARE(text_of(image_size), QString("32 px"));
    type(image_size, "48");
    QCOMPARE(image_size->value(), 48);
    QCOMPARE(text_of(image_size), QString("48 px"));
    type(image_size, "");
    QCOMPARE(image_size->value(), 48);
    QVERIFY(plain(image_size->toolTip()).startsWith("empty; it takes 0 (auto (the data's)) to 1,024"));
    QVERIFY(!child<QPushButton>(w, "trainButton")->isEnabled());
  }

  // The epoch pickers of the charts and the comparison keep text they cannot take as well, and take their word.
  void epoch_pickers_keep_what_was_typed() {
    MainWindow w(dir_.filePath("pickers.sqlite"));
    open(w);
    const QList<WholeNumberBox*> pickers =
        w.findChildren<WholeNumberBox*>(QRegularExpression("^(histogramEpoch|atEpoch)$"));
    QVERIFY(pickers.size() >= 2);
    for (WholeNumberBox* picker : pickers) {
      for (QWidget* p = picker; p; p = p->parentWidget())  // brings its tab forward, so that it can take the focus
        if (auto* tabs = qobject_cast<QTabWidget*>(p->parentWidget() ? p->parentWidget()->parentWidget() : nullptr))
          tabs->setCurrentWidget(p);
      const QString word = picker->objectName() == "atEpoch" ? "last common" : "latest";
      QCOMPARE(text_of(picker), word);
      type(picker, "x3");
      QCOMPARE(text_of(picker), QString("x3"));
      QCOMPARE(picker->value(), 0);
      QVERIFY2(plain(picker->toolTip()).contains(QString("it takes 0 (%1) to 100,000").arg(word)),
               qPrintable(picker->toolTip()));
      type(picker, "3");
      QCOMPARE(picker->value(), 3);
      QVERIFY(picker->problem().isEmpty());
      type(picker, word);
      QCOMPARE(picker->value(), 0);
    }
  }

  // A value out of range typed in Advanced moves no field under the pointer (the next click went to the field that
  // had moved there): the panel's list of problems is below every field, and the field says its problem where it is
  // typed.
  void a_problem_typed_moves_no_field() {
    MainWindow w(dir_.filePath("shift.sqlite"));
    open(w);
    TrainConfig c = w.setup()->config();
    c.precision = precision_preset("amp-fp16");
    w.setup()->set_config(c);
    child<QToolButton>(w, "advancedToggle")->setChecked(true);
    auto* scale = setting_field<WideNumberBox>(w, "precision.loss_scale.init_scale");
    auto* growth = setting_field<QAbstractSpinBox>(w, "precision.loss_scale.growth_interval");
    QVERIFY(scale && growth && scale->isEnabled());
    QTest::qWait(50);
    const QPoint scale_at = scale->mapTo(&w, QPoint(0, 0)), growth_at = growth->mapTo(&w, QPoint(0, 0));
    auto* edit = scale->findChild<QLineEdit*>();
    scale->setFocus();
    edit->selectAll();
    QTest::keyClicks(edit, "1099511627776");  // 2^40, past its 1e12
    auto* problems = child<QLabel>(w, "settingsProblem");
    QTRY_VERIFY(problems->isVisibleTo(w.setup()));
    QTest::qWait(50);
    QCOMPARE(scale->mapTo(&w, QPoint(0, 0)), scale_at);
    QCOMPARE(growth->mapTo(&w, QPoint(0, 0)), growth_at);
    for (const QAbstractSpinBox* field : w.setup()->findChildren<QAbstractSpinBox*>())
      if (field->isVisibleTo(w.setup()))
        QVERIFY2(problems->mapTo(w.setup(), QPoint(0, 0)).y() > field->mapTo(w.setup(), QPoint(0, 0)).y(),
                 qPrintable(field->objectName()));
    const QString problem = scale->property("fieldProblem").toString();
    QVERIFY(!problem.isEmpty());
    QVERIFY2(QToolTip::isVisible() && QToolTip::text() == problem, qPrintable(QToolTip::text()));
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) {
  return ampwb::ui::test::run_ui_test<ampwb::ui::test::FieldsKeepWhatWasTyped>(argc, argv);
}

#include "test_ui_fields.moc"
