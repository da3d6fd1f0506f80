// The window fits a laptop's screen, offscreen: the screen here is 1920×1080 at 150 % (1280×720 logical, set up
// in main()). The main window's minimum is under 1280×720, with or without the setup panel; the first launch's
// size fits the screen; at 1280×720, on the Training tab after a short run and on the comparison view, no chart
// overlaps another, each is whole and usable, and the controls people reach for are inside the window. Every
// chart's legend names its entries distinctly and draws them whole, its title wraps rather than being cut, and no
// text it draws (axis titles, tick labels) ends in an ellipsis. The Runs tab's tool bar and table and the precision
// sweep's dialog fit as well, and on a smaller scaled screen the charts scroll down, never sideways.
#include <QAbstractButton>
#include <QComboBox>
#include <QDialog>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QGraphicsTextItem>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSignalSpy>
#include <QSplitter>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>
#include <QTextDocumentFragment>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QtTest>
#include <set>

#include "chart_legend.h"
#include "chart_panel.h"
#include "chart_title.h"
#include "compare_view.h"
#include "divergence_view.h"
#include "gui_app.h"
#include "main_window.h"
#include "metric_chart.h"
#include "numerics_heatmap.h"
#include "run_controls.h"
#include "run_setup_panel.h"
#include "runs_view.h"
#include "sweep_dialog.h"
#include "test_ui_util.h"

namespace ampwb::ui::test {
namespace {

const QSize kSmallScreen(1280, 720);  // 1920×1080 at 150 %; a 1366×768 laptop has a little more

// The part of `w` that can be seen: its rectangle in `window`'s coordinates, clipped by every parent.
QRect visible_part(const QWidget* w, const QWidget* window) {
  QRect r(w->mapTo(window, QPoint(0, 0)), w->size());
  for (const QWidget* p = w->parentWidget(); p && p != window; p = p->parentWidget())
    r &= QRect(p->mapTo(window, QPoint(0, 0)), p->size());
  return r & window->rect();
}

// The widgets whose minimum sizes are largest, to say what makes the window too big when a check fails.
QString widest(const QWidget* root) {
  QList<const QWidget*> all;
  for (const QWidget* w : root->findChildren<const QWidget*>())
    if (w->isVisibleTo(root)) all << w;
  std::sort(all.begin(), all.end(), [](const QWidget* a, const QWidget* b) {
    return a->minimumSizeHint().width() > b->minimumSizeHint().width();
  });
  QString text;
  for (qsizetype i = 0; i < std::min<qsizetype>(12, all.size()); ++i)
    text += QStringLiteral("\n  %1 (%2): minimumSizeHint %3×%4, minimumSize %5×%6")
                .arg(all[i]->objectName(), all[i]->metaObject()->className())
                .arg(all[i]->minimumSizeHint().width())
                .arg(all[i]->minimumSizeHint().height())
                .arg(all[i]->minimumWidth())
                .arg(all[i]->minimumHeight());
  return text;
}

QString describe(const QRect& r) {
  return QStringLiteral("%1×%2 at (%3, %4)").arg(r.width()).arg(r.height()).arg(r.x()).arg(r.y());
}

// The chart-like views of a panel: every chart, the per-layer numerics and the precision divergence.
// Whether a chart is one the runs shown may leave out: the FP8 chart shows only where a run recorded FP8 tensors,
// in the loss-scale chart's place where no run scales its loss, else in the data-wait chart's.
bool optional_chart(ChartPanel* panel, MetricChart* c) {
  const QString& key = c->metric_key();
  return !c->isVisibleTo(panel) && (key == "fp8-scaling" || key == "loss-scale" || key == "data-wait");
}

QList<QWidget*> chart_views(ChartPanel* panel) {
  QList<QWidget*> views;
  for (MetricChart* c : panel->charts())
    if (!optional_chart(panel, c)) views << c;
  views << panel->numerics() << panel->divergence();
  return views;
}

// Plain text with its line breaks and runs of spaces as single spaces: a wrapped legend label reads as its name.
QString plain(const QString& html_or_text, bool html) {
  const QString text = html ? QTextDocumentFragment::fromHtml(html_or_text).toPlainText() : html_or_text;
  return text.simplified();
}

}  // namespace

class WindowFits : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString data_, db_;
  int64_t fp32_ = 0, fp16_ = 0, fp8_ = 0;

  // Every chart view of the panel whole, inside the window, of a usable size, and apart from the others.
  static void check_charts_apart(MainWindow& w, ChartPanel* panel, const char* where) {
    const QList<QWidget*> views = chart_views(panel);
    for (qsizetype i = 0; i < views.size(); ++i) {
      QWidget* v = views[i];
      const QRect r(v->mapTo(&w, QPoint(0, 0)), v->size());
      const QString what = QStringLiteral("%1: %2 (%3)").arg(where, v->objectName(), describe(r));
      QVERIFY2(v->isVisible(), qPrintable(what + " is hidden"));

      QVERIFY2(visible_part(v, &w) == r, qPrintable(what + " is cut off; visible: " + describe(visible_part(v, &w))));
      QVERIFY2(r.width() >= 180 && r.height() >= 140, qPrintable(what + " is too small to read"));
      for (qsizetype j = 0; j < i; ++j) {
        const QRect other(views[j]->mapTo(&w, QPoint(0, 0)), views[j]->size());
        QVERIFY2(!r.intersects(other),
                 qPrintable(what + " overlaps " + views[j]->objectName() + " " + describe(other)));
      }
    }
  }

  // No text a chart draws (title, axis titles, tick labels) is cut short with an ellipsis.
  static void check_no_ellipsis(ChartPanel* panel, const char* where) {
    for (MetricChart* c : panel->charts())
      if (!optional_chart(panel, c))
        for (QGraphicsItem* item : c->scene()->items()) {
          auto* text = dynamic_cast<QGraphicsTextItem*>(item);
          if (!text || !text->isVisible() || text->opacity() == 0 || text->defaultTextColor().alpha() == 0) continue;
          const QString shown = text->toPlainText();
          QVERIFY2(!shown.contains("...") && !shown.contains(QChar(0x2026)),
                   qPrintable(QStringLiteral("%1, %2: \"%3\" is cut short").arg(where, c->metric_key(), shown)));
        }
  }

  // Every chart's title whole: its lines, each within the chart's width, read as the chart's title, above the plot.
  static void check_titles(ChartPanel* panel, const char* where) {
    for (MetricChart* c : panel->charts()) {
      if (optional_chart(panel, c)) continue;
      const ChartTitle* title = c->wrapping_title();
      const QString what = QStringLiteral("%1, %2: the title").arg(where, c->metric_key());
      QCOMPARE(title->lines().join(' '), plain(c->chart()->title(), true));
      const QFontMetricsF metrics(title->font());
      for (int i = 0; i < title->lines().size(); ++i) {
        const QRectF line = title->line_rect(i);
        QVERIFY2(metrics.horizontalAdvance(title->lines()[i]) <= line.width() && line.left() >= 0 &&
                     line.right() <= c->chart()->size().width() && !line.intersects(c->chart()->plotArea()),
                 qPrintable(what + " line \"" + title->lines()[i] + "\" does not fit"));
      }
    }
  }

  // A word-wrapped label shows all of its text in the height it has.
  static void check_whole_text(QLabel* label, const char* where) {
    QVERIFY2(label->heightForWidth(label->width()) <= label->height(),
             qPrintable(QStringLiteral("%1: %2 needs %3 px for \"%4\", has %5")
                            .arg(where, label->objectName())
                            .arg(label->heightForWidth(label->width()))
                            .arg(label->text())
                            .arg(label->height())));
  }

  // The controls a user reaches for are inside the window, not past its right edge or below the status bar.
  static void check_reachable(MainWindow& w, const QList<QWidget*>& widgets, const char* where) {
    for (QWidget* c : widgets) {
      const QRect r(c->mapTo(&w, QPoint(0, 0)), c->size());
      QVERIFY2(visible_part(c, &w) == r,
               qPrintable(QStringLiteral("%1: %2 is cut off at %3").arg(where, c->objectName(), describe(r))));
    }
  }

  // Every visible legend: entries named distinctly (the chart's QLegend markers), each drawn whole inside its chart,
  // below the plot and apart from the other entries.
  static void check_legends(ChartPanel* panel, const char* where) {
    int legends = 0;
    for (MetricChart* c : panel->charts()) {
      if (optional_chart(panel, c)) continue;
      const ChartLegend* legend = c->wrapping_legend();
      if (!legend->isVisible()) continue;
      ++legends;
      const QString chart = QStringLiteral("%1, %2").arg(where, c->metric_key());
      std::set<QString> labels;
      for (QLegendMarker* m : c->chart()->legend()->markers()) {
        const QString label = plain(m->label(), true);
        if (!m->isVisible() || label.isEmpty()) continue;  // a run not started yet has no name to show
        QVERIFY2(labels.insert(label).second, qPrintable(chart + ": two legend entries read \"" + label + "\""));
      }
      const QFontMetricsF metrics(legend->font());
      const QRect view = c->viewport()->rect();
      std::set<QString> drawn;
      const std::vector<ChartLegend::Entry>& entries = legend->entries();
      for (size_t i = 0; i < entries.size(); ++i) {
        const ChartLegend::Entry& e = entries[i];
        const QString what = chart + ": the legend entry \"" + e.label + "\" (" + describe(e.text.toRect()) + ")";
        // The whole name in the room it is drawn in: nothing cut, lines broken only between words.
        const QRectF needed =
            metrics.boundingRect(QRectF(e.text.topLeft(), QSizeF(e.text.width(), 1e6)), Qt::TextWordWrap, e.label);
        QVERIFY2(needed.width() <= e.text.width() + 0.5 && needed.height() <= e.text.height() + 0.5,
                 qPrintable(what + " does not hold its name"));
        const QRectF whole = e.text.united(e.sample);
        QVERIFY2(view.contains(c->mapFromScene(c->chart()->mapRectToScene(whole)).boundingRect()),
                 qPrintable(what + " is outside its chart"));
        QVERIFY2(!whole.intersects(c->chart()->plotArea()), qPrintable(what + " covers the plot"));
        for (size_t j = 0; j < i; ++j)
          QVERIFY2(!whole.intersects(entries[j].text.united(entries[j].sample)),
                   qPrintable(what + " overlaps \"" + entries[j].label + "\""));
        drawn.insert(QString(e.label).replace(QChar(0x00a0), ' ').simplified());
      }
      const auto joined = [](const std::set<QString>& names) {
        return QStringList(names.begin(), names.end()).join(" | ");
      };
      QVERIFY2(drawn == labels, qPrintable(chart + ": the legend draws " + joined(drawn) + " for " + joined(labels)));
      QVERIFY2(!drawn.empty(), qPrintable(chart + ": an empty legend"));
    }
    QVERIFY2(legends > 0, where);
  }

  static void show_at(MainWindow& w, const QSize& size) {
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTest::qWait(300);  // the layouts and the charts' own deferred layouts settle
    QVERIFY2(w.width() <= size.width() && w.height() <= size.height(),
             qPrintable(QStringLiteral("asked for %1×%2, the window is %3×%4; the widest parts:%5")
                            .arg(size.width())
                            .arg(size.height())
                            .arg(w.width())
                            .arg(w.height())
                            .arg(widest(&w))));
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    data_ = write_stripes(dir_.filePath("stripes"), 24, 16);
    db_ = dir_.filePath("runs.sqlite");
    TrainConfig c = tiny_config(data_);
    c.name = "fp32";
    fp32_ = train_into_store(db_, c);
    c.precision = precision_preset("amp-fp16");
    c.name = "amp-fp16";
    fp16_ = train_into_store(db_, c);
    c.precision = precision_preset("amp-fp8");
    c.name = "amp-fp8";
    fp8_ = train_into_store(db_, c);
  }

  // The premise: this program's screen is a 1080p one at 150 %.
  void the_screen_is_1080p_at_150_percent() {
    QScreen* screen = QGuiApplication::primaryScreen();
    QCOMPARE(screen->devicePixelRatio(), 1.5);
    QCOMPARE(screen->geometry().size(), kSmallScreen);
  }

  void the_minimum_size_is_under_1280x720() {
    MainWindow w(db_);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    for (bool setup_panel : {true, false}) {
      w.findChild<QWidget*>("setupDock")->setVisible(setup_panel);
      QApplication::processEvents();
      const QSize hint = w.minimumSizeHint().expandedTo(w.minimumSize());
      qInfo("the window's minimum, setup panel %s: %d×%d", setup_panel ? "shown" : "hidden", hint.width(),
            hint.height());
      QVERIFY2(hint.width() <= kSmallScreen.width() && hint.height() <= kSmallScreen.height(),
               qPrintable(QStringLiteral("setup panel %1: minimum %2×%3; the widest parts:%4")
                              .arg(setup_panel ? "shown" : "hidden")
                              .arg(hint.width())
                              .arg(hint.height())
                              .arg(widest(&w))));
    }
    for (int tab = 0; tab < w.tabs()->count(); ++tab) {  // no tab is bigger than the window's minimum
      w.tabs()->setCurrentIndex(tab);
      QApplication::processEvents();
      const QSize hint = w.minimumSizeHint().expandedTo(w.minimumSize());
      QVERIFY2(
          hint.width() <= kSmallScreen.width() && hint.height() <= kSmallScreen.height(),
          qPrintable(w.tabs()->tabText(tab) + QStringLiteral(": minimum %1×%2").arg(hint.width()).arg(hint.height())));
    }
  }

  // A window made small and then large again gives the Run setup panel back its width (it stayed narrow, clipping
  // its fields), also a width the user dragged it to.
  void the_setup_panel_gets_its_width_back() {
    MainWindow w(dir_.filePath("dock.sqlite"));
    w.resize(1250, 680);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* dock = w.findChild<QDockWidget*>("setupDock");
    QTest::qWait(100);
    for (int wanted : {dock->width(), dock->width() - 40}) {
      if (wanted != dock->width()) {  // dragged by the user
        w.resizeDocks({dock}, {wanted}, Qt::Horizontal);
        QTRY_COMPARE(dock->width(), wanted);
      }
      w.resize(800, 560);
      QTRY_VERIFY(dock->width() < wanted);
      w.resize(1250, 680);
      QTRY_COMPARE(dock->width(), wanted);
    }
  }

  // From the keyboard alone: Tab goes from the filter through the runs' action buttons to the table and out of it,
  // not from cell to cell; F2 renames the run selected.
  void the_runs_view_works_from_the_keyboard() {
    MainWindow w(db_);
    w.show();
    w.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&w));
    w.tabs()->setCurrentWidget(w.runs_view());
    RunsView* view = w.runs_view();
    QTRY_VERIFY(view->model()->row_of(fp32_) >= 0);
    view->select({fp32_});
    auto* filter = view->findChild<QLineEdit*>("runsFilter");
    filter->setFocus();
    QTRY_VERIFY(filter->hasFocus());
    QStringList visited;
    bool left_the_table = false;
    for (int i = 0; i < 30 && !left_the_table; ++i) {
      const bool in_table = QApplication::focusWidget() == view->table();
      QTest::keyClick(QApplication::focusWidget(), Qt::Key_Tab);
      if (auto* button = qobject_cast<QToolButton*>(QApplication::focusWidget())) visited << button->text();
      left_the_table = in_table && QApplication::focusWidget() != view->table();
    }
    QVERIFY2(visited.contains("Rename…") && visited.contains("Delete…"), qPrintable(visited.join(", ")));
    QVERIFY(left_the_table);

    view->table()->setFocus();
    QString asked;
    QTimer::singleShot(0, &w, [&] {
      if (auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget())) {
        asked = dialog->windowTitle();
        dialog->reject();
      }
    });
    QTest::keyClick(view->table(), Qt::Key_F2);
    QCOMPARE(asked, QStringLiteral("Rename run %1").arg(fp32_));
  }

  // Ctrl+1 to Ctrl+4 show the tabs in the order they are drawn.
  void the_tab_shortcuts_follow_the_tabs() {
    MainWindow w(dir_.filePath("shortcuts.sqlite"));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    for (int tab = w.tabs()->count() - 1; tab >= 0; --tab) {
      QTest::keyClick(&w, static_cast<Qt::Key>(Qt::Key_1 + tab), Qt::ControlModifier);
      QCOMPARE(w.tabs()->currentIndex(), tab);
    }
    QCOMPARE(w.tabs()->tabText(3), QString("Sweeps"));
  }

  // F1 (Help ▸ Documentation) says where the guides are, as links to files that are there, and how to list every
  // command.
  void help_points_at_the_guides() {
    MainWindow w(dir_.filePath("help.sqlite"));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QString text;
    QTimer::singleShot(0, &w, [&] {
      if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
        text = box->text();
        box->accept();
      }
    });
    QTest::keyClick(&w, Qt::Key_F1);
    QVERIFY2(text.contains("ampwb help"), qPrintable(text));
    const QRegularExpression links(QStringLiteral("href=\"([^\"]+)\""));
    int found = 0;
    for (auto it = links.globalMatch(text); it.hasNext(); ++found) {
      const QString file = QUrl(it.next().captured(1)).toLocalFile();
      QVERIFY2(QFileInfo::exists(file), qPrintable(file));
    }
    QVERIFY2(found >= 2 && text.contains("README.md"), qPrintable(text));
  }

  // The pages' tabs stay where they are whichever page shows, the setup panel beside it or not: a tab clicked is
  // where it was a moment ago. Clicking one shows its page.
  void the_tabs_stay_put_from_page_to_page() {
    MainWindow w(dir_.filePath("tabs.sqlite"));
    show_at(w, kSmallScreen);
    auto* pages = w.findChild<QTabBar*>("pageTabs");
    QVERIFY(pages && pages->isVisible());
    QCOMPARE(pages->count(), w.tabs()->count());
    std::vector<QPoint> at;
    for (int tab = 0; tab < pages->count(); ++tab) at.push_back(pages->mapTo(&w, pages->tabRect(tab).center()));
    for (int tab : {1, 2, 3, 0}) {
      QTest::mouseClick(pages, Qt::LeftButton, {}, pages->mapFrom(&w, at[static_cast<size_t>(tab)]));
      QApplication::processEvents();
      QCOMPARE(w.tabs()->currentIndex(), tab);
      for (int other = 0; other < pages->count(); ++other)
        QCOMPARE(pages->mapTo(&w, pages->tabRect(other).center()), at[static_cast<size_t>(other)]);
    }
  }

  // A first launch (no saved geometry) opens inside the screen's available area, frame included.
  void the_first_launch_fits_the_screen() {
    QSettings().remove("window");
    MainWindow w(dir_.filePath("first.sqlite"));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const QRect available = w.screen()->availableGeometry();
    QVERIFY2(available.contains(w.frameGeometry()), qPrintable("the window's frame " + describe(w.frameGeometry()) +
                                                               " is not inside the screen's " + describe(available)));
  }

  // A store the user named (--db, AMPWB_DB) that is not there is made only when the user says so: a mistyped path
  // would otherwise open an empty store without a word. The default store, on a first launch, is made unasked.
  void a_named_store_not_there_is_asked_about() {
    QVERIFY(may_create_store(db_));                  // there: no question
    QVERIFY(may_create_store("mysql://host/runs"));  // no store can be there: opening it says why, not this
    const QString missing = dir_.filePath("typo/runs.sqlite");
    QString asked, by_default;
    const auto answer = [&asked, &by_default](const QString& button) {
      QTimer::singleShot(0, [&asked, &by_default, button] {
        auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
        if (!box) return;
        asked = box->text();
        by_default = box->defaultButton() ? box->defaultButton()->text() : QString();
        for (QAbstractButton* b : box->buttons())
          if (b->text() == button) b->click();
      });
    };
    answer("Quit");
    QVERIFY(!may_create_store(missing));
    QVERIFY2(asked.startsWith("There is no run store at " + missing) && asked.contains("(and its folder)"),
             qPrintable(asked));
    QVERIFY(!QFileInfo::exists(dir_.filePath("typo")));
    QCOMPARE(by_default, QString("Quit"));  // Enter, pressed out of habit, makes no store of a typo
    answer("Create");
    QVERIFY(may_create_store(missing));
    QVERIFY(parse_gui_options({"--db", missing}).db_chosen);
    const QByteArray env = qgetenv("AMPWB_DB");
    qunsetenv("AMPWB_DB");
    QVERIFY(!parse_gui_options({}).db_chosen);
    qputenv("AMPWB_DB", env);
  }

  // The Compare tab's split between charts and table, once dragged, is the next window's too.
  void the_compare_split_dragged_is_kept() {
    QSettings().remove("compare");
    int dragged_table = 0;
    {
      MainWindow w(db_);
      show_at(w, kSmallScreen);
      w.tabs()->setCurrentWidget(w.compare_view());
      QTest::qWait(100);
      auto* splitter = w.compare_view()->findChild<QSplitter*>("compareSplitter");
      QVERIFY(splitter);
      const int table_before = splitter->sizes()[1];
      QSplitterHandle* handle = splitter->handle(1);
      const QPoint middle = handle->rect().center();
      QTest::mousePress(handle, Qt::LeftButton, {}, middle);
      QTest::mouseMove(handle, middle - QPoint(0, 120));
      QTest::mouseRelease(handle, Qt::LeftButton, {}, middle - QPoint(0, 120));
      dragged_table = splitter->sizes()[1];
      QVERIFY2(dragged_table > table_before + 60, qPrintable(QStringLiteral("the table was %1 px high and is %2 after "
                                                                            "the drag")
                                                                 .arg(table_before)
                                                                 .arg(dragged_table)));
    }
    MainWindow w(db_);
    show_at(w, kSmallScreen);
    w.tabs()->setCurrentWidget(w.compare_view());
    QTest::qWait(100);
    QCOMPARE(w.compare_view()->findChild<QSplitter*>("compareSplitter")->sizes()[1], dragged_table);
    QSettings().remove("compare");  // the later tests see the split a first launch has
  }

  // The Runs tab at 1280×720: its filter, every button, the table and the status bar's store path in the window.
  void the_runs_view_fits_1280x720() {
    MainWindow w(db_);
    show_at(w, kSmallScreen);
    w.tabs()->setCurrentWidget(w.runs_view());
    QTest::qWait(100);
    QList<QWidget*> reachable{w.findChild<QWidget*>("runsFilter"), w.findChild<QWidget*>("runsTable"),
                              w.findChild<QWidget*>("storePath")};
    const QList<QToolBar*> bars = w.runs_view()->findChildren<QToolBar*>();
    QVERIFY(!bars.isEmpty());
    for (QToolBar* bar : bars)
      for (QAction* action : bar->actions()) {  // each one a button of its own, not behind the bar's "»"
        if (action->isSeparator()) continue;
        QWidget* button = bar->widgetForAction(action);
        QVERIFY2(button && button->isVisible(), qPrintable("Runs tab: " + action->text() + " is not shown"));
        reachable << button;
      }
    check_reachable(w, reachable, "Runs tab");
    QVERIFY(w.findChild<QWidget*>("runsTable")->height() >= 200);
    // A message, however long, has the whole bar while it lasts: the store's path steps aside, then comes back.
    QWidget* store = w.findChild<QWidget*>("storePath");
    w.statusBar()->showMessage(QString(200, 'w'), 5000);
    QVERIFY(!store->isVisible());
    // Wider than the bar, it is cut at its edge: the bar's tooltip says all of it.
    QCOMPARE(tooltip_text(w.statusBar()->toolTip()), QString(200, 'w'));
    w.statusBar()->clearMessage();
    QVERIFY(store->isVisible());
    QVERIFY(w.statusBar()->toolTip().isEmpty());
  }

  // The precision's note under its choice is whole for every mode, the longest (AMP FP8's) and then a short one again
  // (no gap where the longer one was), at the panel's width on a small screen.
  void the_precision_note_is_whole_for_every_mode() {
    MainWindow w(db_);
    show_at(w, kSmallScreen);
    auto* precision = w.findChild<QComboBox*>("precision");
    auto* note = w.findChild<QLabel*>("precisionHelp");
    for (const char* mode : {"amp-fp8", "fp32", "amp-fp16"}) {
      precision->setCurrentIndex(precision->findData(QString(mode)));
      QTest::qWait(50);
      check_whole_text(note, mode);
      const int text =
          note->fontMetrics()
              .boundingRect(QRect(0, 0, note->contentsRect().width(), 10000), Qt::TextWordWrap, note->text())
              .height();
      QVERIFY2(note->height() <= text + 4,
               qPrintable(
                   QStringLiteral("%1: the note has %2 px for %3 px of text").arg(mode).arg(note->height()).arg(text)));
    }
  }

  // The precision sweep's dialog (every variant with its note) fits the screen too.
  void the_sweep_dialog_fits_1280x720() {
    MainWindow w(db_);
    const TrainConfig base = w.setup()->config();
    SweepDialog dialog(base, make_backend(base.device, {base.threads})->capabilities(), &w);
    dialog.apply_seed_article_preset();
    dialog.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dialog));
    const QSize size = dialog.frameGeometry().size().expandedTo(dialog.minimumSizeHint());
    QVERIFY2(size.width() <= kSmallScreen.width() && size.height() <= kSmallScreen.height(),
             qPrintable(QStringLiteral("the sweep dialog is %1×%2").arg(size.width()).arg(size.height())));
    dialog.reject();
  }

  // The Training tab at 1280×720 after a short run: every chart whole and apart, and their legends whole.
  void the_training_tab_fits_1280x720() {
    MainWindow w(dir_.filePath("live.sqlite"));
    show_at(w, kSmallScreen);
    TrainConfig c = tiny_config(data_, 2, 3);
    c.precision = precision_preset("amp-fp16");
    w.setup()->set_config(c);
    QTRY_VERIFY_WITH_TIMEOUT(!w.setup()->inspecting(), 60000);
    QSignalSpy finished(&w, &MainWindow::run_finished);
    QVERIFY(w.start_training());
    QVERIFY(finished.wait(600000));
    QTest::qWait(300);
    QCOMPARE(w.size(), kSmallScreen);  // a run's texts and charts did not grow it
    check_charts_apart(w, w.live_charts(), "Training tab");
    check_reachable(w,
                    {w.live_charts()->findChild<QWidget*>("exportCharts"), w.findChild<QWidget*>("eta"),
                     w.findChild<QWidget*>("progress"), w.findChild<QWidget*>("trainButton")},
                    "Training tab");
    check_legends(w.live_charts(), "Training tab");
    check_no_ellipsis(w.live_charts(), "Training tab");
    check_titles(w.live_charts(), "Training tab");
    check_whole_text(w.live_charts()->findChild<QLabel*>("skippedNote"), "Training tab");
    // A status and notes far longer than their two lines: all of their text is there to scroll to, and the charts
    // keep their places.
    const QString sentence = "Every word of this long status is there to be read, none cut off at the edge. ";
    w.controls()->set_status(sentence.repeated(8));
    w.controls()->set_notes(std::vector<std::string>(6, sentence.trimmed().chopped(1).toStdString()));
    QTest::qWait(300);
    for (const char* name : {"statusLine", "runNotes"}) check_whole_text(w.findChild<QLabel*>(name), "Training tab");
    QCOMPARE(w.size(), kSmallScreen);
    check_charts_apart(w, w.live_charts(), "Training tab, long status and notes");
    w.findChild<QWidget*>("setupDock")->hide();  // more room for the charts: still whole
    QTest::qWait(300);
    check_charts_apart(w, w.live_charts(), "Training tab, setup panel hidden");
    check_legends(w.live_charts(), "Training tab, setup panel hidden");
    check_no_ellipsis(w.live_charts(), "Training tab, setup panel hidden");
  }

  // 1366×768 at 125 % (1093×614 logical): the charts two abreast and the per-layer views below them, the page
  // scrolling down, not sideways; back at 1280×720, three abreast with the layers beside them again.
  void a_scaled_small_screen_scrolls_the_charts_down_not_sideways() {
    MainWindow w(dir_.filePath("scaled.sqlite"));
    show_at(w, QSize(1093, 614));
    ChartPanel* panel = w.live_charts();
    auto* scroll = panel->findChild<QScrollArea*>("chartScroll");
    const QWidget *loss = panel->chart("loss"), *accuracy = panel->chart("accuracy"), *layers = panel->numerics();
    auto at = [&](const QWidget* v) { return QRect(v->mapTo(scroll->widget(), QPoint(0, 0)), v->size()); };
    QVERIFY2(!scroll->horizontalScrollBar()->isVisible(), qPrintable(widest(scroll->widget())));
    QVERIFY(scroll->verticalScrollBar()->isVisible());
    QCOMPARE(at(accuracy).top(), at(loss).top());  // two abreast
    QVERIFY2(at(layers).top() > at(loss).bottom() && at(layers).left() <= at(loss).left() + 8 &&
                 at(layers).right() >= at(accuracy).right() - 8,
             qPrintable(describe(at(layers))));  // below the charts, as wide as both columns
    for (QWidget* v : chart_views(panel))
      QVERIFY2(v->width() >= v->minimumSizeHint().width(), qPrintable(v->objectName()));
    w.resize(kSmallScreen);
    QTRY_VERIFY(at(layers).left() > at(panel->chart("loss-scale")).right());
    QCOMPARE(at(layers).top(), at(loss).top());
    QVERIFY(!scroll->horizontalScrollBar()->isVisible());
  }

  // The comparison of two runs, and one stored run opened alone (its charts keep their legends).
  void the_comparison_fits_1280x720() {
    MainWindow w(db_);
    show_at(w, kSmallScreen);
    w.open_runs({fp32_, fp16_});
    QCOMPARE(w.tabs()->currentWidget(), w.compare_view());
    QTest::qWait(300);
    QCOMPARE(w.size(), kSmallScreen);
    ChartPanel* charts = w.compare_view()->charts();
    check_charts_apart(w, charts, "Comparison");
    check_no_ellipsis(charts, "Comparison");
    check_titles(charts, "Comparison");
    check_reachable(w, {charts->findChild<QWidget*>("exportCharts"), w.findChild<QWidget*>("baseline")}, "Comparison");
    for (const char* name : {"compareSummary", "compareTime"})
      check_whole_text(w.findChild<QLabel*>(name), "Comparison");
    // The side-by-side table shows a handful of its rows, all its columns without scrolling sideways.
    auto* table = w.compare_view()->findChild<QTableView*>("compareTable");
    const int rows_shown = table->viewport()->height() / table->verticalHeader()->defaultSectionSize();
    QVERIFY2(rows_shown >= 4, qPrintable(QStringLiteral("%1 rows of the table shown").arg(rows_shown)));
    QVERIFY(!table->horizontalScrollBar()->isVisible());
    w.open_runs({fp16_});
    QTest::qWait(300);
    QCOMPARE(w.size(), kSmallScreen);
    check_charts_apart(w, charts, "One stored run");
    check_legends(charts, "One stored run");
    check_no_ellipsis(charts, "One stored run");
    check_titles(charts, "One stored run");
    // An amp-fp8 run: its FP8 chart, with the tensor choice under it, in the loss-scale chart's place.
    w.open_runs({fp8_});
    QTest::qWait(300);
    QVERIFY(charts->chart("fp8-scaling")->isVisible() && !charts->chart("loss-scale")->isVisible());
    check_charts_apart(w, charts, "An amp-fp8 run");
    check_reachable(w, {charts->findChild<QWidget*>("fp8Tensor")}, "An amp-fp8 run");
    check_titles(charts, "An amp-fp8 run");
    w.open_runs({fp16_, fp8_});
    QTest::qWait(300);
    QCOMPARE(w.size(), kSmallScreen);
    // Beside a run that scales its loss, both, the FP8 chart in the data-wait chart's place.
    QVERIFY(charts->chart("fp8-scaling")->isVisible() && charts->chart("loss-scale")->isVisible());
    QVERIFY(!charts->chart("data-wait")->isVisible());
    check_charts_apart(w, charts, "amp-fp16 beside amp-fp8");
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) {
  // A 1920×1080 screen at 150 %, as many laptops have: the offscreen platform's screen, from its configuration file.
  static QTemporaryDir config;
  const QString file = config.filePath("screen.json");
  QFile json(file);
  if (!json.open(QIODevice::WriteOnly)) return 1;
  json.write(R"({"screens": [{"name": "laptop", "x": 0, "y": 0, "width": 1920, "height": 1080,
                 "logicalDpi": 144, "logicalBaseDpi": 96, "dpr": 1}]})");
  json.close();
  ::setenv("QT_QPA_PLATFORM", qPrintable("offscreen:configfile=" + file), 1);
  return ampwb::ui::test::run_ui_test<ampwb::ui::test::WindowFits>(argc, argv);
}

#include "test_ui_layout.moc"
