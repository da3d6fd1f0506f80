// `ampwb report` on real stored runs: every section in one self-contained file, run and class names escaped in the
// HTML and its SVG, the page rendered by a real headless browser, and the PDF converted to pages.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "store/run_report.h"
#include "store/store_recorder.h"
#include "test_cli_util.h"

namespace ampwb {
namespace {
using namespace cli_test;

const char* const kHostileRun = "<script>alert(1)</script>";
const char* const kHostileClass = "a&b\"c";

class Report : public ::testing::Test {
 protected:
  // Two runs on stripes whose first class folder has a name that needs escaping.
  static void SetUpTestSuite() {
    dir_ = new TempDir("report");
    const fs::path data = make_stripes_folder("report", 24, 16);
    fs::rename(data / "horizontal stripes", data / kHostileClass);
    RunStore store(db());
    for (const char* mode : {"fp32", "amp-bf16"}) {
      TrainConfig c;
      c.data_dir = data.string();
      c.name = std::string(mode) == "fp32" ? kHostileRun : "bf16 & co";
      c.depth = 20;
      c.epochs = 2;
      c.batch_size = 8;
      c.threads = 2;
      c.precision = precision_preset(mode);
      StoreRecorder recorder(store, c);
      Trainer(c, &recorder).run();
      ids_.push_back(recorder.run_id());
    }
    fs::remove_all(data);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string db() { return dir_->file("runs.sqlite"); }
  static std::vector<std::string> report_args(const std::string& out) {
    return {"report", std::to_string(ids_[0]), std::to_string(ids_[1]), "--out", out, "--db", db()};
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
        "Validation accuracy (%) against wall time", "Loss scale", "Epoch time", "<h3>Diagnosis</h3>",
        "<h3>Where the time went</h3>", "<h3>Per-layer numerics</h3>", "<h3>Confusion matrix</h3>",
        "Validation set, epoch 2.", "<h3>Machine and data</h3>", "precision.mode",
        "<h3>Precision divergence from FP32</h3>", "fp32 computes in FP32: the run is its own reference",
        "One step in amp-bf16 against one in FP32", "<td>layer1.0.conv1</td>"})
    expect_contains(html, section);
  // The second run's speed against the first, whichever way it went on this machine (AMX makes BF16 faster).
  expect_contains(html, " images/s (interquartile range ");
  expect_contains(html, "(run " + std::to_string(ids_[1]) + ", amp-bf16, against run " + std::to_string(ids_[0]) +
                            ", fp32)");
  expect_contains(html, "Training speed (steady state): ");
  expect_contains(html, "Machine load while training: ");
  EXPECT_TRUE(html.find("Most confused: ") != std::string::npos ||
              html.find("No class was taken for another.") != std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "a stored name became markup";
  expect_contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;");
  EXPECT_EQ(html.find(kHostileClass), std::string::npos);
  expect_contains(html, "a&amp;b&quot;c");
  expect_contains(html, "bf16 &amp; co");
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
  // The charts drew: pixels in the first run's colour (#1f77b4), as the browser rendered the inline SVG.
  cv::Mat first_run;
  cv::inRange(page, cv::Scalar(0xa4, 0x67, 0x0f), cv::Scalar(0xc4, 0x87, 0x2f), first_run);
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
}

TEST(HtmlEscape, EscapesEveryCharacterThatEndsTextOrAnAttribute) {
  EXPECT_EQ(html_escape("<a href=\"x\">Tom & Jerry's</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain ünïcode"), "plain ünïcode");
}

}  // namespace
}  // namespace ampwb
