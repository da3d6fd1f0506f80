// What else the machine was doing while a run trained: other processes' CPU time, the hypervisor's steal and the
// CPUs' clock, over a span of training (an epoch's steps), from /proc and /sys; on a GPU, its clock and the other
// processes using it (gpu_load.h). Timings measured beside other work
// are not the configuration's speed; the comparison, the diagnosis and the report flag them (analysis/run_speed.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "train/record_fields.h"

namespace ampwb {

struct MachineLoad {
  double other_cpu = -1;  // the share of the machine's CPU time other processes used, 0 to 1; -1 unreadable
  double steal = -1;      // the share of its CPUs' time the hypervisor gave to other guests; -1 unreadable
  double cpu_mhz = 0;     // the CPUs' mean clock at the end of the span; 0 where /sys does not show it
  double gpu_mhz = 0;     // the GPU's clock at the end of the span, and the most it runs at; 0 off a GPU
  double gpu_max_mhz = 0;
  int gpu_other_processes = -1;  // other processes on the run's GPU; -1 off a GPU or unreadable

  bool known() const { return other_cpu >= 0; }
};

// Machines busier than this with other work, or steal this large, time nothing reliably.
constexpr double kBusyMachine = 0.2;
// Why timings taken under `load` say as much about the other work as about what was timed: "the machine was 45%
// busy with other work and 1 other process used the GPU"; empty when it was quiet enough (or nothing was read).
std::string busy_reasons(const MachineLoad& load);
inline bool too_busy_to_time(const MachineLoad& load) { return !busy_reasons(load).empty(); }

// The load over spans one after another (a benchmark's turns), each `seconds` long: their shares and clocks weighted
// by their length, the most other processes any saw on the GPU; unknown where none was read.
MachineLoad mean_load(const std::vector<MachineLoad>& spans, const std::vector<double>& seconds);

// "12% of the CPUs busy with other work, 0% steal, 3.7 GHz", then on a GPU "; GPU at 1.41 of 1.98 GHz, no other
// process on it"; "not recorded".
std::string machine_load_text(const MachineLoad& load);
// The same in a table's cell, whose note says what the shares are: "12% other work, 0% steal, 3.7 GHz; GPU 1.41 of
// 1.98 GHz, no other process".
std::string machine_load_cell(const MachineLoad& load);

// The CPU time counters at start(); stop() gives the load since, and the state of the GPU `device` names.
class MachineLoadMeter {
 public:
  explicit MachineLoadMeter(std::string device = "cpu") : device_(std::move(device)) { start(); }
  void start();
  // `siblings`: the share of the machine's CPU time the run's other processes on this machine used meanwhile (a
  // data-parallel run's ranks here), which is the run's own work, not other work.
  MachineLoad stop(double siblings = 0) const;
  // This process's share of the machine's CPU time since start(); 0 where /proc cannot say.
  double own_share() const;

 private:
  struct Counters {
    bool read = false;
    uint64_t total = 0, busy = 0, steal = 0;  // the machine's, in clock ticks (/proc/stat)
    uint64_t own = 0;                         // this process's user and system time, in the same ticks
  };
  static Counters read_counters();
  std::string device_;
  Counters start_;
};

template <class R, class V>
requires same_record<R, MachineLoad>
void fields(R& l, V&& v) {
  v("other_cpu", l.other_cpu);
  v("steal", l.steal);
  v("cpu_mhz", l.cpu_mhz);
  v("gpu_mhz", l.gpu_mhz);
  v("gpu_max_mhz", l.gpu_max_mhz);
  v("gpu_other_processes", l.gpu_other_processes);
}

}  // namespace ampwb
