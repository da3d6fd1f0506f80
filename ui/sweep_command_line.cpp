// The command line of a sweep the GUI starts.
#include "sweep_command_line.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "core/error.h"

namespace ampwb::ui {
namespace {

// A configuration key (config_settings) and the flag of `ampwb train` (and so of `ampwb sweep`) that sets it; on/off
// flags take no value. The grid's own settings (precision, seed, depth, batch size) are not here: the grid gives them.
struct FlagOf {
  const char* key;
  const char* flag;
  bool on_off;
};
constexpr FlagOf kFlags[] = {
    {"data_dir", "--data", false},
    {"data.validation_fraction", "--val-fraction", false},
    {"data.max_train_images", "--max-train-images", false},
    {"data.max_validation_images", "--max-val-images", false},
    {"data.augment", "--augment", true},
    {"data.normalization", "--normalize", false},
    {"data.drop_last", "--drop-last", true},
    {"data.cache_budget_mb", "--cache-mb", false},
    {"image_size", "--image-size", false},
    {"stem", "--stem", false},
    {"epochs", "--epochs", false},
    {"lr", "--lr", false},
    {"schedule", "--schedule", false},
    {"warmup_epochs", "--warmup-epochs", false},
    {"optimizer.kind", "--optimizer", false},
    {"optimizer.momentum", "--momentum", false},
    {"optimizer.nesterov", "--nesterov", true},
    {"optimizer.weight_decay", "--weight-decay", false},
    {"label_smoothing", "--label-smoothing", false},
    {"grad_clip_norm", "--grad-clip", false},
    {"topk", "--topk", false},
    {"device", "--device", false},
    {"threads", "--threads", false},
    {"host_sync", "--host-sync", false},
    {"conv_algorithm", "--conv-algorithm", false},
    {"max_steps_per_epoch", "--max-steps-per-epoch", false},
    {"max_consecutive_skipped", "--max-skipped", false},
    {"numerics_every", "--numerics-every", false},
};

std::string joined(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ",") + v;
  return out;
}

void check_whole_numbers(const std::vector<std::string>& values, const std::string& what) {
  if (values.empty()) throw Error(what + ": give at least one value");
  for (const std::string& v : values)
    if (v.empty() || !std::all_of(v.begin(), v.end(), [](unsigned char ch) { return std::isdigit(ch); }))
      throw Error(what + ": '" + v + "' is not a whole number");
  for (size_t i = 0; i < values.size(); ++i)
    if (std::find(values.begin(), values.begin() + static_cast<long>(i), values[i]) !=
        values.begin() + static_cast<long>(i))
      throw Error(what + ": '" + values[i] + "' is given twice");
}

}  // namespace

bool SweepPlan::needs_cli() const {
  return on_slurm || seeds.size() > 1 || depths.size() > 1 || batch_sizes.size() > 1;
}

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  const auto flush = [&] {
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    if (first != std::string::npos) out.push_back(item.substr(first, last - first + 1));
    item.clear();
  };
  for (const char ch : text) {
    if (ch == ',')
      flush();
    else
      item += ch;
  }
  flush();
  return out;
}

void check_grid_lists(const SweepPlan& plan) {
  check_whole_numbers(plan.seeds, "Seeds");
  check_whole_numbers(plan.depths, "Depths");
  check_whole_numbers(plan.batch_sizes, "Batch sizes");
}

TrainConfig with_single_values(TrainConfig base, const SweepPlan& plan) {
  check_grid_lists(plan);
  if (plan.seeds.size() == 1) base.seed = std::stoull(plan.seeds[0]);
  if (plan.depths.size() == 1) base.depth = std::stoi(plan.depths[0]);
  if (plan.batch_sizes.size() == 1) base.batch_size = std::stoi(plan.batch_sizes[0]);
  return base;
}

std::vector<std::string> sweep_command_arguments(const TrainConfig& base, const SweepPlan& plan,
                                                 const std::string& db) {
  if (plan.variants.empty()) throw Error("Precisions: tick at least one");
  std::vector<std::string> modes;
  for (const SweepVariant& v : plan.variants) {
    if (v.loss_scaling_off)
      throw Error("'" + v.label + "' runs only in a precision sweep on this machine (one seed, depth and batch size)");
    modes.push_back(v.key);
  }
  check_grid_lists(plan);

  std::vector<std::string> args = {"sweep", "--db", db, "--on", plan.on_slurm ? "slurm" : "local"};
  if (!plan.name.empty()) args.insert(args.end(), {"--name", plan.name});
  if (plan.on_slurm) {
    if (!plan.partition.empty()) args.insert(args.end(), {"--partition", plan.partition});
    if (!plan.account.empty()) args.insert(args.end(), {"--account", plan.account});
    if (!plan.time_limit.empty()) args.insert(args.end(), {"--time", plan.time_limit});
    if (plan.max_parallel > 0) args.insert(args.end(), {"--max-parallel", std::to_string(plan.max_parallel)});
  } else if (plan.parallel > 1) {
    args.insert(args.end(), {"--parallel", std::to_string(plan.parallel)});
  }
  args.insert(args.end(), {"--precision", joined(modes), "--seed", joined(plan.seeds), "--depth", joined(plan.depths),
                           "--batch-size", joined(plan.batch_sizes)});

  // The panel's other settings, where they differ from what `ampwb train` takes without the flag.
  std::map<std::string, std::string> defaults;
  for (const auto& [key, value] : config_settings(TrainConfig{})) defaults[key] = value;
  for (const auto& [key, value] : config_settings(base)) {
    const auto flag = std::find_if(std::begin(kFlags), std::end(kFlags), [&](const FlagOf& f) { return key == f.key; });
    if (flag == std::end(kFlags) || (defaults.count(key) && defaults[key] == value && key != "data_dir")) continue;
    if (flag->on_off) {
      if (value == "true") args.push_back(flag->flag);
    } else {
      args.insert(args.end(), {flag->flag, value});
    }
  }
  return args;
}

}  // namespace ampwb::ui
