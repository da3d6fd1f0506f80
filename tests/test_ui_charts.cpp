// The charts' data side, offscreen: min/max decimation keeps extremes within a point budget, smoothing ignores
// overflowed steps, a 200,000-step run redraws within a UI tick, the event queue hands batches over intact, a
// resumed run replaces what it reports again, the ETA, the "differ only by seed" test behind the bands, and the
// per-layer numerics heat map fed live and from the store, a real run drawn against steps, epochs or wall-clock
// seconds, and one loss spike drawn alike by the window, an exported chart and the HTML report.
#include <QAbstractAxis>
#include <QAbstractBarSeries>
#include <QAbstractTextDocumentLayout>
#include <QBarSet>
#include <QCategoryAxis>
#include <QChart>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QLogValueAxis>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <QValueAxis>
#include <QXYSeries>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>

#include "accuracy_chart.h"
#include "analysis/run_colours.h"
#include "analysis/run_report.h"
#include "chart_export.h"
#include "chart_legend.h"
#include "chart_panel.h"
#include "chart_style.h"
#include "decimate.h"
#include "divergence_view.h"
#include "event_queue.h"
#include "fp8_scaling_chart.h"
#include "histogram_chart.h"
#include "loss_scale_chart.h"
#include "metric_chart.h"
#include "numerics_heatmap.h"
#include "run_series.h"
#include "store/run_store.h"
#include "sweep.h"
#include "test_ui_util.h"
#include "timing_charts.h"
#include "train/run_progress.h"

namespace ampwb::ui::test {
namespace {

// A long run: noisy decaying loss, a dynamic loss scale that overflows now and then.
RunSeries long_run(int64_t steps, int64_t steps_per_epoch) {
  RunSeries r;
  r.run_id = 1;
  r.label = "long";
  r.steps_per_epoch = steps_per_epoch;
  r.config.epochs = static_cast<int>(steps / steps_per_epoch);
  float scale = 65536;
  for (int64_t i = 0; i < steps; ++i) {
    StepReport s;
    s.step = i;
    s.epoch = static_cast<int>(i / steps_per_epoch) + 1;
    s.loss = static_cast<float>(2.3 * std::exp(-i / 50000.0) + 0.1 * std::sin(i * 0.37));
    s.skipped = i % 2000 == 0;
    s.loss_scale = scale;
    if (s.skipped) {
      s.loss = INFINITY;
      scale /= 2;
    } else if (i % 1000 == 999) {
      scale *= 2;
    }
    s.wall_seconds = i * 0.01;
    r.steps.push_back(s);
    if ((i + 1) % steps_per_epoch == 0) {
      EpochReport e;
      e.epoch = s.epoch;
      e.train_loss = s.loss;
      e.validation_loss = 0.5;
      e.validation_accuracy = 0.8;
      e.seconds = 10;
      r.epochs.push_back(e);
    }
  }
  r.revision = 1;
  return r;
}

// A probed step's record of one layer with the activation's largest magnitude and the gradients' underflow.
LayerNumerics numerics(int epoch, int64_t step, const std::string& layer, double activation_max,
                       double grad_underflow) {
  LayerNumerics n;
  n.epoch = epoch;
  n.step = step;
  n.layer = layer;
  n.kind = layer == "fc" ? "linear" : "conv";
  n.in_channels = 16;
  n.out_channels = 16;
  n.forward_dtype = n.backward_dtype = "f16";
  n.casts = 3;
  n.loss_scale = 1024;
  n.activation = {256, activation_max, 0, 0, 0.5, 0};
  n.activation_grad = {256, 2.0, grad_underflow, 0, 0.25, 0, 2 * grad_underflow};
  n.weight_grad = {2304, 0.5, 0, 0, 0, 0};
  return n;
}

// The largest value a line drawn in `colour` (fully opaque) reaches in a chart exported as SVG, read back through
// the y axis's labels. QSvgGenerator writes one <g> per painter state, its transform the whole painter's
// (a translation here): the line is the group of that colour with the most segments (a legend's sample has one), the
// y axis's labels the numbers alone on their height (the x axis's share one), placed by their text box's top.
double highest_value_in_exported_chart(const std::string& svg, const QColor& colour) {
  const std::regex translate("transform=\"matrix\\(1,0,0,1,([-0-9.]+),([-0-9.]+)\\)\"");
  const std::regex number("<text [^>]*>(-?[0-9.]+)</text>");
  const std::regex points("points=\"([^\"]*)\"");
  const std::string stroke = "stroke=\"" + colour.name().toStdString() + "\" stroke-opacity=\"1\"";
  std::vector<std::pair<double, double>> labels;  // (page y, value)
  size_t most_segments = 0;
  double line_top = INFINITY;
  for (size_t at = svg.find("<g "); at != std::string::npos; at = svg.find("<g ", at + 1)) {
    const size_t head_end = svg.find('>', at), end = svg.find("</g>", head_end);
    const std::string head = svg.substr(at, head_end - at), body = svg.substr(head_end, end - head_end);
    std::smatch m;
    if (!std::regex_search(head, m, translate)) continue;
    const double dy = std::stod(m[2]);
    if (std::regex_search(body, m, number)) labels.emplace_back(dy, std::stod(m[1]));
    if (head.find(stroke) == std::string::npos) continue;
    size_t segments = 0;
    double top = INFINITY;
    for (auto it = std::sregex_iterator(body.begin(), body.end(), points); it != std::sregex_iterator(); ++it) {
      ++segments;
      std::istringstream xy((*it)[1].str());
      for (std::string pair; xy >> pair;) top = std::min(top, dy + std::stod(pair.substr(pair.find(',') + 1)));
    }
    if (segments > most_segments) most_segments = segments, line_top = top;
  }
  std::vector<std::pair<double, double>> y_axis;
  for (const auto& label : labels)
    if (std::count_if(labels.begin(), labels.end(), [&](const auto& l) { return l.first == label.first; }) == 1)
      y_axis.push_back(label);
  if (y_axis.size() < 2 || most_segments < 100) qFatal("no y axis or no line of colour %s", qPrintable(colour.name()));
  const auto [y0, v0] = y_axis.front();
  const auto [y1, v1] = y_axis.back();
  return v0 + (line_top - y0) / (y1 - y0) * (v1 - v0);
}

// The largest value the first polyline of the report's chart titled `title` reaches, read back from its pixels
// through the chart's y tick labels (the report draws them at their ticks' height plus 4).
double highest_value_in_report_chart(const std::string& html, const std::string& title) {
  const size_t begin = html.find("<title>" + title + "</title>"), end = html.find("</svg>", begin);
  if (begin == std::string::npos || end == std::string::npos) qFatal("no chart %s in the report", title.c_str());
  const std::string svg = html.substr(begin, end - begin);
  std::vector<std::pair<double, double>> ticks;  // (pixel y, value)
  const std::regex tick("<text class=\"y-tick\" x=\"[^\"]*\" y=\"([-0-9.]+)\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator(); ++it)
    ticks.emplace_back(std::stod((*it)[1]) - 4, std::stod((*it)[2]));
  std::smatch points;
  const std::regex polyline("<polyline [^>]*points=\"([^\"]*)\"");
  if (ticks.size() < 2 || !std::regex_search(svg, points, polyline)) qFatal("no axis or line in %s", title.c_str());
  double top = INFINITY;  // the smallest pixel y: the highest point drawn
  std::istringstream xy(points[1].str());
  for (std::string pair; xy >> pair;) top = std::min(top, std::stod(pair.substr(pair.find(',') + 1)));
  const auto [y0, v0] = ticks.front();
  const auto [y1, v1] = ticks.back();
  return v0 + (top - y0) / (y1 - y0) * (v1 - v0);
}

// The values an epoch axis ticks at (chart_axis.h's set_epoch_range).
QList<double> epoch_ticks(const QValueAxis& axis) {
  QList<double> ticks;
  if (axis.tickType() == QValueAxis::TicksDynamic) {
    for (double t = axis.tickAnchor(); t <= axis.max(); t += axis.tickInterval())
      if (t >= axis.min()) ticks << t;
  } else {
    for (int k = 0; k < axis.tickCount(); ++k)
      ticks << axis.min() + k * (axis.max() - axis.min()) / (axis.tickCount() - 1);
  }
  return ticks;
}

}  // namespace

class ChartData : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Runs compared past the palette's eight keep colours of their own: 24 runs, 24 colours, each far from the others.
  void runs_past_the_palette_keep_colours_of_their_own() {
    for (int a = 0; a < 24; ++a)
      for (int b = a + 1; b < 24; ++b) {
        const QColor x = run_color(a), y = run_color(b);
        const int distance =
            std::abs(x.red() - y.red()) + std::abs(x.green() - y.green()) + std::abs(x.blue() - y.blue());
        QVERIFY2(distance >= 40,
                 qPrintable(QStringLiteral("runs %1 and %2: %3 and %4").arg(a).arg(b).arg(x.name(), y.name())));
      }
  }

  // The histogram's shaded FP16 range is in no run's hue, so that it never reads as a run's; where both are grey, the
  // band as drawn over a light chart is far lighter than the run's line.
  void the_fp16_range_is_in_no_runs_colour() {
    const QColor band = fp16_range_color();
    const double a = band.alphaF();
    const QColor drawn =
        QColor::fromRgbF(1 - a * (1 - band.redF()), 1 - a * (1 - band.greenF()), 1 - a * (1 - band.blueF()));
    for (int i = 0; i < 24; ++i) {
      const QColor run = run_color(i);
      const bool grey_band = band.hsvHue() < 0, grey_run = run.hsvHue() < 0;
      const int hues_apart =
          std::min(std::abs(run.hsvHue() - band.hsvHue()), 360 - std::abs(run.hsvHue() - band.hsvHue()));
      const bool apart = grey_band != grey_run || (grey_band ? drawn.value() - run.value() >= 60 : hues_apart >= 30);
      QVERIFY2(apart, qPrintable(QStringLiteral("run %1 (%2) and the band (%3)").arg(i).arg(run.name(), band.name())));
    }
  }

  // The HTML report names a run's colour as the workbench draws it; its darker and lighter rounds are Qt's.
  void the_report_colours_a_run_as_the_workbench_does() {
    for (int i = 0; i < 24; ++i) {
      const QColor drawn = run_color(i), base = run_color(i % 8);
      QCOMPARE(QString::fromStdString(hex_colour(run_colour(static_cast<size_t>(i)))), drawn.name());
      const QColor qt = i < 8 ? base : i < 16 ? base.darker(170) : base.lighter(145);
      const int off = std::max(
          {std::abs(qt.red() - drawn.red()), std::abs(qt.green() - drawn.green()), std::abs(qt.blue() - drawn.blue())});
      QVERIFY2(off <= 2, qPrintable(QStringLiteral("run %1: %2, Qt's %3").arg(i).arg(drawn.name(), qt.name())));
    }
  }

  // Forty runs compared: the legend names them all, in at most four lines that scroll, and the charts keep the rest.
  void a_long_legend_scrolls_and_leaves_the_charts_their_room() {
    std::vector<RunSeries> runs(40);
    RunList shown;
    for (size_t i = 0; i < runs.size(); ++i) {
      runs[i].run_id = static_cast<int64_t>(i + 1);
      runs[i].label = std::to_string(i + 1) + " · resnet20 amp-bf16 seed " + std::to_string(i);
      runs[i].status = RunStatus::Finished;
      shown.push_back(&runs[i]);
    }
    ChartPanel panel;
    panel.resize(1000, 700);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    panel.set_runs(shown);
    QApplication::processEvents();
    auto* legend = panel.findChild<QLabel*>("runLegend");
    QVERIFY(legend_words(legend).contains("40 · resnet20 amp-bf16 seed 39"));
    // Laid out at the label's width, every line begins with an entry's swatch: no name is broken across lines.
    QTextDocument laid_out;
    laid_out.setDefaultFont(legend->font());
    laid_out.setDocumentMargin(0);
    laid_out.setHtml(legend->text());
    laid_out.setTextWidth(legend->contentsRect().width());
    int lines = 0;
    for (QTextBlock block = laid_out.begin(); block.isValid(); block = block.next()) {
      laid_out.documentLayout()->blockBoundingRect(block);  // lays the block out
      for (int i = 0; i < block.layout()->lineCount(); ++i, ++lines) {
        const QTextLine line = block.layout()->lineAt(i);
        const QString text = block.text().mid(line.textStart(), line.textLength()).trimmed();
        QVERIFY2(text.startsWith(QChar(0x25a0)) || text.startsWith("Groups"), qPrintable(text));
      }
    }
    QVERIFY2(lines > 4, qPrintable(QString::number(lines)));  // the case that matters: many lines
    QWidget* area = legend->parentWidget()->parentWidget();  // the scroll area's viewport, then the area
    QVERIFY(area->isVisible());
    QVERIFY2(area->height() <= 4 * legend->fontMetrics().lineSpacing() + 8,
             qPrintable(QString::number(area->height())));
    QVERIFY2(panel.chart("loss")->height() > 150, qPrintable(QString::number(panel.chart("loss")->height())));
  }

  void decimation_keeps_extremes_within_budget() {
    std::vector<double> y(1000000);
    for (size_t i = 0; i < y.size(); ++i) y[i] = std::sin(i * 0.001);
    y[123457] = 50;   // a spike
    y[765432] = -50;  // and a dip
    y[500000] = NAN;  // never drawn
    const QList<QPointF> points = decimate_min_max(
        y.size(), [](size_t i) { return double(i); }, [&](size_t i) { return y[i]; }, 800);
    QVERIFY(points.size() <= 2 * 800);
    QVERIFY(points.size() > 800);
    bool spike = false, dip = false;
    for (const QPointF& p : points) {
      spike |= p.x() == 123457 && p.y() == 50;
      dip |= p.x() == 765432 && p.y() == -50;
      QVERIFY(std::isfinite(p.y()));
    }
    QVERIFY(spike && dip);
    for (qsizetype i = 1; i < points.size(); ++i) QVERIFY(points[i].x() > points[i - 1].x());
    // Few points: all of them.
    QCOMPARE(decimate_min_max(
                 5, [](size_t i) { return double(i); }, [](size_t i) { return double(i); }, 800)
                 .size(),
             qsizetype{5});
  }

  void smoothing_is_incremental_and_skips_overflow() {
    std::vector<double> values = {1, 1, INFINITY, 1, 1};
    std::vector<double> smooth;
    double state = 0, debias = 0;
    extend_smoothed(values, 0.9, smooth, state, debias);
    QCOMPARE(smooth.size(), values.size());
    for (double v : smooth) QVERIFY(std::abs(v - 1.0) < 1e-12);  // debiased: a constant stays constant
    values.push_back(2);
    extend_smoothed(values, 0.9, smooth, state, debias);
    QCOMPARE(smooth.size(), size_t{6});
    QVERIFY(smooth.back() > 1 && smooth.back() < 2);
  }

  // The curve against steps says its smoothing where a reader of an exported chart sees it: in one run's legend, in
  // the title of several runs'. Unsmoothed, one run's legend names its per-step curve once.
  void the_loss_chart_says_its_smoothing() {
    RunSeries a = long_run(400, 100), b = long_run(400, 100);
    b.run_id = 2;
    b.label = "other";
    ChartPanel panel;
    panel.resize(1500, 900);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QChart* loss = panel.chart("loss")->chart();
    const auto legend = [&] {
      panel.chart("loss")->wrapping_legend()->relayout();
      QStringList names;
      for (const ChartLegend::Entry& e : panel.chart("loss")->wrapping_legend()->entries()) names << e.label;
      return names;
    };
    panel.set_smoothing(0.6);
    panel.set_runs({&a});
    QVERIFY2(legend().contains("per step") && legend().contains("smoothed 0.6"), qPrintable(legend().join(" | ")));
    panel.set_smoothing(0);
    QCOMPARE(legend().count("per step"), 1);
    QVERIFY2(!legend().join(" ").contains("smoothed"), qPrintable(legend().join(" | ")));
    panel.set_runs({&a, &b});
    QCOMPARE(loss->title(), QString("Loss: — per step · - - train · ··· validation"));
    panel.set_smoothing(0.6);
    QCOMPARE(loss->title(), QString("Loss: — per step, smoothed 0.6 · - - train · ··· validation"));
  }

  // Smoothed, the faint per-step line is drawn too, so the axis holds its every finite value: a step whose loss lies
  // far below or above the smoothed line is on the chart, not cut off at its edge.
  void the_loss_axis_holds_every_step_drawn() {
    RunSeries run = long_run(400, 100);
    run.steps[201].loss = 0.5f;  // far below the smoothed line's lowest, ~2.2
    run.steps[301].loss = 9.0f;
    ChartPanel panel;
    panel.resize(1500, 900);
    panel.set_smoothing(0.9);
    panel.set_runs({&run});
    const auto* y = qobject_cast<QValueAxis*>(panel.chart("loss")->chart()->axes(Qt::Vertical).first());
    QVERIFY(y);
    QVERIFY2(y->min() <= 0.5 && y->max() >= 9.0, qPrintable(QString("%1 to %2").arg(y->min()).arg(y->max())));
    QVERIFY(std::isfinite(y->max()));  // a skipped step's infinite loss is not drawn, nor stretches the axis
  }

  // The loss scale's axis ticks at 2^k steps, k a power of two, tall or short: GradScaler's 65536 (2^16) is labelled.
  void the_loss_scale_axis_labels_gradscalers_start() {
    RunSeries run = long_run(4000, 1000);  // from 65536 down, halved at each skipped step
    run.steps.back().loss_scale = 1;
    ChartPanel panel;
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    for (const QSize size : {QSize(1500, 900), QSize(900, 420)}) {
      panel.resize(size);
      panel.set_runs({&run});
      QApplication::processEvents();
      panel.refresh();
      const auto* y = qobject_cast<QLogValueAxis*>(panel.chart("loss-scale")->chart()->axes(Qt::Vertical).front());
      QVERIFY(y);
      const int k = static_cast<int>(std::lround(std::log2(y->base())));
      QVERIFY2(k >= 1 && (k & (k - 1)) == 0 && 16 % k == 0, qPrintable(QString::number(y->base())));
      QVERIFY(y->min() <= 1 && y->max() >= 65536);
      QCOMPARE(y->labelFormat(), QString("%.10g"));  // "65536", not "6.55e+04"
    }
    // A scale started at 2^40: its labels rounded ("1.1e+12"), as QtCharts would cut "1099511627776" to "1.099511...".
    RunSeries high = long_run(4000, 1000);
    for (StepReport& s : high.steps) s.loss_scale = std::ldexp(1.0f, 40);
    panel.set_runs({&high});
    const auto* y = qobject_cast<QLogValueAxis*>(panel.chart("loss-scale")->chart()->axes(Qt::Vertical).front());
    QCOMPARE(y->labelFormat(), QString("%.3g"));
  }

  void a_200000_step_run_redraws_within_a_tick() {
    RunSeries run = long_run(200000, 5000);
    ChartPanel panel;
    panel.resize(1500, 900);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QElapsedTimer first;
    first.start();
    panel.set_runs({&run});
    const qint64 first_ms = first.elapsed();
    // Live: 1,000 more steps per batch, then a redraw, as the UI timer does.
    QElapsedTimer clock;
    clock.start();
    const int batches = 20;
    for (int b = 0; b < batches; ++b) {
      for (int k = 0; k < 1000; ++k) {
        StepReport s = run.steps.back();
        s.step += 1;
        s.skipped = false;
        s.loss = 0.3f;
        run.steps.push_back(s);
      }
      ++run.revision;
      panel.refresh();
      QCoreApplication::processEvents();  // the scene's changes reach the views
      panel.repaint();                    // and they paint, synchronously
    }
    const double per_batch = clock.elapsed() / double(batches);
    qInfo("charts with %zu steps: first draw %lld ms, update and repaint after a 1,000-step batch %.1f ms",
          run.steps.size(), static_cast<long long>(first_ms), per_batch);
    QVERIFY2(per_batch < 40.0, "a redraw of a 200,000-step run must fit in the 40 ms UI tick");
    // Decimated: a few thousand points drawn, whatever the run's length.
    QVERIFY(panel.chart("loss")->point_count() < 20000);
    QVERIFY(panel.chart("loss-scale")->point_count() < 10000);
    QVERIFY(panel.chart("loss-scale")->point_count() > 100);
    const SkippedSteps skipped = count_skipped(run);
    QCOMPARE(skipped.total, int64_t{100});
    QCOMPARE(skipped.early, int64_t{1});  // step 0: the scale calibrating
  }

  void event_queue_hands_over_batches() {
    EventQueue queue;
    QVERIFY(queue.take().empty());
    RunInfo info;
    info.steps_per_epoch = 10;
    queue.on_start(info);
    queue.set_run_id(7);
    std::thread producer([&] {
      for (int i = 0; i < 1000; ++i) queue.on_step(StepReport{1, i});
      queue.on_epoch(EpochReport{1});
      queue.on_end(RunEnd{RunStatus::Finished, ""});
    });
    std::vector<StepReport> steps;
    bool ended = false;
    int64_t run_id = 0;
    while (!ended) {
      EventBatch b = queue.take();
      if (b.run_id) run_id = b.run_id;
      steps.insert(steps.end(), b.steps.begin(), b.steps.end());
      ended = b.ended.has_value();
    }
    producer.join();
    QCOMPARE(run_id, int64_t{7});
    QCOMPARE(steps.size(), size_t{1000});
    for (size_t i = 0; i < steps.size(); ++i) QCOMPARE(steps[i].step, int64_t(i));
  }

  void resumed_run_replaces_what_it_reports_again() {
    RunSeries r;
    EventBatch first;
    first.started = RunInfo{};
    first.started->steps_per_epoch = 4;
    for (int i = 0; i < 6; ++i) first.steps.push_back(StepReport{i / 4 + 1, i, 1.0f});
    first.epochs.push_back(EpochReport{1});
    r.append(first);
    // Resumed from a checkpoint at step 4 (epoch 2 begins again).
    EventBatch again;
    again.started = RunInfo{};
    again.started->steps_per_epoch = 4;
    again.started->first_epoch = 2;
    again.steps.push_back(StepReport{2, 4, 0.5f});
    r.append(again);
    QCOMPARE(r.steps.size(), size_t{5});
    QCOMPARE(r.steps.back().loss, 0.5f);
    QCOMPARE(r.epochs.size(), size_t{1});
    QCOMPARE(r.epoch_end_step(1), 3.0);
  }

  void progress_and_eta() {
    RunProgress p;
    RunInfo info;
    info.steps_per_epoch = 100;
    p.start(info, 2);
    QCOMPARE(p.eta_seconds(), -1.0);
    for (int i = 0; i < 50; ++i) p.step(StepReport{1, i, 0, 0, 0, 1, false, 0, 0.1 * (i + 1)});
    QCOMPARE(p.fraction(), 0.25);
    QVERIFY(std::abs(p.eta_seconds() - 15.0) < 0.5);  // 150 steps left at 0.1 s
    QCOMPARE(p.step_in_epoch(), int64_t{50});
    // The end of epoch 1: 50 more steps, then 5 s of evaluation, then epoch 2 goes on at the same rate. The ETA
    // right after the pause is the training time left plus one more evaluation, not the pause read as slowness,
    // nor the host's work between steps (2 s of the epoch's 10 s of steps outside their arithmetic) counted twice.
    for (int i = 50; i < 100; ++i) p.step(StepReport{1, i, 0, 0, 0, 1, false, 0, 0.1 * (i + 1)});
    EpochReport e;
    e.epoch = 1;
    e.seconds = 15.0;
    e.compute_seconds = 8.0;
    p.epoch(e);
    QCOMPARE(p.current_epoch(), 2);  // paused here, the bar says epoch 2's first step is still to come
    QCOMPARE(p.step_in_epoch(), int64_t{0});
    for (int i = 100; i < 105; ++i) p.step(StepReport{2, i, 0, 0, 0, 1, false, 0, 15.0 + 0.1 * (i - 99)});
    QVERIFY2(std::abs(p.eta_seconds() - (9.5 + 5.0)) < 0.05, qPrintable(QString::number(p.eta_seconds())));
    // The GUI drains its events in batches, each batch's steps before its epoch reports: the same ETA when epoch 2's
    // first steps come before epoch 1's report. A user's pause of 10 minutes on the way counts neither.
    RunProgress q;
    q.start(info, 2);
    for (int i = 0; i < 100; ++i) q.step(StepReport{1, i, 0, 0, 0, 1, false, 0, 0.1 * (i + 1)});
    q.resumed(600);
    for (int i = 100; i < 105; ++i) q.step(StepReport{2, i, 0, 0, 0, 1, false, 0, 615.0 + 0.1 * (i - 99)});
    q.epoch(e);
    QVERIFY2(std::abs(q.eta_seconds() - (9.5 + 5.0)) < 0.05, qPrintable(QString::number(q.eta_seconds())));
    QCOMPARE(QString::fromStdString(time_left_text(3725)), QString("1 h 02 min"));
    QCOMPARE(QString::fromStdString(time_left_text(185)), QString("3 min 05 s"));
  }

  void bands_only_for_runs_that_differ_by_seed() {
    TrainConfig a, b;
    b.seed = 3;
    b.name = "other name";
    b.checkpoint_dir = "/elsewhere";
    QVERIFY(differ_only_by_seed({a, b}));
    QVERIFY(!differ_only_by_seed({a, a}));  // the same seed: nothing to average over
    b.precision = precision_preset("amp-bf16");
    QVERIFY(!differ_only_by_seed({a, b}));
    QVERIFY(!differ_only_by_seed({a}));
  }

  void sweep_queues_one_run_per_variant() {
    Sweep sweep;
    TrainConfig base;
    base.seed = 5;
    std::vector<SweepVariant> variants;
    for (const SweepVariant& v : sweep_variants())
      if (!mode_info(v.mode).cuda_only) variants.push_back(v);
    const std::vector<std::string> names =
        sweep_run_names(variants, base.seed, [](const std::string&) { return false; });
    sweep.plan(base, variants, names, "sweep x");
    QCOMPARE(sweep.count(), int(variants.size()));
    QCOMPARE(sweep.tag(), std::string("sweep x"));
    int n = 0;
    while (auto c = sweep.next()) {
      QCOMPARE(c->seed, uint64_t{5});
      QCOMPARE(c->name, variants[static_cast<size_t>(n)].key + " · seed 5");
      sweep.finished(100 + n);
      ++n;
    }
    QVERIFY(!sweep.active());
    QCOMPARE(sweep.run_ids().size(), variants.size());
    const TrainConfig noscale = apply_variant(base, sweep_variants()[4]);
    QCOMPARE(noscale.precision.mode, PrecisionMode::AmpFp16);
    QCOMPARE(noscale.precision.loss_scale.kind, LossScaleKind::Off);
    QVERIFY(noscale.precision.master_weights);
    // What the panel changed on its mode's preset goes to every variant; the variant's own preset stays otherwise.
    TrainConfig changed = base;
    changed.precision = precision_preset(PrecisionMode::AmpFp16);
    changed.precision.loss_scale.growth_interval = 100;
    changed.precision.fp8.scaling.margin = 2;
    for (const SweepVariant& v : sweep_variants()) {
      const TrainConfig c = apply_variant(changed, v);
      QCOMPARE(c.precision.mode, v.mode);
      QCOMPARE(c.precision.loss_scale.growth_interval, int64_t{100});
      QCOMPARE(c.precision.fp8.scaling.margin, 2);
      QCOMPARE(c.precision.loss_scale.kind,
               v.loss_scaling_off ? LossScaleKind::Off : precision_preset(v.mode).loss_scale.kind);
    }
  }

  // Labels say what a run is: its mode where the name does not, and for an older sweep's run (named by when it ran)
  // what varied and the seed.
  void run_labels_say_what_the_run_is() {
    RunRecord r;
    r.id = 4;
    r.config.precision.mode = PrecisionMode::AmpBf16;
    r.config.seed = 3;
    r.name = "amp-bf16";
    QCOMPARE(run_label(r), std::string("4 · amp-bf16"));
    r.name = "baseline";
    QCOMPARE(run_label(r), std::string("4 · baseline (amp-bf16)"));
    r.name = "amp-bf16 · seed 3";
    QCOMPARE(run_label(r), std::string("4 · amp-bf16 · seed 3"));
    r.name = "sweep 1201-135804 amp-bf16";
    QCOMPARE(run_label(r), std::string("4 · amp-bf16 · seed 3"));
    r.name = "sweep 1201-135804-2 amp-fp16-noscale";
    QCOMPARE(run_label(r), std::string("4 · amp-fp16-noscale · seed 3"));
  }

  void histogram_picks_the_epoch_asked() {
    RunSeries r;
    for (int e = 1; e <= 3; ++e)
      for (const char* kind : {"weight", "activation"}) {
        GradientHistogram h;
        h.epoch = e;
        h.kind = kind;
        r.histograms.push_back(h);
      }
    QCOMPARE(HistogramChart::pick(r, "weight", 0)->epoch, 3);
    QCOMPARE(HistogramChart::pick(r, "activation", 2)->epoch, 2);
    QVERIFY(HistogramChart::pick(r, "weight", 9) == nullptr);
  }

  // A run that does not compute in FP16 is shown against FP16's range as a what-if, and says so; an FP16 run's
  // histogram and skipped steps are its own.
  void runs_not_in_fp16_show_fp16_as_a_what_if() {
    const auto run_in = [](const char* mode, int64_t id) {
      RunSeries r;
      r.run_id = id;
      r.config.precision = precision_preset(mode);
      GradientHistogram h;
      h.epoch = 1;
      h.kind = "weight";
      h.counts.assign(61, 0);
      h.counts[20] = 10;
      h.total = 10;
      h.underflow_fraction = 0.25;
      r.histograms.push_back(h);
      return r;
    };
    const RunSeries bf16 = run_in("amp-bf16", 7), fp16 = run_in("amp-fp16", 8);
    ChartPanel panel;
    const auto names = [&] {
      QStringList out;
      for (QAbstractSeries* s : panel.chart("histogram")->chart()->series())
        if (s->name().startsWith("#") || s->name().contains("FP16:")) out << s->name();
      return out;
    };
    auto* note = panel.findChild<QLabel*>("skippedNote");
    panel.set_runs({&bf16});
    QCOMPARE(panel.chart("loss-scale")->chart()->title(), QString("Loss scale (log2): none, a line at 1"));
    QVERIFY2(panel.chart("histogram")->chart()->title().endsWith("what FP16 would do"),
             qPrintable(panel.chart("histogram")->chart()->title()));
    QCOMPARE(names(), QStringList{"if FP16: under\u00a025.0% · over\u00a00.0%"});
    QCOMPARE(note->text(), QString("No loss scaling: the scale stays 1, no step skipped."));
    QVERIFY(note->toolTip().startsWith("What FP16 would do"));
    panel.set_runs({&fp16});
    QVERIFY(!panel.chart("histogram")->chart()->title().contains("would"));
    QCOMPARE(names(), QStringList{"in FP16: under\u00a025.0% · over\u00a00.0%"});
    QCOMPARE(note->text(), QString("No skipped steps: no gradients overflowed."));
    panel.set_runs({&bf16, &fp16});
    QCOMPARE(names(), (QStringList{"#7 if FP16: 25.0% / 0.0%", "#8: 25.0% / 0.0%"}));
    // The loss-scale chart says which runs scale nothing, drawn at 1: an exported chart has no note beside it.
    QCOMPARE(panel.chart("loss-scale")->chart()->title(),
             QString("Loss scale (log2): run 7 scales nothing (a line at 1)"));
    QCOMPARE(panel.chart("histogram")->chart()->title(),
             QString("Weight gradients × loss scale (epoch 1) against FP16's range"));
    RunSeries fp32 = run_in("fp32", 9);
    fp32.histograms.front().epoch = 2;
    panel.set_runs({&bf16, &fp32});
    QCOMPARE(panel.chart("histogram")->chart()->title(),
             QString("Weight gradients × loss scale (each run's last epoch): what FP16 would do"));
    panel.set_runs({});  // as the Compare tab before any run is opened: nothing said of steps nobody took
    QCOMPARE(note->text(), QString());
  }

  // The Training tab's live run is one series refilled, not rebuilt: its loss-scale title follows the setup's
  // precision from no scaling to GradScaler's.
  void the_live_loss_scale_title_follows_the_runs_precision() {
    RunSeries live;
    live.config.precision = precision_preset("fp32");
    ChartPanel panel;
    panel.set_runs({&live});
    QCOMPARE(panel.chart("loss-scale")->chart()->title(), QString("Loss scale (log2): none, a line at 1"));
    RunSeries next;  // as the main window previews the setup's choice
    next.config.precision = precision_preset("amp-fp16");
    live.replace_with(std::move(next));
    panel.refresh();
    QCOMPARE(panel.chart("loss-scale")->chart()->title(), QString("Loss scale (log2)"));
  }

  void fp8_scaling_chart_draws_the_chosen_tensors_history() {
    // An amp-fp8 run probed at steps 9 and 19: conv1's input and weight, fc's output gradient in FP8.
    RunSeries fp8 = long_run(20, 10);
    fp8.config.precision = precision_preset("amp-fp8");
    for (int64_t step : {9, 19}) {
      const int epoch = static_cast<int>(step / 10) + 1;
      LayerNumerics conv = numerics(epoch, step, "conv1", 1.0, 0.0), fc = numerics(epoch, step, "fc", 1.0, 0.0);
      conv.fp8_input = {448.0 / (step + 1), step + 1.0, 448.0, 100, 0.0, 0.0};  // the scale follows the amax
      conv.fp8_weight = {64.0, 4.0, 448.0, 100, 0.0, 0.0};
      fc.fp8_output_grad = {1024.0, 0.5, 57344.0, 100, 0.0, 0.0};
      fp8.layer_numerics.push_back(conv);
      fp8.layer_numerics.push_back(fc);
    }
    const std::vector<Fp8TensorName> expected = {{"conv1", "input"}, {"conv1", "weight"}, {"fc", "output_grad"}};
    QVERIFY(fp8_tensors({&fp8}) == expected);
    // Beside a run whose conv1 and fc stayed in BF16, the tensors stay in model order, not conv1's and fc's last.
    RunSeries middle_only = long_run(20, 10), all_in_fp8 = long_run(20, 10);
    for (RunSeries* run : {&middle_only, &all_in_fp8}) {
      run->config.precision = precision_preset("amp-fp8");
      for (const char* layer : {"conv1", "layer1.0.conv1", "fc"}) {
        LayerNumerics n = numerics(1, 9, layer, 1.0, 0.0);
        if (run == &all_in_fp8 || std::string(layer) == "layer1.0.conv1") n.fp8_input = {2.0, 3.0, 448.0, 100, 0, 0};
        run->layer_numerics.push_back(n);
      }
    }
    const std::vector<Fp8TensorName> merged = {{"conv1", "input"}, {"layer1.0.conv1", "input"}, {"fc", "input"}};
    QVERIFY(fp8_tensors({&middle_only, &all_in_fp8}) == merged);

    ChartPanel panel;
    panel.resize(1366, 768);
    panel.show();
    RunSeries fp32 = long_run(20, 10);
    panel.set_runs({&fp32});
    auto* chart = static_cast<Fp8ScalingChart*>(panel.chart("fp8-scaling"));
    auto* tensor = panel.findChild<QComboBox*>("fp8Tensor");
    QVERIFY(chart && tensor);
    QVERIFY(!chart->isVisibleTo(&panel));  // nothing in FP8: no chart

    panel.set_runs({&fp8});
    QVERIFY(chart->isVisibleTo(&panel));
    QVERIFY(!panel.chart("loss-scale")->isVisibleTo(&panel));  // in its place: amp-fp8 scales no loss
    QCOMPARE(tensor->count(), 3);
    QCOMPARE(tensor->itemText(2), QString("fc · output gradient"));
    QCOMPARE(chart->chart()->title(), QString("FP8 scale and amax (log2): conv1 input"));
    const auto points = [&](const QString& name) {
      for (QAbstractSeries* series : chart->chart()->series())
        if (series->name() == name) return static_cast<QXYSeries*>(series)->points();
      return QList<QPointF>{};
    };
    QCOMPARE(points("scale"), (QList<QPointF>{{9, 44.8}, {19, 22.4}}));
    QCOMPARE(points("amax"), (QList<QPointF>{{9, 10}, {19, 20}}));

    tensor->setCurrentIndex(2);
    QCOMPARE(panel.options().fp8_tensor, QString("fc:output_grad"));
    QCOMPARE(chart->chart()->title(), QString("FP8 scale and amax (log2): fc output gradient"));
    QCOMPARE(points("scale"), (QList<QPointF>{{9, 1024}, {19, 1024}}));
    QCOMPARE(points("amax"), (QList<QPointF>{{9, 0.5}, {19, 0.5}}));
    // Powers of two said as they are where they stay short ("1024", not "1.02e+03"), rounded where they would not.
    auto* y = qobject_cast<QLogValueAxis*>(chart->chart()->axes(Qt::Vertical).front());
    QVERIFY(y);
    QCOMPARE(y->labelFormat(), QString("%.10g"));
    RunSeries tiny = fp8;
    for (LayerNumerics& n : tiny.layer_numerics) n.fp8_output_grad.amax = 1e-6;
    panel.set_runs({&tiny});
    QCOMPARE(qobject_cast<QLogValueAxis*>(chart->chart()->axes(Qt::Vertical).front())->labelFormat(), QString("%.3g"));
    RunSeries fp16 = long_run(20, 10);
    fp16.config.precision = precision_preset("amp-fp16");
    panel.set_runs({&fp8, &fp16});  // beside a run that scales its loss, both charts show
    QVERIFY(chart->isVisibleTo(&panel) && panel.chart("loss-scale")->isVisibleTo(&panel));
    QVERIFY(!panel.chart("data-wait")->isVisibleTo(&panel));  // the FP8 chart in its place
    // Two runs: colours are the runs', so the title says which line is the scale and which the amax.
    QCOMPARE(chart->chart()->title(), QString("FP8 scale \u2014 and amax - - (log2): fc output gradient"));

    // Exported with the others for an FP8 run only.
    QTemporaryDir folder;
    const QStringList with = export_all_charts({&fp8}, panel.options(), folder.path(), "fp8", "png", QSize(600, 400));
    QVERIFY2(with.last().endsWith("fp8-fp8-scaling.png"), qPrintable(with.join(", ")));
    const QStringList without =
        export_all_charts({&fp32}, panel.options(), folder.path(), "fp32", "png", QSize(600, 400));
    QCOMPARE(without.size(), with.size() - 1);
  }

  void numerics_heat_map_fills_live_and_from_the_store() {
    // Live: two probed steps in epoch 1 (the later one is the epoch's), one in epoch 2, through the event queue.
    EventQueue queue;
    queue.on_layer_numerics({numerics(1, 1, "conv1", 1.0, 0.5), numerics(1, 1, "fc", 1.0, 0.5)});
    queue.on_layer_numerics({numerics(1, 3, "conv1", 4096.0, 0.0), numerics(1, 3, "fc", 131008.0, 0.02)});
    RunSeries run;
    run.append(queue.take());
    // amp-fp8's records: conv1's input and output gradient in FP8 on epoch 2's step; fc has none.
    LayerNumerics fp8 = numerics(2, 7, "conv1", 0.0, 0.2);
    fp8.fp8_input = {2.0, 300.0, 448.0, 100, 0.02, 0.1};
    fp8.fp8_output_grad = {4096.0, 1e-3, 57344.0, 100, 0.0, 0.3};
    queue.on_layer_numerics({fp8, numerics(2, 7, "fc", 65504.0, 0.0)});
    const EventBatch second = queue.take();
    QVERIFY(!second.empty());
    run.append(second);
    QCOMPARE(run.layer_numerics.size(), size_t{6});

    // A run without FP8 tensors opens on FP16's headroom; one with them (this one, from epoch 2) on what FP8 clipped
    // where a cell clipped 0.1% or more, else on what it made zero, until a measure is chosen.
    RunSeries no_fp8 = run;
    no_fp8.layer_numerics.resize(4);
    RunSeries unclipped = run;
    unclipped.layer_numerics[4].fp8_input.saturated_fraction = 5e-4;  // a new maximum's few: delayed scaling's own
    NumericsHeatmap map;
    map.update_from({&no_fp8});
    QCOMPARE(map.measure(), NumericsMeasure::ActivationHeadroom);
    map.update_from({&unclipped});
    QCOMPARE(map.measure(), NumericsMeasure::Fp8Underflow);
    RunSeries clipped_between = unclipped;  // at a probe within epoch 2 that no cell shows (step 7 is the epoch's)
    LayerNumerics between = clipped_between.layer_numerics[4];
    between.step = 5;
    between.fp8_input.saturated_fraction = 0.3;
    clipped_between.layer_numerics.push_back(between);
    map.update_from({&clipped_between});
    QCOMPARE(map.measure(), NumericsMeasure::Fp8Underflow);
    map.update_from({&run});
    QCOMPARE(map.measure(), NumericsMeasure::Fp8Saturated);
    map.set_measure(NumericsMeasure::ActivationHeadroom);
    // FP16's headroom is FP16's limit, not this FP32 run's own, and the caption says so; an FP16 run's is its own.
    QVERIFY2(map.caption_text().endsWith("; FP16's limits, not this run's (fp32)"), qPrintable(map.caption_text()));
    RunSeries in_fp16 = run;
    in_fp16.config.precision = precision_preset("amp-fp16");
    map.update_from({&in_fp16});
    QVERIFY2(!map.caption_text().contains("not this run's"), qPrintable(map.caption_text()));
    map.update_from({&run});
    QTableWidget* t = map.table();
    QCOMPARE(t->rowCount(), 2);
    QCOMPARE(t->columnCount(), 2);
    QCOMPARE(t->verticalHeaderItem(0)->text(), QString("conv1"));
    QCOMPARE(t->verticalHeaderItem(1)->text(), QString("fc"));
    QCOMPARE(t->horizontalHeaderItem(1)->text(), QString("E2"));
    // Headroom log2(65504 / max): 4096 -> 4.0; 131008 = 2 x 65504 -> -1.0 (beyond FP16); 65504 -> 0.0.
    QCOMPARE(t->item(0, 0)->text(), QString("4.0"));
    QCOMPARE(t->item(1, 0)->text(), QString("-1.0"));
    QCOMPARE(t->item(1, 1)->text(), QString("0.0"));
    QCOMPARE(t->item(0, 1)->text(), QString("all 0"));
    // Colours: beyond FP16 red, 4 powers of two halfway (yellow), 8 and more green, all-zero grey.
    QCOMPARE(t->item(1, 0)->background().color().hue(), 0);
    QCOMPARE(t->item(0, 0)->background().color().rgb(), numerics_color(NumericsMeasure::ActivationHeadroom, 4.0).rgb());
    QCOMPARE(numerics_color(NumericsMeasure::ActivationHeadroom, 4.0).hue(), 60);
    QCOMPARE(numerics_color(NumericsMeasure::ActivationHeadroom, 12.0).hue(), 120);
    QCOMPARE(t->item(0, 1)->background().color().rgb(), QColor(200, 200, 200).rgb());
    const QString tip = t->item(1, 0)->toolTip();
    QVERIFY2(tip.contains("fc (linear, 16 → 16 channels), epoch 1, step 3"), qPrintable(tip));
    QVERIFY2(tip.contains("forward in f16, backward in f16, 3 casts"), qPrintable(tip));
    QVERIFY2(tip.contains("loss scale 1024"), qPrintable(tip));
    QVERIFY2(tip.contains("activation: max |x| 131008;"), qPrintable(tip));
    QVERIFY2(tip.contains("weight gradient: max |x| 0.5;"), qPrintable(tip));

    // The selector: the activation gradients' underflow, 10% and more red, none green.
    map.set_measure(NumericsMeasure::ActivationGradUnderflow);
    QCOMPARE(t->item(0, 0)->text(), QString("0.00%"));
    QCOMPARE(t->item(1, 0)->text(), QString("2.00%"));
    QCOMPARE(t->item(0, 1)->text(), QString("20.00%"));
    QCOMPARE(t->item(0, 0)->background().color().hue(), 120);
    QCOMPARE(t->item(0, 1)->background().color().hue(), 0);
    // These gradients are stored in FP16: the caption says their underflow is zeros already, and the share
    // below 2^-14 is there to read.
    QVERIFY2(map.caption_text().contains("stored in FP16"), qPrintable(map.caption_text()));
    map.set_measure(NumericsMeasure::ActivationGradBelowNormal);
    QCOMPARE(t->item(0, 1)->text(), QString("40.00%"));
    QVERIFY(!map.caption_text().contains("stored in FP16"));
    map.set_measure(NumericsMeasure::WeightGradUnderflow);
    QCOMPARE(t->item(1, 1)->text(), QString("0.00%"));
    // FP8's shares: a layer's worst FP8 tensor, – where a layer has none; 1% clipped is already red.
    map.set_measure(NumericsMeasure::Fp8Saturated);
    QCOMPARE(t->item(0, 1)->text(), QString("2.00%"));
    QVERIFY(t->columnWidth(1) > t->fontMetrics().horizontalAdvance("2.00%"));  // its widest share, whole
    QCOMPARE(t->item(0, 1)->background().color().hue(), 0);
    QCOMPARE(t->item(1, 1)->text(), QString("–"));
    QCOMPARE(t->item(0, 0)->text(), QString("–"));
    QCOMPARE(t->item(1, 1)->background().color().rgb(), QColor(200, 200, 200).rgb());
    // The 0.1% the diagnosis warns of is yellow, a share past it no longer green; none, or a hundredth of it, green.
    QCOMPARE(numerics_color(NumericsMeasure::Fp8Saturated, kFp8ClippedShareOfNote).hue(), 60);
    QVERIFY(numerics_color(NumericsMeasure::Fp8Saturated, 0.0025).hue() < 60);
    QCOMPARE(numerics_color(NumericsMeasure::Fp8Saturated, 0.0).hue(), 120);
    QCOMPARE(numerics_color(NumericsMeasure::Fp8Saturated, 1e-5).hue(), 120);
    map.set_measure(NumericsMeasure::Fp8Underflow);
    QCOMPARE(t->item(0, 1)->text(), QString("30.00%"));
    QVERIFY2(map.caption_text().contains("amp-fp8"), qPrintable(map.caption_text()));
    const QString fp8_tip = t->item(0, 1)->toolTip();
    QVERIFY2(fp8_tip.contains("FP8 input (max 448): scale 2, amax 300; 2.00% clipped, 10.00% made zero (100 values)"),
             qPrintable(fp8_tip));
    QVERIFY2(fp8_tip.contains("FP8 output gradient (max 57344)"), qPrintable(fp8_tip));
    QVERIFY(!fp8_tip.contains("FP8 weight"));

    // From the store: the same records, read back into a series, draw the same cells.
    QTemporaryDir dir;
    const std::string db = dir.filePath("runs.sqlite").toStdString();
    {
      RunStore store(db);
      TrainConfig config;
      config.name = "numerics";
      const int64_t id = store.begin_run(config, RunInfo{}, "");
      store.add_layer_numerics(id, run.layer_numerics);
    }
    const RunStore store(db, RunStore::Mode::ReadOnly);
    const RunSeries stored = load_run_series(store, store.resolve("numerics"));
    QCOMPARE(stored.layer_numerics.size(), size_t{6});
    NumericsHeatmap from_store;
    from_store.update_from({&stored});
    QCOMPARE(from_store.measure(), NumericsMeasure::Fp8Saturated);
    from_store.set_measure(NumericsMeasure::ActivationHeadroom);
    from_store.update_from({&no_fp8});
    QCOMPARE(from_store.measure(), NumericsMeasure::ActivationHeadroom);  // the choice stays
    from_store.update_from({&stored});
    QCOMPARE(from_store.table()->rowCount(), 2);
    QCOMPARE(from_store.table()->item(1, 0)->text(), QString("-1.0"));
    QCOMPARE(from_store.table()->item(1, 0)->toolTip(), tip);
    QCOMPARE(from_store.table()->item(0, 1)->toolTip(), fp8_tip);
  }

  void divergence_view_shows_a_stored_runs_layers() {
    PrecisionDivergence d;
    d.epoch = 2;
    d.step = 19;
    d.mode = "amp-bf16";
    d.format = "bf16";
    d.samples = 16;
    d.unit_roundoff = 1.0 / 256;
    d.threshold = kDepartureUnits / 256;
    d.loss = {1e-3, 0.7, 0};
    d.layers = {{"conv1", "conv", "bf16", {0.5 / 256, 9, 0}, {0.01, 1, 0}, {0.02, 1, 0}},
                {"bn1", "batch_norm", "f32", {6.0 / 256, 9, 0}, {0.01, 1, 0}, {0.02, 1, 0}},
                {"fc", "linear", "bf16", {0.05, 9, 0}, {0.0, 0.0, 0}, {0.0, 1, 2}}};
    find_departures(d);
    QCOMPARE(d.first_departing, std::string("bn1"));

    // Live: reported at the end of the run, through the event queue.
    EventQueue queue;
    queue.on_divergence(d);
    RunSeries live;
    live.append(queue.take());
    QVERIFY(live.divergence);

    // Stored, read back into a series.
    QTemporaryDir dir;
    const std::string db = dir.filePath("runs.sqlite").toStdString();
    {
      RunStore store(db);
      TrainConfig config;
      config.name = "diverging";
      config.precision = precision_preset("amp-bf16");
      const int64_t id = store.begin_run(config, RunInfo{}, "");
      store.add_divergence(id, *live.divergence);
      config.name = "reference";
      config.precision = precision_preset("fp32");
      store.begin_run(config, RunInfo{}, "");
    }
    const RunStore store(db, RunStore::Mode::ReadOnly);
    const RunSeries stored = load_run_series(store, store.resolve("diverging"));
    ChartPanel panel;
    panel.set_runs({&stored});
    DivergenceView* view = panel.divergence();
    QVERIFY(view);
    QTableWidget* t = view->table();
    QCOMPARE(t->rowCount(), 3);
    QCOMPARE(t->verticalHeaderItem(0)->text(), QString("conv1"));
    QCOMPARE(t->verticalHeaderItem(2)->text(), QString("fc"));
    QCOMPARE(t->item(0, 0)->text(), QString::fromStdString(relative_error_text(d.layers[0].activation)));
    QCOMPARE(t->item(2, 1)->text(), QString("-"));        // a zero reference: not defined
    QCOMPARE(t->item(2, 2)->text(), QString("inf/NaN"));  // non-finite where FP32 is finite
    QVERIFY(t->item(1, 3)->text().startsWith("first departure"));
    QVERIFY(t->item(1, 3)->font().bold());
    // Within one rounding green, beyond the line of 4 red.
    QCOMPARE(t->item(0, 0)->background().color().hue(), 120);
    QCOMPARE(t->item(1, 0)->background().color().hue(), 0);
    QCOMPARE(view->caption()->text(), QString::fromStdString(divergence_sentence(d)));
    QVERIFY(view->caption()->text().contains("departs from FP32 first at bn1"));
    QVERIFY(view->caption()->toolTip().startsWith(view->caption()->text() + "\n\n"));  // whole, however narrow

    // An FP32 run has nothing to compare, and says so.
    const RunSeries reference = load_run_series(store, store.resolve("reference"));
    panel.set_runs({&reference});
    QCOMPARE(t->rowCount(), 0);
    QVERIFY(view->caption()->text().contains("its own reference"));
  }

  // One thinning rule for every chart: a single-step loss spike ten times the loss around it, in a 24,000-step
  // stored run, is drawn at its full height by the window's loss chart, by its exported SVG and by the HTML
  // report's SVG (a bucket's mean would draw it at about a tenth of that).
  void a_single_step_spike_is_drawn_in_the_window_export_and_report() {
    constexpr int64_t kSteps = 24000, kPerEpoch = 4000, kSpikeStep = 13457;
    QTemporaryDir dir;
    const std::string db = dir.filePath("runs.sqlite").toStdString();
    float spike = 0;
    {
      RunStore store(db);
      TrainConfig config;
      config.name = "spike";
      config.epochs = static_cast<int>(kSteps / kPerEpoch);
      RunInfo info;
      info.steps_per_epoch = kPerEpoch;
      const int64_t id = store.begin_run(config, info, "");
      std::vector<StepReport> steps;
      for (int64_t i = 0; i < kSteps; ++i) {
        StepReport s;
        s.epoch = static_cast<int>(i / kPerEpoch) + 1;
        s.step = i;
        s.loss = static_cast<float>(1.0 + 0.2 * std::exp(-i / 8000.0));
        if (i == kSpikeStep) s.loss = spike = 10 * s.loss;
        s.loss_scale = 1024;
        s.wall_seconds = 0.01 * static_cast<double>(i);
        steps.push_back(s);
      }
      store.add_steps(id, steps, 240);
      store.end_run(id, RunEnd{}, {}, 240);
    }
    const RunStore store(db, RunStore::Mode::ReadOnly);
    const int64_t id = store.resolve("spike");
    const RunSeries run = load_run_series(store, id);
    QCOMPARE(run.steps.size(), size_t(kSteps));

    // The window, unsmoothed (as the report draws it): the loss chart's per-step curves hold the spike's very
    // point among a few thousand.
    ChartPanel panel;
    panel.resize(1500, 900);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    panel.set_smoothing(0);
    panel.set_runs({&run});
    int curves = 0;
    for (QAbstractSeries* s : panel.chart("loss")->chart()->series()) {
      if (s->name() != "per step") continue;
      const QList<QPointF> drawn = qobject_cast<QXYSeries*>(s)->points();
      QVERIFY(drawn.size() > 100 && drawn.size() < kSteps / 4);
      QVERIFY2(drawn.contains(QPointF(double(kSpikeStep), double(spike))), "the window's loss chart lost the spike");
      ++curves;
    }
    QCOMPARE(curves, 2);  // the faint raw line and the (here unsmoothed) main one

    // An exported chart: the SVG file's per-step line reaches the spike's value on the file's own y axis.
    const QString svg = dir.filePath("loss.svg");
    export_chart("loss", {&run}, panel.options(), svg);
    QFile file(svg);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const double exported = highest_value_in_exported_chart(file.readAll().toStdString(), train_color());
    QVERIFY2(std::abs(exported - spike) < 0.05 * spike,  // labels placed by their box's top: half a label's height
             qPrintable(QString("the exported loss chart peaks at %1, the spike is %2").arg(exported).arg(spike)));

    // The report: the training loss chart's polyline reaches the spike's value on the chart's y axis.
    const std::string html = html_report(store, {id});
    const double reported = highest_value_in_report_chart(html, "Training loss");
    QVERIFY2(std::abs(reported - spike) < 0.02 * spike,
             qPrintable(QString("the report's loss chart peaks at %1, the spike is %2").arg(reported).arg(spike)));
  }

  // Every tick of an epoch axis is a whole epoch, so that its "%.0f" label says where it is (one epoch's axis, 0.5 to
  // 1.5, once read "1 1 2"), and there are at most 13 of them, or as many as fit, also on the live chart's axis after
  // a one-epoch run.
  void epoch_axes_tick_at_whole_epochs() {
    QCOMPARE(epoch_label_step(12, 13), 1);
    QCOMPARE(epoch_label_step(12, 5), 5);
    QCOMPARE(epoch_label_step(300, 5), 100);
    QCOMPARE(epoch_label_step(300, 13), 50);  // 1, 2, 5, 10, 20, 50: 20 would take 15 labels
    QValueAxis live;  // the live chart's axis, set for one run after another
    for (int fitting : {kMostEpochTicks, 5})
      for (int epochs : {1, 2, 3, 12, 13, 90, 1, 90}) {
        QValueAxis fresh;
        for (QValueAxis* axis : {&fresh, &live}) {
          set_epoch_range(axis, epochs, fitting);
          const QList<double> ticks = epoch_ticks(*axis);
          const QString what = QStringLiteral("%1 epochs, %2 fit, %3 axis")
                                   .arg(epochs)
                                   .arg(fitting)
                                   .arg(axis == &live ? "live" : "fresh");
          QVERIFY2(!ticks.isEmpty() && ticks.size() <= fitting, qPrintable(what));
          if (epochs <= 12 && fitting == kMostEpochTicks) QCOMPARE(ticks.size(), epochs);  // each epoch
          for (double t : ticks) QVERIFY2(t == std::round(t), qPrintable(what + QStringLiteral(": %1").arg(t)));
          QVERIFY(axis->min() <= 1 && axis->max() >= epochs);
        }
      }
    // In a chart as narrow as at 1366x768 beside the setup panel, 12 epochs are labelled no closer than their labels.
    RunSeries run = long_run(12 * 2, 2);
    AccuracyChart chart;
    chart.resize(220, 250);
    chart.show();
    ChartOptions by_epoch;
    by_epoch.x_axis = XAxis::Epoch;
    chart.update_from({&run}, by_epoch);
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    auto* x = qobject_cast<QValueAxis*>(chart.chart()->axes(Qt::Horizontal).value(0));
    QVERIFY(x);
    const auto apart = [&] {  // between two ticks, once the chart has ticked its laid-out plot
      const QList<double> ticks = epoch_ticks(*x);
      return ticks.size() < 2 ? 0.0 : chart.chart()->plotArea().width() * (ticks[1] - ticks[0]) / (x->max() - x->min());
    };
    QTRY_VERIFY2(apart() > QFontMetricsF(x->labelsFont()).horizontalAdvance("12"),
                 qPrintable(QStringLiteral("%1 ticks %2 px apart").arg(epoch_ticks(*x).size()).arg(apart())));
  }

  // One run's data-wait bars keep every epoch, labelled at every epoch while the labels fit beside each other, else at
  // every 2nd, 5th, 10th, ... epoch: a long run's labels once all read "…" at 1366x768. The axis spans the epochs
  // planned, as the other epoch charts' do.
  void a_long_runs_data_wait_bars_label_the_epochs_that_fit() {
    for (const auto& [epochs, width, planned] :
         {std::tuple{6, 450, 6}, {60, 450, 60}, {60, 1300, 60}, {300, 450, 300}, {6, 450, 30}}) {
      RunSeries run = long_run(epochs * 2, 2);
      run.config.epochs = planned;
      for (EpochReport& e : run.epochs) e.compute_seconds = 1, e.data_wait_seconds = 0.25;
      DataWaitChart chart;
      chart.resize(width, 300);
      chart.show();
      chart.update_from({&run}, ChartOptions{});
      QVERIFY(QTest::qWaitForWindowExposed(&chart));
      const QString what = QStringLiteral("%1 of %2 epochs, %3 px").arg(epochs).arg(planned).arg(width);
      auto* axis = qobject_cast<QCategoryAxis*>(chart.chart()->axes(Qt::Horizontal).value(0));
      auto* bars = qobject_cast<QAbstractBarSeries*>(chart.chart()->series().value(0));
      QVERIFY2(axis && bars && bars->barSets().value(0)->count() == epochs, qPrintable(what));
      // The narrowest gap between two labels, once the chart has relabelled its laid-out plot.
      const auto narrowest = [&] {
        const QStringList shown = axis->categoriesLabels();
        qreal gap = INFINITY;
        for (qsizetype k = 1; k < shown.size(); ++k)
          gap = std::min(gap, chart.chart()->mapToPosition(QPointF(axis->endValue(shown[k]), 0), bars).x() -
                                  chart.chart()->mapToPosition(QPointF(axis->endValue(shown[k - 1]), 0), bars).x());
        return gap;
      };
      const qreal label_width = QFontMetricsF(axis->labelsFont()).horizontalAdvance(QString::number(planned));
      QTRY_VERIFY2(
          narrowest() > label_width,
          qPrintable(what + QStringLiteral(": %1 px between labels %2 px wide").arg(narrowest()).arg(label_width)));
      const QStringList labels = axis->categoriesLabels();
      QVERIFY2(labels.size() >= 4, qPrintable(what + ": " + labels.join(' ')));
      if (planned == 6) QCOMPARE(labels, (QStringList{"1", "2", "3", "4", "5", "6"}));
      QCOMPARE(axis->max(), planned - 0.5);
      QCOMPARE(labels.back().toInt() % (planned == 6 ? 1 : 5), 0);
      for (const QString& label : labels)  // each under its bar
        QCOMPARE(static_cast<int>(axis->endValue(label)) + 1, label.toInt());
      if (epochs == 60 && width == 1300) QVERIFY2(labels.size() > 6, qPrintable(what + ": " + labels.join(' ')));
    }
  }

  void x_axis_follows_the_choice_step_epoch_or_wall_clock() {
    // A real run: ResNet-20 on stripes, 2 epochs of 4 steps, recorded into a store and read back.
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.sqlite");
    const int64_t id = train_into_store(db, tiny_config(write_stripes(dir.filePath("stripes"), 24, 16), 2, 4));
    const RunStore store(db.toStdString(), RunStore::Mode::ReadOnly);
    const RunSeries run = load_run_series(store, id);
    const std::vector<StepReport> steps = store.steps(id);
    const std::vector<EpochReport> epochs = store.epochs(id);
    QCOMPARE(steps.size(), size_t{8});
    QCOMPARE(epochs.size(), size_t{2});
    QCOMPARE(run.steps_per_epoch, int64_t{4});

    ChartPanel panel;
    panel.resize(1500, 900);
    panel.set_runs({&run});
    auto points = [&](const QString& metric, const QString& series) {
      for (QAbstractSeries* s : panel.chart(metric)->chart()->series())
        if (s->name() == series) return qobject_cast<QXYSeries*>(s)->points();
      qFatal("no series %s in %s", qPrintable(series), qPrintable(metric));
      return QList<QPointF>{};
    };
    auto x_title = [&](const QString& metric) {
      return panel.chart(metric)->chart()->axes(Qt::Horizontal).front()->titleText();
    };
    // The epoch's wall-clock time: the wall time of its last stored step and then its validation (the epoch's time
    // outside its steps), as the HTML report has it.
    auto epoch_end_wall = [&](int epoch) {
      double at = NAN;
      for (const StepReport& s : steps)
        if (s.epoch == epoch) at = s.wall_seconds;
      const EpochReport& e = epochs[static_cast<size_t>(epoch - 1)];
      return at + (e.seconds - e.compute_seconds - e.data_wait_seconds);
    };

    // Step (the default): step numbers, with ticks where their whole-number labels say (8 steps: 0 to 10 by 5,
    // not by 2.5 labelled "3" and "8").
    QCOMPARE(x_title("loss"), QString("step"));
    const auto* x = qobject_cast<QValueAxis*>(panel.chart("loss")->chart()->axes(Qt::Horizontal).front());
    QVERIFY(x && x->tickCount() > 1);
    const double tick = (x->max() - x->min()) / (x->tickCount() - 1);
    QCOMPARE(tick, std::round(tick));
    QList<QPointF> loss = points("loss", "per step");
    QCOMPARE(loss.size(), qsizetype{8});
    for (qsizetype k = 0; k < loss.size(); ++k) QCOMPARE(loss[k].x(), double(steps[k].step));

    // Wall clock: every per-step point at its stored wall time, every per-epoch point at its epoch's end.
    panel.set_x_axis(XAxis::WallClock);
    for (const QString metric : {"loss", "loss-scale", "accuracy", "epoch-time"})
      QVERIFY2(x_title(metric).startsWith("wall clock (s"), qPrintable(metric + ": " + x_title(metric)));
    loss = points("loss", "per step");
    const QList<QPointF> scale = points("loss-scale", "scale");
    QCOMPARE(loss.size(), qsizetype{8});
    QCOMPARE(scale.size(), qsizetype{8});
    for (qsizetype k = 0; k < loss.size(); ++k) {
      QCOMPARE(loss[k].x(), steps[k].wall_seconds);
      QCOMPARE(scale[k].x(), steps[k].wall_seconds);
    }
    QVERIFY(steps.back().wall_seconds > steps.front().wall_seconds);
    const QList<QPointF> accuracy = points("accuracy", "validation top-1");
    const QList<QPointF> validation_loss = points("loss", "validation");
    QCOMPARE(accuracy.size(), qsizetype{2});
    for (int e = 0; e < 2; ++e) {
      QCOMPARE(accuracy[e].x(), epoch_end_wall(e + 1));
      QVERIFY(accuracy[e].x() > steps[static_cast<size_t>(4 * e + 3)].wall_seconds);  // known once validated
      QCOMPARE(accuracy[e].y(), 100 * epochs[e].validation_accuracy);
      QCOMPARE(validation_loss[e].x(), epoch_end_wall(e + 1));
    }

    // Epoch: per-step curves at the fraction of epochs done, per-epoch points at whole epochs.
    panel.set_x_axis(XAxis::Epoch);
    QCOMPARE(x_title("loss"), QString("epoch"));
    loss = points("loss", "per step");
    for (qsizetype k = 0; k < loss.size(); ++k) QCOMPARE(loss[k].x(), (steps[k].step + 1) / 4.0);
    QCOMPARE(points("loss", "validation").back().x(), 2.0);
    QCOMPARE(points("accuracy", "validation top-1").back().x(), 2.0);

    // An exported chart is drawn against the same axis: its title is in the SVG.
    ChartOptions wall = panel.options();
    wall.x_axis = XAxis::WallClock;
    const QString svg = dir.filePath("accuracy.svg");
    export_chart("accuracy", {&run}, wall, svg);
    QFile file(svg);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray drawn = file.readAll();
    QVERIFY(drawn.contains("wall clock (s since the run started)"));
  }
};

}  // namespace ampwb::ui::test

int main(int argc, char** argv) { return ampwb::ui::test::run_ui_test<ampwb::ui::test::ChartData>(argc, argv); }

#include "test_ui_charts.moc"
