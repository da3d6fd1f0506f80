// User text is shown as written, never rendered as HTML, offscreen: run names, tags, notes, class folders and the
// paths of the dataset and the run store hold markup here, and go through the real window (runs view, comparison,
// diagnosis, live training and its setup panel, message boxes, About box). Every label that would render rich text,
// every tooltip, every item view's tooltips, every chart's title, axis titles, series and legend names, and every
// rich-text document must hold the markup escaped; where the text matters, the literal characters must show.
#include <QAbstractAxis>
#include <QAbstractItemView>
#include <QAbstractSeries>
#include <QAction>
#include <QChart>
#include <QChartView>
#include <QFile>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTextBrowser>
#include <QTextDocumentFragment>
#include <QTimer>
#include <QtTest>

#include "chart_panel.h"
#include "compare_view.h"
#include "main_window.h"
#include "run_setup_panel.h"
#include "runs_model.h"
#include "runs_view.h"
#include "store/run_store.h"
#include "test_ui_util.h"

namespace ampwb::ui::test {
namespace {

// What the user typed. Folder names cannot hold '/', so a path's "</u>" is a folder "<u>data<" holding "u>".
const QString kName = R"(<h1 style="color:red">HUGE</h1><a href="http://example.invalid">click</a>)";
const QString kOtherName = "<s>other</s> run";
const QString kTag = R"(<a href="http://example.invalid">tag</a>)";
const QString kNotes = "<h1>noted</h1>";
const QStringList kClasses = {"<h1>horizontal", "<u>vertical"};
// Markup of the fields above, none of which the workbench writes itself (its own rich text uses h3, p, br, span, b).
const QStringList kRaw = {"<h1", "<a href", "<u>", "<s>", "<i>"};

bool has_raw_markup(const QString& text) {
  for (const QString& m : kRaw)
    if (text.contains(m, Qt::CaseInsensitive)) return true;
  return false;
}

// As QLabel, QMessageBox and QToolTip decide (tooltips are Qt::AutoText).
bool renders_rich(Qt::TextFormat format, const QString& text) {
  return format == Qt::RichText || (format == Qt::AutoText && Qt::mightBeRichText(text));
}

QString shown(Qt::TextFormat format, const QString& text) {
  return renders_rich(format, text) ? QTextDocumentFragment::fromHtml(text).toPlainText() : text;
}

// Every place under `root` where the fields' markup would be rendered as HTML, one line each.
QStringList html_leaks(QWidget* root) {
  QStringList leaks;
  auto check = [&](bool rich, const QString& text, const QString& where) {
    if (rich && has_raw_markup(text)) leaks << where + ": " + text;
  };
  QList<QWidget*> widgets = root->findChildren<QWidget*>();
  widgets.prepend(root);
  for (QWidget* w : widgets) {
    const QString who = QString::fromUtf8(w->metaObject()->className()) + " '" + w->objectName() + "'";
    check(Qt::mightBeRichText(w->toolTip()), w->toolTip(), who + " tooltip");
    check(Qt::mightBeRichText(w->whatsThis()), w->whatsThis(), who + " what's this");
    if (auto* label = qobject_cast<QLabel*>(w))
      check(renders_rich(label->textFormat(), label->text()), label->text(), who);
    if (auto* edit = qobject_cast<QTextEdit*>(w)) check(true, edit->toHtml(), who + " document");
    if (auto* view = qobject_cast<QAbstractItemView*>(w); view && view->model() && !qobject_cast<QHeaderView*>(w)) {
      const QAbstractItemModel* model = view->model();
      const qsizetype before = leaks.size();
      for (int r = 0; r < model->rowCount() && leaks.size() == before; ++r)  // the first leak of a view is enough
        for (int c = 0; c < model->columnCount() && leaks.size() == before; ++c) {
          const QString tip = model->index(r, c).data(Qt::ToolTipRole).toString();
          check(Qt::mightBeRichText(tip), tip, who + QStringLiteral(" tooltip of (%1, %2)").arg(r).arg(c));
        }
    }
    if (auto* chart_view = qobject_cast<QChartView*>(w)) {
      // QtCharts draws all of these as HTML.
      QChart* chart = chart_view->chart();
      check(true, chart->title(), who + " title");
      for (QAbstractAxis* axis : chart->axes()) check(true, axis->titleText(), who + " axis title");
      for (QAbstractSeries* series : chart->series()) check(true, series->name(), who + " series name");
      for (QLegendMarker* marker : chart->legend()->markers()) check(true, marker->label(), who + " legend entry");
    }
  }
  return leaks;
}

// Answers the next message box (with its default button), noting its text and whether it renders rich text.
class BoxWatch {
 public:
  BoxWatch() {
    timer_.setInterval(20);
    QObject::connect(&timer_, &QTimer::timeout, [this] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      if (!box || !box->isVisible()) return;
      timer_.stop();
      seen = true;
      text = box->text();
      rich = renders_rich(box->textFormat(), box->text());
      if (QAbstractButton* b = box->defaultButton())
        b->click();
      else
        box->buttons().front()->click();
    });
    timer_.start();
  }
  bool seen = false, rich = false;
  QString text;

 private:
  QTimer timer_;
};

}  // namespace

class PlainText : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString data_, other_data_, db_;
  int64_t first_ = 0, second_ = 0;

  // Stripes in class folders named with markup, and an empty file the trainer passes over (its note quotes the path).
  QString write_data(const QString& root) {
    write_stripes(root, 16, 16);
    QDir folder(root);
    if (!folder.rename("horizontal", kClasses[0]) || !folder.rename("vertical", kClasses[1]))
      qFatal("cannot name class folders with markup");
    QFile empty(folder.filePath(kClasses[0] + "/empty.png"));
    if (!empty.open(QIODevice::WriteOnly)) qFatal("cannot write empty.png");
    return root;
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    data_ = write_data(dir_.filePath("<u>data</u>"));
    other_data_ = write_data(dir_.filePath("<i>other data</i>"));
    QVERIFY(QDir().mkpath(dir_.filePath("<s>store</s>")));
    db_ = dir_.filePath("<s>store</s>/runs.sqlite");
    TrainConfig c = tiny_config(data_, 1, 3);
    c.name = kName.toStdString();
    first_ = train_into_store(db_, c);
    c = tiny_config(other_data_, 1, 3);
    c.name = kOtherName.toStdString();
    c.precision = precision_preset("amp-bf16");
    second_ = train_into_store(db_, c);
  }

  void runs_view_shows_tags_notes_and_paths_as_text() {
    MainWindow w(db_);
    RunsView* runs = w.runs_view();
    QCOMPARE(runs->add_tag(first_, kTag), QString());
    QCOMPARE(runs->set_notes(first_, kNotes), QString());
    RunStore(db_.toStdString()).add_note(first_, "what the <i>run</i> noted");
    runs->reload();
    QCOMPARE(runs->model()->rowCount(), 2);
    const QStringList leaks = html_leaks(&w);
    QVERIFY2(leaks.isEmpty(), qPrintable(leaks.join('\n')));
    // The tooltip shows the dataset path and the notes as typed (and the store's path in the status bar).
    const int row = runs->model()->row_of(first_);
    const QString tip = runs->model()->index(row, RunsModel::Name).data(Qt::ToolTipRole).toString();
    QVERIFY2(shown(Qt::AutoText, tip).contains(data_), qPrintable(tip));
    QVERIFY2(shown(Qt::AutoText, tip).contains(kNotes), qPrintable(tip));
    QVERIFY2(shown(Qt::AutoText, tip).contains("note: what the <i>run</i> noted"), qPrintable(tip));
    auto* store = w.findChild<QLabel*>("storePath");
    QVERIFY(store);
    QVERIFY2(shown(store->textFormat(), store->text()).contains(QDir::toNativeSeparators(db_)),
             qPrintable(store->text()));
  }

  void comparison_shows_names_as_text() {
    MainWindow w(db_);
    w.open_runs({first_, second_});
    CompareView* view = w.compare_view();
    ChartPanel* charts = view->charts();
    QVERIFY(charts->chart("loss")->point_count() > 0);
    QStringList leaks = html_leaks(&w);
    QVERIFY2(leaks.isEmpty(), qPrintable(leaks.join('\n')));
    // The step-time line (the bug report's case) names both runs, literally.
    QLabel* time = view->time_summary();
    QVERIFY(!time->text().isEmpty());
    QVERIFY2(shown(time->textFormat(), time->text()).contains(kName), qPrintable(time->text()));
    QVERIFY2(shown(time->textFormat(), time->text()).contains(kOtherName), qPrintable(time->text()));
    // The diagnosis names the run literally (its heading is HTML, the name escaped in it).
    auto* diagnosis = view->findChild<QTextBrowser*>("diagnosisText");
    QVERIFY(diagnosis);
    QVERIFY2(diagnosis->toPlainText().contains(kName), qPrintable(diagnosis->toHtml()));
    // The series are named by the runs (drawn as HTML in legends): as typed.
    bool named_by_run = false;
    for (QAbstractSeries* s : charts->chart("loss")->chart()->series())
      named_by_run = named_by_run || QTextDocumentFragment::fromHtml(s->name()).toPlainText().contains(kName);
    QVERIFY(named_by_run);

    // Grouped by the dataset path: the groups' mean lines and bands are named by it, as is the run legend.
    charts->set_group_by("data_dir");
    QCOMPARE(charts->options().group_by, QString("data_dir"));
    leaks = html_leaks(&w);
    QVERIFY2(leaks.isEmpty(), qPrintable(leaks.join('\n')));
    bool named = false;
    for (QAbstractSeries* s : charts->chart("accuracy")->chart()->series())
      named = named || QTextDocumentFragment::fromHtml(s->name()).toPlainText().contains(data_);
    QVERIFY(named);
    auto* legend = charts->findChild<QLabel*>("runLegend");
    QVERIFY(legend);
    QVERIFY2(legend_words(legend).contains(kName), qPrintable(legend->text()));

    // One run: its title.
    w.open_runs({first_});
    leaks = html_leaks(&w);
    QVERIFY2(leaks.isEmpty(), qPrintable(leaks.join('\n')));
    auto* title = view->findChild<QLabel*>("compareTitle");
    QVERIFY(title);
    QVERIFY2(shown(title->textFormat(), title->text()).contains(kName), qPrintable(title->text()));
  }

  void message_boxes_show_names_as_text() {
    MainWindow w(db_);
    w.resize(1200, 800);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    // Delete asks first, listing the names: declined.
    RunsView* runs = w.runs_view();
    QAction* remove = nullptr;
    for (QAction* a : runs->findChildren<QAction*>())
      if (a->text() == RunsView::tr("Delete…")) remove = a;
    QVERIFY(remove);
    runs->select({first_});
    {
      BoxWatch box;
      remove->trigger();
      QVERIFY(box.seen);
      QVERIFY2(!box.rich || !has_raw_markup(box.text), qPrintable(box.text));
      QVERIFY2(shown(box.rich ? Qt::RichText : Qt::PlainText, box.text).contains(kName), qPrintable(box.text));
    }
    QCOMPARE(runs->model()->rowCount(), 2);
    // The About box names the run store.
    QAction* about = nullptr;
    for (QAction* a : w.findChildren<QAction*>())
      if (a->text() == MainWindow::tr("&About AMP Workbench")) about = a;
    QVERIFY(about);
    {
      BoxWatch box;
      about->trigger();
      QVERIFY(box.seen);
      QVERIFY2(!box.rich || !has_raw_markup(box.text), qPrintable(box.text));
      QVERIFY2(shown(box.rich ? Qt::RichText : Qt::PlainText, box.text).contains(db_), qPrintable(box.text));
    }
  }

  void live_training_shows_paths_names_and_errors_as_text() {
    QVERIFY(QDir().mkpath(dir_.filePath("<s>live</s>")));
    MainWindow w(dir_.filePath("<s>live</s>/runs.sqlite"));
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    RunSetupPanel* setup = w.setup();
    QSignalSpy inspected(setup, &RunSetupPanel::dataset_inspected);
    TrainConfig c = tiny_config(data_, 1, 3);
    c.name = kName.toStdString();
    setup->set_config(c);
    QTRY_VERIFY_WITH_TIMEOUT(inspected.count() >= 1, 60000);
    // The dataset report lists the class folders as they are named.
    auto* report = setup->findChild<QPlainTextEdit*>();
    QVERIFY(report);
    for (const QString& cls : kClasses)
      QVERIFY2(report->toPlainText().contains(cls), qPrintable(report->toPlainText()));
    QStringList leaks = html_leaks(&w);
    QVERIFY2(leaks.isEmpty(), qPrintable(leaks.join('\n')));

    QSignalSpy finished(&w, &MainWindow::run_finished);
    QVERIFY(w.start_training());
    QVERIFY(finished.wait(600000));
    QCOMPARE(finished.at(0).at(1).toInt(), static_cast<int>(RunStatus::Finished));
    // The trainer's note quotes the dataset path (it passed over the empty file).
    auto* notes = w.findChild<QLabel*>("runNotes");
    QVERIFY(notes);
    QVERIFY2(shown(notes->textFormat(), notes->text()).contains(data_), qPrintable(notes->text()));
    leaks = html_leaks(&w);
    QVERIFY2(leaks.isEmpty(), qPrintable(leaks.join('\n')));

    // The same name again: refused, with an error quoting it in the status line and in a message box.
    setup->set_config(c);
    {
      BoxWatch box;
      QVERIFY(!w.start_training());
      QVERIFY(box.seen);
      QVERIFY2(!box.rich || !has_raw_markup(box.text), qPrintable(box.text));
      QVERIFY2(shown(box.rich ? Qt::RichText : Qt::PlainText, box.text).contains(kName), qPrintable(box.text));
    }
    auto* status = w.findChild<QLabel*>("statusLine");
    QVERIFY(status);
    QVERIFY2(shown(status->textFormat(), status->text()).contains(kName), qPrintable(status->text()));
    QVERIFY2(shown(Qt::AutoText, status->toolTip()).contains(kName), qPrintable(status->toolTip()));
    leaks = html_leaks(&w);
    QVERIFY2(leaks.isEmpty(), qPrintable(leaks.join('\n')));
  }

  // A name in Chinese is drawn (scripts/install-deps.sh installs a font for it): nothing to say. A character no font
  // draws (one of Unicode's private use) would show as a box: the status bar says so, by code point, with the mend.
  void a_name_no_font_draws_is_flagged_with_the_mend() {
    const QString db = dir_.filePath("fonts.sqlite");
    const int64_t id = train_into_store(db, tiny_config(data_, 1, 1));
    MainWindow w(db);
    auto* warning = w.findChild<QLabel*>("fontWarning");
    QVERIFY(warning);
    QCOMPARE(w.runs_view()->rename(id, QString::fromUcs4(U"run \U0010FFFD\u200B")), QString());
    w.runs_view()->reload();
    QTRY_VERIFY(!warning->isHidden());
    const QString tip = tooltip_text(warning->toolTip());
    QVERIFY2(
        tip.startsWith("No installed font draws U+10FFFD, shown as empty boxes") && tip.contains("fonts-wqy-microhei"),
        qPrintable(tip));  // the zero-width space draws nothing anyway: not named
    QCOMPARE(w.runs_view()->rename(id, "混合精度 猫狗"), QString());
    w.runs_view()->reload();
    QTRY_VERIFY2(warning->isHidden(), "scripts/install-deps.sh installs fonts-wqy-microhei for Chinese names");
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) { return ampwb::ui::test::run_ui_test<ampwb::ui::test::PlainText>(argc, argv); }

#include "test_ui_plain_text.moc"
