// A private single-node Slurm for tests (slurm_cluster.h): the folder, the munge key and slurm.conf it writes, and
// how it starts, watches and stops the three daemons.
#include "slurm_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

extern char** environ;

namespace ampwb::test {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Two distinct TCP ports nothing listens on now: the kernel's picks for port 0, both held until both are picked
// (another program could take one before the daemon binds it, which then fails saying the address is in use).
std::pair<int, int> free_ports() {
  int ports[2] = {};
  int fds[2] = {-1, -1};
  bool ok = true;
  for (int i = 0; i < 2 && ok; ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t size = sizeof address;
    ok = fds[i] >= 0 && ::bind(fds[i], reinterpret_cast<sockaddr*>(&address), size) == 0 &&
         ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&address), &size) == 0;
    ports[i] = ntohs(address.sin_port);
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("SlurmCluster: cannot find free ports");
  return {ports[0], ports[1]};
}

// This host's short name, the one slurmd looks itself up by in slurm.conf.
std::string short_hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string host = name;
  return host.substr(0, host.find('.'));
}

// What the kernel says is available now, in MiB; the node is declared with less, since slurmd refuses a node whose
// RealMemory exceeds what it finds.
long available_memory_mib() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  long kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib / 1024;
  return 1024;
}

std::string current_user() {
  const passwd* entry = ::getpwuid(::geteuid());
  return entry ? entry->pw_name : std::to_string(::geteuid());
}

// The value after "Key=" in scontrol's one-line output, up to the next space; empty when absent.
std::string field(const std::string& text, const std::string& key) {
  const std::string needle = " " + key + "=";
  const std::string padded = " " + text;
  const size_t at = padded.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = at + needle.size();
  return padded.substr(begin, padded.find_first_of(" \n", begin) - begin);
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

SlurmCluster::SlurmCluster(const std::string& extra_conf) {
  std::string pattern = (fs::temp_directory_path() / "ampwb-slurm-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("SlurmCluster: cannot create a temporary folder");
  folder_ = pattern;
  // munged warns that its socket is unreachable unless every user may pass through the folder (mkdtemp makes it 0700).
  fs::permissions(folder_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  conf_ = folder_ / "slurm.conf";
  node_ = short_hostname();
  try {
    start(extra_conf);
  } catch (...) {
    stop();
    throw;
  }
}

SlurmCluster::~SlurmCluster() { stop(); }

void SlurmCluster::write_munge_key() const {
  std::ifstream random("/dev/urandom", std::ios::binary);
  std::string key(1024, '\0');
  random.read(key.data(), static_cast<std::streamsize>(key.size()));
  const fs::path path = folder_ / "munge.key";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0400);  // munged refuses a key others can read
  if (fd < 0 || ::write(fd, key.data(), key.size()) != static_cast<ssize_t>(key.size()) || ::close(fd) != 0)
    throw std::runtime_error("SlurmCluster: cannot write the munge key " + path.string());
}

void SlurmCluster::write_conf(int controller_port, int node_port, const std::string& extra_conf) const {
  const std::string dir = folder_.string();
  const std::string user = current_user();
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::ofstream conf(conf_);
  // As ../shared/docs/STACK.md saw working here (no cgroups, no systemd, no accounting database), with three
  // additions: the controller and the node at 127.0.0.1, so a host name that does not resolve does not matter;
  // ports picked free; and a 10 s KillWait (SIGTERM to SIGKILL; 30 s by default) so a job that ignores SIGTERM
  // holds the teardown less.
  conf << "ClusterName=ampwbtest\n"
       << "SlurmctldHost=" << node_ << "(127.0.0.1)\n"
       << "SlurmUser=" << user << "\n"
       << "SlurmdUser=" << user << "\n"
       << "SlurmctldPort=" << controller_port << "\n"
       << "SlurmdPort=" << node_port << "\n"
       << "AuthType=auth/munge\n"
       << "AuthInfo=socket=" << dir << "/munge.socket\n"
       << "CryptoType=crypto/munge\n"
       << "StateSaveLocation=" << dir << "/state\n"
       << "SlurmdSpoolDir=" << dir << "/spool\n"
       << "SlurmctldPidFile=" << dir << "/slurmctld.pid\n"
       << "SlurmdPidFile=" << dir << "/slurmd.pid\n"
       << "SlurmctldLogFile=" << dir << "/slurmctld.log\n"
       << "SlurmdLogFile=" << dir << "/slurmd.log\n"
       << "ProctrackType=proctrack/linuxproc\n"
       << "TaskPlugin=task/none\n"
       << "JobAcctGatherType=jobacct_gather/none\n"
       << "SelectType=select/cons_tres\n"
       << "SelectTypeParameters=CR_Core\n"
       << "MpiDefault=none\n"
       << "ReturnToService=2\n"
       << "KillWait=10\n"
       << "NodeName=" << node_ << " NodeAddr=127.0.0.1 CPUs=" << cpus
       << " RealMemory=" << available_memory_mib() * 9 / 10 << " State=UNKNOWN\n"
       << "PartitionName=" << kPartition << " Nodes=" << node_ << " Default=YES MaxTime=INFINITE State=UP\n"
       << extra_conf;
  if (!conf.flush()) throw std::runtime_error("SlurmCluster: cannot write " + conf_.string());
}

void SlurmCluster::start(const std::string& extra_conf) {
  for (const char* sub : {"state", "spool"}) fs::create_directories(folder_ / sub);
  write_munge_key();
  const auto [controller_port, node_port] = free_ports();
  write_conf(controller_port, node_port, extra_conf);
  const std::string dir = folder_.string();

  // munged in the foreground, so it stays this process's child; --force lets it run without /run/munge.
  Daemon& munged = daemons_.emplace_back(spawn_daemon(
      "munged",
      {"munged", "--foreground", "--force", "--key-file=" + dir + "/munge.key", "--socket=" + dir + "/munge.socket",
       "--pid-file=" + dir + "/munged.pid", "--log-file=" + dir + "/munged.log", "--seed-file=" + dir + "/munged.seed"},
      "munged.log"));
  if (!wait_until(
          [&] {
            check_alive(munged);
            return fs::exists(folder_ / "munge.socket");
          },
          10s))
    fail(munged, "did not create its socket within 10 s");

  Daemon& slurmctld =
      daemons_.emplace_back(spawn_daemon("slurmctld", {"slurmctld", "-D", "-f", conf_.string()}, "slurmctld.log"));
  if (!wait_until(
          [&] {
            check_alive(slurmctld);
            return run({"scontrol", "ping"}).output.find("is UP") != std::string::npos;
          },
          30s))
    fail(slurmctld, "did not answer `scontrol ping` within 30 s");

  Daemon& slurmd = daemons_.emplace_back(spawn_daemon("slurmd", {"slurmd", "-D", "-f", conf_.string()}, "slurmd.log"));
  std::string state;
  if (!wait_until(
          [&] {
            for (Daemon& daemon : daemons_) check_alive(daemon);
            CommandResult sinfo = run({"sinfo", "--noheader", "--Node", "--format=%T", "--nodes=" + node_});
            state = sinfo.output.substr(0, sinfo.output.find('\n'));
            return sinfo.exit_code == 0 && state == "idle";
          },
          60s))
    fail(slurmd, "did not make the node idle within 60 s (sinfo says \"" + state +
                     "\", reason: " + run({"sinfo", "--noheader", "--list-reasons", "--format=%E"}).output + ")");
}

SlurmCluster::Daemon SlurmCluster::spawn_daemon(const std::string& name, const std::vector<std::string>& argv,
                                                const std::string& log) {
  Daemon daemon{name, -1, log, name + ".out"};
  const std::string out = (folder_ / daemon.out).string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addchdir_np(&actions, folder_.c_str());
  const std::vector<std::string> env = environment();
  const int error =
      ::posix_spawnp(&daemon.pid, argv[0].c_str(), &actions, nullptr, c_strings(argv).data(), c_strings(env).data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    daemon.pid = -1;
    fail(daemon, std::string("cannot be started: ") + std::strerror(error) +
                     " (Debian's slurm-wlm and munge packages; scripts/install-deps.sh installs them)");
  }
  return daemon;
}

void SlurmCluster::check_alive(Daemon& daemon) const {
  if (daemon.pid <= 0) return;
  int status = 0;
  if (::waitpid(daemon.pid, &status, WNOHANG) != daemon.pid) return;
  daemon.pid = -1;
  fail(daemon, WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                 : "was killed by signal " + std::to_string(WTERMSIG(status)));
}

void SlurmCluster::fail(const Daemon& daemon, const std::string& what) const {
  std::ostringstream message;
  message << "SlurmCluster: " << daemon.name << " " << what << "\n--- last lines of " << (folder_ / daemon.log).string()
          << ":\n"
          << tail(daemon.log) << "--- its output:\n"
          << tail(daemon.out);
  throw std::runtime_error(message.str());
}

void SlurmCluster::stop() {
  const bool controller_up = daemons_.size() >= 2 && daemons_[1].pid > 0;
  if (controller_up && !run({"squeue", "--noheader", "--format=%i"}).output.empty()) {
    // Jobs still there (a failed test): cancelled, so no slurmstepd outlives the cluster in the folder.
    run({"scancel", "--user=" + current_user()});
    wait_until([&] { return run({"squeue", "--noheader", "--format=%i"}).output.empty(); }, 15s);
  }
  for (auto daemon = daemons_.rbegin(); daemon != daemons_.rend(); ++daemon) {
    if (daemon->pid <= 0) continue;
    ::kill(daemon->pid, SIGTERM);
    const pid_t pid = daemon->pid;
    if (!wait_until([&] { return ::waitpid(pid, nullptr, WNOHANG) == pid; }, 10s)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    daemon->pid = -1;
  }
  daemons_.clear();
  std::error_code ignored;
  fs::remove_all(folder_, ignored);
}

CommandResult SlurmCluster::run(const std::vector<std::string>& argv) const {
  CommandResult result;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return result;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addchdir_np(&actions, folder_.c_str());
  const std::vector<std::string> env = environment();
  pid_t pid = -1;
  const int error =
      ::posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, c_strings(argv).data(), c_strings(env).data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (error != 0) {
    ::close(pipe_fds[0]);
    result.output = argv[0] + ": " + std::strerror(error);
    return result;
  }
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

std::vector<std::string> SlurmCluster::environment() const {
  std::vector<std::string> env;
  for (char** entry = environ; *entry; ++entry)
    if (std::string_view(*entry).substr(0, 11) != "SLURM_CONF=") env.emplace_back(*entry);
  env.push_back("SLURM_CONF=" + conf_.string());
  return env;
}

std::string SlurmCluster::show_job(const std::string& job_id) const {
  const CommandResult shown = run({"scontrol", "--oneliner", "show", "job", job_id});
  return shown.exit_code == 0 ? shown.output : "";
}

std::string SlurmCluster::job_state(const std::string& job_id) const { return field(show_job(job_id), "JobState"); }

int SlurmCluster::job_restarts(const std::string& job_id) const {
  const std::string restarts = field(show_job(job_id), "Restarts");
  return restarts.empty() ? -1 : std::stoi(restarts);
}

bool SlurmCluster::wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(200ms);
  }
  return true;
}

std::string SlurmCluster::tail(const std::string& file, int lines) const {
  std::ifstream in(folder_ / file);
  if (!in) return "(no " + file + ")\n";
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string text;
  for (const std::string& line : last) text += line + "\n";
  return text;
}

}  // namespace ampwb::test
