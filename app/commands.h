// The subcommands of ampwb. Each command file adds its subcommands, their options and help to the one CLI11
// parser (main.cpp builds it) and runs its command when the line is parsed; a command returns the exit status.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "cli.h"
#include "store/run_store.h"
#include "train/config.h"

namespace ampwb::cli {

void add_train_command(CLI::App& app, Invocation& invocation);     // train_command.cpp
void add_bench_command(CLI::App& app, Invocation& invocation);     // bench_command.cpp
void add_devices_command(CLI::App& app, Invocation& invocation);   // devices.cpp
void add_dataset_commands(CLI::App& app, Invocation& invocation);  // dataset_command.cpp: inspect, sample, ...
void add_run_commands(CLI::App& app, Invocation& invocation);      // runs_commands.cpp: runs, show, compare
void add_explain_command(CLI::App& app, Invocation& invocation);   // explain_command.cpp
void add_report_command(CLI::App& app, Invocation& invocation);    // report_command.cpp
void add_predict_command(CLI::App& app, Invocation& invocation);   // predict_command.cpp
// export_model_command.cpp: export model, under the export command add_store_commands adds (call it after).
void add_export_model_command(CLI::App& app, Invocation& invocation);
// store_commands.cpp: export csv|chart, delete, rename, tag, note, store check|backup|recover|copy.
void add_store_commands(CLI::App& app, Invocation& invocation);
void add_sweep_command(CLI::App& app, Invocation& invocation);  // sweep_command.cpp: sweep, sweep status|cancel|...

// One run trained in this process into `store` as `ampwb train` trains it (train_command.cpp), for a sweep's point.
struct TrainingInStore {
  int64_t continue_run = 0;                         // a run to resume: `config` is its resume_config
  bool quiet = false;                               // no progress lines, only errors
  bool sweep_point = false;                         // a SIGINT is its sweep stopping or cancelled, which says so itself
  std::function<void(int64_t run)> on_run_started;  // told the run's id once its row is recorded
};
struct TrainingOutcome {
  int64_t run_id = 0;  // 0 when it never started
  RunStatus status = RunStatus::Failed;
  std::string reason;
  int exit_code = 0;  // as `ampwb train` would exit
  int signal = 0;     // the signal that stopped it, if one did
  bool store_failed = false;  // the run store's failure ended it (interrupted), not the training's
};
TrainingOutcome train_in_store(RunStore& store, const TrainConfig& config, const TrainingInStore& how);

// The devices this machine can train on, with what each runs (devices.cpp): ends the help of ampwb, train, bench.
std::string devices_help();

// ampwb export chart: drawn by the desktop workbench's charts (export_chart_command.cpp, a GUI build only).
struct ExportChartOptions {
  std::vector<std::string> runs;
  std::string metric, out, histogram = "weight", db;
  std::string x_axis = "step";  // "step", "epoch" or "wall"
  std::string group_by;         // a configuration key, "all-but-seed" or "none"; empty: all-but-seed where the
                                // runs differ only by seed, as the GUI
  std::string fp8_tensor;       // "layer1.0.conv1:input"; empty: the first FP8 tensor
  int width = 1200, height = 800;
  double smoothing = 0.6;
  bool overwrite = false;
};
int export_chart_command(const ExportChartOptions& options);

}  // namespace ampwb::cli
