// The hidden `--screenshot-scenario` of the GUI, run by scripts/screenshots.sh under Xvfb: it drives the real
// window through its own controls (a training on the built-in sample, then a precision sweep) and saves
// screenshots of the main window during training, of the runs view and of the comparison. It also measures the
// event loop's stalls during the training and prints them.
#pragma once

#include <QString>
#include <functional>

namespace ampwb::ui {

class MainWindow;

// Scenarios: "all" (training, runs, compare), "idle" (the first launch), "sweeps" (the Sweeps tab on the store's
// sweeps, and the sweep dialog). Returns the process exit status.
int run_screenshot_scenario(MainWindow& window, const QString& name, const QString& folder);

// Runs the event loop until `done` holds or `timeout_ms` passes; returns whether it held.
bool wait_until(const std::function<bool()>& done, int timeout_ms);

}  // namespace ampwb::ui
