// A sweep the GUI hands to `ampwb sweep` in a child process: the grid of the sweep dialog (precision variants, seeds,
// depths, batch sizes) on the run-setup panel's settings, and where it runs (here, or one Slurm job array). The
// settings go whole, as a sweep file's "config" on the child's standard input, so that nothing a flag cannot say
// (a default, a loss scaler override, a path with a comma) is lost; `ampwb sweep --sweep-file FILE` with the same
// file is the same sweep. Plain C++.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "precision_modes.h"
#include "train/config.h"

namespace ampwb::ui {

struct SweepPlan {
  std::vector<SweepVariant> variants;
  std::vector<std::string> seeds, depths, batch_sizes;  // each at least one value
  bool on_slurm = false;
  int parallel = 1;  // points at once here
  std::string partition, account, time_limit;
  int max_parallel = 0;  // Slurm array tasks at once (0: as Slurm allows)
  std::string name;

  // Whether the CLI runs it: on Slurm, or a grid of more than precisions. Otherwise the precision sweep runs in
  // this process, one variant after another, timed in alternation at its end.
  bool needs_cli() const;
};

// "0, 1,2" -> {"0", "1", "2"}: trimmed; an empty item stays, for check_grid_lists to refuse as `ampwb sweep` does.
std::vector<std::string> comma_list(const std::string& text);

// Throws Error naming the list (Seeds, Depths, Batch sizes) that is empty, holds an empty item, what is no whole
// number, or a value twice.
void check_grid_lists(const SweepPlan& plan);

// `base` with the plan's seed, depth and batch size where each has one value (a precision sweep run here).
TrainConfig with_single_values(TrainConfig base, const SweepPlan& plan);

struct SweepCommand {
  std::vector<std::string> arguments;  // of `ampwb sweep`, without the program: the store, where, --sweep-file -
  nlohmann::ordered_json sweep_file;   // for its standard input: {"name", "config": base, "grid", "settings"}
};

// The `ampwb sweep` child for the plan on `base`, recorded into the store `db`: the grid's lists of several values
// are its grid, those of one value settings over `base`. Throws Error for what a sweep's grid cannot say (a variant
// without loss scaling, a value that is no number).
SweepCommand sweep_command(const TrainConfig& base, const SweepPlan& plan, const std::string& db);

}  // namespace ampwb::ui
