// ampwb train: trains a ResNet on an image folder and records the run in the run store. Progress goes to a
// terminal as a progress bar and to a pipe or file as one line per epoch; --json prints a summary at the end.
// The training flags themselves are in train_flags.cpp.
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "dist/collective_timeout.h"
#include "dist/make_communicator.h"
#include "facade/processes.h"
#include "setting_flags.h"
#include "store/run_resume.h"
#include "store/run_store.h"
#include "store/store_recorder.h"
#include "train/event_lines.h"
#include "train/observer_list.h"
#include "train/run_progress.h"
#include "train/scale_collapse.h"
#include "train/trainer.h"
#include "train_flags.h"

namespace ampwb::cli {
namespace {

// What process `pid`'s standard output is ("/dev/pts/3", "/home/u/train.log"); empty where it cannot be read.
std::string output_of(pid_t pid) {
  std::error_code unreadable;
  const std::string path = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/fd/1", unreadable).string();
  return unreadable ? std::string() : path;
}

// The parent of process `pid` (/proc/PID/stat: "PID (name) STATE PPID ..."); 0 where it cannot be read.
pid_t parent_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  std::istringstream after_name(line.substr(std::min(line.size(), line.rfind(')') + 1)));
  std::string state;
  pid_t parent = 0;
  after_name >> state >> parent;
  return parent;
}

// Whether this process prints to a terminal, where a progress bar redraws in place. mpirun gives its ranks a terminal
// of its own whatever its own output is (`mpirun ... > train.log`, or `train --processes N` into a file): a rank it
// started goes up its parents (a wrapper script may stand between) to the first whose output is not that terminal,
// mpirun's, and asks whether that is one. A rank a remote daemon started, whose output is none, prints lines.
bool prints_to_terminal() {
  if (::isatty(STDOUT_FILENO) != 1) return false;
  if (!std::getenv("OMPI_COMM_WORLD_RANK")) return true;
  const std::string own = output_of(::getpid());
  for (pid_t pid = ::getppid(), hops = 0; pid > 1 && hops < 16; pid = parent_of(pid), ++hops) {
    const std::string theirs = output_of(pid);
    if (theirs.empty()) return false;
    if (theirs != own) return theirs.starts_with("/dev/pts/") || theirs.starts_with("/dev/tty");
  }
  return false;
}

// The first SIGINT/SIGTERM/SIGHUP (a closed terminal, a dropped SSH session) or SIGUSR1 (mpirun passes it on to every
// rank) asks the run to stop after its current step (it ends as cancelled and is recorded so, with a checkpoint);
// SA_RESETHAND makes a second one end the process at once (the store then shows the run as interrupted). SIGPIPE (the
// output's reader went away: `ampwb train | head`) stops it the same way, with a checkpoint, instead of killing it; it
// stays caught, since every later write to the pipe raises it again. The first signal is the one that stopped the
// run: its exit status and its recorded words.
volatile std::sig_atomic_t g_signal = 0;
void on_signal(int signal) {
  if (g_signal == 0) g_signal = signal;
}

// --processes passes its stop to the ranks as SIGUSR1, since mpirun answers SIGINT and SIGTERM with a SIGTERM to every
// rank and a SIGKILL one second later, too soon for a step and a checkpoint. The signal it received is written first
// in a file of its own the ranks read, named by this variable.
constexpr const char* kLauncherSignalVariable = "AMPWB_LAUNCHER_SIGNAL_FILE";

// The signal that stopped this training: the launcher's where a SIGUSR1 came from it.
int stop_signal() {
  const char* file = std::getenv(kLauncherSignalVariable);
  if (g_signal != SIGUSR1 || !file) return g_signal;
  int launcher_signal = 0;
  std::ifstream(file) >> launcher_signal;
  return launcher_signal > 0 ? launcher_signal : g_signal;
}

class SignalGuard {
 public:
  SignalGuard() {
    struct sigaction action {};
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
    sigaction(SIGUSR1, &action, &old_usr1_);
    sigaction(SIGHUP, nullptr, &old_hup_);
    if (old_hup_.sa_handler != SIG_IGN) sigaction(SIGHUP, &action, nullptr);  // nohup's run outlives its terminal
    action.sa_flags = 0;
    sigaction(SIGPIPE, &action, &old_pipe_);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
  }

 private:
  struct sigaction old_int_ {
  }, old_term_{}, old_usr1_{}, old_hup_{}, old_pipe_{};
};

// --processes: the mpirun this process started, in a process group of its own, so that every signal reaches it once,
// passed on by this process however it came (a terminal's Ctrl-C, kill, a process group's kill) as SIGUSR1, the
// signal's number written first to the file the ranks read (kLauncherSignalVariable).
volatile pid_t g_mpirun = 0;
int g_launcher_signal_file = -1;
void pass_signal_to_mpirun(int signal) {
  const int saved_errno = errno;
  if (g_signal == 0) {
    g_signal = signal;
    const char number[] = {static_cast<char>('0' + signal / 10), static_cast<char>('0' + signal % 10)};
    [[maybe_unused]] const ssize_t written = ::pwrite(g_launcher_signal_file, number, sizeof number, 0);
  }
  if (g_mpirun > 0) ::kill(g_mpirun, SIGUSR1);
  errno = saved_errno;
}

// Ctrl-Z (SIGTSTP) stops the ranks too, mpirun passing it on, then this process; fg or bg (SIGCONT) continues them.
void pass_job_control_to_mpirun(int signal) {
  const int saved_errno = errno;
  if (g_mpirun > 0) ::kill(g_mpirun, signal);
  struct sigaction action {};
  action.sa_handler = signal == SIGTSTP ? SIG_DFL : pass_job_control_to_mpirun;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTSTP, &action, nullptr);
  if (signal == SIGTSTP) ::raise(SIGTSTP);  // held until this handler returns, then stops this process
  errno = saved_errno;
}

// The Slurm job this process runs in ($SLURM_JOB_ID), empty outside Slurm.
std::string slurm_job_id() {
  const char* id = std::getenv("SLURM_JOB_ID");
  return id ? std::string(id) : std::string();
}

// A run stopped by a signal says which: SIGINT is the user's Ctrl-C; SIGHUP, SIGPIPE and SIGTERM say what stopped it.
// A SIGTERM under Slurm is the job being preempted, requeued or cancelled (then SIGKILL after the grace time): the
// run ends as interrupted, not cancelled, so that its checkpoint resumes it (a requeued sweep point does so itself).
class SignalAwareObservers : public ObserverList {
 public:
  using ObserverList::ObserverList;
  void on_end(const RunEnd& e) override { ObserverList::on_end(as_signalled(e)); }

  RunEnd as_signalled(const RunEnd& e) const {
    constexpr std::string_view kByTheUser = "stopped by the user";
    if (e.status != RunStatus::Cancelled || !e.reason.starts_with(kByTheUser)) return e;
    RunEnd end = e;
    const std::string after = e.reason.substr(kByTheUser.size());
    const int signal = stop_signal();
    if (signal == SIGTERM && !slurm_job_id().empty()) {
      end.status = RunStatus::Interrupted;
      end.reason =
          "Slurm job " + slurm_job_id() + " ended by SIGTERM (preempted, requeued or cancelled): stopped" + after;
    } else if (signal == SIGTERM || signal == SIGUSR1) {  // Ctrl-C is the user's; the others say who stopped it
      end.reason = std::string(signal == SIGTERM ? "stopped by SIGTERM" : "stopped by SIGUSR1") + after;
    } else if (signal == SIGHUP) {
      end.reason = "stopped as its terminal closed (SIGHUP)" + after;
    } else if (signal == SIGPIPE) {
      end.reason = "stopped as its output's reader went away (SIGPIPE)" + after;
    }
    return end;
  }
};

// Prints the run as it goes and turns a caught signal into Trainer::stop().
class ConsoleObserver : public TrainObserver {
 public:
  ConsoleObserver(int epochs, bool quiet, bool terminal, const StoreRecorder& recorder, const std::string& db)
      : epochs_(epochs), quiet_(quiet), terminal_(terminal), recorder_(recorder), db_(db) {}
  void set_trainer(Trainer* trainer) { trainer_ = trainer; }
  void set_sweep_point(bool sweep_point) { sweep_point_ = sweep_point; }

  void on_start(const RunInfo& info) override {
    progress_.start(info, epochs_);
    validated_ = info.validation_images > 0;
    if (quiet_) return;
    std::printf("run:     %lld, recorded in %s\n", static_cast<long long>(recorder_.run_id()), db_.c_str());
    std::printf("dataset: %lld training and %lld validation images, %zu classes (%s), %d px\n",
                static_cast<long long>(info.train_images), static_cast<long long>(info.validation_images),
                info.class_names.size(), info.dataset_layout.c_str(), info.image_size);
    if (!info.memory.empty()) std::printf("memory:  %s\n", info.memory.c_str());
    std::printf("model:   %s\ndevice:  %s\n", info.model_summary.c_str(), info.backend_description.c_str());
    if (!info.compute.empty()) std::printf("compute: %s\n", info.compute.c_str());
    for (const std::string& note : info.notes) std::printf("note:    %s\n", note.c_str());
    std::fflush(stdout);
  }

  void on_step(const StepReport& r) override {
    poll_signal();
    collapse_watch_.step(r);
    // Skips from the first step that have ended: the warning given while they lasted said what they now turned out
    // to be, an initial scale too high.
    if (warned_collapses_ > 0 && !noted_initial_level_ && collapse_watch_.latest()->found_initial_level()) {
      noted_initial_level_ = true;
      print_collapse_warning();
    }
    progress_.step(r);
    if (quiet_ || !terminal_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100)) return;  // a terminal needs no more than 10 frames/s
    last_draw_ = now;
    const int width = 24;
    const int64_t done = progress_.step_in_epoch(), total = progress_.steps_per_epoch();
    const int filled = static_cast<int>(std::min<int64_t>(width, done * width / total));
    std::printf("\r\033[Kepoch %d/%d [%s%s] %lld/%lld  loss %.4f  acc %5.1f%%  lr %.4g", r.epoch, epochs_,
                std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                static_cast<long long>(done), static_cast<long long>(total), r.loss, 100 * r.accuracy, r.lr);
    if (r.loss_scale != 1.0f) std::printf("  scale %g", r.loss_scale);
    if (r.skipped) std::printf("  skipped");
    if (const double left = progress_.eta_seconds(); left >= 0)  // the run's, validations to come included
      std::printf("  ETA %s", time_left_text(left).c_str());
    std::fflush(stdout);
  }

  // A long validation says how far it has come, on the progress line the steps used.
  void on_validation(const ValidationProgress& v) override {
    poll_signal();
    progress_.validation(v);
    if (quiet_ || !terminal_) return;
    const auto now = std::chrono::steady_clock::now();
    if (v.images_done > 0 && v.images_done < v.images && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    std::printf("\r\033[Kepoch %d/%d validating %lld/%lld images", v.epoch, epochs_,
                static_cast<long long>(v.images_done), static_cast<long long>(v.images));
    if (const double left = progress_.validation_eta_seconds(); left >= 0)
      std::printf("  %s left", time_left_text(left).c_str());
    std::fflush(stdout);
  }

  void on_epoch(const EpochReport& r) override {
    poll_signal();
    progress_.epoch(r);
    epochs.push_back(r);
    if (quiet_) return;
    if (terminal_) std::printf("\r\033[K");
    std::printf("epoch %d/%d  train loss %.4f acc %.2f%%  ", r.epoch, epochs_, r.train_loss, 100 * r.train_accuracy);
    if (validated_) std::printf("val loss %.4f acc %.2f%%  ", r.validation_loss, 100 * r.validation_accuracy);
    if (validated_ && r.topk > 0) std::printf("top-%d %.2f%%  ", r.topk, 100 * r.validation_topk);
    std::printf("%.1f s  %.1f img/s  data wait %.2f s  peak %.1f MiB", r.seconds, r.images_per_second,
                r.data_wait_seconds, r.peak_bytes / 1048576.0);
    if (r.skipped_steps) std::printf("  skipped %lld", static_cast<long long>(r.skipped_steps));
    if (r.loss_scale != 1.0) std::printf("  scale %g", r.loss_scale);
    if (const double left = progress_.eta_seconds(); r.epoch < epochs_ && left >= 0)
      std::printf("  ETA %s", time_left_text(left).c_str());
    std::printf("\n");
    std::fflush(stdout);
  }

  // After the step that completes a collapse, its own report: the warning names every step's layers. Printed once a
  // collapse, even with --quiet: it is what the user must act on.
  void on_overflow(const OverflowReport& o) override {
    collapse_watch_.overflow(o);
    if (warned_collapses_ == collapse_watch_.collapses()) return;
    warned_collapses_ = collapse_watch_.collapses();
    print_collapse_warning();
  }

  // The watch's warning on a line of its own, the progress bar's line cleared first.
  void print_collapse_warning() {
    if (terminal_ && !quiet_) std::printf("\r\033[K");
    std::fflush(stdout);
    std::fprintf(stderr, "ampwb train: warning: %s\n", collapse_watch_.warning().c_str());
  }

  void on_note(const std::string& note) override {
    if (terminal_) std::printf("\r\033[K");
    std::printf("note: %s\n", note.c_str());
    std::fflush(stdout);
  }

  void on_checkpoint(const CheckpointInfo& c) override {
    if (quiet_) return;
    if (terminal_) std::printf("\r\033[K");
    if (c.resume_epoch > epochs_)  // written at the end: it resumes nowhere, but stays while the run is not finished
      std::printf("checkpoint: end of epoch %d: %s\n", epochs_, c.path.c_str());
    else
      std::printf("checkpoint: resumes at epoch %d, after %lld steps of the run: %s\n", c.resume_epoch,
                  static_cast<long long>(c.step), c.path.c_str());
    std::fflush(stdout);
  }

  void on_end(const RunEnd&) override {
    if (!quiet_ && terminal_) std::printf("\r\033[K");
    std::fflush(stdout);
  }

  std::vector<EpochReport> epochs;
  int signal = 0;  // the signal that stopped the run

 private:
  void poll_signal() {
    if (g_signal == 0 || signal || !trainer_) return;
    signal = stop_signal();
    if (signal == SIGTERM && !slurm_job_id().empty())
      std::fprintf(stderr, "\nampwb train: Slurm ends job %s (SIGTERM): stopping after this step, resumable\n",
                   slurm_job_id().c_str());
    else if (sweep_point_)  // from the sweep, stopped or cancelled, which says so itself
      ;
    else if (signal == SIGPIPE)
      std::fprintf(stderr, "\nampwb train: the output's reader is gone: stopping after this step, resumable\n");
    else
      std::fprintf(stderr, "\nampwb train: %s received: stopping after this step (again to quit at once)\n",
                   signal == SIGINT    ? "interrupt"
                   : signal == SIGHUP  ? "hang-up"
                   : signal == SIGUSR1 ? "SIGUSR1"
                                       : "termination signal");
    trainer_->stop();
  }

  int epochs_;
  bool quiet_, terminal_;
  bool sweep_point_ = false;
  const StoreRecorder& recorder_;
  std::string db_;
  Trainer* trainer_ = nullptr;
  ScaleCollapseWatch collapse_watch_;
  int warned_collapses_ = 0;
  bool noted_initial_level_ = false;
  bool validated_ = true;  // the run has validation images
  RunProgress progress_;
  std::chrono::steady_clock::time_point last_draw_{};
};

struct TrainOptions {
  TrainFlags flags;
  int processes = 1;
  int collective_timeout = static_cast<int>(  // seconds: how long a rank waits for the others in a collective
      std::chrono::duration_cast<std::chrono::seconds>(kDefaultCollectiveTimeout).count());
  bool json = false, events_json = false, no_checkpoint = false, keep_checkpoint = false;
  bool no_keep_weights = false;  // a finished run's final weights are not kept beside the store
  std::string db, resume, config_file;
  const CLI::App* command = nullptr;  // the parsed `train`: which flags were given
};

// What --resume may change, from the flags given. Any other training flag is refused by name, also where it
// repeats the stored value or names the default: a flag is never silently ignored.
ResumeChanges resume_changes(const TrainOptions& options) {
  const TrainConfig& given = options.flags.config;
  ResumeChanges changes;
  for (const CLI::Option* option : options.command->get_options()) {
    const std::string flag = option->get_name();
    if (option->count() == 0 || flag == "--resume" || flag == "--db" || flag == "--json" ||
        flag == "--keep-checkpoint" || flag == "--processes" || flag == "--collective-timeout" ||
        flag == "--events-json")
      continue;
    if (flag == "--data")
      changes.data_dir = absolute_folder(given.data_dir);
    else if (flag == "--threads")
      changes.threads = given.threads;
    else if (flag == "--cache-mb")
      changes.cache_budget_mb = given.data.cache_budget_mb;
    else
      throw Error("resuming continues the run's stored configuration: " + flag +
                  " cannot be given (only --data, --threads, --cache-mb, --keep-checkpoint, --processes and "
                  "--collective-timeout can)");
  }
  return changes;
}

// Under mpirun or srun, rank 0 settles the run's configuration (the flags, or the store's for a resumed run) and
// sends it to the other ranks, which train it as received and never open the store. A refusal on rank 0 sends an
// empty configuration instead, so that no rank is left waiting.
class ConfigForRanks {
 public:
  explicit ConfigForRanks(Communicator& world) : world_(world) {}
  ~ConfigForRanks() {
    try {
      if (!sent_) send_text("");
    } catch (const std::exception&) {  // the ranks end with rank 0's exit: mpirun ends them all
    }
  }
  void send(const TrainConfig& c) { send_text(nlohmann::json{{"config", c}, {"resume_from", c.resume_from}}.dump()); }

 private:
  void send_text(const std::string& text) {
    sent_ = true;
    if (world_.world_size() == 1) return;
    int64_t bytes = static_cast<int64_t>(text.size());
    world_.broadcast(&bytes, sizeof bytes, 0);
    if (bytes > 0) world_.broadcast(const_cast<char*>(text.data()), text.size(), 0);
  }

  Communicator& world_;
  bool sent_ = false;
};

std::optional<TrainConfig> config_from_rank0(Communicator& world) {
  int64_t bytes = 0;
  world.broadcast(&bytes, sizeof bytes, 0);
  if (bytes == 0) return std::nullopt;
  std::string text(static_cast<size_t>(bytes), '\0');
  world.broadcast(text.data(), text.size(), 0);
  const nlohmann::json j = nlohmann::json::parse(text);
  TrainConfig c = j.at("config").get<TrainConfig>();
  c.resume_from = j.at("resume_from").get<std::string>();
  return c;
}

// --config FILE: the run's whole configuration as JSON (TrainConfig's, as the run store keeps it and the GUI writes
// it). Only the flags that say how to run it may be given beside it; a training flag would be silently overruled.
TrainConfig config_from_file(const TrainOptions& options) {
  std::ifstream in(options.config_file);
  if (!in) throw Error("--config: cannot read " + options.config_file + ": " + std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const CLI::Option* option : options.command->get_options()) {
    const std::string flag = option->get_name();
    if (option->count() == 0 || flag == "--config" || flag == "--db" || flag == "--json" || flag == "--events-json" ||
        flag == "--processes" || flag == "--collective-timeout" || flag == "--threads" || flag == "--no-checkpoint" ||
        flag == "--keep-checkpoint" || flag == "--no-keep-weights")
      continue;
    throw Error(
        "--config gives the whole configuration: " + flag +
        " cannot be given with it (only --db, --threads, --processes, --collective-timeout, --json, --events-json, "
        "--no-checkpoint, --keep-checkpoint and --no-keep-weights can)");
  }
  TrainConfig c;
  try {
    c = config_from_json_text(text);
  } catch (const std::exception& e) {
    throw Error("--config: " + options.config_file + " is no training configuration: " + e.what());
  }
  if (options.command->get_option("--threads")->count() > 0) c.threads = options.flags.config.threads;
  return c;
}

std::string processes(int n) { return n == 1 ? std::string("one process") : std::to_string(n) + " processes"; }

// Each rank's shard, the steps of an epoch and the batch in all depend on the processes: a resumed run goes on as it
// was, with as many.
void refuse_other_processes(const RunStore& store, int64_t run, int world_size) {
  if (const int before = store.run(run).info.world_size; before != world_size)
    throw Error("run " + std::to_string(run) + " was trained by " + processes(before) + ": resume it with as many (" +
                (before > 1 ? "--processes " + std::to_string(before) + ", mpirun -np " + std::to_string(before) +
                                  " or srun -n " + std::to_string(before)
                            : std::string("without --processes, mpirun or srun")) +
                "), not " + processes(world_size));
}

// The command that continues run `run` of `world_size` processes: as many again.
std::string resume_command(int64_t run, int world_size) {
  return "ampwb train --resume " + std::to_string(run) +
         (world_size > 1 ? " --processes " + std::to_string(world_size) : std::string());
}

// A rank other than 0: trains its shard of the run rank 0 records; says only why it failed.
int train_beside_rank0(Communicator& world, Launcher launcher) {
  const std::optional<TrainConfig> c = config_from_rank0(world);
  if (!c) return 1;  // rank 0 refused the run and says why
  Trainer trainer(*c, nullptr);
  trainer.set_communicator(&world, launcher);
  RunEnd end;
  {
    SignalGuard signals;  // a signal stops rank 0, and through it every rank at the same step
    end = trainer.run();
  }
  if (end.status == RunStatus::Failed || end.status == RunStatus::Interrupted)
    std::fprintf(stderr, "ampwb train: rank %d: error: %s\n", world.rank(),
                 said_with_flag(end.setting, end.reason).c_str());
  if (end.status == RunStatus::Failed) world.exiting_on_failure();  // the others may wait for this rank's next step
  // A stop by a signal exits as rank 0 does (130 SIGINT, 143 SIGTERM): mpirun passes on the ranks' status.
  if (end.status == RunStatus::Cancelled && g_signal) return 128 + stop_signal();
  return end.status == RunStatus::Finished ? 0 : 1;
}

// --processes N: this command again as N ranks of one mpirun on this machine, each with its share of the cores
// unless --threads says (mpirun's own flags let it run as root and start more ranks than cores).
[[noreturn]] void run_as_ranks(const TrainOptions& options) {
  if (!have_mpi()) throw Error("--processes needs MPI, and this build has none (Open MPI: libopenmpi-dev)");
  if (!options.resume.empty()) {  // refused here, not by rank 0 after mpirun started them all
    const RunStore store(store_path(options.db), RunStore::Mode::ReadOnly);
    refuse_other_processes(store, store.resolve(options.resume), options.processes);
  }
  // More CPU ranks than cores still train, slowly: each step waits for the rank the others crowded out.
  if (const ProcessOffer offer = process_offer();
      offer.on_cpu(options.flags.config.device) && options.processes > offer.max_processes(DeviceChoice::cpu()))
    std::fprintf(stderr,
                 "ampwb train: warning: %d processes on %d cores take turns on them, each step waiting for the "
                 "slowest: up to %d here (ampwb devices)\n",
                 options.processes, offer.cores, offer.max_processes(DeviceChoice::cpu()));
  // No input for the ranks: mpirun, in a process group of its own, would stop reading a terminal (SIGTTIN). Quiet:
  // the ranks say why they ended, and mpirun's boxed words on a rank's exit status (a Ctrl-C's 130 too) would follow.
  std::vector<std::string> argv = {"mpirun", "-np",    std::to_string(options.processes), "--oversubscribe", "--stdin",
                                   "none",   "--quiet"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> self;
  for (std::string arg; std::getline(cmdline, arg, '\0');) self.push_back(arg);
  self.at(0) = std::filesystem::read_symlink("/proc/self/exe").string();
  for (size_t i = 0; i < self.size(); ++i) {
    if (self[i] == "--processes") {
      ++i;  // and its value
    } else if (!self[i].starts_with("--processes=")) {
      argv.push_back(self[i]);
    }
  }
  if (options.command->get_option("--threads")->count() == 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    argv.insert(argv.end(), {"--threads", std::to_string(std::max(1, cores / options.processes))});
  }
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  // mpirun stays this process's child: a signal to mpirun makes it exit 1 whatever its ranks did, while this
  // process, as any training, exits 128 + the signal that stopped the run. The signals wait, blocked, until the
  // handler knows mpirun; a SIGHUP nohup ignores stays ignored.
  struct sigaction hup {};
  sigaction(SIGHUP, nullptr, &hup);
  std::vector<int> stops = {SIGINT, SIGTERM, SIGUSR1};
  if (hup.sa_handler != SIG_IGN) stops.push_back(SIGHUP);
  sigset_t blocked, before;
  sigemptyset(&blocked);
  for (const int signal : stops) sigaddset(&blocked, signal);
  sigprocmask(SIG_BLOCK, &blocked, &before);
  std::signal(SIGCHLD, SIG_DFL);  // an inherited SIG_IGN would reap mpirun before waitpid could read its status
  const pid_t parent = ::getpid();
  // A file in memory, gone with this process; the ranks read it through /proc.
  g_launcher_signal_file = ::memfd_create("ampwb-launcher-signal", MFD_CLOEXEC);
  if (g_launcher_signal_file >= 0)
    ::setenv(kLauncherSignalVariable,
             ("/proc/" + std::to_string(parent) + "/fd/" + std::to_string(g_launcher_signal_file)).c_str(), 1);
  g_mpirun = ::fork();
  if (g_mpirun < 0) throw Error(std::string("--processes cannot start mpirun: ") + std::strerror(errno));
  if (g_mpirun == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // this process killed outright: mpirun stops its ranks all the same
    if (::getppid() != parent) ::_exit(1);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr,
                 "ampwb train: error: --processes starts Open MPI's mpirun, which cannot be run here (%s; Debian: "
                 "openmpi-bin)\n",
                 std::strerror(errno));
    ::_exit(1);
  }
  struct sigaction action {};
  action.sa_handler = pass_signal_to_mpirun;
  sigemptyset(&action.sa_mask);
  for (const int signal : stops) sigaction(signal, &action, nullptr);
  action.sa_handler = pass_job_control_to_mpirun;
  for (const int signal : {SIGTSTP, SIGCONT}) sigaction(signal, &action, nullptr);
  sigprocmask(SIG_SETMASK, &before, nullptr);  // one held meanwhile arrives now, and is passed on
  int status = 0;
  pid_t waited = 0;
  while ((waited = ::waitpid(g_mpirun, &status, 0)) < 0 && errno == EINTR) {
  }
  g_mpirun = 0;
  const int exit_status = waited < 0 ? 1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // A rank the kernel ended (a crash, the out-of-memory killer) said nothing, and mpirun is quiet: said here.
  if (const int rank_signal = exit_status - 128; g_signal == 0 && rank_signal > 0 && rank_signal < 32 &&
                                                 rank_signal != SIGINT && rank_signal != SIGTERM &&
                                                 rank_signal != SIGHUP && rank_signal != SIGPIPE)
    std::fprintf(stderr, "ampwb train: error: a process of this training was ended by signal %d (%s)%s\n", rank_signal,
                 strsignal(rank_signal), rank_signal == SIGKILL ? ": the out-of-memory killer, or a kill -9" : "");
  std::exit(g_signal != 0 && exit_status != 0 ? 128 + g_signal : exit_status);
}

// What train_recorded needs beside the store and the configuration.
struct RecordedRun {
  int64_t continue_run = 0;  // the run to resume (`c` is its resume_config), 0 for a new one
  bool json = false, events_json = false, quiet = false;
  bool sweep_point = false;  // TrainingInStore's
  Communicator* world = nullptr;
  Launcher launcher = Launcher::Single;
  ConfigForRanks* for_ranks = nullptr;  // rank 0 of many: sends the other ranks the configuration
  std::function<void(int64_t run)> on_run_started;
  bool keep_final_weights = true;  // beside the store, when the run finishes (store/final_weights.h)
};

// Tells who asked the run's id once its row is recorded (a sweep links its point to it).
class RunStartedObserver : public TrainObserver {
 public:
  RunStartedObserver(const StoreRecorder& recorder, std::function<void(int64_t)> started)
      : recorder_(recorder), started_(std::move(started)) {}
  void on_start(const RunInfo&) override {
    if (started_ && recorder_.run_id() != 0) started_(recorder_.run_id());
  }

 private:
  const StoreRecorder& recorder_;
  std::function<void(int64_t)> started_;
};

// Trains `c` into `store` on rank 0: prints as it goes, records every event, and ends as `ampwb train` does.
TrainingOutcome train_recorded(RunStore& store, const TrainConfig& c, const RecordedRun& how) {
  std::error_code ec;
  const bool folder_made_here = !c.checkpoint_dir.empty() && !std::filesystem::exists(c.checkpoint_dir, ec);
  if (how.continue_run == 0)
    if (const std::string refusal = checkpoint_folder_refusal(store, c.checkpoint_dir); !refusal.empty())
      throw Error("--checkpoint-dir: " + refusal);
  const bool json = how.json;
  StoreRecorder recorder(store, c, {.keep_final_weights = how.keep_final_weights}, how.continue_run);
  ConsoleObserver console(c.epochs, json || how.events_json || how.quiet, prints_to_terminal(), recorder, store.path());
  console.set_sweep_point(how.sweep_point);
  EventLineWriter event_lines(stdout, [&recorder] { return recorder.run_id(); });
  // The recorder first: a printed epoch is a stored epoch.
  std::vector<TrainObserver*> listeners = {&recorder, &console};
  if (how.events_json) listeners.push_back(&event_lines);
  RunStartedObserver started(recorder, how.on_run_started);
  if (how.on_run_started) listeners.push_back(&started);
  SignalAwareObservers observers(listeners);
  if (how.for_ranks) how.for_ranks->send(c);
  Trainer trainer(c, &observers);
  trainer.set_communicator(how.world, how.launcher);
  console.set_trainer(&trainer);
  RunEnd end;
  {
    SignalGuard signals;
    end = trainer.run();
  }
  end = recorder.recorded_end(observers.as_signalled(end));  // the store's failure interrupts a sound run

  // The summary of the whole run as stored (a resumed run includes its earlier epochs); what this process saw
  // when the store could not record it.
  const int64_t run_id = recorder.run_id();
  const bool recorded = run_id != 0 && recorder.error().empty();
  RunRecord record;
  record.config = c;  // what it trained, where the store could not record it
  if (recorded) record = store.run(run_id);
  const std::vector<EpochReport> epochs = recorded ? store.epochs(run_id) : console.epochs;
  const RunSummary summary = summarize(record, epochs);
  if (json) {
    nlohmann::json out = summary;  // the summary's fields, then the run's
    out.update({{"run_id", run_id},
                {"name", record.name},
                {"db", store.path()},
                {"status", end.status},
                {"reason", end.reason},
                {"recorded", recorded},
                {"epochs", epochs}});
    if (!record.config.precision.scales_loss()) without_loss_scale(out["epochs"]);
    if (!recorder.error().empty()) out["store_error"] = recorder.error();
    print_json(out);
  }
  // A finished run cannot be resumed: its checkpoints are only disk space, once the store holds its end. Until then
  // the store shows it interrupted, and its checkpoint is what lets it finish again.
  bool checkpoint_removed = false;
  if (end.status == RunStatus::Finished && recorded && is_own_checkpoint_dir(store.path(), c.checkpoint_dir) &&
      !c.keep_checkpoints && std::filesystem::exists(c.checkpoint_dir, ec))
    checkpoint_removed = std::filesystem::remove_all(c.checkpoint_dir, ec) > 0 && !ec;
  // A run without a checkpoint (refused before it started, or ended before its first) has nothing to resume: the
  // folder this process made for it goes, if it holds nothing but its lock (never a folder that was there before,
  // another run's perhaps).
  if (folder_made_here) {
    const std::filesystem::path folder = c.checkpoint_dir, lock = folder / "checkpoint.lock";
    bool only_the_lock = true;
    for (const auto& entry : std::filesystem::directory_iterator(folder, ec))
      only_the_lock = only_the_lock && entry.path() == lock;
    if (only_the_lock && !ec) {
      std::filesystem::remove(lock, ec);
      std::filesystem::remove(folder, ec);  // only an empty folder
    }
  }
  if (!json && !how.events_json && run_id != 0 && !how.quiet) {  // the events say it in their own lines
    const std::string name = record.name.empty() ? std::string() : " (" + record.name + ")";  // unrecorded: none
    // The checkpoint lines above named files that are gone now: said, so that nobody looks for them.
    std::printf("run %lld%s %s%s; ampwb show %lld\n", static_cast<long long>(run_id), name.c_str(),
                run_end_words(end.status, end.reason).c_str(),
                checkpoint_removed ? ", its checkpoint removed (--keep-checkpoint keeps it)" : "",
                static_cast<long long>(run_id));
  }
  std::fflush(stdout);
  const int world_size = how.world ? how.world->world_size() : 1;
  if (!recorder.error().empty()) {
    std::fprintf(stderr, "ampwb train: error: the run was not %srecorded: %s\n", run_id == 0 ? "" : "fully ",
                 recorder.error().c_str());
    // Its row still says running: the next process to open the store marks it interrupted (kAbandonedRunReason).
    if (run_id != 0 && !trainer.checkpoint_path().empty() && std::filesystem::exists(trainer.checkpoint_path(), ec))
      std::fprintf(stderr,
                   "ampwb train: the run store will show run %lld interrupted: once it can be written again, resume "
                   "the run from its last checkpoint with %s\n",
                   static_cast<long long>(run_id), resume_command(run_id, world_size).c_str());
    else if (run_id != 0)
      std::fprintf(stderr,
                   "ampwb train: the run store will show run %lld interrupted, with no checkpoint to resume it from\n",
                   static_cast<long long>(run_id));
  }
  if (end.status == RunStatus::Failed && end.reason != recorder.error())
    std::fprintf(stderr, "ampwb train: error: %s\n", said_with_flag(end.setting, end.reason).c_str());
  // Another rank was lost (dist/collective_timeout.h): this process ends, and with it, through mpirun, every rank.
  if (end.status == RunStatus::Interrupted && recorder.error().empty())
    std::fprintf(stderr, "ampwb train: error: %s; resume the run from its last checkpoint with %s\n",
                 end.reason.c_str(), resume_command(run_id, world_size).c_str());
  TrainingOutcome outcome{run_id, end.status, end.reason, 0, console.signal, !recorder.error().empty()};
  if (!recorder.error().empty() || end.status == RunStatus::Failed || end.status == RunStatus::Interrupted)
    outcome.exit_code = 1;
  else if (end.status == RunStatus::Cancelled)
    outcome.exit_code = console.signal ? 128 + console.signal : 1;  // 129 SIGHUP, 130 SIGINT, 141 SIGPIPE, 143 SIGTERM
  return outcome;
}

// Flags whose settings the run's precision ignores: FP8's outside amp-fp8, the loss scaler's where nothing scales the
// loss. They do nothing, which the user is told; the run records their defaults (effective_config).
void warn_of_ignored_flags(const CLI::App& command, const TrainConfig& c) {
  const auto given = [&](std::initializer_list<const char*> flags) {
    std::string names;
    int count = 0;
    for (const char* flag : flags)
      if (const CLI::Option* option = command.get_option_no_throw(flag); option && option->count() > 0) {
        names += (names.empty() ? "" : ", ") + std::string(flag);
        ++count;
      }
    return std::pair{names, count};
  };
  const char* mode = mode_name(c.precision.mode);
  if (c.precision.mode != PrecisionMode::AmpFp8)
    if (const auto [names, count] =
            given({"--fp8-amax-history", "--fp8-margin", "--fp8-amax-rule", "--fp8-formats", "--fp8-first-last"});
        count > 0)
      std::fprintf(stderr, "ampwb train: warning: %s %s amp-fp8 runs alone: this %s run ignores %s\n", names.c_str(),
                   count == 1 ? "sets" : "set", mode, count == 1 ? "it" : "them");
  if (!c.precision.scales_loss())
    if (const auto [names, count] = given({"--scaler-preset", "--init-scale", "--growth-factor", "--backoff-factor",
                                           "--growth-interval", "--hysteresis", "--min-scale", "--max-scale"});
        count > 0)
      std::fprintf(stderr,
                   "ampwb train: warning: %s %s the loss scaler, which this %s run does not use (%s): it ignores %s\n",
                   names.c_str(), count == 1 ? "sets" : "set", mode,
                   mode_info(c.precision.mode).format == NumberFormat::Fp16
                       ? "its loss scaling is off; --loss-scale dynamic or static:S turns it on"
                       : "its format needs no loss scaling",
                   count == 1 ? "it" : "them");
}

int train_command(const TrainOptions& options) {
  const LaunchInfo launch = read_launch_info(process_environment());
  if (options.processes > 1 && launch.world_size > 1)
    throw Error("--processes starts mpirun itself: give it without mpirun or srun, or leave it out under them");
  if (options.processes > 1) run_as_ranks(options);
  const std::unique_ptr<Communicator> world =
      make_communicator(launch, std::chrono::seconds(options.collective_timeout), options.flags.config.device);
  if (world->rank() != 0) return train_beside_rank0(*world, launch.launcher);
  ConfigForRanks for_ranks(*world);
  TrainConfig c = options.config_file.empty() ? options.flags.resolve() : config_from_file(options);
  c.data_dir = absolute_folder(c.data_dir);
  c.checkpoint_dir = absolute_folder(c.checkpoint_dir);
  const std::string db_path = store_path(options.db);
  const std::string& resume = options.resume;
  const bool no_checkpoint = options.no_checkpoint, keep_checkpoint = options.keep_checkpoint;
  c.keep_checkpoints = keep_checkpoint;
  if (resume.empty()) {
    validate(c);  // bad settings are refused before the store is touched
    if (!c.name.empty()) check_run_name(c.name);
    if (options.command && options.config_file.empty()) warn_of_ignored_flags(*options.command, c);
  }

  // Opened before any training work, so an unusable store is reported at once, not after data loading.
  RunStore store(db_path, RunStore::Mode::Create);
  int64_t continue_run = 0;
  if (!resume.empty()) {
    continue_run = store.resolve(resume);
    refuse_other_processes(store, continue_run, world->world_size());
    const ResumeChanges changes = resume_changes(options);
    c = resume_config(store, continue_run, changes);
    if (std::error_code ec; !changes.data_dir && !std::filesystem::is_directory(c.data_dir, ec))
      throw Error("run " + std::to_string(continue_run) + " trained on the dataset folder '" + c.data_dir +
                  "', which is not there now: if it moved, resume with --data FOLDER");
    c.keep_checkpoints = c.keep_checkpoints || keep_checkpoint;
  } else if (!c.name.empty()) {
    store.check_new_name(c.name);
  }
  // A configuration taken from a stored run names that run's own checkpoint folder: this run gets one of its own.
  if (resume.empty() && !options.config_file.empty() && is_own_checkpoint_dir(store.path(), c.checkpoint_dir))
    c.checkpoint_dir.clear();
  // Checkpoints by default, beside the store, as the GUI does; a folder made here goes when the run finishes.
  if (resume.empty() && c.checkpoint_dir.empty() && !no_checkpoint) c.checkpoint_dir = new_checkpoint_dir(store.path());
  RecordedRun how;
  how.continue_run = continue_run;
  how.json = options.json;
  how.events_json = options.events_json;
  how.world = world.get();
  how.launcher = launch.launcher;
  how.for_ranks = &for_ranks;
  how.keep_final_weights = !options.no_keep_weights;
  const TrainingOutcome outcome = train_recorded(store, c, how);
  if (outcome.status == RunStatus::Failed || outcome.store_failed) world->exiting_on_failure();  // as the others
  return outcome.exit_code;
}

}  // namespace

TrainingOutcome train_in_store(RunStore& store, const TrainConfig& config, const TrainingInStore& how) {
  const std::unique_ptr<Communicator> world = make_communicator(LaunchInfo{}, kDefaultCollectiveTimeout, config.device);
  RecordedRun recorded;
  recorded.continue_run = how.continue_run;
  recorded.quiet = how.quiet;
  recorded.sweep_point = how.sweep_point;
  recorded.world = world.get();
  recorded.on_run_started = how.on_run_started;
  return train_recorded(store, config, recorded);
}

void add_train_command(CLI::App& app, Invocation& invocation) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* train =
      app.add_subcommand("train", "train a ResNet on an image folder and record the run in the run store");
  options->command = train;
  add_train_flags(train, options->flags);
  train
      ->add_option("--resume", options->resume,
                   "continue a stopped run from its checkpoint (only --data, --threads, --cache-mb, --keep-checkpoint, "
                   "--processes, as many as it had, and --collective-timeout may be given)")
      ->type_name("RUN")
      ->group("Run");
  train->add_flag("--no-checkpoint", options->no_checkpoint, "write no checkpoints (the run cannot be resumed)")
      ->excludes("--checkpoint-dir")
      ->group("Run");
  train->add_flag("--keep-checkpoint", options->keep_checkpoint, "keep a finished run's checkpoints (else removed)")
      ->group("Run");
  train
      ->add_flag("--no-keep-weights", options->no_keep_weights,
                 "keep no final weights of the finished run (else kept beside the store, for ampwb predict and "
                 "ampwb export model)")
      ->group("Run");
  add_db_option(train, options->db)->group("Run");
  CLI::Option* json =
      train->add_flag("--json", options->json, "print the run's summary as JSON at the end, no progress")->group("Run");
  train
      ->add_flag("--events-json", options->events_json,
                 "print the run's events as it goes, one JSON object a line (the GUI follows a run it started so)")
      ->excludes(json)
      ->group("Run");
  train
      ->add_option(
          "--config", options->config_file,
          "the run's whole configuration as a JSON file (as the run store keeps it), instead of training flags")
      ->type_name("FILE")
      ->group("Run");
  add_number(train, "--processes", options->processes,
             "train as this many processes of one mpirun on this machine, each taking --batch-size images a step "
             "from its shard of the data (docs/distributed.md)")
      ->check(CLI::Range(1, 1024).description(""))
      ->group("Run");
  add_number(train, "--collective-timeout", options->collective_timeout,
             "seconds a process of a run on many processes waits for the others in one exchange before it names those "
             "that do not answer and ends the run as interrupted (docs/distributed.md)")
      ->type_name("SECONDS")
      ->check(CLI::Range(1, 7 * 24 * 3600).description(""))
      ->group("Run");
  train->footer(devices_help);
  run_on_parse(train, invocation, options, train_command);
}

}  // namespace ampwb::cli
