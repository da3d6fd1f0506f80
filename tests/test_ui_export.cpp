// Export from the desktop workbench, offscreen: every chart of a run and of a comparison to PNG (decoded at the
// size asked), SVG (parsed) and PDF (its header); the CSV reports through the run store's exporter (rows counted);
// `ampwb export chart` run as a separate process with no display at all, against the epoch or the wall clock; and
// the file dialogs the exports choose their folders with, which must never open the store's files.
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QAbstractButton>
#include <QCheckBox>
#include <QCompleter>
#include <QFile>
#include <QFileDialog>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QSvgRenderer>
#include <QXmlStreamReader>
#include <QtTest>
#include <csignal>
#include <cstring>
#include <functional>

#include "analysis/csv_export.h"
#include "chart_export.h"
#include "chart_factory.h"
#include "chart_panel.h"
#include "compare_view.h"
#include "file_dialogs.h"
#include "main_window.h"
#include "run_series.h"
#include "test_ui_util.h"

namespace ampwb::ui::test {
namespace {

QByteArray read(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void check_png(const QString& path, QSize size) {
  QImage image(path);
  QVERIFY2(!image.isNull(), qPrintable(path));
  QCOMPARE(image.size(), size);
  // Not a blank canvas: text, axes and curves cover more than 1 % of it.
  const QImage argb = image.convertToFormat(QImage::Format_ARGB32);
  const QRgb background = argb.pixel(1, 1);
  qint64 drawn = 0;
  for (int y = 0; y < argb.height(); ++y) {
    const QRgb* line = reinterpret_cast<const QRgb*>(argb.constScanLine(y));
    for (int x = 0; x < argb.width(); ++x) drawn += line[x] != background;
  }
  QVERIFY2(drawn > argb.width() * argb.height() / 100, qPrintable(path + " looks blank"));
}

void check_svg(const QString& path) {
  QXmlStreamReader xml(read(path));
  bool root = false;
  int texts = 0, unseen = 0;
  while (!xml.atEnd()) {
    xml.readNext();
    if (xml.isStartElement() && xml.name() == QLatin1String("svg")) root = true;
    if (xml.isStartElement() && xml.name() == QLatin1String("text")) {
      ++texts;
      unseen += xml.attributes().value("fill-opacity") == QLatin1String("0");
    }
  }
  QVERIFY2(!xml.hasError(), qPrintable(path + ": " + xml.errorString()));
  QVERIFY(root);
  QVERIFY(texts > 3);  // title, axis labels: vector text, not a bitmap
  QCOMPARE(unseen, 0);  // words no one sees would still be found by a search and read aloud
  QVERIFY(QSvgRenderer(path).isValid());
}

void check_pdf(const QString& path) {
  const QByteArray pdf = read(path);
  QVERIFY2(pdf.startsWith("%PDF-"), qPrintable(path));
  QVERIFY(pdf.size() > 1000);
  QVERIFY(pdf.trimmed().endsWith("%%EOF"));
}

// The names of the files in `folder` opened while `action` ran (inotify's IN_OPEN: any process, this one too).
QStringList files_opened_in(const QString& folder, const std::function<void()>& action) {
  const int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (watch < 0 || ::inotify_add_watch(watch, QFile::encodeName(folder).constData(), IN_OPEN) < 0)
    qFatal("inotify: %s", std::strerror(errno));
  action();
  QStringList opened;
  alignas(inotify_event) char buffer[64 * 1024];
  for (ssize_t n; (n = ::read(watch, buffer, sizeof buffer)) > 0;)
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      if (event->len > 0) opened << QString::fromUtf8(event->name);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  ::close(watch);
  return opened;
}

// Types the store's folder into a file dialog's name field, as a user does, and waits until its completer has
// listed the folder and the dialog's model has looked at every file in it.
void list_in_dialog(QFileDialog* dialog, const QString& folder) {
  dialog->show();
  auto* name = dialog->findChild<QLineEdit*>("fileNameEdit");
  QVERIFY(name);
  QTest::keyClicks(name, folder + "/");
  QTRY_VERIFY_WITH_TIMEOUT(name->completer() && name->completer()->completionCount() > 0, 20000);
  dialog->setDirectory(folder);  // and the listing itself, every file's type and icon
  QTest::qWait(1500);
  dialog->close();
}

ino_t inode_of(const QString& path) {
  struct stat s {};
  return ::stat(QFile::encodeName(path).constData(), &s) == 0 ? s.st_ino : 0;
}

int csv_rows(const QString& path) {
  const QByteArray text = read(path);
  return text.count("\r\n");  // RFC 4180 line ends; no field here holds a line break
}

}  // namespace

class ExportCharts : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString db_;
  int64_t a_ = 0, b_ = 0, fp8_ = 0;

 private Q_SLOTS:
  void initTestCase() {
    const QString data = write_stripes(dir_.filePath("stripes"), 24, 16);
    db_ = dir_.filePath("runs.sqlite");
    TrainConfig c = tiny_config(data, 2, 3);
    c.precision = precision_preset("amp-fp16");
    a_ = train_into_store(db_, c);
    c.precision = precision_preset("fp32");
    b_ = train_into_store(db_, c);
    c.precision = precision_preset("amp-fp8");
    fp8_ = train_into_store(db_, c);
  }

  void every_chart_of_a_run_to_png_svg_pdf() {
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    RunSeries run = load_run_series(store, a_);
    const RunList runs{&run};
    for (const QString& metric : chart_metrics()) {
      const QString base = dir_.filePath("one/" + metric);
      export_chart(metric, runs, {}, base + ".png", QSize(1000, 700));
      check_png(base + ".png", QSize(1000, 700));
      export_chart(metric, runs, {}, base + ".svg");
      check_svg(base + ".svg");
      // Shared alone, the file says whose chart it is.
      QVERIFY2(read(base + ".svg").contains(QByteArray::fromStdString("run " + run.label)), qPrintable(metric));
      export_chart(metric, runs, {}, base + ".pdf");
      check_pdf(base + ".pdf");
    }
    QVERIFY_THROWS_EXCEPTION(std::exception, export_chart("loss", runs, {}, dir_.filePath("x.bmp")));
  }

  // A disk that fills while a chart is written: the export fails saying so, and the chart written there before
  // is still whole. The process's file size limit (RLIMIT_FSIZE) stands in for the full disk.
  void a_full_disk_keeps_the_chart_there_before() {
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    RunSeries run = load_run_series(store, a_);
    const RunList runs{&run};
    qsizetype written = 0;
    for (const char* format : {"png", "svg", "pdf"}) {
      const QString path = dir_.filePath(QStringLiteral("full/loss.%1").arg(format));
      export_chart("loss", runs, {}, path);
      const QByteArray before = read(path);
      QVERIFY(before.size() > 4096);
      rlimit limit{}, full{};
      QCOMPARE(::getrlimit(RLIMIT_FSIZE, &limit), 0);
      full = limit;
      full.rlim_cur = 1024;
      const auto sigxfsz = std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
      QCOMPARE(::setrlimit(RLIMIT_FSIZE, &full), 0);
      QString error;
      try {
        export_chart("loss", runs, {}, path);
      } catch (const std::exception& e) {
        error = QString::fromUtf8(e.what());
      }
      ::setrlimit(RLIMIT_FSIZE, &limit);
      std::signal(SIGXFSZ, sigxfsz);
      QVERIFY2(error.startsWith("cannot write '" + path + "'") && error.contains("the chart there before is kept"),
               qPrintable(QStringLiteral("%1: '%2'").arg(format, error)));
      QCOMPARE(read(path), before);
      ++written;
      QCOMPARE(QDir(dir_.filePath("full")).entryList(QDir::Files | QDir::Hidden).size(), written);  // no leftovers
    }
  }

  void all_charts_of_a_comparison() {
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    RunSeries a = load_run_series(store, a_), b = load_run_series(store, b_);
    const QStringList files = export_all_charts({&a, &b}, {}, dir_.filePath("compare"), "compare", "svg");
    QCOMPARE(files.size(), chart_metrics().size() - 1);  // no fp8-scaling chart: neither run is in amp-fp8
    for (const QString& f : files) {
      check_svg(f);
      const QByteArray svg = read(f);  // the runs named under each chart, by colour, as the GUI's panel names them
      QVERIFY2(svg.contains(QByteArray::fromStdString(a.label)) && svg.contains(QByteArray::fromStdString(b.label)),
               qPrintable(f));
    }
  }

  // Grouped by precision, the loss and accuracy charts draw each group's mean ± std and name it under the chart; the
  // epoch-time and histogram charts draw no groups, and their exports name none.
  void only_charts_that_draw_groups_name_them() {
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    RunSeries a = load_run_series(store, a_), b = load_run_series(store, b_);
    ChartOptions grouped;
    grouped.group_by = "precision.mode";
    for (const QString& metric : {QString("accuracy"), QString("epoch-time"), QString("histogram")}) {
      const QString path = dir_.filePath("grouped-" + metric + ".svg");
      export_chart(metric, {&a, &b}, grouped, path);
      check_svg(path);
      const QByteArray svg = read(path);
      QVERIFY2(svg.contains(QByteArray::fromStdString(a.label)), qPrintable(metric));  // the runs, always
      QCOMPARE(svg.count("mean ± std"), metric == "accuracy" ? 2 : 0);
    }
  }

  // The export format chosen last is the one the next export offers, for one chart and for all of them.
  void the_export_format_is_remembered() {
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    RunSeries a = load_run_series(store, a_);
    ChartPanel panel;
    panel.set_runs({&a});
    QString offered_filter, offered_name;
    const auto answer = [&](const QString& file) {  // the save dialog, once it is up: what it offers, then `file`
      QTimer::singleShot(0, &panel, [&, file] {
        auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
        if (!dialog) return;
        offered_filter = dialog->selectedNameFilter();
        offered_name = dialog->findChild<QLineEdit*>()->text();
        if (file.isEmpty()) return dialog->reject();
        dialog->findChild<QLineEdit*>()->setText(file);
        QTest::keyClick(dialog->findChild<QLineEdit*>(), Qt::Key_Return);
      });
    };
    answer(dir_.filePath("remembered-loss.svg"));
    panel.export_one(panel.chart("loss"));
    QVERIFY2(offered_filter.contains("*.png"), qPrintable(offered_filter));  // the first time: PNG
    QVERIFY2(offered_name.endsWith("-loss.png"), qPrintable(offered_name));
    check_svg(dir_.filePath("remembered-loss.svg"));
    answer({});
    panel.export_one(panel.chart("accuracy"));
    QVERIFY2(offered_filter.contains("*.svg"), qPrintable(offered_filter));
    QVERIFY2(offered_name.endsWith("-accuracy.svg"), qPrintable(offered_name));
    QCOMPARE(QSettings().value("export/format").toString(), QString("svg"));
  }

  // Writing over files asks first, naming them; No leaves them, Yes lets the export replace them. Where none of the
  // files exists, nothing is asked.
  void replacing_files_asks_first() {
    const QString folder = dir_.filePath("replace");
    QVERIFY(QDir().mkpath(folder));
    const QStringList files{folder + "/runs-summary.csv", folder + "/runs-long.csv"};
    QVERIFY(confirm_replacing(nullptr, "Export CSV", files));  // a question would wait here for an answer
    QFile old(files[0]);
    QVERIFY(old.open(QIODevice::WriteOnly));
    old.close();
    QString asked;
    const auto answer = [&](QMessageBox::StandardButton button) {
      QTimer::singleShot(0, [&asked, button] {
        auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
        if (!box) return;
        asked = box->text();
        box->button(button)->click();
      });
    };
    answer(QMessageBox::No);
    QVERIFY(!confirm_replacing(nullptr, "Export CSV", files));
    QVERIFY2(asked.startsWith("runs-summary.csv already exists in " + folder), qPrintable(asked));
    QVERIFY(!asked.contains("runs-long.csv"));
    answer(QMessageBox::Yes);
    QVERIFY(confirm_replacing(nullptr, "Export CSV", files));
    // What the dialogs are asked about is what the exports then write.
    MainWindow w(db_);
    const std::vector<std::string> listed = csv_export_files({a_, b_}, folder.toStdString());
    const QStringList written = w.export_csv({a_, b_}, folder);
    QCOMPARE(written.size(), static_cast<qsizetype>(listed.size()));
    for (const std::string& f : listed) QVERIFY2(written.contains(QString::fromStdString(f)), f.c_str());
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    RunSeries a = load_run_series(store, a_);
    QCOMPARE(export_all_charts({&a}, {}, folder, "run", "svg"), chart_export_files({&a}, folder, "run", "svg"));
  }

  // Exporting the charts of a Training tab that has shown no run yet writes nothing, and says so; its button waits,
  // as do the Compare tab's with nothing open, and its "Differences only".
  void nothing_to_export_says_so() {
    RunSeries empty;
    ChartPanel panel;
    panel.set_runs({&empty});
    QSignalSpy said(&panel, &ChartPanel::status_message);
    panel.export_all();  // a folder dialog would wait here
    QCOMPARE(said.count(), 1);
    QVERIFY2(said[0][0].toString().startsWith("Nothing to export yet"), qPrintable(said[0][0].toString()));
    QVERIFY(!panel.findChild<QPushButton*>("exportCharts")->isEnabled());

    MainWindow w(db_);
    QVERIFY(!w.compare_view()->charts()->findChild<QPushButton*>("exportCharts")->isEnabled());
    QVERIFY(!w.compare_view()->findChild<QCheckBox*>("differencesOnly")->isEnabled());
    QVERIFY(w.open_runs({a_, b_}));
    QVERIFY(w.compare_view()->charts()->findChild<QPushButton*>("exportCharts")->isEnabled());
    QVERIFY(w.compare_view()->findChild<QCheckBox*>("differencesOnly")->isEnabled());
  }

  void csv_reports() {
    MainWindow w(db_);
    // A run gone from the store (deleted elsewhere) is said before any file is written: no folder half full.
    const QString none = dir_.filePath("csv none");
    QVERIFY_THROWS_EXCEPTION(StoreError, w.export_csv({a_, b_ + 1000}, none));
    QVERIFY(!QFileInfo::exists(none));
    const QStringList files = w.export_csv({a_, b_}, dir_.filePath("csv"));
    QVERIFY(files.size() >= 2 * 3 + 2);
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    const QString folder = dir_.filePath("csv");
    QCOMPARE(csv_rows(folder + "/runs-summary.csv"), 1 + 2);
    QCOMPARE(csv_rows(folder + QStringLiteral("/run-%1-epochs.csv").arg(a_)), 1 + int(store.epochs(a_).size()));
    QCOMPARE(csv_rows(folder + QStringLiteral("/run-%1-steps.csv").arg(a_)), 1 + int(store.steps(a_).size()));
  }

  // Qt's own file dialog reads the first bytes of files whose names do not say their type (runs.sqlite-wal): in
  // the GUI's process, an open and close that dropped SQLite's locks on the store (engine/store/sqlite_locks.h).
  // The workbench's dialogs list the store's folder without opening a file of it; another ampwb then opens and
  // closes the store, this process records more, and the store's log is the one it had, every run whole.
  void file_dialog_completer_leaves_the_store_alone() {
    MainWindow w(db_);  // holds the store, as the GUI does
    const QString folder = QFileInfo(db_).absolutePath(), store = QFileInfo(db_).fileName();
    QVERIFY(QFile::exists(db_ + "-wal"));
    const ino_t wal = inode_of(db_ + "-wal");
    const auto store_files = [&](const QStringList& opened) { return opened.filter(QRegularExpression("^" + store)); };
    // Qt's dialog as it comes: the check sees its opens.
    QStringList opened = files_opened_in(folder, [&] {
      QFileDialog plain(&w, "Qt's own", QDir::homePath());
      plain.setOption(QFileDialog::DontUseNativeDialog);
      list_in_dialog(&plain, folder);
    });
    QVERIFY2(!store_files(opened).isEmpty(), qPrintable("Qt's dialog opened only: " + opened.join(", ")));
    opened = files_opened_in(folder, [&] {
      QFileDialog* ours = new_file_dialog(&w, "ours", QDir::homePath());
      list_in_dialog(ours, folder);
      delete ours;
    });
    QVERIFY2(store_files(opened).isEmpty(), qPrintable("opened: " + store_files(opened).join(", ")));

    QProcess runs;
    runs.start(AMPWB_BINARY, {"runs", "--json", "--db", db_});
    QVERIFY(runs.waitForFinished(60000));
    QCOMPARE(runs.exitCode(), 0);
    const int64_t more = train_into_store(db_, tiny_config(dir_.filePath("stripes"), 1, 2));
    QCOMPARE(inode_of(db_ + "-wal"), wal);
    runs.start(AMPWB_BINARY, {"runs", "--json", "--db", db_});
    QVERIFY(runs.waitForFinished(60000));
    const QJsonArray listed = QJsonDocument::fromJson(runs.readAllStandardOutput()).array();
    QVERIFY(!listed.isEmpty());
    QCOMPARE(listed.last().toObject().value("id").toInteger(), more);
    RunStore check(db_.toStdString(), RunStore::Mode::ReadOnly);
    QCOMPARE(QString::fromStdString(check.integrity_check()), QString("ok"));
  }

  void headless_command_without_a_display() {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* var : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(var);
    auto run = [&](const QStringList& args) {
      QProcess p;
      p.setProcessEnvironment(env);
      p.start(AMPWB_BINARY, args);
      if (!p.waitForFinished(120000)) qFatal("ampwb export chart did not finish");
      return std::make_pair(p.exitCode(), QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError()));
    };
    const QString id = QString::number(a_), other = QString::number(b_);
    const QString png = dir_.filePath("cli/loss.png"), svg = dir_.filePath("cli/accuracy.svg"),
                  pdf = dir_.filePath("cli/epoch-time.pdf"), scale = dir_.filePath("cli/loss-scale.png");
    auto [rc, out] = run({"export", "chart", id, "--metric", "loss", "--out", png, "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    check_png(png, QSize(1200, 800));
    std::tie(rc, out) = run({"export", "chart", id, other, "--metric", "accuracy", "--out", svg, "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    check_svg(svg);
    QVERIFY(read(svg).contains(">epoch<"));  // per-epoch curves: against the epoch unless asked otherwise
    // Against wall-clock time (time to accuracy): the axis says so.
    const QString wall = dir_.filePath("cli-wall.svg");
    std::tie(rc, out) =
        run({"export", "chart", id, "--metric", "accuracy", "--x-axis", "wall", "--out", wall, "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    check_svg(wall);
    QVERIFY(read(wall).contains("wall clock (s since the run started)"));
    QVERIFY(!read(wall).contains(">epoch<"));
    // Group mean lines are drawn 3 px wide (metric_chart.cpp): none by default, as the runs differ by more than
    // the seed; one per precision when grouped by it. An unknown key is refused by name.
    const QByteArray mean_line = "stroke-width=\"3\"";
    QCOMPARE(read(svg).count(mean_line), 0);
    const QString grouped = dir_.filePath("cli-grouped.svg"), refused = dir_.filePath("cli-refused.svg");
    std::tie(rc, out) = run({"export", "chart", id, other, "--metric", "accuracy", "--group-by", "precision.mode",
                             "--out", grouped, "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    check_svg(grouped);
    QCOMPARE(read(grouped).count(mean_line), 2);
    std::tie(rc, out) = run(
        {"export", "chart", id, other, "--metric", "accuracy", "--group-by", "colour", "--out", refused, "--db", db_});
    QCOMPARE(rc, 1);
    QVERIFY2(out.contains("no setting 'colour' to group by"), qPrintable(out));
    std::tie(rc, out) = run({"export", "chart", id, "--metric", "epoch-time", "--out", pdf, "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    check_pdf(pdf);
    std::tie(rc, out) = run({"export", "chart", id, other, "--metric", "loss-scale", "--out", scale, "--db", db_,
                             "--width", "640", "--height", "480"});
    QVERIFY2(rc == 0, qPrintable(out));
    check_png(scale, QSize(640, 480));
    // amp-fp8's scaling, of the tensor asked for; refused, naming what there is, for others.
    const QString fp8 = QString::number(fp8_), scaling = dir_.filePath("cli/fp8-scaling.svg");
    std::tie(rc, out) = run({"export", "chart", fp8, "--metric", "fp8-scaling", "--fp8-tensor",
                             "layer1.0.conv2:output_grad", "--out", scaling, "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    check_svg(scaling);
    QVERIFY2(read(scaling).contains("FP8 scale and amax (log2): layer1.0.conv2 output gradient"),
             qPrintable(read(scaling).left(4000)));
    std::tie(rc, out) = run({"export", "chart", fp8, "--metric", "fp8-scaling", "--fp8-tensor", "conv1:input", "--out",
                             refused, "--db", db_});
    QCOMPARE(rc, 1);
    // conv1 stays in BF16: the FP8 layers are named, a deep network's by its first few and last.
    QVERIFY2(out.contains("the runs have no FP8 layer 'conv1': their "), qPrintable(out));
    QVERIFY2(out.contains(" FP8 layers are layer1.0.conv1, layer1.0.conv2, "), qPrintable(out));
    QVERIFY2(out.contains("each with input, weight and output_grad"), qPrintable(out));
    std::tie(rc, out) = run({"export", "chart", fp8, "--metric", "fp8-scaling", "--fp8-tensor", "layer1.0.conv2:grad",
                             "--out", refused, "--db", db_});
    QCOMPARE(rc, 1);
    QVERIFY2(out.contains("'layer1.0.conv2:grad' names no FP8 tensor: give LAYER:input, LAYER:weight or "
                          "LAYER:output_grad"),
             qPrintable(out));
    // As `ampwb show` heads the role.
    std::tie(rc, out) = run({"export", "chart", fp8, "--metric", "fp8-scaling", "--fp8-tensor",
                             "layer1.0.conv2:output gradient", "--out", scaling, "--overwrite", "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    std::tie(rc, out) = run({"export", "chart", id, "--metric", "fp8-scaling", "--out", refused, "--db", db_});
    QVERIFY(!QFile::exists(refused));  // nothing written by a refused command
    QCOMPARE(rc, 1);
    QVERIFY2(out.contains("no FP8 tensor was recorded in the runs asked for"), qPrintable(out));
    std::tie(rc, out) = run({"export", "chart", id, "--metric", "loss", "--out", dir_.filePath("x.gif"), "--db", db_});
    QCOMPARE(rc, 1);
    QVERIFY(out.contains(".png, .svg or .pdf"));
    // A chart there already is kept unless --overwrite asks to replace it.
    const QByteArray before = read(grouped);
    std::tie(rc, out) = run({"export", "chart", id, "--metric", "loss", "--out", grouped, "--db", db_});
    QCOMPARE(rc, 1);
    QVERIFY2(out.contains("exists already: name another --out, or add --overwrite to replace it"), qPrintable(out));
    QCOMPARE(read(grouped), before);
    std::tie(rc, out) = run({"export", "chart", id, "--metric", "loss", "--out", grouped, "--overwrite", "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    QVERIFY(read(grouped) != before);
    // Bad usage, refused by the parser (exit 2) with the valid choices or range.
    for (const QStringList& bad :
         {QStringList{"--metric", "nope"}, QStringList{"--histogram", "bogus"}, QStringList{"--smoothing", "1"}}) {
      std::tie(rc, out) =
          run(QStringList{"export", "chart", id, "--metric", "histogram", "--out", png, "--db", db_} + bad);
      QCOMPARE(rc, 2);
      QVERIFY2(out.contains(bad[0] + ": ") && (out.contains(" not in {") || out.contains("must be in [0, 1)")),
               qPrintable(out));
    }
    // A run name no installed font draws (Unicode's private use) is drawn as boxes: the command says so, by code
    // point, with the mend; the names drawn above had nothing to say.
    std::tie(rc, out) =
        run({"export", "chart", id, "--metric", "loss", "--out", dir_.filePath("drawn.png"), "--db", db_});
    QVERIFY2(rc == 0 && !out.contains("warning:"), qPrintable(out));
    const std::string name = RunStore(db_.toStdString(), RunStore::Mode::ReadOnly).run(a_).name;
    RunStore(db_.toStdString()).rename(a_, QString::fromUcs4(U"boxes \U0010FFFD").toStdString());
    std::tie(rc, out) =
        run({"export", "chart", id, "--metric", "loss", "--out", dir_.filePath("boxes.png"), "--db", db_});
    RunStore(db_.toStdString()).rename(a_, name);
    QVERIFY2(rc == 0, qPrintable(out));
    QVERIFY2(out.contains("warning: no installed font draws U+10FFFD, shown as empty boxes") &&
                 out.contains("fonts-wqy-microhei"),
             qPrintable(out));
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) { return ampwb::ui::test::run_ui_test<ampwb::ui::test::ExportCharts>(argc, argv); }

#include "test_ui_export.moc"
