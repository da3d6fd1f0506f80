// The screenshot scenario: set up, train, grab; sweep, compare, grab.
#include "screenshot_scenario.h"

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QPixmap>
#include <QPushButton>
#include <QScreen>
#include <QTabWidget>
#include <QTimer>
#include <algorithm>
#include <cstdio>

#include "chart_panel.h"
#include "compare_view.h"
#include "export_model_dialog.h"
#include "main_window.h"
#include "run_controls.h"
#include "run_setup_panel.h"
#include "runs_view.h"
#include "stall_meter.h"
#include "sweep_dialog.h"
#include "sweep_view.h"

namespace ampwb::ui {

bool wait_until(const std::function<bool()>& done, int timeout_ms) {
  QElapsedTimer clock;
  clock.start();
  while (!done()) {
    if (clock.elapsed() > timeout_ms) return false;
    QEventLoop loop;
    QTimer::singleShot(20, &loop, &QEventLoop::quit);
    loop.exec();
  }
  return true;
}

namespace {

bool save(QWidget& widget, const QString& folder, const QString& name) {
  QApplication::processEvents();
  const QString path = QDir(folder).filePath(name + ".png");
  const bool ok = widget.grab().save(path);
  std::printf("%s %s\n", ok ? "wrote" : "could not write", qPrintable(path));
  std::fflush(stdout);
  return ok;
}

}  // namespace

int run_screenshot_scenario(MainWindow& window, const QString& name, const QString& folder) {
  if (name != "all" && name != "idle" && name != "sweeps" && name != "runs") {
    std::fprintf(stderr, "unknown screenshot scenario '%s' (expected: all, idle, sweeps, runs)\n", qPrintable(name));
    return 2;
  }
  QDir().mkpath(folder);
  // As large as the screen allows, up to 1600×1000: the screenshots show what a laptop's screen shows.
  window.resize(QSize(1600, 1000).boundedTo(window.screen()->availableGeometry().size()));
  wait_until([] { return false; }, 300);  // let the window settle
  if (name == "idle") {                   // the window as a new user first sees it
    wait_until([&] { return !window.setup()->inspecting(); }, 60000);
    return save(window, folder, "first-launch") ? 0 : 1;
  }
  if (name == "runs") {  // the store's runs (`ampwb train` fills it), the newest selected, its model export, its charts
    window.tabs()->setCurrentWidget(window.runs_view());
    window.runs_view()->reload();
    RunsModel* runs = window.runs_view()->model();
    int64_t newest = 0;
    for (int row = 0; row < runs->rowCount(); ++row) newest = std::max(newest, runs->run_id(row));
    if (newest > 0) window.runs_view()->select({newest});
    bool ok = save(window, folder, "runs");
    if (window.runs_view()->export_model_action()->isEnabled()) {
      window.runs_view()->export_model_selected();
      if (auto* dialog = window.runs_view()->findChild<ExportModelDialog*>("exportModelDialog")) {
        wait_until([] { return false; }, 300);
        ok = save(*dialog, folder, "export-model-dialog") && ok;
        dialog->close();
      }
    }
    if (newest > 0) {  // and its charts, as "Open / compare" shows them
      window.open_runs({newest});
      wait_until([] { return false; }, 500);
      ok = save(window, folder, "run-charts") && ok;
    }
    return ok ? 0 : 1;
  }
  if (name == "sweeps") {  // the store's sweeps as it holds them (`ampwb sweep` fills it), and the sweep dialog
    window.tabs()->setCurrentWidget(window.sweep_view());
    wait_until([&] { return window.sweep_view()->current_sweep() != 0; }, 10000);
    const int64_t newest = window.sweep_view()->current_sweep();
    bool ok = save(window, folder, "sweeps");
    if (newest > 1) {
      window.sweep_view()->show_sweep(1);
      ok = save(window, folder, "sweeps-first") && ok;
      window.sweep_view()->show_sweep(newest);
    }
    wait_until([&] { return !window.setup()->inspecting(); }, 60000);
    const TrainConfig base = window.setup()->config();
    try {
      SweepDialog dialog(base, make_backend(base.device, {base.threads})->capabilities(), &window);
      dialog.show();
      wait_until([] { return false; }, 300);
      ok = save(dialog, folder, "sweep-dialog") && ok;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "the sweep dialog: %s\n", e.what());
      ok = false;
    }
    return ok ? 0 : 1;
  }

  // 1. A training on the built-in sample through the setup panel: AMP FP16, so the loss scale has a story.
  TrainConfig c = RunSetupPanel::first_launch_config();
  c.depth = 20;
  c.precision = precision_preset(PrecisionMode::AmpFp16);
  c.epochs = 4;
  c.batch_size = 64;
  c.lr = 0.05f;
  c.data.max_train_images = 2000;
  c.threads = 1;  // predictable on a shared machine (two OpenMP threads crawl when a neighbour is busy)
  c.name = std::string("fashion resnet20 ") + mode_name(PrecisionMode::AmpFp16);
  window.setup()->set_config(c);
  wait_until([&] { return !window.setup()->inspecting(); }, 60000);
  StallMeter meter(5);
  meter.start();
  window.controls()->train_button()->click();
  const bool trained = wait_until([&] { return window.live_run()->epochs.size() >= 3; }, 600000);
  meter.stop();
  std::printf("event-loop lateness during training: p50 %.2f ms, p99 %.2f ms, max %.2f ms over %zu ticks\n",
              meter.percentile_ms(0.5), meter.percentile_ms(0.99), meter.max_ms(), meter.ticks());
  if (!trained) {
    std::fprintf(stderr, "the training did not reach 3 epochs\n");
    return 1;
  }
  wait_until([] { return false; }, 1500);  // a few more steps on the charts
  bool ok = save(window, folder, "training");
  wait_until([&] { return !window.session()->running(); }, 600000);

  // 2. A precision sweep on the same settings, then its comparison.
  c.epochs = 3;
  c.name.clear();
  std::vector<SweepVariant> variants;
  for (const SweepVariant& v : sweep_variants())
    if (!v.loss_scaling_off &&
        (v.mode == PrecisionMode::Fp32 || v.mode == PrecisionMode::AmpFp16 || v.mode == PrecisionMode::AmpBf16))
      variants.push_back(v);
  bool swept = false;
  QObject::connect(&window, &MainWindow::sweep_finished, [&] { swept = true; });
  window.start_sweep(c, variants);
  if (!wait_until([&] { return swept; }, 1200000)) {
    std::fprintf(stderr, "the sweep did not finish\n");
    return 1;
  }
  window.compare_view()->baseline()->setCurrentIndex(0);
  ok = save(window, folder, "compare") && ok;

  window.tabs()->setCurrentWidget(window.runs_view());
  window.runs_view()->reload();
  ok = save(window, folder, "runs") && ok;
  return ok ? 0 : 1;
}

}  // namespace ampwb::ui
