// A private single-node Slurm for tests: munged, slurmctld and slurmd started from a temporary folder, and the
// client commands (sbatch, squeue, scontrol, scancel) run against it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace ampwb::test {

// What a client command printed (stdout and stderr together) and how it ended.
struct CommandResult {
  int exit_code = -1;  // the command's exit status; -1 when it did not start or ended by a signal
  std::string output;
};

// Starts Debian's munged, slurmctld and slurmd (slurm-wlm 22.05, munge 0.5) as this process's children, every file of
// theirs (key, sockets, state, spool, logs, slurm.conf) in a fresh temporary folder and their ports picked free, so
// two test programs can each run one; it waits until the node is idle. A daemon that cannot start throws
// std::runtime_error naming it, with the last lines of its log. The destructor cancels what still runs, stops the
// daemons and removes the folder. Runs as root or as a plain user, who is then SlurmUser and SlurmdUser.
class SlurmCluster {
 public:
  // `extra_conf`: lines appended to slurm.conf (a later line overrides an earlier one).
  explicit SlurmCluster(const std::string& extra_conf = "");
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // The temporary folder (jobs may write here; it goes with the cluster).
  const std::filesystem::path& folder() const { return folder_; }
  const std::filesystem::path& conf() const { return conf_; }
  // The node's name (this host's short name) and its one partition, the default.
  const std::string& node() const { return node_; }
  static constexpr const char* kPartition = "test";

  // Runs a client command (argv[0] looked up on PATH, no shell) in folder() with SLURM_CONF set, and waits for it.
  CommandResult run(const std::vector<std::string>& argv) const;
  // This process's environment with SLURM_CONF naming this cluster, for child processes ("NAME=value" each).
  std::vector<std::string> environment() const;

  // A job's state as `scontrol show job` says it (PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, ...), and its
  // restart count; empty / -1 once Slurm has forgotten the job (MinJobAge after it ended).
  std::string job_state(const std::string& job_id) const;
  int job_restarts(const std::string& job_id) const;
  // Waits, polling every 200 ms, until `done` holds or `limit` passed; returns whether it held.
  static bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit);

  // The last `lines` lines of a file in folder() (a daemon's log), for failure messages.
  std::string tail(const std::string& file, int lines = 20) const;

 private:
  struct Daemon {
    std::string name;
    pid_t pid = -1;
    std::string log;  // its own log file, in folder()
    std::string out;  // its stdout and stderr, in folder() (what it says before its log is open)
  };

  void start(const std::string& extra_conf);
  void stop();
  void write_munge_key() const;
  void write_conf(int controller_port, int node_port, const std::string& extra_conf) const;
  Daemon spawn_daemon(const std::string& name, const std::vector<std::string>& argv, const std::string& log);
  // Throws naming `daemon` if it has exited, with its exit status and its log's last lines.
  void check_alive(Daemon& daemon) const;
  [[noreturn]] void fail(const Daemon& daemon, const std::string& what) const;
  std::string show_job(const std::string& job_id) const;

  std::filesystem::path folder_;
  std::filesystem::path conf_;
  std::string node_;
  std::vector<Daemon> daemons_;  // in start order: munged, slurmctld, slurmd
};

}  // namespace ampwb::test
