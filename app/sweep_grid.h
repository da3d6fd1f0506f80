// A sweep's grid: training settings that each take a list of values, and settings every point shares. Its points
// are the cartesian product, in a stated order: the dimensions in the order they are given (on the command line,
// or as the sweep file's "grid" object lists them), the last one varying fastest. Every setting is spelled as the
// flag of `ampwb train` that sets it, without its dashes ("batch-size"), and each point is read by train's own flags
// (train_flags.h), so a sweep takes exactly what `ampwb train` takes and refuses what it refuses, by flag.
//
// Sweep file (JSON; "-" reads it from standard input):
//   {"name": "modes",                                                 optional
//    "config": {...},  optional: a whole TrainConfig (as `train --config` takes it) the settings and grid apply on
//    "grid": {"precision": ["fp32", "amp-bf16"], "seed": [0, 1, 2]},  each setting's values, in order
//    "settings": {"data": "/data/cifar", "epochs": 2, "augment": true},  shared by every point
//    "slurm": {"partition": "gpu", "account": "lab", "time": "2:00:00", "max-parallel": 4}}  optional, --on slurm
// A value is a string, a number or, for an on/off flag (augment, nesterov, ...), true or false. On a "config", a
// point that sets the precision mode gets that mode's preset with the loss scaler settings in which the config
// differs from its own mode's preset (the user's overrides), as `--precision M --init-scale S` would; the config's
// name is not used (each point's run has its own).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/config.h"

namespace ampwb::cli {

struct SweepGrid {
  std::string name;
  std::optional<TrainConfig> base;  // the sweep file's "config": what every point starts from, else the defaults
  // Where a Slurm sweep runs, from the file's "slurm" object: "partition", "account", "time", "max-parallel".
  std::vector<std::pair<std::string, std::string>> slurm;
  // The settings that vary, in the grid's order: the setting (a train flag without "--") and its values.
  std::vector<std::pair<std::string, std::vector<std::string>>> dimensions;
  // The settings every point shares; an on/off flag's value is "true" or "false".
  std::vector<std::pair<std::string, std::string>> settings;

  size_t points() const;  // the product of the dimensions' sizes (1 without any)
  // {"name", "config" (when based on one), "grid": {setting: [values]}, "settings": {setting: value}}, as a sweep
  // file gives it.
  nlohmann::ordered_json to_json() const;
};

struct SweepPointConfig {
  std::vector<std::pair<std::string, std::string>> values;  // the point's value of each dimension, in order
  TrainConfig config;                                       // the run it trains (data folder made absolute)
  // {"values": {setting: value}, "config": the TrainConfig}: what the store keeps of the point.
  std::string settings_json() const;
};

// Whether `setting` is one a sweep may set: a flag of `ampwb train` that describes the run (not --name, --resume,
// --config, --db and the like).
bool is_sweep_setting(const std::string& setting);
// The flags of `ampwb train` a sweep takes, with "--", each with whether it is an on/off flag (no value), its help
// and its help group.
struct SweepSetting {
  std::string flag;
  bool on_off = false;
  std::string help, group;
};
const std::vector<SweepSetting>& sweep_settings();

// Reads a sweep file; throws Error naming the file and what is wrong (an unknown setting, an empty list).
SweepGrid read_sweep_file(const std::string& path);
SweepGrid sweep_grid_from_json(const nlohmann::ordered_json& j);

// Every point, in order, each read through the training flags and checked as `ampwb train` checks a run; a bad
// value throws Error naming its flag and the point. Nothing is written.
std::vector<SweepPointConfig> expand_sweep(const SweepGrid& grid);

// Leaves out the points that would train the same run as an earlier point: the same configuration, as where they
// differ only in settings their precision ignores (FP8's outside amp-fp8, the loss scaler's where nothing scales the
// loss: --precision fp32,amp-fp8 --fp8-margin 0,2). Returns each one left out, by its values, "precision=fp32
// fp8-margin=2 (as precision=fp32 fp8-margin=0)", for the user's note; the points kept count from 1 as before.
std::vector<std::string> drop_repeated_runs(std::vector<SweepPointConfig>& points);

// "precision=amp-fp16 seed=1": a point's values for a progress line.
std::string describe_point(const std::vector<std::pair<std::string, std::string>>& values);
std::string describe_point_json(const std::string& settings_json);

}  // namespace ampwb::cli
