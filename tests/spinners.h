// Other work sharing the machine with what a test times: processes that spin, one pinned to each CPU, until
// destroyed (also when an assertion leaves the test early).
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

namespace ampwb {

class Spinners {
 public:
  Spinners() {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < cpus; ++cpu) {
      const pid_t pid = fork();
      if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
        for (;;) {
        }
      }
      if (pid > 0) pids_.push_back(pid);  // never -1: kill(-1) would reach every process
    }
  }
  ~Spinners() {
    for (pid_t pid : pids_) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
  }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace ampwb
