// Reading the launcher's variables: which launcher, then its rank and sizes, each checked against the others.
#include "dist/launch.h"

#include <charconv>
#include <climits>
#include <cstdlib>
#include <utility>

#include "core/error.h"

namespace ampwb {
namespace {

// The variables one launcher sets. local_size is nullptr where the launcher sets none that means it; started_by is
// the variable only a process the launcher started has, nullptr where rank or size is that already.
struct LauncherVariables {
  Launcher launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
  const char* started_by = nullptr;
};

constexpr LauncherVariables kMpirun{.launcher = Launcher::Mpirun,
                                    .rank = "OMPI_COMM_WORLD_RANK",
                                    .size = "OMPI_COMM_WORLD_SIZE",
                                    .local_rank = "OMPI_COMM_WORLD_LOCAL_RANK",
                                    .local_size = "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr LauncherVariables kTorchrun{.launcher = Launcher::Torchrun,
                                      .rank = "RANK",
                                      .size = "WORLD_SIZE",
                                      .local_rank = "LOCAL_RANK",
                                      .local_size = "LOCAL_WORLD_SIZE"};
// An sbatch script's own process has SLURM_PROCID=0 and, where the job asked for tasks, SLURM_NTASKS, but only srun's
// tasks have SLURM_STEP_ID (checked with Slurm 22.05): the script's process is one process, not rank 0 of many.
constexpr LauncherVariables kSrun{.launcher = Launcher::Srun,
                                  .rank = "SLURM_PROCID",
                                  .size = "SLURM_NTASKS",
                                  .local_rank = "SLURM_LOCALID",
                                  .local_size = nullptr,
                                  .started_by = "SLURM_STEP_ID"};

std::string quoted(const std::string& name, const std::string& value) { return name + "='" + value + "'"; }

// The int `text` spells in decimal, all of it (no spaces, no sign but '-'); nullopt otherwise.
std::optional<int> parse_int(const std::string& text) {
  long long number = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  const auto [end, error] = std::from_chars(first, last, number);
  if (text.empty() || error != std::errc() || end != last || number > INT_MAX || number < INT_MIN) return std::nullopt;
  return static_cast<int>(number);
}

// The whole number in `name`, nullopt where it is not set; a value that is not one throws, naming it.
std::optional<int> whole_number(const Environment& env, const char* name, Launcher launcher) {
  const std::optional<std::string> value = env(name);
  if (!value) return std::nullopt;
  const std::optional<int> number = parse_int(*value);
  if (!number)
    throw Error(quoted(name, *value) + " is not a whole number (one of " + choice_name(launcher) + "'s variables)");
  return number;
}

int required_number(const Environment& env, const char* name, const char* because, Launcher launcher) {
  const std::optional<int> number = whole_number(env, name, launcher);
  if (!number)
    throw Error(std::string(name) + " is not set, but " + because + " is: " + choice_name(launcher) + " sets both");
  return *number;
}

LaunchInfo read_launcher(const Environment& env, const LauncherVariables& vars) {
  const Launcher launcher = vars.launcher;
  const char* present = vars.started_by ? vars.started_by : env(vars.rank) ? vars.rank : vars.size;
  LaunchInfo info;
  info.launcher = launcher;
  info.rank = required_number(env, vars.rank, present, launcher);
  info.world_size = required_number(env, vars.size, present, launcher);
  info.local_rank = required_number(env, vars.local_rank, present, launcher);
  if (vars.local_size) info.local_world_size = whole_number(env, vars.local_size, launcher);

  const std::string suffix = " (" + std::string(choice_name(launcher)) + "'s variables)";
  const auto value = [](const char* name, int number) { return std::string(name) + "=" + std::to_string(number); };
  if (info.world_size < 1) throw Error(value(vars.size, info.world_size) + " is not a positive count" + suffix);
  if (info.rank < 0 || info.rank >= info.world_size)
    throw Error(value(vars.rank, info.rank) + " is not within 0 .. " + value(vars.size, info.world_size) + " - 1" +
                suffix);
  if (info.local_rank < 0 || info.local_rank >= info.world_size)
    throw Error(value(vars.local_rank, info.local_rank) + " is not within 0 .. " + value(vars.size, info.world_size) +
                " - 1" + suffix);
  if (info.local_world_size) {
    const int local_size = *info.local_world_size;
    if (local_size < 1 || local_size > info.world_size)
      throw Error(value(vars.local_size, local_size) + " is not within 1 .. " + value(vars.size, info.world_size) +
                  suffix);
    if (info.local_rank >= local_size)
      throw Error(value(vars.local_rank, info.local_rank) + " is not below " + value(vars.local_size, local_size) +
                  suffix);
  }
  return info;
}

void read_master(const Environment& env, LaunchInfo& info) {
  if (std::optional<std::string> addr = env("MASTER_ADDR")) {
    if (addr->empty()) throw Error("MASTER_ADDR is set but empty: it names the rendezvous host");
    info.master_addr = std::move(*addr);
  }
  if (const std::optional<std::string> port = env("MASTER_PORT")) {
    const std::optional<int> number = parse_int(*port);
    if (!number || *number < 1 || *number > 65535)
      throw Error(quoted("MASTER_PORT", *port) + " is not a port (1 .. 65535)");
    info.master_port = static_cast<uint16_t>(*number);
  }
  // Without MPI nothing else tells the ranks where to meet.
  if (info.launcher == Launcher::Torchrun && info.world_size > 1) {
    if (info.master_addr.empty())
      throw Error("MASTER_ADDR is not set, but WORLD_SIZE=" + std::to_string(info.world_size) +
                  " is: torchrun-style ranks meet there");
    if (!info.master_port)
      throw Error("MASTER_PORT is not set, but WORLD_SIZE=" + std::to_string(info.world_size) +
                  " is: torchrun-style ranks meet there");
  }
}

}  // namespace

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

Environment environment_of(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const std::string& name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

LaunchInfo read_launch_info(const Environment& env) {
  const auto sets = [&](const LauncherVariables& vars) {
    return vars.started_by ? env(vars.started_by).has_value() : env(vars.rank) || env(vars.size);
  };
  LaunchInfo info;
  if (sets(kMpirun)) {
    info = read_launcher(env, kMpirun);
  } else if (sets(kTorchrun)) {
    info = read_launcher(env, kTorchrun);
  } else if (sets(kSrun)) {
    info = read_launcher(env, kSrun);
  }
  read_master(env, info);
  return info;
}

int gpu_of_rank(const LaunchInfo& launch, int gpus) {
  if (gpus < 1) throw Error("this process is " + describe(launch) + ", to train on a GPU, but it sees none");
  if (gpus == 1) return 0;
  if (launch.local_rank >= gpus)
    throw Error("this process is " + describe(launch) + ", but this machine has " + std::to_string(gpus) +
                " GPUs (cuda:0 to cuda:" + std::to_string(gpus - 1) +
                "): start at most one rank per GPU on each machine");
  return launch.local_rank;
}

std::string describe(const LaunchInfo& info) {
  if (info.launcher == Launcher::Single) return "a single process";
  std::string text = "rank " + std::to_string(info.rank) + " of " + std::to_string(info.world_size) + " (local rank " +
                     std::to_string(info.local_rank);
  if (info.local_world_size) text += " of " + std::to_string(*info.local_world_size);
  return text + "), launched by " + choice_name(info.launcher);
}

}  // namespace ampwb
