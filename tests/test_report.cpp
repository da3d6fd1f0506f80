// `ampwb report` on real stored runs: every section in one self-contained file, run and class names escaped in the
// HTML and its SVG, the page rendered by a real headless browser, and the PDF converted to pages.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "analysis/report_charts.h"
#include "analysis/run_colours.h"
#include "analysis/run_report.h"
#include "store/store_recorder.h"
#include "test_cli_util.h"

namespace ampwb {
namespace {
using namespace cli_test;

const char* const kHostileRun = "<script>alert(1)</script>";
const char* const kHostileClass = "a&b\"c";

class Report : public ::testing::Test {
 protected:
  // Two runs on stripes whose first class folder has a name that needs escaping, neither scaling its loss, and a
  // third that does.
  static void SetUpTestSuite() {
    dir_ = new TempDir("report");
    const fs::path data = make_stripes_folder("report", 24, 16);
    fs::rename(data / "horizontal stripes", data / kHostileClass);
    RunStore store(db());
    for (const char* mode : {"fp32", "amp-bf16", "amp-fp16"}) {
      TrainConfig c;
      c.data_dir = data.string();
      c.name = std::string(mode) == "fp32" ? kHostileRun : std::string(mode) == "amp-bf16" ? "bf16 & co" : "fp16";
      c.depth = 20;
      c.epochs = 2;
      c.batch_size = 8;
      c.threads = 2;
      c.precision = precision_preset(mode);
      StoreRecorder recorder(store, c);
      Trainer(c, &recorder).run();
      ids_.push_back(recorder.run_id());
    }
    store.add_tag(ids_[1], "<b>keeper</b>");
    store.set_notes(ids_[1], "why it ran\n<i>second</i> line");
    fs::remove_all(data);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string db() { return dir_->file("runs.sqlite"); }
  // The FP32 run and the one in `mode` ("amp-bf16" or "amp-fp16").
  static std::vector<std::string> report_args(const std::string& out, const std::string& mode = "amp-bf16") {
    return {"report", std::to_string(ids_[0]), std::to_string(ids_[mode == "amp-bf16" ? 1 : 2]), "--out", out, "--db",
            db()};
  }
  static std::string browser() {
    for (const char* b : {"/usr/bin/chromium-headless-shell", "/usr/bin/chromium"})
      if (fs::exists(b)) return b;
    return "";
  }

  static TempDir* dir_;
  static std::vector<int64_t> ids_;
};
TempDir* Report::dir_ = nullptr;
std::vector<int64_t> Report::ids_;

TEST_F(Report, HoldsEverySectionWithStoredNamesEscaped) {
  const std::string out = dir_->file("report.html");
  const Result r = ampwb(report_args(out));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string html = read_text(out);
  for (const char* section :
       {"<h2 id=\"comparison\">", "Configuration differences", "<h2 id=\"charts\">", "Training loss",
        "Validation accuracy (%) against wall time",
        "<p>Loss scale: no run here scales its loss (each one's scale stays 1), so none skips a step.</p>",
        "Epoch time", "<h3>Diagnosis</h3>", "<h3>Where the time went</h3>", "<h3>Per-layer numerics</h3>",
        "<h3>Confusion matrix</h3>", "Validation set, epoch 2.", "<h3>Machine and data</h3>", "precision.mode",
        "<h3>Precision divergence from FP32</h3>", "fp32 computes in FP32: the run is its own reference",
        "One step in amp-bf16 against one in FP32", "<td>layer1.0.conv1</td>"})
    expect_contains(html, section);
  // The second run's speed against the first, whichever way it went on this machine (AMX makes BF16 faster).
  expect_contains(html, " images/s (interquartile range ");
  expect_contains(html,
                  "(run " + std::to_string(ids_[1]) + ", amp-bf16, against run " + std::to_string(ids_[0]) + ", fp32)");
  expect_contains(html, "Training speed (steady state): ");
  expect_contains(
      html, "in brackets its 95% interval, a bootstrap over blocks of consecutive steps");  // what the interval is
  expect_contains(html, "Machine load while training: ");
  EXPECT_TRUE(html.find("Most confused: ") != std::string::npos ||
              html.find("No class was taken for another.") != std::string::npos);
  EXPECT_EQ(html.find("<title>Loss scale"), std::string::npos) << "a flat loss-scale chart of runs that scale nothing";
  EXPECT_EQ(html.find("<script"), std::string::npos) << "a stored name became markup";
  expect_contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;");
  EXPECT_EQ(html.find(kHostileClass), std::string::npos);
  expect_contains(html, "a&amp;b&quot;c");
  expect_contains(html, "bf16 &amp; co");
  // The user's tags and notes under their run's heading, escaped, a note's lines kept.
  expect_contains(html, "<p><b>Tags:</b> &lt;b&gt;keeper&lt;/b&gt;</p>");
  expect_contains(html, "<p><b>Notes:</b> why it ran<br>\n&lt;i&gt;second&lt;/i&gt; line</p>");
  EXPECT_EQ(html.find("<b>Tags:</b>"), html.rfind("<b>Tags:</b>")) << "the run without tags shows some";
  // Self-contained: nothing fetched from anywhere.
  std::string rest = html;
  for (size_t at; (at = rest.find("http://www.w3.org/2000/svg")) != std::string::npos;) rest.erase(at, 26);
  EXPECT_EQ(rest.find("http"), std::string::npos);
  EXPECT_EQ(rest.find("src="), std::string::npos);
}

TEST_F(Report, ABrowserRendersItAndItsPdfHasPages) {
  const std::string chromium = browser();
  if (chromium.empty())
    GTEST_SKIP() << "no headless Chromium (scripts/install-deps.sh installs chromium-headless-shell)";
  const std::string html = dir_->file("render.html"), png = dir_->file("render.png");
  ASSERT_EQ(ampwb(report_args(html)).status, 0);
  const Result shot = run({chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1100,2400",
                           "--screenshot=" + png, "file://" + html});
  ASSERT_EQ(shot.status, 0) << shot.output;
  const cv::Mat page = cv::imread(png);
  ASSERT_FALSE(page.empty()) << shot.output;
  // The charts drew: pixels in the first run's colour (#0072b2, as the workbench draws it), as the browser rendered
  // the inline SVG.
  ASSERT_EQ(hex_colour(run_colour(0)), "#0072b2");
  cv::Mat first_run;
  cv::inRange(page, cv::Scalar(0xa2, 0x62, 0x00), cv::Scalar(0xc2, 0x82, 0x10), first_run);  // BGR
  EXPECT_GT(cv::countNonZero(first_run), 200);

  const std::string pdf = dir_->file("report.pdf");
  const Result printed = ampwb(report_args(pdf));
  ASSERT_EQ(printed.status, 0) << printed.output;
  ASSERT_TRUE(fs::exists("/usr/bin/pdftoppm")) << "pdftoppm (poppler-utils) converts the PDF to pages";
  const Result pages = run({"/usr/bin/pdftoppm", "-png", "-r", "30", pdf, dir_->file("page")});
  ASSERT_EQ(pages.status, 0) << pages.output;
  int count = 0;
  for (const auto& f : fs::directory_iterator(dir_->path())) count += f.path().filename().string().starts_with("page");
  EXPECT_GE(count, 2) << "a report of two runs with charts fills more than one page";
  for (const auto& f : fs::directory_iterator(dir_->path()))
    EXPECT_EQ(f.path().string().find(".printing-"), std::string::npos) << f.path() << " left behind";
}

// A report that cannot be written makes nothing and leaves what was there: a file in its folder's place is named
// before the report is made, for HTML and PDF alike; a print that fails leaves an earlier report as it was. A
// missing folder is made, as export csv and export chart make theirs, once the report is ready.
TEST_F(Report, AReportThatCannotBeWrittenLeavesWhatWasThere) {
  const std::string folder = dir_->file("no-such-folder"), nested = folder + "/deeper/report.html";
  Result r = ampwb({"report", "999", "--out", nested, "--db", db()});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_FALSE(fs::exists(folder)) << "a report that failed made its folder";
  r = ampwb(report_args(nested));
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(read_text(nested), "<html");
  const std::string plain = dir_->file("plain-file");
  std::ofstream(plain) << "x";
  r = ampwb(report_args(plain + "/report.html"));
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "'" + plain + "' is a file, not a folder");

  const std::string earlier = dir_->file("earlier.pdf"), failing = dir_->file("failing-chromium");
  std::ofstream(earlier) << "an earlier report";
  std::ofstream(failing) << "#!/bin/sh\nexit 3\n";
  fs::permissions(failing, fs::perms::owner_all);
  // A report there already is not replaced unless asked to be; asked, a report that fails keeps it all the same.
  r = ampwb(report_args(earlier));
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "'" + earlier + "' exists already: name another --out, or add --overwrite to replace it");
  ::setenv("AMPWB_CHROMIUM", failing.c_str(), 1);  // a browser that prints nothing
  std::vector<std::string> replacing = report_args(earlier);
  replacing.push_back("--overwrite");
  r = ampwb(replacing);
  const std::string unmade = dir_->file("unmade");
  const Result into_a_new_folder = ampwb(report_args(unmade + "/report.pdf"));
  ::unsetenv("AMPWB_CHROMIUM");
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "could not print");
  EXPECT_EQ(read_text(earlier), "an earlier report");
  EXPECT_EQ(into_a_new_folder.status, 1) << into_a_new_folder.output;
  EXPECT_FALSE(fs::exists(unmade)) << "a print that failed made its folder";
  for (const auto& f : fs::directory_iterator(dir_->path()))
    EXPECT_EQ(f.path().string().find(".printing-"), std::string::npos) << f.path() << " left behind";
}

// Whether `step` is 1, 2 or 5 times a power of ten.
bool nice_spacing(double step) {
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  return std::fabs(mantissa - 1) < 1e-6 || std::fabs(mantissa - 2) < 1e-6 || std::fabs(mantissa - 5) < 1e-6;
}

// The texts of the elements of `svg` whose class is `cls`.
std::vector<std::string> texts_of_class(const std::string& svg, const std::string& cls) {
  std::vector<std::string> out;
  const std::regex text("class=\"" + cls + "\"[^>]*>([^<]*)<");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

// Tick values evenly spaced by a nice spacing, read back from their texts.
void expect_nice_ticks(const std::vector<std::string>& texts, const std::string& chart, bool whole) {
  ASSERT_GE(texts.size(), 2u) << chart;
  std::vector<double> values;
  for (const std::string& t : texts) values.push_back(std::stod(t));
  const double step = values[1] - values[0];
  EXPECT_TRUE(nice_spacing(step)) << chart << ": ticks " << texts.front() << ", " << texts[1];
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(values[i], values[0] + step * static_cast<double>(i), step * 1e-6) << chart << ": " << texts[i];
    EXPECT_NEAR(values[i] / step, std::round(values[i] / step), 1e-6) << chart << ": " << texts[i];
    if (whole) {
      EXPECT_EQ(texts[i].find('.'), std::string::npos) << chart << ": " << texts[i];
    }
  }
}

// Printed to PDF, no page ends with a heading: each stays with what it heads.
TEST_F(Report, ItsPdfKeepsEveryHeadingWithItsContent) {
  const std::string chromium = browser();
  if (chromium.empty())
    GTEST_SKIP() << "no headless Chromium (scripts/install-deps.sh installs chromium-headless-shell)";
  ASSERT_TRUE(fs::exists("/usr/bin/pdftotext")) << "pdftotext (poppler-utils) reads the PDF's pages";
  const std::string html_file = dir_->file("headings.html"), pdf = dir_->file("headings.pdf");
  ASSERT_EQ(ampwb(report_args(html_file)).status, 0);
  ASSERT_EQ(ampwb(report_args(pdf)).status, 0);
  const std::string html = read_text(html_file);
  std::vector<std::string> headings;
  const std::regex heading("<h[123][^>]*>([^<&]*)</h[123]>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), heading); it != std::sregex_iterator(); ++it)
    headings.push_back((*it)[1]);
  ASSERT_GE(headings.size(), 10u);
  const Result text = run({"/usr/bin/pdftotext", "-layout", pdf, dir_->file("headings.txt")});
  ASSERT_EQ(text.status, 0) << text.output;
  const std::string pages = read_text(dir_->file("headings.txt"));
  size_t count = 0, start = 0;
  for (size_t end; (end = pages.find('\f', start)) != std::string::npos; start = end + 1, ++count) {
    std::string last;  // the page's last line with text
    std::istringstream lines(pages.substr(start, end - start));
    for (std::string line; std::getline(lines, line);)
      if (line.find_first_not_of(" \t") != std::string::npos) last = line.substr(line.find_first_not_of(" \t"));
    while (!last.empty() && last.back() == ' ') last.pop_back();
    EXPECT_EQ(std::find(headings.begin(), headings.end(), last), headings.end())
        << "page " << count + 1 << " ends with the heading \"" << last << "\"";
  }
  EXPECT_GE(count, 3u);
}

TEST(ReportCharts, TicksAreNiceNumbersAndWholeWhereTheAxisCounts) {
  // The ranges: accuracy 0.9052 to 2.477 ticked at 2.477 and 0.9052; two epochs ticked at 1.25, 1.5, 1.75.
  const std::vector<double> y = nice_ticks(0.9052, 2.477, 6);
  ASSERT_GE(y.size(), 3u);
  EXPECT_LE(y.size(), 6u);
  EXPECT_LE(y.front(), 0.9052);
  EXPECT_GE(y.back(), 2.477);
  EXPECT_TRUE(nice_spacing(y[1] - y[0]));
  for (double v : y) EXPECT_NEAR(v / (y[1] - y[0]), std::round(v / (y[1] - y[0])), 1e-9) << v;
  EXPECT_EQ(nice_ticks(1, 2, 7, true), (std::vector<double>{1, 2}));
  EXPECT_EQ(nice_ticks(1, 5, 7, true), (std::vector<double>{1, 2, 3, 4, 5}));
  EXPECT_EQ(nice_ticks(0, 4690, 7, true), (std::vector<double>{0, 1000, 2000, 3000, 4000, 5000}));
  EXPECT_EQ(nice_ticks(-0.3, 0.3, 7), (std::vector<double>{-0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3}));
  // Flat lines: an accuracy of 100% every epoch tops its axis; one epoch spans to the next; a zero goes up.
  EXPECT_EQ(nice_ticks(100, 100, 6), (std::vector<double>{90, 92, 94, 96, 98, 100}));
  EXPECT_EQ(nice_ticks(1, 1, 7, true), (std::vector<double>{1, 2}));
  EXPECT_EQ(nice_ticks(-2, -2, 6), (std::vector<double>{-2, -1.95, -1.9, -1.85, -1.8}));
  EXPECT_EQ(nice_ticks(0, 0, 6), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(tick_text(0.5, 0.5), "0.5");
  EXPECT_EQ(tick_text(2, 1), "2");
  EXPECT_EQ(tick_text(0.05, 0.05), "0.05");
  EXPECT_EQ(tick_text(1500, 500), "1500");
}

// A run of one epoch has one point on the per-epoch charts: a polyline of one point draws nothing, so it is a dot, in
// the plot, at its value; a line of two points is left a line.
TEST(ReportCharts, ALineOfOnePointIsDrawnAsADot) {
  const std::string svg =
      svg_line_chart("Validation accuracy (%)", "epoch",
                     {{"1 fp32", "#1f77b4", {{1, 90.05}}, {}}, {"2 amp-bf16", "#d62728", {{1, 91.15}, {2, 92.0}}, {}}},
                     ChartAxis::WholeNumbers);
  const std::regex dot("<circle class=\"point\" cx=\"([0-9.]+)\" cy=\"([0-9.]+)\" r=\"[0-9.]+\" fill=\"([^\"]+)\"");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, dot)) << svg;
  EXPECT_EQ(m[3], "#1f77b4");
  const std::string dot_y = m[2];
  const std::regex plot("<rect x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)\" height=\"([0-9.]+)\"");
  std::smatch r;
  ASSERT_TRUE(std::regex_search(svg, r, plot));
  EXPECT_NEAR(std::stod(m[1]), std::stod(r[1]), 0.1) << "epoch 1, the axis's first tick";
  const double y = std::stod(dot_y), top = std::stod(r[2]), height = std::stod(r[4]);
  EXPECT_GT(y, top);
  EXPECT_LT(y, top + height);
  // The other line's first point, 91.15, lies above the dot's 90.05 (SVG's y grows downwards).
  const std::regex line_start("stroke=\"#d62728\" points=\"[0-9.]+,([0-9.]+) ");
  ASSERT_TRUE(std::regex_search(svg, r, line_start)) << svg;
  EXPECT_LT(std::stod(r[1]), y);
  EXPECT_EQ(svg.find("<circle", m.position(0) + 1), std::string::npos) << "one dot only";
}

// amp-fp8 runs get the GUI's FP8 chart: one tensor's scale and amax at each probed step, a line per run, the tensor
// that clipped the most of those every FP8 run casts (a tensor of one run alone would leave the others without a
// line), crosses where it clipped. Runs without FP8 get no such chart.
TEST(ReportFp8, ChartsTheScaleAndAmaxOfTheTensorThatClippedTheMost) {
  TempDir dir("report_fp8");
  RunStore store(dir.file("runs.sqlite"));
  const auto layer = [](int64_t step, const char* name, double weight_clipped, double scale) {
    LayerNumerics n;
    n.epoch = 1, n.step = step, n.layer = name, n.kind = "conv";
    n.fp8_input = {scale, 2.0, 448.0, 100, 0.0, 0.0};
    n.fp8_weight = {scale * 8, 0.4, 448.0, 100, weight_clipped, 0.0};
    return n;
  };
  std::vector<int64_t> ids;
  for (const bool first_and_last : {false, true}) {
    TrainConfig c;
    c.name = first_and_last ? "all in fp8" : "fp8";
    c.precision = precision_preset("amp-fp8");
    c.precision.fp8.first_and_last = first_and_last;
    ids.push_back(store.begin_run(c, RunInfo{}, ""));
    std::vector<LayerNumerics> probes{layer(4, "layer1.0.conv1", 0.0, 100), layer(9, "layer1.0.conv1", 0.02, 128)};
    if (!first_and_last) probes[0].fp8_weight.amax = 0;  // a tensor of zeros: no point on a log axis
    if (first_and_last) {
      LayerNumerics stem = layer(9, "conv1", 0.0, 8);
      stem.fp8_input.saturated_fraction = 0.9;  // clipped most, but in this run alone
      probes.push_back(stem);
    }
    store.add_layer_numerics(ids.back(), probes);
  }
  const std::string html = html_report(store, ids, {});
  expect_contains(html, "FP8's delayed scaling of layer1.0.conv1&#39;s weight, the tensor that clipped the most");
  const std::regex chart("<svg[^]*?</svg>");
  std::vector<std::string> scale_charts;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), chart); it != std::sregex_iterator(); ++it)
    if (it->str().find("FP8 scale of layer1.0.conv1&#39;s weight") != std::string::npos)
      scale_charts.push_back(it->str());
  ASSERT_EQ(scale_charts.size(), 1u);
  for (const char* legend : {"1 amp-fp8", "2 amp-fp8"}) expect_contains(scale_charts[0], legend);
  expect_contains(html, "FP8 amax of layer1.0.conv1&#39;s weight");
  // Run 1's amax of 0 is left out: its other probe alone, a dot; the axis keeps to the amaxes there are.
  const size_t amax_at = html.find("FP8 amax of layer1.0.conv1&#39;s weight");
  const std::string amax_chart = html.substr(amax_at, html.find("</svg>", amax_at) - amax_at);
  expect_contains(amax_chart, "<circle class=\"point\"");
  EXPECT_FALSE(std::regex_search(amax_chart, std::regex(">[0-9.]+e-[0-9]+<"))) << "an axis down past 2^-30";
  // One clipped probe in each run: a cross each.
  const std::string& svg = scale_charts[0];
  size_t crosses = 0;
  for (size_t at = svg.find("&#215;</text>"); at != std::string::npos; at = svg.find("&#215;</text>", at + 1))
    ++crosses;
  EXPECT_EQ(crosses, 2u) << svg;

  TrainConfig plain;
  plain.name = "fp32";
  const std::vector<int64_t> fp32{store.begin_run(plain, RunInfo{}, "")};
  EXPECT_EQ(html_report(store, fp32, {}).find("FP8 scale of"), std::string::npos);
}

// Every chart of the report ticks at nice numbers, epochs at whole ones, the loss scale at powers of two; every legend
// lies below its plot; the heat map's caption is on the page, saying what FP16 would face on a run not in FP16.
TEST_F(Report, ChartsTickAtNiceNumbersWithTheLegendBelowThePlot) {
  const std::string out = dir_->file("ticks.html");
  ASSERT_EQ(ampwb(report_args(out, "amp-fp16")).status, 0);
  const std::string html = read_text(out);
  const std::regex chart("<svg[^>]*class=\"chart\"[^>]*><title>([^<]*)</title>.*?</svg>");
  const std::regex plot("<rect x=\"[^\"]*\" y=\"([0-9.]+)\" width=\"[^\"]*\" height=\"([0-9.]+)\"");
  const std::regex legend_y("<g class=\"legend\"><line x1=\"[^\"]*\" x2=\"[^\"]*\" y1=\"([0-9.]+)\"");
  int charts = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), chart); it != std::sregex_iterator(); ++it, ++charts) {
    const std::string svg = (*it)[0], title = (*it)[1];
    const bool by_epoch = title == "Validation accuracy (%)" || title == "Epoch time (s)";
    expect_nice_ticks(texts_of_class(svg, "x-tick"), title + " (x)", by_epoch || title == "Training loss");
    if (title.starts_with("Loss scale")) {
      for (const std::string& t : texts_of_class(svg, "y-tick")) {
        const double v = t.starts_with("2^") ? std::ldexp(1.0, std::stoi(t.substr(2))) : std::stod(t);
        EXPECT_EQ(v, std::exp2(std::round(std::log2(v)))) << title << ": " << t;
      }
    } else {
      expect_nice_ticks(texts_of_class(svg, "y-tick"), title + " (y)", false);
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_search(svg, m, plot)) << title;
    const double plot_bottom = std::stod(m[1]) + std::stod(m[2]);
    int legends = 0;
    for (auto l = std::sregex_iterator(svg.begin(), svg.end(), legend_y); l != std::sregex_iterator(); ++l, ++legends)
      EXPECT_GT(std::stod((*l)[1]), plot_bottom + 20) << title << ": a legend entry over the plot or its axis";
    EXPECT_EQ(legends, 2) << title;
  }
  EXPECT_EQ(charts, 5);
  expect_contains(html,
                  "<figcaption class=\"caption\">What FP16 would face (this run does not compute in FP16): each cell");
  expect_contains(html, "below FP16's largest value, 65,504, in powers of two");
}

TEST(HtmlEscape, EscapesEveryCharacterThatEndsTextOrAnAttribute) {
  EXPECT_EQ(html_escape("<a href=\"x\">Tom & Jerry's</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain ünïcode"), "plain ünïcode");
}

}  // namespace
}  // namespace ampwb
