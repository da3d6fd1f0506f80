// The devices this machine can train on (facade/devices.h), each with its backend's capabilities and mode_support
// for every precision mode (the trainer's own verdicts): name, instruction set or compute capability, memory, and
// which modes run there, with the reason for any that does not and what to expect of those that do (notes).
// `ampwb devices` prints it; the help of ampwb, train and bench ends with it.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "facade/devices.h"
#include "facade/processes.h"

namespace ampwb::cli {
namespace {

std::string gib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / 1073741824.0);
  return text;
}

// "a", "a and b", "a, b and c".
std::string listing(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

std::string device_text(const DeviceReport& d) {
  std::string out = "  " + d.device.id.name() + ": " + printable(d.device.name.empty() ? "?" : d.device.name);
  out += " (" + (d.device.isa.empty() ? std::string("?") : d.device.isa) + ", " + gib(d.device.memory_bytes) + ")\n";
  if (!d.error.empty()) return out + "    cannot train here: " + d.error + "\n";
  // Modes that compute alike (or fail for one reason) on one line, in the order of kPrecisionModes.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> runs, refused, notes;
  for (const auto& [mode, support] : d.modes) {
    const std::string key = support.supported ? support.compute : support.reason;
    auto& group = support.supported ? runs : refused;
    if (!runs.count(key) && !refused.count(key)) order.push_back(key);
    group[key].push_back(mode);
    for (const std::string& note : support.notes)  // what to expect of its speed: said once for the group
      if (std::find(notes[key].begin(), notes[key].end(), note) == notes[key].end()) notes[key].push_back(note);
  }
  for (const std::string& key : order) {
    if (runs.count(key))
      out += "    runs " + listing(runs[key]) + (key.empty() ? "" : ": " + key) + "\n";
    else
      out += "    not " + listing(refused[key]) + ": " + key + "\n";
    for (const std::string& note : notes[key]) out += "      note: " + note + "\n";
  }
  return out;
}

// The first line mpirun says of its version ("mpirun (Open MPI) 4.1.4"), "" where it says nothing.
std::string mpirun_version(const std::string& mpirun) {
  if (mpirun.empty()) return "";
  const std::string command = "'" + mpirun + "' --version 2>/dev/null";
  const std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  char line[256] = {};
  if (!pipe || !std::fgets(line, sizeof line, pipe.get())) return "";
  std::string text = line;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// One run on many processes (docs/distributed.md): what starts them here and how many make sense.
std::string processes_text(const ProcessOffer& o, const std::string& version) {
  std::string out = "One run on many processes (ampwb train --processes N, or under mpirun or srun):\n";
  out += "  cores: " + std::to_string(o.cores) + ", CUDA GPUs: " + std::to_string(o.gpus) + "\n";
  out +=
      std::string("  MPI: ") + (o.mpi_built ? "built in" : "not built in (Open MPI's libopenmpi-dev)") + "; mpirun: ";
  out += o.mpirun.empty() ? std::string("not on PATH (Debian: openmpi-bin)")
                          : o.mpirun + (version.empty() ? "" : " (" + version + ")");
  out += std::string("\n  NCCL: ") + (o.nccl_built ? "built in" : "not built in") + "\n";
  for (const DeviceChoice device : {DeviceChoice::cpu(), DeviceChoice::cuda(0)}) {
    if (!device.is_cpu() && o.gpus == 0) continue;
    const std::string why = o.why_one(device);
    out += "  --processes on " + std::string(device.is_cpu() ? "the CPU" : "GPUs") + ": up to " +
           std::to_string(o.max_processes(device)) + (why.empty() ? "" : " (" + why + ")") + "\n";
  }
  return out;
}

struct DevicesOptions {
  bool json = false;
};

int devices_command(const DevicesOptions& options) {
  const ProcessOffer offer = process_offer();
  const std::string version = mpirun_version(offer.mpirun);
  if (!options.json) {
    std::printf("%s\n%s", devices_help().c_str(), processes_text(offer, version).c_str());
    return 0;
  }
  nlohmann::json out = {{"devices", nlohmann::json::array()}, {"gpu_absence_reason", gpu_absence_reason()}};
  for (const DeviceReport& d : device_reports()) {
    nlohmann::json modes = nlohmann::json::object();
    for (const auto& [mode, support] : d.modes)
      modes[mode] = {{"supported", support.supported},
                     {"compute", support.compute},
                     {"reason", support.reason},
                     {"notes", support.notes}};
    out["devices"].push_back({{"device", d.device.id.name()},
                              {"name", d.device.name},
                              {"isa", d.device.isa},
                              {"memory_bytes", d.device.memory_bytes},
                              {"usable", d.error.empty()},
                              {"error", d.error},
                              {"modes", modes}});
  }
  out["processes"] = {{"cores", offer.cores},
                      {"gpus", offer.gpus},
                      {"mpi_built", offer.mpi_built},
                      {"mpirun", offer.mpirun},
                      {"mpirun_version", version},
                      {"nccl_built", offer.nccl_built},
                      {"max_cpu_processes", offer.max_processes(DeviceChoice::cpu())},
                      {"cpu_limit_reason", offer.why_one(DeviceChoice::cpu())},
                      {"max_gpu_processes", offer.gpus > 0 ? offer.max_processes(DeviceChoice::cuda(0)) : 0},
                      {"gpu_limit_reason", offer.gpus > 0 ? offer.why_one(DeviceChoice::cuda(0)) : "no CUDA GPU"}};
  print_json(out);
  return 0;
}

}  // namespace

std::string devices_help() {
  std::string out = "Devices this machine can train on (--device), and the precision modes each runs:\n";
  for (const DeviceReport& d : device_reports()) out += device_text(d);
  if (const std::string no_gpu = gpu_absence_reason(); !no_gpu.empty()) out += "  (no CUDA GPU: " + no_gpu + ")\n";
  return out;
}

void add_devices_command(CLI::App& app, Invocation& invocation) {
  auto options = std::make_shared<DevicesOptions>();
  CLI::App* devices = app.add_subcommand("devices", "the devices this machine can train on and what each runs");
  devices->add_flag("--json", options->json, "as JSON (for scripts)");
  run_on_parse(devices, invocation, options, devices_command);
}

}  // namespace ampwb::cli
