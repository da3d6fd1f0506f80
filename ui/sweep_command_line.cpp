// The command line of a sweep the GUI starts.
#include "sweep_command_line.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace ampwb::ui {
namespace {

void check_whole_numbers(const std::vector<std::string>& values, const std::string& what) {
  if (values.empty()) throw Error(what + ": give at least one value");
  for (const std::string& v : values)
    if (v.empty()) throw Error(what + ": an empty value between commas (a comma list is values between commas: 0,1,2)");
  for (const std::string& v : values)
    if (!std::all_of(v.begin(), v.end(), [](unsigned char ch) { return std::isdigit(ch); }))
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
  if (text.find_first_not_of(" \t") == std::string::npos) return out;
  std::string item;
  const auto flush = [&] {
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    out.push_back(first == std::string::npos ? std::string() : item.substr(first, last - first + 1));
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

SweepCommand sweep_command(const TrainConfig& base, const SweepPlan& plan, const std::string& db) {
  if (plan.variants.empty()) throw Error("Precisions: tick at least one");
  std::vector<std::string> modes;
  for (const SweepVariant& v : plan.variants) {
    if (v.loss_scaling_off)
      throw Error("'" + v.label + "' runs only in a precision sweep on this machine (one seed, depth and batch size)");
    modes.push_back(v.key);
  }
  check_grid_lists(plan);

  SweepCommand command;
  std::vector<std::string>& args = command.arguments;
  args = {"sweep", "--db", db, "--on", plan.on_slurm ? "slurm" : "local"};
  if (plan.on_slurm) {
    if (!plan.partition.empty()) args.insert(args.end(), {"--partition", plan.partition});
    if (!plan.account.empty()) args.insert(args.end(), {"--account", plan.account});
    if (!plan.time_limit.empty()) args.insert(args.end(), {"--time", plan.time_limit});
    if (plan.max_parallel > 0) args.insert(args.end(), {"--max-parallel", std::to_string(plan.max_parallel)});
  } else if (plan.parallel > 1) {
    args.insert(args.end(), {"--parallel", std::to_string(plan.parallel)});
  }
  args.insert(args.end(), {"--sweep-file", "-"});

  nlohmann::ordered_json& file = command.sweep_file;
  if (!plan.name.empty()) file["name"] = plan.name;
  file["config"] = nlohmann::ordered_json::parse(config_to_json_text(base));
  file["grid"] = nlohmann::ordered_json::object();
  file["settings"] = nlohmann::ordered_json::object();
  for (const auto& [setting, values] : {std::pair{"precision", modes}, std::pair{"seed", plan.seeds},
                                        std::pair{"depth", plan.depths}, std::pair{"batch-size", plan.batch_sizes}}) {
    if (values.size() > 1)
      file["grid"][setting] = values;
    else
      file["settings"][setting] = values.front();
  }
  return command;
}

}  // namespace ampwb::ui
