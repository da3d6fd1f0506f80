// /proc/stat's machine-wide CPU counters against /proc/self/stat's own, and /sys's current clocks.
#include "train/machine_load.h"

#include "train/gpu_load.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace ampwb {
namespace {

template <class... A>
std::string text(const char* format, A... a) {
  char buf[96];
  std::snprintf(buf, sizeof buf, format, a...);
  return buf;
}

// The mean of every CPU's current clock in MHz, 0 where cpufreq is not exposed (most virtual machines).
double mean_cpu_mhz() {
  double sum = 0;
  int n = 0;
  for (int cpu = 0;; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
    if (!std::filesystem::exists(dir)) break;
    double khz = 0;
    if (std::ifstream(dir + "/cpufreq/scaling_cur_freq") >> khz) sum += khz / 1000, ++n;
  }
  return n ? sum / n : 0;
}

}  // namespace

std::string busy_reasons(const MachineLoad& load) {
  std::vector<std::string> reasons;
  if (load.known() && load.other_cpu >= kBusyMachine)
    reasons.push_back(text("the machine was %.0f%% busy with other work", 100 * load.other_cpu));
  if (load.known() && load.steal >= kBusyMachine)
    reasons.push_back(text("the hypervisor took %.0f%% of the CPUs for other guests", 100 * load.steal));
  if (load.gpu_other_processes > 0)
    reasons.push_back(text("%d other process", load.gpu_other_processes) +
                      (load.gpu_other_processes > 1 ? "es used the GPU" : " used the GPU"));
  std::string out;
  for (size_t i = 0; i < reasons.size(); ++i) out += (i ? " and " : "") + reasons[i];
  return out;
}

std::string machine_load_text(const MachineLoad& load) {
  if (!load.known()) return "not recorded";
  char buf[120];
  int at = std::snprintf(buf, sizeof buf, "%.0f%% of the CPUs busy with other work, %.0f%% steal", 100 * load.other_cpu,
                         100 * std::max(0.0, load.steal));
  if (load.cpu_mhz > 0) at += std::snprintf(buf + at, sizeof buf - at, ", %.1f GHz", load.cpu_mhz / 1000);
  std::string out = buf;
  if (load.gpu_mhz > 0) {
    out += load.gpu_max_mhz > 0 ? text("; GPU at %.2f of %.2f GHz", load.gpu_mhz / 1000, load.gpu_max_mhz / 1000)
                                : text("; GPU at %.2f GHz", load.gpu_mhz / 1000);
    if (load.gpu_other_processes == 0) out += ", no other process on it";
    if (load.gpu_other_processes > 0)
      out +=
          text(", %d other process", load.gpu_other_processes) + (load.gpu_other_processes > 1 ? "es on it" : " on it");
  }
  return out;
}

std::string machine_load_cell(const MachineLoad& load) {
  if (!load.known()) return "not recorded";
  std::string out = text("%.0f%% other work, %.0f%% steal", 100 * load.other_cpu, 100 * std::max(0.0, load.steal));
  if (load.cpu_mhz > 0) out += text(", %.1f GHz", load.cpu_mhz / 1000);
  if (load.gpu_mhz > 0) {
    out += load.gpu_max_mhz > 0 ? text("; GPU %.2f of %.2f GHz", load.gpu_mhz / 1000, load.gpu_max_mhz / 1000)
                                : text("; GPU %.2f GHz", load.gpu_mhz / 1000);
    if (load.gpu_other_processes == 0) out += ", no other process";
    if (load.gpu_other_processes > 0)
      out += text(", %d other process", load.gpu_other_processes) + (load.gpu_other_processes > 1 ? "es" : "");
  }
  return out;
}

MachineLoad mean_load(const std::vector<MachineLoad>& spans, const std::vector<double>& seconds) {
  MachineLoad mean;
  double cpu_time = 0, other = 0, steal = 0, mhz = 0, gpu_time = 0, gpu_mhz = 0;
  for (size_t i = 0; i < spans.size() && i < seconds.size(); ++i) {
    const MachineLoad& s = spans[i];
    const double t = seconds[i];
    mean.gpu_other_processes = std::max(mean.gpu_other_processes, s.gpu_other_processes);
    mean.gpu_max_mhz = std::max(mean.gpu_max_mhz, s.gpu_max_mhz);
    if (s.gpu_mhz > 0) gpu_time += t, gpu_mhz += t * s.gpu_mhz;
    if (s.known()) cpu_time += t, other += t * s.other_cpu, steal += t * std::max(0.0, s.steal), mhz += t * s.cpu_mhz;
  }
  if (cpu_time > 0) mean.other_cpu = other / cpu_time, mean.steal = steal / cpu_time, mean.cpu_mhz = mhz / cpu_time;
  if (gpu_time > 0) mean.gpu_mhz = gpu_mhz / gpu_time;
  return mean;
}

MachineLoadMeter::Counters MachineLoadMeter::read_counters() {
  Counters c;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return c;
  c.busy = user + nice + system + irq + softirq;  // guest time is inside user already
  c.steal = steal;
  c.total = c.busy + idle + iowait + steal;
  // /proc/self/stat: the command (in parentheses, which may hold spaces), then fields 3..; utime and stime are the
  // 14th and 15th, in the same clock ticks as /proc/stat.
  std::ifstream self("/proc/self/stat");
  std::string line;
  std::getline(self, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return c;
  std::istringstream rest(line.substr(close + 2));
  std::string skipped;
  for (int field = 3; field <= 13; ++field) rest >> skipped;
  uint64_t utime = 0, stime = 0;
  if (!(rest >> utime >> stime)) return c;
  c.own = utime + stime;
  c.read = true;
  return c;
}

void MachineLoadMeter::start() { start_ = read_counters(); }

double MachineLoadMeter::own_share() const {
  const Counters end = read_counters();
  if (!start_.read || !end.read || end.total <= start_.total) return 0;
  return static_cast<double>(end.own - start_.own) / static_cast<double>(end.total - start_.total);
}

MachineLoad MachineLoadMeter::stop(double siblings) const {
  MachineLoad load;
  load.cpu_mhz = mean_cpu_mhz();
  if (const std::optional<GpuState> gpu = read_gpu_state(device_)) {
    load.gpu_mhz = gpu->sm_mhz;
    load.gpu_max_mhz = gpu->max_sm_mhz;
    load.gpu_other_processes = gpu->other_processes;
  }
  const Counters end = read_counters();
  if (!start_.read || !end.read || end.total <= start_.total) return load;
  const double total = static_cast<double>(end.total - start_.total);
  const double others = static_cast<double>(end.busy - start_.busy) - static_cast<double>(end.own - start_.own);
  load.other_cpu = std::clamp(others / total - siblings, 0.0, 1.0);
  load.steal = static_cast<double>(end.steal - start_.steal) / total;
  return load;
}

}  // namespace ampwb
