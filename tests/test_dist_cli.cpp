// `ampwb train` on two real ranks of one mpirun: one run, trained by both and recorded by rank 0 alone. mpirun starts
// the two ranks with different run stores (a multiple-program launch), so a rank other than 0 that opened its own
// would leave a file behind.
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <utility>

#include "analysis/run_speed.h"
#include "test_cli_util.h"

namespace ampwb::cli_test {
namespace {

// mpirun -np 1 ampwb ARGS(db for rank 0) : -np 1 ampwb ARGS(db for rank 1); one CPU thread a rank.
std::vector<std::string> two_ranks(const std::vector<std::string>& rank0, const std::vector<std::string>& rank1) {
  std::vector<std::string> argv = {AMPWB_MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1"};
  argv.insert(argv.end(), {"-np", "1", AMPWB_BINARY});
  argv.insert(argv.end(), rank0.begin(), rank0.end());
  argv.insert(argv.end(), {":", "-np", "1", AMPWB_BINARY});
  argv.insert(argv.end(), rank1.begin(), rank1.end());
  return argv;
}

std::vector<std::string> training(const std::string& db, int epochs = 2) {
  std::vector<std::string> args = tiny_training(db, epochs);
  *(std::find(args.begin(), args.end(), "--threads") + 1) = "1";
  return args;
}

// The machine's CPU ticks, all and busy (/proc/stat's first line), and those of this process's waited-for children.
struct Ticks {
  double total = 0, busy = 0, children = 0;
};
Ticks ticks_now() {
  Ticks t;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  t.busy = user + nice + system + irq + softirq;
  t.total = t.busy + idle + iowait + steal;
  rusage children{};
  ::getrusage(RUSAGE_CHILDREN, &children);
  const auto seconds = [](const timeval& v) { return static_cast<double>(v.tv_sec) + v.tv_usec / 1e6; };
  t.children = (seconds(children.ru_utime) + seconds(children.ru_stime)) * static_cast<double>(::sysconf(_SC_CLK_TCK));
  return t;
}

TEST(DistCli, TwoRanksTrainOneRunThatRankZeroAloneRecords) {
  TempDir dir("dist_two_ranks");
  const std::string db = dir.file("runs.sqlite"), other = dir.file("rank1/runs.sqlite");
  const Ticks before = ticks_now();
  const Result r = run(two_ranks(training(db, 4), training(other, 4)));
  const Ticks after = ticks_now();
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "2 processes train together");
  // mpirun's output goes to a pipe: rank 0 prints lines, not a bar redrawn in the terminal mpirun gives it.
  EXPECT_EQ(r.output.find_first_of("\r\x1b"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "rank1")) << "rank 1 opened a run store of its own";

  RunStore store(db, RunStore::Mode::ReadOnly);
  const std::vector<RunRecord> runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::Finished) << runs[0].end_reason;
  EXPECT_EQ(store.epochs(runs[0].id).size(), 4u);
  // The two ranks are the run's own work, not other work on the machine: what each epoch records as other work is
  // what this test sees beside the run (mpirun and its ranks), give or take the ticks' granularity over short epochs.
  const double beside =
      ((after.busy - before.busy) - (after.children - before.children)) / (after.total - before.total);
  for (const EpochTimes& t : store.epoch_times(runs[0].id))
    EXPECT_LT(t.load.other_cpu, std::max(beside, 0.0) + 0.25)
        << "epoch " << t.epoch << ": the other rank counted as other work (" << beside << " beside the run)";
  const Result show = ampwb({"show", std::to_string(runs[0].id), "--json", "--db", db});
  ASSERT_EQ(show.status, 0) << show.output;
  const json j = json::parse(show.output);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["global_batch_size"], 8) << "4 images a rank";
  EXPECT_EQ(j["launcher"], "mpirun");
  // Its speed counts the images of every rank: a step of 8 images, not of rank 0's 4.
  const Result exported = ampwb({"export", "csv", "--all", "--out", dir.file("csv"), "--db", db});
  ASSERT_EQ(exported.status, 0) << exported.output;
  const auto summary = csv_records(dir.file("csv/runs-summary.csv"));
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].at("processes"), "2");
  EXPECT_EQ(summary[0].at("global_batch_size"), "8");
  const RunSpeed steady = measure_speed(store.steps(runs[0].id), 8, runs[0].config.numerics_every);
  ASSERT_TRUE(steady.known());
  EXPECT_DOUBLE_EQ(std::stod(summary[0].at("steady_images_per_second")), steady.images_per_second());
  // The runs list says it as the workbench's does: the device, times the processes.
  const Result listed = ampwb({"runs", "--db", db});
  expect_contains(listed.output, " cpu × 2 ");
  const json listed_json = json::parse(ampwb({"runs", "--json", "--db", db}).output);
  EXPECT_EQ(listed_json[0]["world_size"], 2);
  EXPECT_EQ(listed_json[0]["global_batch_size"], 8);
  // 60 training images, 30 a rank: 8 steps an epoch of up to 4 images a rank, where one process takes 15.
  EXPECT_EQ(runs[0].info.steps_per_epoch, 8);
}

// A setting rank 0 refuses once the flags are read (warm-up beyond the epochs) ends every rank at once, saying the
// flag: the other ranks, waiting for the configuration, hear the refusal instead.
TEST(DistCli, ARefusalOnRankZeroEndsEveryRank) {
  TempDir dir("dist_refused");
  std::vector<std::string> args = training(dir.file("runs.sqlite"));
  args.insert(args.end(), {"--warmup-epochs", "3"});  // of 2 epochs
  const Result r = run(two_ranks(args, args));
  EXPECT_NE(r.status, 0) << r.output;
  expect_contains(r.output, "--warmup-epochs: the warm-up epochs must be in [0, epochs]");
  EXPECT_FALSE(fs::exists(dir.file("runs.sqlite"))) << "refused before the store was opened";
}

// A sweep trains each point as one process: started as two by mpirun, each would run the whole grid and record it
// again, so both refuse before anything is written.
TEST(DistCli, ASweepStartedAsManyProcessesIsRefused) {
  TempDir dir("dist_sweep");
  std::vector<std::string> args = tiny_training(dir.file("runs.sqlite"), 1, 0, "sweep", 1);
  args.insert(args.end(), {"--seed", "0,1", "--no-timing"});
  const Result r = run(two_ranks(args, args));
  EXPECT_NE(r.status, 0) << r.output;
  expect_contains(r.output, "ampwb sweep was started as 2 processes by mpirun, and each would train every point");
  EXPECT_FALSE(fs::exists(dir.file("runs.sqlite"))) << "refused before the store was opened";
}

// A failure rank 0 alone meets once the ranks train (here its checkpoint folder, which it alone writes) ends the
// other rank, waiting in the step's first exchange, within the grace a failed rank gives, not the collective timeout.
TEST(DistCli, AFailureOnOneRankEndsEveryRankSoon) {
  TempDir dir("dist_failed_alone");
  std::ofstream(dir.file("a-file")) << "not a folder\n";
  std::vector<std::string> args = training(dir.file("runs.sqlite"));
  args.insert(args.end(), {"--checkpoint-dir", dir.file("a-file") + "/checkpoints", "--collective-timeout", "600"});
  const auto start = Clock::now();
  const Result r = run(two_ranks(args, args));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_NE(r.status, 0) << r.output;
  expect_contains(r.output, "cannot write checkpoints to " + dir.file("a-file") + "/checkpoints");
  expect_contains(r.output, "rank 0: ending the MPI job, since the other ranks did not end within 15 s");
  EXPECT_LT(seconds, 120) << "the other rank waited for its collective timeout:\n" << r.output;
}

// `ampwb train --processes 2` starts mpirun itself: one run of two ranks, each with its share of the cores.
TEST(DistCli, ProcessesStartsMpirunItself) {
  TempDir dir("dist_processes");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> args = tiny_training(db, 1);
  args.erase(std::find(args.begin(), args.end(), "--threads"), std::find(args.begin(), args.end(), "--threads") + 2);
  args.insert(args.end(), {"--processes", "2"});
  const Result r = ampwb(args);
  ASSERT_EQ(r.status, 0) << r.output;
  // Written to a file, its progress comes as lines.
  EXPECT_EQ(r.output.find_first_of("\r\x1b"), std::string::npos) << r.output;
  expect_contains(r.output, "epoch 1/1  train loss ");
  RunStore store(db, RunStore::Mode::ReadOnly);
  const RunRecord record = store.runs().at(0);
  EXPECT_EQ(record.status, RunStatus::Finished) << record.end_reason;
  EXPECT_EQ(record.info.world_size, 2);
  EXPECT_EQ(record.info.launcher, Launcher::Mpirun);
  EXPECT_EQ(record.config.threads, std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2));
  const Result under_mpirun = run(two_ranks(args, args));
  EXPECT_NE(under_mpirun.status, 0);
  expect_contains(under_mpirun.output, "--processes starts mpirun itself");
  // More ranks than cores: said before they start (here they end at once, refusing 0 epochs).
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> crowded = tiny_training(dir.file("crowded.sqlite"), 0);
  crowded.insert(crowded.end(), {"--processes", std::to_string(cores + 1)});
  const Result warned = ampwb(crowded);
  EXPECT_NE(warned.status, 0);
  expect_contains(warned.output, "ampwb train: warning: " + std::to_string(cores + 1) + " processes on " +
                                     std::to_string(cores) + " cores take turns on them");
}

// The pid of the ampwb process (not mpirun) whose command line holds `part`, and its environment `variable`
// (NAME=VALUE) where one is given, or 0.
pid_t pid_with(const std::string& part, const std::string& variable = "") {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string command_line = read_text((entry.path() / "cmdline").string());
    const std::string environment = '\0' + read_text((entry.path() / "environ").string());
    if (command_line.rfind(AMPWB_BINARY, 0) == 0 && command_line.find(part) != std::string::npos &&
        (variable.empty() || environment.find('\0' + variable + '\0') != std::string::npos))
      return static_cast<pid_t>(std::stoi(name));
  }
  return 0;
}

// Whether the store at `db` holds a run with a checkpoint within two minutes. Rank 0 makes the store while this
// looks: an empty file, not yet a store, is refused read-only, and looked at again.
bool wait_for_checkpoint(const std::string& db) {
  for (const auto until = Clock::now() + std::chrono::seconds(120); Clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (!fs::exists(db)) continue;
    try {
      RunStore store(db, RunStore::Mode::ReadOnly);
      const std::vector<RunRecord> runs = store.runs();
      if (!runs.empty() && !store.checkpoints(runs[0].id).empty()) return true;
    } catch (const Error&) {  // being made; a store that never opens fails the caller's assertion at the deadline
    }
  }
  return false;
}

// Run 1, interrupted, resumed by two ranks (rank 1 given a store path it must never open) and trained to its 40th
// epoch.
void resumes_to_the_end_on_two_ranks(const TempDir& dir, const std::string& db, const std::string& rank1_db) {
  const std::vector<std::string> resume = {"train", "--resume", "1", "--threads", "1", "--db"};
  std::vector<std::string> first = resume, other = resume;
  first.push_back(db);
  other.push_back(rank1_db);
  const Result resumed = run(two_ranks(first, other));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  RunStore store(db, RunStore::Mode::ReadOnly);
  EXPECT_EQ(store.run(1).status, RunStatus::Finished);
  EXPECT_EQ(store.epochs(1).size(), 40u);
  EXPECT_FALSE(fs::exists(dir.path() / "rank1")) << "rank 1 opened a run store of its own";
}

// A rank killed mid-run ends the other within 60 s, mpirun naming it; the run is left interrupted at its last
// checkpoint and resumes from it with as many processes, but not with another number.
TEST(DistCli, AKilledRankEndsTheRunWhichResumesWithAsManyRanks) {
  TempDir dir("dist_killed");
  const std::string db = dir.file("runs.sqlite"), rank1_db = dir.file("rank1/runs.sqlite");
  const pid_t mpirun = spawn(two_ranks(training(db, 40), training(rank1_db, 40)), dir.file("mpirun.log"));
  const bool checkpointed = wait_for_checkpoint(db);
  const pid_t rank0 = pid_with(db), rank1 = pid_with(rank1_db);
  ASSERT_TRUE(checkpointed && rank0 > 0 && rank1 > 0) << read_text(dir.file("mpirun.log"));
  ::kill(rank1, SIGKILL);
  const auto killed = Clock::now();
  EXPECT_NE(wait_exit(mpirun), 0);
  while (fs::exists("/proc/" + std::to_string(rank0)) && Clock::now() - killed < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(fs::exists("/proc/" + std::to_string(rank0))) << "rank 0 outlived rank 1 by a minute";
  const std::string log = read_text(dir.file("mpirun.log"));
  expect_contains(log, "process rank 1");

  {
    RunStore store(db);  // read-write: the abandoned run is marked interrupted
    const RunRecord run = store.runs().at(0);
    EXPECT_EQ(run.status, RunStatus::Interrupted) << run.end_reason;
    EXPECT_TRUE(store.resumable(run.id));
  }
  const Result alone = ampwb({"train", "--resume", "1", "--db", db, "--threads", "1"});
  EXPECT_NE(alone.status, 0);
  expect_contains(alone.output, "run 1 was trained by 2 processes: resume it with as many (--processes 2, ");
  // Refused before mpirun starts any rank.
  const Result three = ampwb({"train", "--resume", "1", "--processes", "3", "--db", db, "--threads", "1"});
  EXPECT_EQ(three.status, 1) << three.output;
  expect_contains(three.output, "run 1 was trained by 2 processes: resume it with as many (--processes 2, ");
  EXPECT_EQ(three.output.find("mpirun detected"), std::string::npos) << three.output;  // mpirun's words on a rank's exit
  EXPECT_EQ(three.output.find("Primary job"), std::string::npos) << three.output;
  resumes_to_the_end_on_two_ranks(dir, db, rank1_db);
}

// A process's state, as /proc/PID/stat says it ('R', 'S', 'T' stopped, 'Z'); 0 where there is none.
char state_of(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");  // "PID (NAME) STATE ..."
  const size_t name_end = stat.rfind(')');
  return name_end != std::string::npos && name_end + 2 < stat.size() ? stat[name_end + 2] : '\0';
}

// Whether `pid` is stopped, or not, as `stopped` says, within 10 s.
bool comes_to(pid_t pid, bool stopped) {
  for (const auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
    if ((state_of(pid) == 'T') == stopped) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The exit status of `pid` once it has ended, waiting at most `limit`; nullopt where it still runs.
std::optional<int> exit_within(pid_t pid, std::chrono::seconds limit) {
  for (const auto until = Clock::now() + limit; Clock::now() < until;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::nullopt;
}

// Whether `pid` still runs: a zombie (killed, its parent gone without reaping it) does not.
bool runs(pid_t pid) {
  const char state = state_of(pid);
  return state != '\0' && state != 'Z';
}

// Ends the given processes with SIGKILL (which a stopped process obeys too) where they are still this test's ranks or
// mpirun, whatever the test's outcome: no test leaves a stopped rank behind.
class KillAtEnd {
 public:
  void add(pid_t pid) { pids_.push_back({pid, read_text("/proc/" + std::to_string(pid) + "/cmdline")}); }
  ~KillAtEnd() {
    for (const auto& [pid, command_line] : pids_)
      if (read_text("/proc/" + std::to_string(pid) + "/cmdline") == command_line) ::kill(pid, SIGKILL);
  }

 private:
  std::vector<std::pair<pid_t, std::string>> pids_;
};

// Ctrl-Z (SIGTSTP sent to it alone) pauses a `--processes 2` training, its ranks too, and SIGCONT continues them.
// Ctrl-C (SIGINT) stops it after a step with a checkpoint, and it exits 130 as a training of one process does. That
// step may take longer than the second mpirun gives its ranks between a SIGTERM and a SIGKILL: here rank 1 is paused
// (SIGSTOP) for 3 s around the Ctrl-C, and rank 0 waits for it. The ranks say why they stopped; mpirun says nothing.
TEST(DistCli, AStoppedProcessesTrainingExitsAsItsSignalSays) {
  TempDir dir("dist_processes_stopped");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> args = tiny_training(db, 40);
  args.erase(std::find(args.begin(), args.end(), "--threads"), std::find(args.begin(), args.end(), "--threads") + 2);
  args.insert(args.end(), {"--processes", "2", "--threads", "1"});
  args.insert(args.begin(), AMPWB_BINARY);
  const pid_t ampwb_pid = spawn(args, dir.file("train.log"));
  KillAtEnd strays;
  ASSERT_TRUE(wait_for_checkpoint(db)) << read_text(dir.file("train.log"));
  const pid_t rank1 = pid_with(db, "OMPI_COMM_WORLD_RANK=1");
  ASSERT_GT(rank1, 0);
  strays.add(rank1);

  // Whether the launcher itself stops depends on its process group (the kernel ignores a stop in one no terminal
  // controls: ctest's may be such); its ranks stop either way.
  ::kill(ampwb_pid, SIGTSTP);
  EXPECT_TRUE(comes_to(rank1, true)) << "Ctrl-Z left the ranks training";
  ::kill(ampwb_pid, SIGCONT);
  EXPECT_TRUE(comes_to(rank1, false)) << "continued, the ranks stayed stopped";

  ::kill(rank1, SIGSTOP);
  ::kill(ampwb_pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ::kill(rank1, SIGCONT);
  EXPECT_EQ(wait_exit(ampwb_pid), 130) << read_text(dir.file("train.log"));
  const std::string log = read_text(dir.file("train.log"));
  EXPECT_EQ(log.find("Primary job"), std::string::npos) << "mpirun's words on the ranks' exit status: " << log;
  RunStore store(db, RunStore::Mode::ReadOnly);
  const RunRecord run = store.runs().at(0);
  EXPECT_EQ(run.status, RunStatus::Cancelled) << run.end_reason;
  expect_contains(run.end_reason, "stopped by the user");
  EXPECT_LT(store.epochs(run.id).size(), 40u);
  EXPECT_TRUE(store.resumable(run.id));
}

// On several machines the checkpoint folder may be rank 0's own disk: rank 0 alone reads the checkpoint a run resumes
// from, and sends it to the others. Here rank 1 sees an empty folder where rank 0's checkpoints are (a tmpfs over it,
// in a mount namespace of its own).
TEST(DistCli, RankZeroAloneReadsTheCheckpointItResumesFrom) {
  if (std::system("unshare -m true 2>/dev/null") != 0)
    GTEST_SKIP() << "unshare -m is not allowed here: it hides the checkpoint folder from rank 1";
  TempDir dir("dist_resume_rank0");
  const std::string db = dir.file("runs.sqlite"), folder = dir.file("rank0-disk");
  std::vector<std::string> args = training(db, 2);
  args.insert(args.end(), {"--checkpoint-dir", folder, "--keep-checkpoint"});
  ASSERT_EQ(run(two_ranks(args, args)).status, 0);
  // As if killed during epoch 2: interrupted, its checkpoint (on disk and in the store) the one of epoch 1.
  fs::rename(folder + "/checkpoint.ampwb.prev", folder + "/checkpoint.ampwb");
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(handle,
                         "UPDATE runs SET status = 'interrupted'; "
                         "UPDATE checkpoints SET epoch = epoch - 1, step = step / 2",  // 2 epochs of equal steps
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(handle);

  const std::vector<std::string> resume = {"train", "--resume", "1", "--threads", "1", "--db"};
  std::vector<std::string> argv = {
      AMPWB_MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1", "-np", "1", AMPWB_BINARY};
  argv.insert(argv.end(), resume.begin(), resume.end());
  argv.insert(argv.end(), {db, ":", "-np", "1", "unshare", "-m", "sh", "-c",
                           "mount -t tmpfs none \"$0\" && exec \"$@\"", folder, AMPWB_BINARY});
  argv.insert(argv.end(), resume.begin(), resume.end());
  argv.push_back(dir.file("rank1/runs.sqlite"));
  const Result resumed = run(argv);
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  RunStore store(db, RunStore::Mode::ReadOnly);
  EXPECT_EQ(store.run(1).status, RunStatus::Finished);
  EXPECT_EQ(store.epochs(1).size(), 2u);
}

// A rank that stops (SIGSTOP: alive to mpirun, answering nothing) is named by rank 0 once its collective timeout has
// passed; rank 0 records the run as interrupted and ends the MPI job, the stopped rank with it; the run resumes from
// its last checkpoint and finishes.
TEST(DistCli, AStoppedRankIsNamedAndTheRunResumes) {
  TempDir dir("dist_stopped");
  const std::string db = dir.file("runs.sqlite"), rank1_db = dir.file("rank1/runs.sqlite");
  std::vector<std::string> rank0_args = training(db, 40), rank1_args = training(rank1_db, 40);
  for (std::vector<std::string>* args : {&rank0_args, &rank1_args})
    args->insert(args->end(), {"--collective-timeout", "10"});
  KillAtEnd strays;
  const pid_t mpirun = spawn(two_ranks(rank0_args, rank1_args), dir.file("mpirun.log"));
  strays.add(mpirun);
  const bool checkpointed = wait_for_checkpoint(db);
  const pid_t rank0 = pid_with(db), rank1 = pid_with(rank1_db);
  ASSERT_TRUE(checkpointed && rank0 > 0 && rank1 > 0) << read_text(dir.file("mpirun.log"));
  strays.add(rank0);
  strays.add(rank1);
  ::kill(rank1, SIGSTOP);
  const auto stopped = Clock::now();
  const std::optional<int> status = exit_within(mpirun, std::chrono::seconds(60));
  const double seconds = std::chrono::duration<double>(Clock::now() - stopped).count();
  const std::string log = read_text(dir.file("mpirun.log"));
  ASSERT_TRUE(status.has_value()) << "the run went on for a minute with rank 1 stopped:\n" << log;
  EXPECT_NE(*status, 0) << log;
  // mpirun may return before the kernel has ended the rank it killed: give the kill a moment to land.
  for (const auto until = Clock::now() + std::chrono::seconds(15); runs(rank1) && Clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(runs(rank1)) << "mpirun left the stopped rank behind for 15 s";
  expect_contains(log, "ampwb train: error: rank 0 of 2 waited ");
  expect_contains(log, " for rank 1, which did not answer: it is hung or stopped");
  std::printf("rank 0 ended the run %.1f s after rank 1 stopped (a collective timeout of 10 s)\n", seconds);

  {
    RunStore store(db);
    const RunRecord run = store.runs().at(0);
    EXPECT_EQ(run.status, RunStatus::Interrupted) << run.end_reason;
    expect_contains(run.end_reason, "for rank 1, which did not answer");
    EXPECT_TRUE(store.resumable(run.id));
  }
  resumes_to_the_end_on_two_ranks(dir, db, rank1_db);
}

}  // namespace
}  // namespace ampwb::cli_test
