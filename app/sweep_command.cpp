// ampwb sweep: a grid of training runs, recorded as a sweep in the run store (store/sweep_record.h) and run here,
// one point at a time or N at once as child processes (`sweep point`), or submitted as one Slurm job array whose
// tasks each run `sweep point` for the point SLURM_ARRAY_TASK_ID names. `sweep status|cancel|list|run` look after it.
// Every front end numbers the points from 1 (point N of M); Slurm's array task N-1 trains point N, and the store
// keeps the 0-based index, which is the task's id.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "analysis/report_text.h"
#include "analysis/run_speed.h"
#include "analysis/sweep_speed_ups.h"
#include "cli.h"
#include "commands.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/shell_word.h"
#include "dist/launch.h"
#include "setting_flags.h"
#include "store/reconnecting.h"
#include "store/run_resume.h"
#include "store/run_store.h"
#include "store/store_filesystem.h"
#include "store/store_location.h"
#include "store/sweep_record.h"
#include "sweep_grid.h"
#include "text_table.h"
#include "train/alternating_benchmark.h"

namespace ampwb::cli {
namespace {
namespace fs = std::filesystem;

struct SweepOptions {
  std::string db, sweep_file, name, on = "local", partition, account, time_limit;
  int parallel = 1, max_parallel = 0;
  bool dry_run = false, json = false, no_timing = false;
  // The training settings given as flags: each flag's values as given (comma lists, split by grid_of), and the on/off
  // flags' counts.
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, int64_t> switches;
  const CLI::App* command = nullptr;
};

struct SweepIdOptions {
  std::string db, sweep;
  bool json = false, quiet = false, no_timing = false;
  bool retry_failed = false;  // sweep run: the failed points queued again first
  int held_by_parent = 0;  // sweep point: the process id of the sweep run that took the point
  int parallel = 1;
  std::string point;  // sweep point: the point (from 1), else $SLURM_ARRAY_TASK_ID (from 0) + 1
};

std::string self_exe() { return fs::read_symlink("/proc/self/exe").string(); }

int64_t sweep_id(const std::string& text) {
  char* end = nullptr;
  const long long id = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || id <= 0)
    throw Error("SWEEP is a sweep's id (ampwb sweep list), got '" + text + "'");
  return id;
}

// "0,,1" as {"0", "", "1"}: every item, the empty ones too, so that a stray comma is said rather than dropped. Spaces
// around an item are dropped, as "fp32, amp-bf16" is written in prose.
std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> items;
  for (size_t from = 0;;) {
    const size_t comma = list.find(',', from);
    std::string item = list.substr(from, comma - from);
    const size_t first = item.find_first_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, item.find_last_not_of(" \t") - first + 1);
    items.push_back(item);
    if (comma == std::string::npos) return items;
    from = comma + 1;
  }
}

// The grid the flags (and the sweep file) describe: a flag given a comma list is a dimension, in the order the
// flags were given; a flag given one value is a setting every point shares.
SweepGrid grid_of(const SweepOptions& o) {
  SweepGrid grid;
  if (!o.sweep_file.empty()) grid = read_sweep_file(o.sweep_file);
  std::set<std::string> given;
  for (const auto& [setting, values] : grid.dimensions) given.insert(setting);
  for (const auto& [setting, value] : grid.settings) given.insert(setting);
  std::set<const CLI::Option*> seen;
  for (const CLI::Option* option : o.command->parse_order()) {
    if (!seen.insert(option).second) continue;
    const std::string flag = option->get_name();
    const std::string setting = flag.substr(2);
    const auto values = o.values.find(flag);
    const auto on = o.switches.find(flag);
    if (values == o.values.end() && on == o.switches.end()) continue;
    if (given.contains(setting)) throw Error(flag + " is given by the sweep file too");
    std::vector<std::string> texts;
    if (values != o.values.end())
      for (const std::string& list : values->second)
        for (const std::string& v : split_list(list)) {
          if (v.empty())
            throw Error(flag + ": '" + list + "' has an empty value (a comma list is values between commas: " + flag +
                        " 0,1,2)");
          texts.push_back(v);
        }
    if (setting == "data" || setting == "checkpoint-dir")  // kept as absolute folders, as the runs keep them
      for (std::string& folder : texts) folder = fs::absolute(folder).lexically_normal().string();
    if (on != o.switches.end()) {
      grid.settings.emplace_back(setting, "true");
    } else if (texts.size() == 1) {
      grid.settings.emplace_back(setting, texts.front());
    } else {
      std::set<std::string> distinct;
      std::string listed;  // every value of the flag, each time it was given: one list of the grid
      for (const std::string& v : texts) listed += (listed.empty() ? "" : ",") + v;
      for (const std::string& v : texts)
        if (!distinct.insert(v).second)
          throw Error(flag + ": '" + v + "' is given twice (the values of each " + flag + " make one list: " + listed +
                      ")");
      grid.dimensions.emplace_back(setting, texts);
    }
  }
  if (!o.name.empty()) grid.name = o.name;
  return grid;
}

// "3-2026-12-02T08-11-53Z": a sweep's id and creation time, for its folders; two stores that keep their folders in
// one place (PostgreSQL stores: the user's data folder) each have a sweep 3.
std::string sweep_stamp(const SweepRecord& s) {
  std::string stamp = std::to_string(s.id) + "-" + s.created;
  std::replace(stamp.begin(), stamp.end(), ':', '-');
  return stamp;
}

// "runs-3f09a2" for /data/runs.sqlite, "ampwb-81c4d0" for postgresql://host/ampwb: a store's name, as a folder name
// takes it, and a hash of where it is, so that two stores of one name (a copy elsewhere, two servers' databases)
// differ.
std::string store_label(const std::string& store_path) {
  const bool server = is_database_server(store_path);
  const std::string where =
      server ? location_without_password(store_path) : fs::absolute(store_path).lexically_normal().string();
  std::string label = fs::path(where.substr(0, where.find('?'))).filename().string();
  if (!server) label = fs::path(label).stem().string();
  for (char& c : label)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  Hasher hash;
  hash.add(where);
  return (label.empty() ? "store" : label) + "-" + hash.hex().substr(0, 6);
}

// A sweep's folder beside the store (its Slurm script and the tasks' output), beside the checkpoints' folder.
fs::path sweep_folder(const std::string& store_path, const std::string& stamp) {
  return fs::path(new_checkpoint_dir(store_path)).parent_path().parent_path() / "sweeps" / stamp;
}

bool uses_gpu(const std::vector<SweepPointConfig>& points) {
  for (const SweepPointConfig& p : points)
    if (p.config.device.name().starts_with("cuda")) return true;
  return false;
}

// The job array's batch script: one task a point, at most `max_parallel` at once, requeued when preempted.
std::string slurm_script(const SweepOptions& o, const std::string& db, const std::string& sweep, const fs::path& folder,
                         size_t points, bool gpu) {
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << "#SBATCH --job-name=ampwb-sweep-" << sweep << "\n";
  s << "#SBATCH --array=0-" << points - 1;
  if (o.max_parallel > 0) s << "%" << o.max_parallel;
  s << "\n#SBATCH --requeue\n";
  s << "#SBATCH --open-mode=append\n";
  s << "#SBATCH --output=" << (folder / "task-%a.out").string() << "\n";
  if (gpu) s << "#SBATCH --gres=gpu:1\n";
  if (!o.partition.empty()) s << "#SBATCH --partition=" << o.partition << "\n";
  if (!o.account.empty()) s << "#SBATCH --account=" << o.account << "\n";
  if (!o.time_limit.empty()) s << "#SBATCH --time=" << o.time_limit << "\n";
  s << "# Task SLURM_ARRAY_TASK_ID trains point SLURM_ARRAY_TASK_ID+1 (points count from 1); a requeued task\n"
       "# resumes its run's checkpoint.\n";
  s << "exec " << shell_quoted(self_exe()) << " sweep point --db " << shell_quoted(db) << " " << sweep << "\n";
  return s.str();
}

// Slurm runs a sweep's tasks on any of its nodes at once: an SQLite file on a network filesystem would be written
// from several machines, which SQLite cannot keep whole (store/store_filesystem.h).
void refuse_sqlite_file_shared_between_nodes(const std::string& db) {
  const std::optional<MountedFilesystem> mount = filesystem_of(db);
  if (!mount || !mount->network) return;
  throw Error("the run store '" + db + "' is an SQLite file on " + mount->type +
              ", a network filesystem: Slurm's tasks on several nodes would write it at once, which can corrupt an "
              "SQLite file and lose its runs; record the sweep into PostgreSQL (--db postgresql://..., "
              "docs/cluster.md), or run it on this machine (--on local); where Slurm runs every task on this "
              "machine, a store on its own disk serves");
}

// Why a Slurm command failed, in a user's words where its output says something a user cannot act on as it stands
// (a DNS lookup's error, then "fatal: Could not establish a configuration source"); else its output as it is.
std::string slurm_failure(const std::string& program, const std::string& output) {
  if (output.find("Could not establish a configuration source") != std::string::npos)
    return "this machine is not a Slurm client: " + program +
           " finds no slurm.conf (set SLURM_CONF to the cluster's, or run this on a node of the cluster)";
  if (output.find("Unable to contact slurm controller") != std::string::npos)
    return "cannot reach Slurm's controller at the host and port slurm.conf names (" + program +
           ": Unable to contact slurm controller)";
  return output;
}

// Runs `argv` and returns its standard output; throws naming the program when it cannot run or fails.
std::string output_of(const std::vector<std::string>& argv) {
  std::string command;
  for (const std::string& a : argv) command += (command.empty() ? "" : " ") + shell_quoted(a);
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw Error("cannot run " + argv.front() + ": " + std::strerror(errno));
  std::string out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(argv.front() + " failed" + (out.empty() ? std::string() : ": " + slurm_failure(argv.front(), out)) +
                (WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (is Slurm installed here?)" : ""));
  return out;
}

// --- running points here ---

volatile std::sig_atomic_t g_stop = 0, g_timing = 0;
std::atomic<bool> g_cancel_timing = false;  // lock-free, so the handler may set it
static_assert(std::atomic<bool>::is_always_lock_free);
void on_stop(int signal) {
  if (g_stop == 0) g_stop = signal;  // the first: what the points record, and the exit status
  g_cancel_timing = true;
  // A turn may take minutes: a second signal ends the process as it would without this handler. Not a SIGPIPE, which
  // every later line raises again: the turn stops as asked.
  if (g_timing && signal != SIGPIPE) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigaction(signal, &default_action, nullptr);
  }
}

std::string point_result(const RunStore& store, const SweepPoint& p) {
  std::string text = sweep_point_state_name(p.state);
  // A finished point always had a run: without one, it was deleted since (the store unlinks it).
  if (const int64_t lost = lost_run(p.settings_json); p.run_id == 0 && lost != 0)
    return text + ", its run " + std::to_string(lost) + " lost to the store's damage (ampwb store recover)";
  if (p.run_id == 0 && p.state == SweepPointState::Finished) return text + ", its run deleted";
  if (p.run_id == 0) return point_failure(p).empty() ? text : text + ": " + point_failure(p);
  text += ", run " + std::to_string(p.run_id);
  try {
    const RunRecord run = store.run(p.run_id);
    const RunSummary s = summarize(run, store.epochs(p.run_id));
    char buffer[96];
    if (!std::isnan(s.final_validation_accuracy)) {
      std::snprintf(buffer, sizeof buffer, ", val acc %.2f%%", 100 * s.final_validation_accuracy);
      text += buffer;
    } else if (!std::isnan(s.final_train_loss)) {
      std::snprintf(buffer, sizeof buffer, ", train loss %.4f", s.final_train_loss);
      text += buffer;
    }
    if (p.state == SweepPointState::Failed && !run.end_reason.empty()) text += ": " + run.end_reason;  // why
  } catch (const std::exception&) {  // the run was deleted meanwhile
  }
  return text;
}

// After a sweep's trainings here, its runs' configurations timed in alternation as the workbench times them
// (train/alternating_benchmark.h), so that their speed-ups do not depend on what else the machine did while each
// point trained; the record goes into the store, where `compare` and the workbench show it. Only where every point
// finished; the first SIGINT/SIGTERM stops it between two turns and keeps nothing, a second one ends the process.
void time_sweep_here(RunStore& store, int64_t sweep) {
  std::vector<int64_t> runs;
  std::vector<RunRecord> records;
  std::vector<BenchConfig> configs;
  for (const SweepPoint& p : sweep_points(store, sweep)) {
    if (p.state != SweepPointState::Finished || p.run_id == 0) {
      std::printf("sweep %lld: not timed in alternation: point %d is %s\n", static_cast<long long>(sweep), p.index + 1,
                  sweep_point_state_name(p.state));
      return;
    }
    records.push_back(store.run(p.run_id));
    const RunRecord& r = records.back();
    runs.push_back(r.id);
    configs.push_back(bench_config_of(r.config, r.info.image_size, static_cast<int>(r.info.class_names.size())));
  }
  std::vector<size_t> of_run;
  const size_t distinct = distinct_configurations(configs, &of_run).size();
  if (distinct < 2) return;  // the points differ in their seeds alone: one configuration, nothing to compare
  auto name = [&](size_t i) { return "run " + std::to_string(runs[i]) + " (" + printable(records[i].name) + ")"; };
  const AlternatingOptions options;
  std::printf(
      "sweep %lld: timing its %zu configurations in alternation for their speed-ups (%d rounds of %d steps "
      "each; Ctrl-C stops it)\n",
      static_cast<long long>(sweep), distinct, options.rounds, options.steps);
  std::fflush(stdout);
  g_timing = 1;
  const AlternatingSpeed timed = time_runs_in_alternation(
      runs, configs, options,
      [&, shown = -1](int round, int) mutable {
        if (round == shown) return;
        std::printf("  round %d/%d\n", (shown = round) + 1, options.rounds);
        std::fflush(stdout);
      },
      &g_cancel_timing);
  g_timing = 0;
  if (g_cancel_timing) {  // also where the signal came during the last turn: a stop keeps nothing
    std::printf(
        "sweep %lld: stopped before its configurations were timed in alternation (ampwb sweep run %lld "
        "times them)\n",
        static_cast<long long>(sweep), static_cast<long long>(sweep));
    return;
  }
  store.add_alternating_speed(timed);
  std::printf("speed-ups timed in alternation, against %s:\n", name(0).c_str());
  for (size_t i = 1; i < runs.size(); ++i) {
    // One line a configuration, named by its first run (the others differ in their seeds only).
    if (std::find(of_run.begin(), of_run.begin() + i, of_run[i]) != of_run.begin() + i) continue;
    const std::string other = work_difference(records[i], records[0]);
    std::printf("  %s: %s%s\n", name(i).c_str(), speed_up_text(alternating_speed_up(timed, runs[i], runs[0])).c_str(),
                other.empty() ? "" : (", not the precision's alone: " + other).c_str());
  }
  // Alternation evens out drift, not a load that shares every turn: such figures are the load's as much.
  if (const std::string loaded = alternation_warning(timed); !loaded.empty())
    std::printf(
        "  \u26a0 timings unreliable: %s: these speed-ups say as much about that work as about the configurations; "
        "time them again on a quiet machine with ampwb sweep run %lld\n",
        loaded.c_str(), static_cast<long long>(sweep));
  std::fflush(stdout);
}

// Runs the sweep's queued and requeued points here, `parallel` at once, each as `ampwb sweep point` in a child
// process (a process group of its own, so a Ctrl-C reaches it once, from here). The first SIGINT, SIGTERM or SIGHUP
// (a closed terminal, whose hangup the children would not get) stops the running points after their current step
// (they stay requeued, resumable) and starts no more; so does a SIGPIPE (`ampwb sweep | head`: the output's reader
// went away), after which what the sweep says goes to stderr.
int run_here(const std::string& db, int64_t sweep, int parallel, bool timing) {
  RunStore store(db, RunStore::Mode::Existing);
  const size_t total = sweep_points(store, sweep).size();
  for (const int index : requeue_abandoned_points(store, sweep))
    std::printf("point %d/%zu was left running by a sweep process that ended: %s\n", index + 1, total,
                sweep_point(store, sweep, index).run_id ? "requeued, to resume its run"
                                                        : "queued again (it had not begun its run)");
  struct sigaction action {
  }, old_int{}, old_term{}, old_hup{}, old_pipe{};
  action.sa_handler = on_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  sigaction(SIGPIPE, &action, &old_pipe);
  sigaction(SIGHUP, nullptr, &old_hup);
  if (old_hup.sa_handler != SIG_IGN) sigaction(SIGHUP, &action, nullptr);  // nohup's sweep outlives its terminal
  g_stop = 0;
  g_cancel_timing = false;
  g_timing = 0;
  std::map<pid_t, SweepPoint> running;  // child -> its point, as taken
  int failed = 0;
  bool forwarded = false;
  bool cancelled = false;  // elsewhere: by `ampwb sweep cancel` or the workbench, which stopped its running points
  for (;;) {
    while (!g_stop && static_cast<int>(running.size()) < parallel) {
      const std::optional<SweepPoint> p = take_next_point(store, sweep);
      if (!p) break;
      // Said before the child starts: a signal this line raises (SIGPIPE) stops the sweep before the point begins,
      // never reaching a child that has no handlers yet.
      std::printf("point %d/%zu started: %s\n", p->index + 1, total, describe_point_json(p->settings_json).c_str());
      std::fflush(stdout);
      if (g_stop) {
        return_point(store, sweep, p->index);
        release_point(store, *p);
        break;
      }
      const pid_t self = ::getpid(), child = ::fork();
      if (child < 0) {
        return_point(store, sweep, p->index);
        release_point(store, *p);
        throw Error(std::string("cannot start a process for a sweep point: ") + std::strerror(errno));
      }
      if (child == 0) {
        ::setpgid(0, 0);
        const std::string exe = self_exe(), point = std::to_string(p->index + 1), id = std::to_string(sweep);
        const std::string parent = std::to_string(self);  // not getppid(): this process may have ended already
        std::vector<std::string> argv = {
            exe, "sweep", "point", "--db", db, "--point", point, "--quiet", "--held-by-parent", parent, id};
        std::vector<char*> args;
        for (std::string& a : argv) args.push_back(a.data());
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        std::fprintf(stderr, "ampwb sweep: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
        ::_exit(127);
      }
      ::setpgid(child, child);
      running[child] = *p;
    }
    if (running.empty()) break;
    if (g_stop && !forwarded) {
      forwarded = true;
      std::fprintf(stderr, "ampwb sweep: stopping the running points after their current step\n");
      for (const auto& [child, point] : running) ::kill(child, g_stop);  // its run records the signal that stopped it
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const auto at = running.find(done);
    if (at == running.end()) continue;
    const SweepPoint taken = at->second;
    const int index = taken.index;
    running.erase(at);
    SweepPoint p = sweep_point(store, sweep, index);
    const bool stopped_by_us = forwarded && WIFSIGNALED(status) && WTERMSIG(status) == g_stop;
    if (p.state == SweepPointState::Running && stopped_by_us) {  // the signal passed on came before its handlers
      return_point(store, sweep, index);
      p = sweep_point(store, sweep, index);
    } else if (p.state == SweepPointState::Running) {  // the child ended before it could say how
      set_point_failed(
          store, sweep, index,
          WIFSIGNALED(status)
              ? std::string("its process was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                    strsignal(WTERMSIG(status)) + ")"
              : "its process ended (exit status " + std::to_string(WEXITSTATUS(status)) + ") before it could say how");
      p = sweep_point(store, sweep, index);
    }
    release_point(store, taken);  // said how it ended: no other process may take it for abandoned before
    if (p.state == SweepPointState::Failed) ++failed;
    std::printf("point %d/%zu %s\n", index + 1, total, reconnecting([&] { return point_result(store, p); }).c_str());
    if (!g_stop && !cancelled && reconnecting([&] { return ampwb::sweep(store, sweep).cancelled; })) {
      cancelled = true;
      std::printf(
          "sweep %lld was cancelled (ampwb sweep cancel, or the workbench): its other running points stop after "
          "their current step and no other starts\n",
          static_cast<long long>(sweep));
    }
    std::fflush(stdout);
  }
  const std::vector<SweepPoint> points = sweep_points(store, sweep);
  std::map<std::string, int> counts;
  for (const SweepPoint& p : points) ++counts[sweep_point_state_name(p.state)];
  std::string summary;
  for (const auto& [state, n] : counts) summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  const std::string id = std::to_string(sweep);
  const std::string ended = "sweep " + id + ": " + summary +
                            (g_stop ? "; continue it with ampwb sweep run " + id : "") +
                            (counts.contains("failed") ? "; ampwb sweep run " + id +
                                                             " --retry-failed trains the failed "
                                                             "points again"
                                                       : "") +
                            "\n";
  std::fputs(ended.c_str(), g_stop == SIGPIPE ? stderr : stdout);
  std::fflush(stdout);
  if (timing && !g_stop && !cancelled && failed == 0) {
    try {
      time_sweep_here(store, sweep);
    } catch (const std::exception& e) {  // the trainings stand; only their timing is missing
      std::fprintf(stderr, "ampwb sweep: its configurations were not timed in alternation: %s\n", e.what());
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  sigaction(SIGPIPE, &old_pipe, nullptr);
  if (g_stop) return 128 + g_stop;
  return failed > 0 ? 1 : 0;  // a cancel is the user's wish, done: no failure
}

// --- the commands ---

// The Slurm settings the flags give, else the sweep file's "slurm" object.
SweepOptions with_file_slurm(const SweepOptions& given, const SweepGrid& grid) {
  SweepOptions o = given;
  for (const auto& [key, value] : grid.slurm) {
    if (key == "partition" && o.partition.empty()) o.partition = value;
    if (key == "account" && o.account.empty()) o.account = value;
    if (key == "time" && o.time_limit.empty()) o.time_limit = value;
    if (key == "max-parallel" && o.max_parallel == 0) {
      char* end = nullptr;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 0 || n > 100000)
        throw Error("the sweep file's slurm max-parallel is a whole number of at least 0, got '" + value + "'");
      o.max_parallel = static_cast<int>(n);
    }
  }
  return o;
}

// A sweep started by mpirun or srun as several processes would run its whole grid once in each: refused, since a
// point trains as one process.
void refuse_many_processes(const char* command) {
  if (const LaunchInfo launch = read_launch_info(process_environment()); launch.world_size > 1)
    throw Error(std::string(command) + " was started as " + std::to_string(launch.world_size) + " processes by " +
                choice_name(launch.launcher) +
                ", and each would train every point: start it as one process (a sweep's points train as one "
                "process each; sweeps of runs on many processes are not built yet)");
}

// sbatch of the sweep's job script (`array`: a retry's tasks, where given), its job array recorded with the sweep.
// Where sbatch refuses, `undo` puts the store back and says how it stands, after sbatch's error.
std::string submit_job_array(RunStore& store, int64_t sweep, const fs::path& script, const std::string& array,
                             const std::function<std::string()>& undo) {
  std::vector<std::string> sbatch = {"sbatch", "--parsable"};
  if (!array.empty()) sbatch.push_back("--array=" + array);
  sbatch.push_back(script.string());
  std::string job;
  try {
    job = output_of(sbatch);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; " + undo());
  }
  job = job.substr(0, job.find(';'));  // "JOBID;CLUSTER" on a federation
  add_sweep_slurm_job(store, sweep, job);
  std::printf("submitted as Slurm job array %s (%s); ampwb sweep status %lld\n", job.c_str(), script.c_str(),
              static_cast<long long>(sweep));
  return job;
}

int sweep_command(const SweepOptions& given) {
  refuse_many_processes("ampwb sweep");
  const SweepGrid grid = grid_of(given);
  const SweepOptions o = with_file_slurm(given, grid);
  if (grid.dimensions.empty())
    throw Error("a sweep needs a setting with several values (--seed 0,1,2) or a sweep file's \"grid\"");
  if (o.on != "local" && o.on != "slurm") throw Error("--on is local or slurm, got '" + o.on + "'");
  if (o.on == "local" &&
      (!given.partition.empty() || !given.account.empty() || !given.time_limit.empty() || given.max_parallel))
    throw Error("--partition, --account, --time and --max-parallel are for --on slurm");
  if (o.on == "slurm" && o.parallel != 1) throw Error("--parallel runs points here: give --max-parallel for Slurm");
  // Every point read and checked before anything is written.
  std::vector<SweepPointConfig> points = expand_sweep(grid);
  const size_t in_grid = points.size();
  const std::vector<std::string> left_out = drop_repeated_runs(points);
  if (!left_out.empty()) {
    std::string which;
    for (const std::string& r : left_out) which += (which.empty() ? "" : "; ") + r;
    std::fprintf(stderr,
                 "ampwb sweep: note: %zu of the grid's %zu combinations would train the same configuration as another "
                 "(a setting their precision ignores, or a value given twice) and are left out: %s\n",
                 left_out.size(), in_grid, which.c_str());
  }
  // A dataset folder that is not there would fail each of its points: said once, before anything is recorded. A
  // Slurm task's node may see folders this one does not (its own scratch disk): a warning there.
  std::map<std::string, std::string> unusable;  // dataset folder -> what is wrong with it
  for (const SweepPointConfig& p : points) {
    const std::string& folder = p.config.data_dir;
    std::error_code ec;
    const fs::file_status status = fs::status(folder, ec);
    if (folder.empty() || fs::is_directory(status)) continue;
    unusable[folder] = fs::exists(status) ? "it is a file, not a dataset folder"
                       : ec && ec != std::errc::no_such_file_or_directory
                           ? "the dataset folder cannot be reached (" + ec.message() + ")"
                           : "the dataset folder does not exist";
  }
  for (const auto& [folder, problem] : unusable) {
    if (o.on == "local") throw Error("cannot sweep on '" + folder + "': " + problem);
    std::fprintf(stderr,
                 "ampwb sweep: warning: '%s': %s on this machine: its points fail unless the nodes Slurm runs "
                 "them on have that dataset folder\n",
                 folder.c_str(), problem.c_str());
  }
  const std::string db = store_path(o.db);
  if (o.on == "slurm" && !is_database_server(db)) refuse_sqlite_file_shared_between_nodes(db);
  if (o.dry_run && o.on == "slurm") {
    std::printf("%s", slurm_script(o, location_for_other_processes(db), "NEW", sweep_folder(db, "NEW"), points.size(),
                                   uses_gpu(points))
                          .c_str());
    std::fprintf(stderr, "ampwb sweep: dry run: %zu points; no sweep recorded, nothing submitted\n", points.size());
    return 0;
  }
  if (o.dry_run) {
    for (size_t i = 0; i < points.size(); ++i)
      std::printf("point %zu/%zu: %s\n", i + 1, points.size(), describe_point(points[i].values).c_str());
    std::fprintf(stderr, "ampwb sweep: dry run: no sweep recorded, nothing run\n");
    return 0;
  }
  std::vector<std::string> settings;
  for (const SweepPointConfig& p : points) settings.push_back(p.settings_json());
  RunStore store(db, RunStore::Mode::Create);
  // The job script names the store without the password given in --db (others may read the script): its tasks
  // connect as this process does without it, through ~/.pgpass or PGPASSWORD (sbatch passes the environment on).
  if (o.on == "slurm" && location_for_other_processes(db) != db) {
    try {
      RunStore without_password(location_for_other_processes(db), RunStore::Mode::ReadOnly);
    } catch (const std::exception& e) {
      throw Error(std::string("Slurm's tasks could not reach the run store: the job script names it without the "
                              "password given in --db, and without it ") +
                  e.what() + "; put the password in ~/.pgpass (docs/cluster.md) and sweep again");
    }
  }
  nlohmann::ordered_json recorded = grid.to_json();
  if (o.no_timing) recorded["timing"] = false;  // for a `sweep run` that goes on with it
  if (!left_out.empty()) recorded["left_out"] = left_out;  // the grid's combinations that have no point
  const int64_t id = create_sweep(store, grid.name, recorded.dump(), o.on, settings);
  std::printf("sweep %lld: %zu points, recorded in %s\n", static_cast<long long>(id), points.size(),
              store.path().c_str());
  std::fflush(stdout);
  if (o.on == "local") return run_here(store.path(), id, o.parallel, !o.no_timing);

  if (!store.is_postgresql()) {
    const std::optional<MountedFilesystem> mount = filesystem_of(db);
    const std::string where = mount ? " on this machine's " + mount->type + " disk" : "";
    std::fprintf(stderr,
                 "ampwb sweep: note: the run store is an SQLite file%s: only the tasks Slurm runs on this machine "
                 "can open it; a cluster's sweep records into PostgreSQL (docs/cluster.md)\n",
                 where.c_str());
  }
  const fs::path folder = sweep_folder(store.path(), sweep_stamp(sweep(store, id)));
  fs::create_directories(folder);
  const fs::path script = folder / "sweep.sbatch";
  {
    std::ofstream out(script);
    out << slurm_script(o, location_for_other_processes(store.path()), std::to_string(id), folder, points.size(),
                        uses_gpu(points));
    if (!out) throw Error("cannot write " + script.string());
  }
  submit_job_array(store, id, script, "", [&] {
    cancel_sweep(store, id);
    return "sweep " + std::to_string(id) + " is recorded as cancelled";
  });
  return 0;
}

// sweep point: trains one point, resuming its run where it was interrupted with a checkpoint.
int sweep_point_command(const SweepIdOptions& o) {
  refuse_many_processes("ampwb sweep point");
  const int64_t id = sweep_id(o.sweep);
  // The point as the user counts (from 1), or the array task's (from 0): task N trains point N+1.
  const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
  if (o.point.empty() && !task)
    throw Error(
        "sweep point needs --point N (from 1, as sweep status shows it), or SLURM_ARRAY_TASK_ID in a Slurm "
        "job array");
  const std::string text = o.point.empty() ? task : o.point;
  const long first = o.point.empty() ? 0 : 1;
  char* end = nullptr;
  const long number = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || number < first)
    throw Error(o.point.empty() ? "SLURM_ARRAY_TASK_ID is a whole number from 0, got '" + text + "'"
                                : "the point is a whole number from 1, got '" + text + "'");
  const long index = number - first;  // the store's, from 0
  const long shown = index + 1;
  // Started while a PostgreSQL server restarts (its sweep run has just reached it), the point waits for it.
  std::optional<RunStore> opened;
  reconnecting([&] { opened.emplace(store_path(o.db), RunStore::Mode::Existing); });
  RunStore& store = *opened;
  if (index >= static_cast<long>(sweep_points(store, id).size()))
    throw Error("sweep " + std::to_string(id) + " has " + std::to_string(sweep_points(store, id).size()) +
                " points: there is no point " + std::to_string(shown));
  const std::optional<SweepPoint> p = take_point(store, id, static_cast<int>(index), o.held_by_parent);
  if (!p) {
    std::printf("sweep %lld point %ld: %s, nothing to run\n", static_cast<long long>(id), shown,
                sweep(store, id).cancelled ? "the sweep is cancelled"
                : o.held_by_parent && ::getppid() != o.held_by_parent
                    ? "its sweep run ended before it began"
                    : sweep_point_state_name(sweep_point(store, id, index).state));
    return 0;
  }
  TrainingInStore how;
  how.quiet = o.quiet;
  how.sweep_point = o.held_by_parent != 0;  // a parent sweep says why it stops; a Slurm task or a user's, itself
  how.on_run_started = [&](int64_t run) { set_point_run(store, id, p->index, run); };
  TrainConfig config;
  if (p->run_id != 0) {
    const RunRecord run = reconnecting([&] { return store.run(p->run_id); });
    if (run.status == RunStatus::Finished) {
      set_point_state(store, id, p->index, SweepPointState::Finished);
      return 0;
    }
    const std::string refusal = reconnecting([&] { return resume_refusal(store, p->run_id); });
    if (refusal.empty()) {
      how.continue_run = p->run_id;
      config = reconnecting([&] { return resume_config(store, p->run_id); });
      if (!o.quiet)
        std::printf("sweep %lld point %ld: resuming run %lld from its checkpoint\n", static_cast<long long>(id), shown,
                    static_cast<long long>(p->run_id));
    } else {  // said even when quiet: the point's curves start over in another run
      std::printf("sweep %lld point %ld: %s; a new run trains the point\n", static_cast<long long>(id), shown,
                  refusal.c_str());
    }
  }
  if (how.continue_run == 0) {
    try {
      config = config_from_json_text(nlohmann::json::parse(p->settings_json).at("config").dump());
    } catch (const std::exception& e) {
      const std::string why =
          "sweep " + std::to_string(id) + " point " + std::to_string(shown) + " has no configuration: " + e.what();
      set_point_failed(store, id, p->index, why);
      throw Error(why);
    }
    // Each point a folder of its own, under the sweep's --checkpoint-dir if it has one: a folder holds one run's. It
    // names the store too: a backup's copy of the sweep, run beside the original, trains its points elsewhere.
    const fs::path base = config.checkpoint_dir.empty() ? fs::path(new_checkpoint_dir(store.path())).parent_path()
                                                        : fs::path(config.checkpoint_dir);
    const int retries = point_retries(*p);
    config.checkpoint_dir =
        (base / ("sweep-" + store_label(store.path()) + "-" + sweep_stamp(sweep(store, id)) + "-point-" +
                 std::to_string(shown) + (retries ? "-retry-" + std::to_string(retries) : "")))
            .string();
  }
  std::fflush(stdout);
  TrainingOutcome outcome;
  try {
    outcome = train_in_store(store, config, how);
  } catch (const std::exception& e) {  // refused before its run began, or the store failed it: kept with the point
    set_point_failed(store, id, p->index, e.what());
    throw;
  }
  SweepPointState state = SweepPointState::Failed;
  if (outcome.status == RunStatus::Finished)
    state = SweepPointState::Finished;
  else if (outcome.status == RunStatus::Interrupted || (outcome.status == RunStatus::Cancelled && outcome.signal))
    state = SweepPointState::Requeued;  // preempted, or stopped by a signal: resumes from its checkpoint
  else if (outcome.status == RunStatus::Cancelled)
    state = SweepPointState::Cancelled;
  if (state == SweepPointState::Failed && outcome.run_id == 0)  // no run to say why: the point keeps it
    set_point_failed(store, id, p->index, outcome.reason.empty() ? "its run could not begin" : outcome.reason);
  else
    set_point_state(store, id, p->index, state);
  return outcome.exit_code;
}

// sweep run --retry-failed of a Slurm sweep: its failed points queued again and submitted as one job array of their
// tasks, by the sweep's own script (its resources, its tasks' output files), with --array naming them.
int retry_failed_on_slurm(RunStore& store, const SweepRecord& s) {
  store.require_writable("retry a sweep's failed points");
  const fs::path script = sweep_folder(store.path(), sweep_stamp(s)) / "sweep.sbatch";
  if (!fs::exists(script))
    throw Error("sweep " + std::to_string(s.id) + "'s job script " + script.string() +
                " is not on this machine: retry its failed points where the sweep was submitted");
  std::vector<SweepPoint> failed;  // as they are, to be written back where sbatch refuses the retry
  for (const SweepPoint& p : sweep_points(store, s.id))
    if (p.state == SweepPointState::Failed) failed.push_back(p);
  if (failed.empty()) {
    std::printf("sweep %lld has no failed point to retry\n", static_cast<long long>(s.id));
    return 0;
  }
  std::string array;  // "1,4%2": the tasks, at most as many at once as the sweep's own job array
  const std::vector<int> queued = requeue_failed_points(store, s.id);
  for (const int index : queued) array += (array.empty() ? "" : ",") + std::to_string(index);
  std::ifstream lines(script);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("#SBATCH --array=") && line.find('%') != std::string::npos)
      array += line.substr(line.find('%'));
  const std::string job = submit_job_array(store, s.id, script, array, [&] {
    restore_points(store, failed);
    return std::string("the failed points stay failed, with their runs");
  });
  for (const int index : queued)
    std::printf("point %d failed; queued again as task %d of Slurm job array %s: a new run trains it\n", index + 1,
                index, job.c_str());
  return 0;
}

int sweep_run_command(const SweepIdOptions& o) {
  refuse_many_processes("ampwb sweep run");
  const int64_t id = sweep_id(o.sweep);
  const std::string db = store_path(o.db);
  bool timing = !o.no_timing;
  {
    RunStore store(db, RunStore::Mode::Existing);
    const SweepRecord s = sweep(store, id);
    // A sweep begun with --no-timing goes on without the timing too.
    if (const auto begun = nlohmann::ordered_json::parse(s.grid_json, nullptr, false);
        begun.is_object() && begun.value("timing", true) == false)
      timing = false;
    if (s.cancelled)
      throw Error("sweep " + o.sweep + " is cancelled: none of its points starts again (ampwb sweep status " + o.sweep +
                  " shows what it trained; a new sweep of the same grid trains every point anew)");
    if (s.runs_on != "local" && !o.retry_failed)
      throw Error("sweep " + o.sweep + " runs on Slurm (" + slurm_jobs_text(s) +
                  "): its tasks run its points (ampwb sweep run " + o.sweep +
                  " --retry-failed submits its failed points again)");
    if (s.runs_on != "local" && o.parallel != 1)
      throw Error("--parallel runs points here: Slurm runs sweep " + o.sweep + "'s, as many at once as it was given");
    if (s.runs_on != "local") return retry_failed_on_slurm(store, s);
  }
  if (o.retry_failed) {
    RunStore store(db, RunStore::Mode::Existing);
    for (const int index : requeue_failed_points(store, id))
      std::printf("point %d failed; queued again: a new run trains it\n", index + 1);
  }
  return run_here(RunStore(db, RunStore::Mode::Existing).path(), id, o.parallel, timing);
}

nlohmann::ordered_json point_json(const RunStore& store, const SweepPoint& p) {
  nlohmann::ordered_json j;
  j["point"] = p.index + 1;  // as the text, the GUI and the progress lines number it
  j["index"] = p.index;      // from 0: a Slurm sweep's array task id
  j["state"] = sweep_point_state_name(p.state);
  j["run_id"] = p.run_id ? nlohmann::ordered_json(p.run_id) : nlohmann::ordered_json();
  if (const int64_t lost = lost_run(p.settings_json); p.run_id == 0 && lost != 0)
    j["run_lost"] = lost;  // to the store's damage, as point_result says
  else if (p.state == SweepPointState::Finished && p.run_id == 0)
    j["run_deleted"] = true;
  if (const std::string why = point_failure(p); !why.empty()) j["failure"] = why;
  try {
    j["values"] = nlohmann::ordered_json::parse(p.settings_json).at("values");
  } catch (const std::exception&) {
    j["values"] = nlohmann::ordered_json::object();
  }
  j["updated"] = p.updated;
  if (p.run_id) {
    try {
      const RunRecord run = store.run(p.run_id);
      const RunSummary s = summarize(run, store.epochs(p.run_id));
      j["run_status"] = run_status_name(run.status);
      j["epochs_completed"] = s.epochs_completed;
      j["final_validation_accuracy"] = s.final_validation_accuracy;
      j["final_validation_loss"] = s.final_validation_loss;
      j["final_train_loss"] = s.final_train_loss;
    } catch (const std::exception&) {
    }
  }
  return j;
}

std::map<std::string, int> state_counts(const std::vector<SweepPoint>& points) {
  std::map<std::string, int> counts;
  for (const SweepPoint& p : points) ++counts[sweep_point_state_name(p.state)];
  return counts;
}

// The sweep's name, or for one given none what it sweeps: "(unnamed: precision × seed)".
std::string sweep_label(const SweepRecord& s) {
  if (!s.name.empty()) return printable(s.name);
  std::string dimensions;
  const auto grid = nlohmann::ordered_json::parse(s.grid_json, nullptr, false);
  if (grid.is_object() && grid.contains("grid") && grid["grid"].is_object())
    for (const auto& [setting, values] : grid["grid"].items())
      dimensions += (dimensions.empty() ? "" : " × ") + printable(setting);
  return dimensions.empty() ? "(unnamed)" : "(unnamed: " + dimensions + ")";
}

std::string counts_text(const std::map<std::string, int>& counts) {
  std::string text;
  for (const auto& [state, n] : counts) text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  return text;
}

// Slurm's own view of a sweep's job array: each task's state and, while it waits, why; from squeue while Slurm
// remembers the job (MinJobAge after it ends), else from sacct where accounting runs. `unavailable` says why
// neither could tell, so that a status never leaves Slurm's view out without a word.
struct SlurmView {
  std::string source;  // "squeue" or "sacct"; empty when neither could say
  struct Task {
    std::string state, reason;
  };
  std::map<int, Task> tasks;  // by array task id (the point's index)
  std::string unavailable;
};

// "42_3|PENDING|JobArrayTaskLimit" lines (squeue) or "42_3|COMPLETED" (sacct) for job array `job`.
std::map<int, SlurmView::Task> slurm_tasks(const std::string& text, const std::string& job) {
  std::map<int, SlurmView::Task> tasks;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '|');) fields.push_back(cell);
    if (fields.size() < 2 || !fields[0].starts_with(job + "_")) continue;  // a step (42_3.batch), another job
    const std::string task = fields[0].substr(job.size() + 1);
    if (task.empty() || !std::all_of(task.begin(), task.end(), [](unsigned char c) { return std::isdigit(c); }))
      continue;                                                    // "42_[4-5%2]": a range squeue did not expand
    std::string state = fields[1].substr(0, fields[1].find(' '));  // sacct: "CANCELLED by 0"
    for (char& c : state) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // A task cancelled while it waited keeps the reason it waited for, no longer the reason of anything.
    const bool has_reason = fields.size() > 2 && fields[2] != "None" && state != "cancelled";
    tasks[std::stoi(task)] = {state, has_reason ? fields[2] : ""};
  }
  return tasks;
}

SlurmView slurm_view_of_job(const std::string& job) {
  SlurmView view;
  std::string squeue_error;
  try {
    view.tasks = slurm_tasks(
        output_of({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + job, "--format=%i|%T|%r"}), job);
    if (!view.tasks.empty()) {
      view.source = "squeue";
      return view;
    }
    squeue_error = "squeue no longer lists job " + job;
  } catch (const Error& e) {
    squeue_error = e.what();
    if (squeue_error.find("Invalid job id") != std::string::npos)  // ended longer ago than Slurm's MinJobAge
      squeue_error = "squeue no longer lists job " + job;
  }
  try {
    view.tasks = slurm_tasks(
        output_of({"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + job, "--format=JobID,State"}),
        job);
    if (!view.tasks.empty()) {
      view.source = "sacct";
      return view;
    }
    view.unavailable = squeue_error + "; sacct has no record of it";
  } catch (const Error& e) {
    view.unavailable = squeue_error + "; " + e.what();
  }
  return view;
}

// The tasks of a sweep's job arrays together, a retry's task over the failed one it trains again.
SlurmView slurm_view(const SweepRecord& s) {
  SlurmView view;
  std::set<std::string> sources;
  for (const std::string& job : slurm_jobs(s)) {
    const SlurmView one = slurm_view_of_job(job);
    if (!one.source.empty()) sources.insert(one.source);
    for (const auto& [task, t] : one.tasks) view.tasks[task] = t;
    if (!one.unavailable.empty()) view.unavailable += (view.unavailable.empty() ? "" : "; ") + one.unavailable;
  }
  for (const std::string& source : sources) view.source += (view.source.empty() ? "" : " and ") + source;
  return view;
}

// "2 running, 4 pending (JobArrayTaskLimit)".
std::string slurm_counts_text(const SlurmView& view) {
  std::map<std::string, std::pair<int, std::set<std::string>>> counts;
  for (const auto& [task, t] : view.tasks) {
    ++counts[t.state].first;
    if (!t.reason.empty()) counts[t.state].second.insert(t.reason);
  }
  std::string text;
  for (const auto& [state, c] : counts) {
    text += (text.empty() ? "" : ", ") + std::to_string(c.first) + " " + state;
    std::string reasons;
    for (const std::string& r : c.second) reasons += (reasons.empty() ? "" : ", ") + r;
    if (!reasons.empty()) text += " (" + reasons + ")";
  }
  return text;
}

// Whether Slurm's state of a task (lower case) says it has ended, whatever the run store says of its point.
bool slurm_task_ended(const std::string& state) {
  static const std::set<std::string> ended = {"completed", "failed",        "cancelled", "timeout",
                                              "node_fail", "out_of_memory", "boot_fail", "deadline"};
  return ended.count(state) > 0;
}

// Where a Slurm task's output says why its point has no run: a task that failed before it could record one (a
// store it could not reach, a dataset folder missing on its node) leaves the reason there alone. Empty elsewhere.
std::string task_output_to_read(const SweepRecord& s, const SweepPoint& p, const SlurmView& view,
                                const std::string& store_path) {
  if (s.runs_on != "slurm" || p.run_id != 0) return {};
  const auto t = view.tasks.find(p.index);
  const bool ended = t != view.tasks.end() && slurm_task_ended(t->second.state);
  if (p.state != SweepPointState::Failed && !(ended && !is_final(p.state))) return {};
  const fs::path out = sweep_folder(store_path, sweep_stamp(s)) / ("task-" + std::to_string(p.index) + ".out");
  std::error_code ec;
  // A PostgreSQL store's sweep folder is the submitting user's data folder, on the machine that submitted it.
  return fs::exists(out, ec)
             ? out.string()
             : "its Slurm task's output, " + out.filename().string() + ", in the sweep's folder where it was submitted";
}

int sweep_status_command(const SweepIdOptions& o) {
  const int64_t id = sweep_id(o.sweep);
  RunStore store(store_path(o.db), RunStore::Mode::ReadOnly);
  const SweepRecord s = sweep(store, id);
  const std::vector<SweepPoint> points = sweep_points(store, id);
  const bool slurm = s.runs_on == "slurm";
  const SlurmView view = slurm ? slurm_view(s) : SlurmView{};
  if (o.json) {
    nlohmann::ordered_json j;
    j["id"] = s.id;
    j["name"] = s.name;
    j["created"] = s.created;
    j["on"] = s.runs_on;
    j["slurm_job_id"] = s.slurm_job_id;
    j["slurm_jobs"] = slurm_jobs(s);
    j["cancelled"] = s.cancelled;
    j["grid"] = nlohmann::ordered_json::parse(s.grid_json, nullptr, false);
    j["summary"] = state_counts(points);
    j["points"] = nlohmann::ordered_json::array();
    for (const SweepPoint& p : points) {
      j["points"].push_back(point_json(store, p));
      if (const auto t = view.tasks.find(p.index); t != view.tasks.end())
        j["points"].back()["slurm"] = {{"state", t->second.state}, {"reason", t->second.reason}};
      if (const std::string out = task_output_to_read(s, p, view, store.path()); !out.empty())
        j["points"].back()["task_output"] = out;
    }
    if (slurm && !s.slurm_job_id.empty()) {
      j["slurm"] = {{"source", view.source.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(view.source)},
                    {"unavailable", view.unavailable}};
    }
    if (const SweepSpeedUps timed = sweep_speed_ups(store, points); timed.baseline) {
      j["timed_in_alternation"] = {{"baseline_point", timed.baseline->index + 1},
                                   {"baseline_run", timed.baseline->run_id},
                                   {"warning", timed.warning},
                                   {"speed_ups", nlohmann::ordered_json::array()}};
      for (const auto& [p, up] : timed.others)
        j["timed_in_alternation"]["speed_ups"].push_back({{"point", p.index + 1},
                                                          {"run", p.run_id},
                                                          {"ratio", up.ratio},
                                                          {"low", up.low},
                                                          {"high", up.high},
                                                          {"text", speed_up_text(up)}});
    }
    print_json(j);
    return 0;
  }
  std::printf("sweep %lld %s: %zu points on %s%s%s, created %s\n", static_cast<long long>(s.id),
              s.name.empty() ? sweep_label(s).c_str() : ("(" + printable(s.name) + ")").c_str(), points.size(),
              s.runs_on.c_str(), s.slurm_job_id.empty() ? "" : (" (" + slurm_jobs_text(s) + ")").c_str(),
              s.cancelled ? ", cancelled" : "", s.created.c_str());
  std::printf("  point%s  %-40s state\n", slurm ? "  task" : "", "settings");
  for (const SweepPoint& p : points) {
    char task[32] = "";  // Slurm's array task N-1 trains point N
    if (slurm) std::snprintf(task, sizeof task, "  %4d", p.index);
    std::string result = point_result(store, p);
    if (const auto t = view.tasks.find(p.index); t != view.tasks.end())
      result += "; Slurm: " + t->second.state + (t->second.reason.empty() ? "" : " (" + t->second.reason + ")");
    if (const std::string out = task_output_to_read(s, p, view, store.path()); !out.empty())
      result += p.state == SweepPointState::Failed ? "; why is in " + out
                                                   : "; its task ended before it could record a run: why is in " + out;
    std::printf("  %5d%s  %-40s %s\n", p.index + 1, task, printable(describe_point_json(p.settings_json)).c_str(),
                result.c_str());
  }
  std::printf("%s\n", counts_text(state_counts(points)).c_str());
  if (const SweepSpeedUps timed = sweep_speed_ups(store, points); timed.baseline) {
    std::printf("speed-ups timed in alternation, against point %d (run %lld):\n", timed.baseline->index + 1,
                static_cast<long long>(timed.baseline->run_id));
    for (const auto& [p, up] : timed.others)
      std::printf("  point %d (run %lld): %s\n", p.index + 1, static_cast<long long>(p.run_id),
                  speed_up_text(up).c_str());
    if (!timed.warning.empty())
      std::printf("  \u26a0 timings unreliable: %s; time them again on a quiet machine with ampwb sweep run %lld\n",
                  timed.warning.c_str(), static_cast<long long>(s.id));
  }
  // A local sweep's points are trained by a `sweep` or `sweep run` process, which holds each point it trains.
  // Said only where certain: a point marked running that nothing holds was left by a process that ended.
  const auto left_running = [&](const SweepPoint& p) {
    return p.state == SweepPointState::Running && !store.connection().point_held(s.id, p.index);
  };
  if (s.runs_on == "local" && !s.cancelled && std::any_of(points.begin(), points.end(), left_running))
    std::printf("a sweep process that trained it has ended: ampwb sweep run %lld goes on with the points left\n",
                static_cast<long long>(s.id));
  if (slurm && s.slurm_job_id.empty())
    std::printf("Slurm: no job array was submitted\n");
  else if (slurm && !view.source.empty())
    std::printf("Slurm (%s): %s: %s%s\n", view.source.c_str(), slurm_jobs_text(s, "job array").c_str(),
                slurm_counts_text(view).c_str(), view.unavailable.empty() ? "" : ("; " + view.unavailable).c_str());
  else if (slurm)
    std::printf("Slurm: cannot say how %s stand%s (%s); the states above are the run store's\n",
                slurm_jobs_text(s, "job array").c_str(), slurm_jobs(s).size() > 1 ? "" : "s", view.unavailable.c_str());
  if (slurm && !s.cancelled &&
      std::any_of(points.begin(), points.end(), [](const SweepPoint& p) { return p.state == SweepPointState::Failed; }))
    std::printf("ampwb sweep run %lld --retry-failed submits the failed points to Slurm again\n",
                static_cast<long long>(s.id));
  return 0;
}

int sweep_cancel_command(const SweepIdOptions& o) {
  const int64_t id = sweep_id(o.sweep);
  RunStore store(store_path(o.db), RunStore::Mode::Existing);
  const SweepRecord s = sweep(store, id);
  const std::vector<SweepPoint> before = sweep_points(store, id);
  // As the GUI's Cancel: a sweep cancelled or ended keeps what it is, rather than an ended one shown cancelled.
  if (s.cancelled || std::all_of(before.begin(), before.end(), [](const SweepPoint& p) { return is_final(p.state); })) {
    std::printf(s.cancelled ? "sweep %lld is cancelled already\n"
                            : "sweep %lld has nothing left to cancel: every point has ended (finished, failed or "
                              "cancelled)\n",
                static_cast<long long>(id));
    return 0;
  }
  store.require_writable("cancel a sweep");  // before scancel: a job cancelled must be recorded so
  std::string scancel_error;
  if (!s.slurm_job_id.empty()) {
    try {
      std::vector<std::string> scancel = {"scancel"};
      for (const std::string& job : slurm_jobs(s)) scancel.push_back(job);
      output_of(scancel);
    } catch (const Error& e) {
      scancel_error = e.what();
    }
  }
  const int cancelled = cancel_sweep(store, id);
  // A local sweep's running points stop after their current step, as at a Ctrl-C (resumable, but left cancelled).
  if (s.runs_on == "local") {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    for (const SweepPoint& p : before) {
      if (p.state != SweepPointState::Running || p.run_id == 0 || !store.recording(p.run_id)) continue;
      const RunRecord run = store.run(p.run_id);
      if (run.host == host && run.pid > 0) ::kill(static_cast<pid_t>(run.pid), SIGINT);
    }
  }
  std::printf("sweep %lld cancelled: %d point%s marked cancelled%s\n", static_cast<long long>(id), cancelled,
              cancelled == 1 ? "" : "s",
              s.slurm_job_id.empty() ? "" : ("; Slurm " + slurm_jobs_text(s) + " cancelled").c_str());
  if (!scancel_error.empty()) {
    std::fprintf(stderr, "ampwb sweep cancel: error: %s\n", scancel_error.c_str());
    return 1;
  }
  return 0;
}

int sweep_list_command(const SweepIdOptions& o) {
  const std::string db = store_path(o.db);
  if (!is_database_server(db) && !fs::exists(db)) {  // no store yet: no sweeps
    if (o.json)
      print_json(nlohmann::ordered_json::array());
    else
      std::printf("no sweeps recorded yet (no run store at %s)\n", db.c_str());
    return 0;
  }
  RunStore store(db, RunStore::Mode::ReadOnly);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  const std::vector<SweepRecord> recorded = sweeps(store);
  if (recorded.empty() && !o.json)
    std::printf("no sweeps recorded yet in %s (ampwb sweep starts one)\n", location_without_password(db).c_str());
  Table table({"ID", "NAME", "CREATED (UTC)", "ON", "SLURM JOB", "POINTS"}, {true});
  for (const SweepRecord& s : recorded) {
    const std::vector<SweepPoint> points = sweep_points(store, s.id);
    if (o.json) {
      list.push_back({{"id", s.id},
                      {"name", s.name},
                      {"created", s.created},
                      {"on", s.runs_on},
                      {"slurm_job_id", s.slurm_job_id},
                      {"slurm_jobs", slurm_jobs(s)},
                      {"cancelled", s.cancelled},
                      {"points", points.size()},
                      {"summary", state_counts(points)}});
    } else {
      // The sweep's cancellation, where its points' states do not say it already ("2: 2 cancelled").
      const bool said = std::all_of(points.begin(), points.end(),
                                    [](const SweepPoint& p) { return p.state == SweepPointState::Cancelled; });
      table.add({std::to_string(s.id), sweep_label(s), timestamp_text(s.created), s.runs_on, s.slurm_job_id,
                 std::to_string(points.size()) + ": " + counts_text(state_counts(points)) +
                     (s.cancelled && !said ? " (sweep cancelled)" : "")});
    }
  }
  if (o.json)
    print_json(list);
  else if (table.rows() > 0)
    table.print();
  return 0;
}

CLI::App* add_sweep_id_command(CLI::App* parent, const char* name, const char* help, Invocation& invocation,
                               int (*command)(const SweepIdOptions&), std::shared_ptr<SweepIdOptions>& options) {
  options = std::make_shared<SweepIdOptions>();
  CLI::App* sub = parent->add_subcommand(name, help);
  add_db_option(sub, options->db);
  run_on_parse(sub, invocation, options, command);
  return sub;
}

}  // namespace

constexpr const char* kNoTimingHelp =
    "here, after every point finished: do not time the configurations in alternation for their speed-ups";

void add_sweep_command(CLI::App& app, Invocation& invocation) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "train a grid of runs (any training flag may take a comma list: --precision fp32,amp-bf16 --seed 0,1,2), here "
      "or as a Slurm job array, recorded as a sweep in the run store");
  options->command = sweep;
  sweep->add_option("--sweep-file", options->sweep_file, "the grid as JSON: {\"grid\": {...}, \"settings\": {...}}")
      ->type_name("FILE");
  sweep->add_option("--name", options->name, "the sweep's name")->type_name("NAME");
  sweep->add_option("--on", options->on, "where the points run: local (here) or slurm (one job array)")
      ->type_name("local|slurm")
      ->check(CLI::IsMember({"local", "slurm"}));
  add_number(sweep, "-j,--parallel", options->parallel, "points at once here (--on local)")
      ->check(CLI::Range(1, 256).description(""));
  sweep->add_flag("--no-timing", options->no_timing, kNoTimingHelp);
  add_number(sweep, "--max-parallel", options->max_parallel, "Slurm: array tasks at once (0: as Slurm allows)")
      ->check(CLI::Range(0, 100000).description(""));
  sweep->add_option("--partition", options->partition, "Slurm: the partition")->type_name("NAME");
  sweep->add_option("--account", options->account, "Slurm: the account")->type_name("NAME");
  sweep->add_option("--time", options->time_limit, "Slurm: each task's time limit (e.g. 2:00:00)")->type_name("TIME");
  sweep->add_flag("--dry-run", options->dry_run, "print the points (or the Slurm script) and record nothing");
  add_db_option(sweep, options->db);
  // Every training flag of `ampwb train`, each taking a comma list.
  for (const SweepSetting& setting : sweep_settings()) {
    const std::string group = "Training settings: " + setting.group;
    if (setting.on_off) {
      sweep->add_flag(setting.flag, options->switches[setting.flag], setting.help)->group(group);
    } else {
      sweep->add_option(setting.flag, options->values[setting.flag], setting.help + " (a comma list sweeps it)")
          ->type_name("V[,V...]")
          ->default_str("")
          ->group(group);
    }
  }
  sweep->callback([sweep, &invocation, options] {
    if (sweep->get_subcommands().empty()) invocation.run = [options] { return sweep_command(*options); };
  });

  std::shared_ptr<SweepIdOptions> o;
  CLI::App* status =
      add_sweep_id_command(sweep, "status", "each point's state and run", invocation, sweep_status_command, o);
  status->add_option("SWEEP", o->sweep, "the sweep's id")->required();
  status->add_flag("--json", o->json, "as JSON");
  CLI::App* cancel =
      add_sweep_id_command(sweep, "cancel", "cancel a sweep (its Slurm job too): no point starts any more", invocation,
                           sweep_cancel_command, o);
  cancel->add_option("SWEEP", o->sweep, "the sweep's id")->required();
  CLI::App* list =
      add_sweep_id_command(sweep, "list", "the sweeps in the run store", invocation, sweep_list_command, o);
  list->add_flag("--json", o->json, "as JSON");
  CLI::App* run = add_sweep_id_command(
      sweep, "run",
      "run a local sweep's queued and requeued points here, then time its configurations in alternation "
      "(again, when every point is done); with --retry-failed, a Slurm sweep's failed points are submitted again",
      invocation, sweep_run_command, o);
  run->add_option("SWEEP", o->sweep, "the sweep's id")->required();
  add_number(run, "-j,--parallel", o->parallel, "points at once")->check(CLI::Range(1, 256).description(""));
  run->add_flag("--no-timing", o->no_timing, kNoTimingHelp);
  run->add_flag("--retry-failed", o->retry_failed,
                "train the failed points again, each in a new run (their failed runs stay as they are); a Slurm "
                "sweep's as a job array of their tasks");
  CLI::App* point = add_sweep_id_command(
      sweep, "point", "train one point of a sweep (a Slurm array task's command), resuming its run when interrupted",
      invocation, sweep_point_command, o);
  point->add_option("SWEEP", o->sweep, "the sweep's id")->required();
  point
      ->add_option("--point", o->point,
                   "the point, from 1 as sweep status numbers it (default: $SLURM_ARRAY_TASK_ID + 1)")
      ->type_name("N");
  point->add_flag("--quiet", o->quiet, "no progress, only errors");
  point->add_option("--held-by-parent", o->held_by_parent)->group("");  // run_here's children: share its hold

  CLI::App* sweeps_alias = add_sweep_id_command(&app, "sweeps", "the sweeps in the run store (as sweep list)",
                                                invocation, sweep_list_command, o);
  sweeps_alias->add_flag("--json", o->json, "as JSON");
}

}  // namespace ampwb::cli
