// ampwb export chart RUN... --metric M --out FILE.png|.svg|.pdf: a chart of stored runs drawn without a display
// (Qt's offscreen platform), the same chart the GUI shows.
#include <sys/stat.h>
#include <unistd.h>

#include <QApplication>
#include <QFileInfo>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "chart_export.h"
#include "chart_factory.h"
#include "commands.h"
#include "core/error.h"
#include "gui_app.h"
#include "run_series.h"
#include "store/run_store.h"

namespace ampwb::cli {

int export_chart_command(Args& args) {
  const std::string metric = args.text("metric", "");
  const std::string out = args.text("out", "");
  const int width = args.integer("width", ui::kDefaultExportSize.width());
  const int height = args.integer("height", ui::kDefaultExportSize.height());
  const double smoothing = args.number("smoothing", 0.6);
  const std::string histogram = args.text("histogram", "weight");
  const std::string db = store_path(args);
  args.reject_unknown();
  const auto& p = args.positional();  // "chart", then the runs
  const std::string usage =
      "usage: ampwb export chart RUN... --metric loss|accuracy|loss-scale|epoch-time|data-wait|histogram "
      "--out FILE.png|.svg|.pdf [--width 1200] [--height 800] [--db FILE]";
  if (p.size() < 2 || metric.empty() || out.empty()) throw Error(usage);
  if (!ui::chart_metrics().contains(QString::fromStdString(metric)))
    throw Error("unknown metric '" + metric + "'; " + usage);
  ui::export_format(QString::fromStdString(out));  // refuses a bad extension before any work
  if (width < 100 || height < 100 || width > 10000 || height > 10000)
    throw Error("--width and --height must be between 100 and 10000");

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
  for (size_t i = 1; i < p.size(); ++i) {
    series.push_back(std::make_unique<ui::RunSeries>(ui::load_run_series(store, store.resolve(p[i]))));
    runs.push_back(series.back().get());
  }
  std::vector<TrainConfig> configs;
  for (const auto& s : series) configs.push_back(s->config);
  ui::ChartOptions options;
  options.smoothing = smoothing;
  options.histogram_kind = QString::fromStdString(histogram);
  options.bands = ui::differ_only_by_seed(configs);
  ui::export_chart(QString::fromStdString(metric), runs, options, QString::fromStdString(out), QSize(width, height));
  std::printf("%s\n", QFileInfo(QString::fromStdString(out)).absoluteFilePath().toLocal8Bit().constData());
  return 0;
}

}  // namespace ampwb::cli
