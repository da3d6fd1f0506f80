// Export from the desktop workbench, offscreen: every chart of a run and of a comparison to PNG (decoded at the
// size asked), SVG (parsed) and PDF (its header); the CSV reports through the run store's exporter (rows counted);
// and `ampwb export chart` run as a separate process with no display at all, against the epoch or the wall clock.
#include <QFile>
#include <QProcess>
#include <QSvgRenderer>
#include <QXmlStreamReader>
#include <QtTest>

#include "chart_export.h"
#include "chart_factory.h"
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
  int texts = 0;
  while (!xml.atEnd()) {
    xml.readNext();
    if (xml.isStartElement() && xml.name() == QLatin1String("svg")) root = true;
    if (xml.isStartElement() && xml.name() == QLatin1String("text")) ++texts;
  }
  QVERIFY2(!xml.hasError(), qPrintable(path + ": " + xml.errorString()));
  QVERIFY(root);
  QVERIFY(texts > 3);  // title, axis labels: vector text, not a bitmap
  QVERIFY(QSvgRenderer(path).isValid());
}

void check_pdf(const QString& path) {
  const QByteArray pdf = read(path);
  QVERIFY2(pdf.startsWith("%PDF-"), qPrintable(path));
  QVERIFY(pdf.size() > 1000);
  QVERIFY(pdf.trimmed().endsWith("%%EOF"));
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
  int64_t a_ = 0, b_ = 0;

 private Q_SLOTS:
  void initTestCase() {
    const QString data = write_stripes(dir_.filePath("stripes"), 24, 16);
    db_ = dir_.filePath("runs.sqlite");
    TrainConfig c = tiny_config(data, 2, 3);
    c.precision = precision_preset("amp-fp16");
    a_ = train_into_store(db_, c);
    c.precision = precision_preset("fp32");
    b_ = train_into_store(db_, c);
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
      export_chart(metric, runs, {}, base + ".pdf");
      check_pdf(base + ".pdf");
    }
    QVERIFY_THROWS_EXCEPTION(std::exception, export_chart("loss", runs, {}, dir_.filePath("x.bmp")));
  }

  void all_charts_of_a_comparison() {
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    RunSeries a = load_run_series(store, a_), b = load_run_series(store, b_);
    const QStringList files = export_all_charts({&a, &b}, {}, dir_.filePath("compare"), "compare", "svg");
    QCOMPARE(files.size(), chart_metrics().size());
    for (const QString& f : files) {
      check_svg(f);
      const QByteArray svg = read(f);  // the runs named under each chart, by colour, as the GUI's panel names them
      QVERIFY2(svg.contains(QByteArray::fromStdString(a.label)) && svg.contains(QByteArray::fromStdString(b.label)),
               qPrintable(f));
    }
  }

  void csv_reports() {
    MainWindow w(db_);
    const QStringList files = w.export_csv({a_, b_}, dir_.filePath("csv"));
    QVERIFY(files.size() >= 2 * 3 + 2);
    RunStore store(db_.toStdString(), RunStore::Mode::ReadOnly);
    const QString folder = dir_.filePath("csv");
    QCOMPARE(csv_rows(folder + "/runs-summary.csv"), 1 + 2);
    QCOMPARE(csv_rows(folder + QStringLiteral("/run-%1-epochs.csv").arg(a_)), 1 + int(store.epochs(a_).size()));
    QCOMPARE(csv_rows(folder + QStringLiteral("/run-%1-steps.csv").arg(a_)), 1 + int(store.steps(a_).size()));
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
    const QString grouped = dir_.filePath("cli-grouped.svg");
    std::tie(rc, out) = run({"export", "chart", id, other, "--metric", "accuracy", "--group-by", "precision.mode",
                             "--out", grouped, "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    check_svg(grouped);
    QCOMPARE(read(grouped).count(mean_line), 2);
    std::tie(rc, out) = run(
        {"export", "chart", id, other, "--metric", "accuracy", "--group-by", "colour", "--out", grouped, "--db", db_});
    QCOMPARE(rc, 1);
    QVERIFY2(out.contains("no setting 'colour' to group by"), qPrintable(out));
    std::tie(rc, out) = run({"export", "chart", id, "--metric", "epoch-time", "--out", pdf, "--db", db_});
    QVERIFY2(rc == 0, qPrintable(out));
    check_pdf(pdf);
    std::tie(rc, out) = run({"export", "chart", id, other, "--metric", "loss-scale", "--out", scale, "--db", db_,
                             "--width", "640", "--height", "480"});
    QVERIFY2(rc == 0, qPrintable(out));
    check_png(scale, QSize(640, 480));
    std::tie(rc, out) = run({"export", "chart", id, "--metric", "loss", "--out", dir_.filePath("x.gif"), "--db", db_});
    QCOMPARE(rc, 1);
    QVERIFY(out.contains(".png, .svg or .pdf"));
    // Bad usage, refused by the parser (exit 2) with the valid choices or range.
    for (const QStringList& bad :
         {QStringList{"--metric", "nope"}, QStringList{"--histogram", "bogus"}, QStringList{"--smoothing", "1"}}) {
      std::tie(rc, out) =
          run(QStringList{"export", "chart", id, "--metric", "histogram", "--out", png, "--db", db_} + bad);
      QCOMPARE(rc, 2);
      QVERIFY2(out.contains(bad[0] + ": ") && (out.contains(" not in {") || out.contains("must be in [0, 1)")),
               qPrintable(out));
    }
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) { return ampwb::ui::test::run_ui_test<ampwb::ui::test::ExportCharts>(argc, argv); }

#include "test_ui_export.moc"
