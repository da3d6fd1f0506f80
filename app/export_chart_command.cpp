// ampwb export chart RUN... --metric M --out FILE.png|.svg|.pdf: a chart of stored runs drawn without a display
// (Qt's offscreen platform), the same chart the GUI shows.
#include <sys/stat.h>
#include <unistd.h>

#include <QApplication>
#include <QFileInfo>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "chart_export.h"
#include "chart_factory.h"
#include "commands.h"
#include "core/error.h"
#include "fp8_scaling_chart.h"
#include "gui_app.h"
#include "missing_glyphs.h"
#include "run_groups.h"
#include "run_series.h"
#include "store/run_store.h"

namespace ampwb::cli {

static_assert(ui::kDefaultExportSize.width() == 1200 && ui::kDefaultExportSize.height() == 800,
              "ExportChartOptions (commands.h) defaults to the GUI's export size");

namespace {

// Why --fp8-tensor names nothing the runs hold, and what they do hold: a deep network has hundreds of FP8 tensors,
// so the layers are named by their first few and last, as `ampwb show` lists them all.
std::string no_such_fp8_tensor(const std::string& text, const ui::Fp8TensorName& asked,
                               const std::vector<ui::Fp8TensorName>& tensors) {
  static const std::vector<std::string> roles = {"input", "weight", "output_grad"};
  if (std::find(roles.begin(), roles.end(), asked.role) == roles.end())
    return "'" + text + "' names no FP8 tensor: give LAYER:input, LAYER:weight or LAYER:output_grad";
  std::vector<std::string> layers;
  for (const ui::Fp8TensorName& t : tensors)
    if (std::find(layers.begin(), layers.end(), t.layer) == layers.end()) layers.push_back(t.layer);
  if (std::find(layers.begin(), layers.end(), asked.layer) != layers.end()) {
    std::string roles_held;
    for (const ui::Fp8TensorName& t : tensors)
      if (t.layer == asked.layer) roles_held += (roles_held.empty() ? "" : ", ") + t.layer + ":" + t.role;
    return "the runs have no FP8 tensor '" + text + "' (they have " + roles_held + ")";
  }
  constexpr size_t kNamed = 5;
  std::string named;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i >= kNamed && i + 1 < layers.size()) continue;
    named += (i == 0 ? "" : i > kNamed ? ", ..., " : ", ") + layers[i];
  }
  return "the runs have no FP8 layer '" + asked.layer + "': their " + std::to_string(layers.size()) +
         " FP8 layers are " + named + " (ampwb show RUN lists them), each with input, weight and output_grad";
}

}  // namespace

int export_chart_command(const ExportChartOptions& options) {
  const std::string& metric = options.metric;
  const std::string& out = options.out;
  if (!ui::chart_metrics().contains(QString::fromStdString(metric)))
    throw Error("unknown metric '" + metric + "' (expected " + ui::chart_metrics().join(", ").toStdString() + ")");
  ui::export_format(QString::fromStdString(out));  // refuses a bad extension before any work
  check_out_file(out, options.overwrite);
  const std::string db = store_path(options.db);

  // Headless always: this command must work over ssh, in CI and in cron, display or not.
  ::setenv("QT_QPA_PLATFORM", "offscreen", 1);
  if (!std::getenv("XDG_RUNTIME_DIR")) {  // Qt wants one, private to the user
    const std::string runtime = "/tmp/ampwb-runtime-" + std::to_string(::getuid());
    ::mkdir(runtime.c_str(), 0700);
    ::setenv("XDG_RUNTIME_DIR", runtime.c_str(), 0);
  }
  int argc = 1;
  char name[] = "ampwb";
  char* argv[] = {name, nullptr};
  QApplication app(argc, argv);
  ui::init_application(app);
  // The offscreen platform notes that it ignores window size hints when the chart is laid out: not news here.
  static const QtMessageHandler previous = qInstallMessageHandler(nullptr);
  qInstallMessageHandler([](QtMsgType type, const QMessageLogContext& context, const QString& message) {
    if (type == QtWarningMsg && message.contains("propagateSizeHints")) return;
    previous(type, context, message);
  });

  const RunStore store(db, RunStore::Mode::ReadOnly);
  std::vector<std::unique_ptr<ui::RunSeries>> series;
  ui::RunList runs;
  for (const int64_t id : resolve_runs(store, options.runs, "export chart")) {
    series.push_back(std::make_unique<ui::RunSeries>(ui::load_run_series(store, id)));
    runs.push_back(series.back().get());
  }
  if (metric == "fp8-scaling") {
    const std::vector<ui::Fp8TensorName> tensors = ui::fp8_tensors(runs);
    if (tensors.empty())
      throw Error("no FP8 tensor was recorded in the runs asked for: the fp8-scaling chart draws amp-fp8 runs");
    const ui::Fp8TensorName asked = ui::fp8_tensor_of(QString::fromStdString(options.fp8_tensor));
    if (!options.fp8_tensor.empty() && std::find(tensors.begin(), tensors.end(), asked) == tensors.end())
      throw Error(no_such_fp8_tensor(options.fp8_tensor, asked, tensors));
  }
  std::vector<TrainConfig> configs;
  for (const auto& s : series) configs.push_back(s->config);
  ui::ChartOptions chart;
  chart.smoothing = options.smoothing;
  chart.histogram_kind = QString::fromStdString(options.histogram);
  chart.fp8_tensor = QString::fromStdString(options.fp8_tensor);
  chart.x_axis = options.x_axis == "wall"    ? ui::XAxis::WallClock
                 : options.x_axis == "epoch" ? ui::XAxis::Epoch
                                             : ui::XAxis::Step;
  if (options.group_by.empty()) {
    if (ui::differ_only_by_seed(configs)) chart.group_by = kAllButSeed;
  } else if (options.group_by != "none") {
    const std::string key = options.group_by == "all-but-seed" ? kAllButSeed : options.group_by;
    group_configs(configs, key);  // refuses a key the configuration does not have, by name
    chart.group_by = QString::fromStdString(key);
  }
  ui::export_chart(QString::fromStdString(metric), runs, chart, QString::fromStdString(out),
                   QSize(options.width, options.height));
  QStringList labels;
  for (const ui::RunSeries* run : runs) labels << QString::fromStdString(run->label);
  if (const QString warning = ui::missing_font_warning(labels); !warning.isEmpty())
    std::fprintf(stderr, "warning: %s\n", warning.toLocal8Bit().constData());
  std::printf("%s\n", QFileInfo(QString::fromStdString(out)).absoluteFilePath().toLocal8Bit().constData());
  return 0;
}

}  // namespace ampwb::cli
