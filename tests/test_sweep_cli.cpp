// ampwb sweep through the real binary on a real image folder, here (--on local): a small grid recorded as a sweep,
// each point a run of the store linked to it, in the order the flags give; a bad value refused before anything is
// written; Ctrl-C leaving the running point requeued and `sweep run` resuming its run; `sweep cancel`; and the Slurm
// script a dry run prints. (Slurm itself: test_sweep_slurm.cpp.)
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <functional>
#include <set>

#include "analysis/run_speed.h"
#ifdef AMPWB_TEST_POSTGRES
#include "postgres_server.h"
#endif
#include "store/store_filesystem.h"
#include "store/sweep_record.h"
#include "test_cli_util.h"
#include "train/alternating_benchmark.h"

namespace ampwb {
namespace {
using namespace cli_test;

// tiny_training's run as a sweep, one thread a point, with `grid`'s flags.
std::vector<std::string> tiny_sweep(const std::string& db, int epochs, int max_steps,
                                    const std::vector<std::string>& grid) {
  std::vector<std::string> args = tiny_training(db, epochs, max_steps, "sweep", 1);
  args.insert(args.end(), grid.begin(), grid.end());
  return args;
}

TEST(SweepCli, RunsAGridHereEachPointARunOfTheStore) {
  TempDir dir("sweep_local");
  const std::string db = dir.file("runs.sqlite");
  // No sweep yet is said so, with or without a store, as `runs` says no run.
  expect_contains(ampwb({"sweeps", "--db", db}).output, "no sweeps recorded yet (no run store at " + db + ")");
  RunStore(dir.file("empty.sqlite"), RunStore::Mode::Create);
  expect_contains(ampwb({"sweeps", "--db", dir.file("empty.sqlite")}).output, "no sweeps recorded yet in ");
  EXPECT_EQ(ampwb({"sweeps", "--json", "--db", dir.file("empty.sqlite")}).output, "[]\n");
  const Result r = ampwb(tiny_sweep(db, 1, 2, {"--seed", "0,1", "--precision", "fp32,amp-bf16", "-j", "2"}));
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "sweep 1: 4 points");
  expect_contains(r.output, "point 3/4 started: seed=1 precision=fp32");
  expect_contains(r.output, "sweep 1: 4 finished");

  const json status = json::parse(ampwb({"sweep", "status", "1", "--json", "--db", db}).output);
  EXPECT_EQ(status["on"], "local");
  EXPECT_EQ(status["summary"]["finished"], 4);
  ASSERT_EQ(status["points"].size(), 4u);
  RunStore store(db, RunStore::Mode::ReadOnly);
  std::set<int64_t> runs;
  for (int i = 0; i < 4; ++i) {
    const json& p = status["points"][i];
    EXPECT_EQ(p["state"], "finished");
    // The seed is the outer setting, as given first.
    EXPECT_EQ(p["values"]["seed"], i < 2 ? "0" : "1");
    EXPECT_EQ(p["values"]["precision"], i % 2 ? "amp-bf16" : "fp32");
    const int64_t run = p["run_id"];
    runs.insert(run);
    const RunRecord record = store.run(run);
    EXPECT_EQ(record.status, RunStatus::Finished);
    EXPECT_EQ(record.config.seed, i < 2 ? 0u : 1u);
    EXPECT_EQ(std::string(mode_name(record.config.precision.mode)), p["values"]["precision"].get<std::string>());
    EXPECT_EQ(record.config.batch_size, 4);
    EXPECT_EQ(p["epochs_completed"], 1);
  }
  EXPECT_EQ(runs.size(), 4u) << "a run serves two points";
  EXPECT_EQ(store.runs().size(), 4u);
  // Then its two configurations (the seeds time alike) were timed in alternation, once a round each, the record
  // stored with each run and shown by compare.
  expect_contains(r.output, "sweep 1: timing its 2 configurations in alternation for their speed-ups");
  std::vector<int64_t> in_order;
  for (int i = 0; i < 4; ++i) in_order.push_back(status["points"][i]["run_id"]);
  const std::optional<AlternatingSpeed> timed = store.alternating_speed(in_order[3]);
  ASSERT_TRUE(timed.has_value()) << r.output;
  EXPECT_EQ(timed->runs, in_order);
  ASSERT_EQ(timed->images_per_second.size(), 4u);
  for (const std::vector<double>& rounds : timed->images_per_second) {
    ASSERT_EQ(rounds.size(), static_cast<size_t>(AlternatingOptions{}.rounds));
    for (double ips : rounds) EXPECT_GT(ips, 0);
  }
  EXPECT_EQ(timed->images_per_second[2], timed->images_per_second[0]) << "seed 1's fp32 is seed 0's configuration";
  EXPECT_EQ(timed->images_per_second[3], timed->images_per_second[1]);
  EXPECT_NE(timed->images_per_second[1], timed->images_per_second[0]);
  EXPECT_TRUE(timed->load.known()) << "the other work of its turns, kept with it";
  // Up to the warning a busy machine adds below them.
  std::string printed = r.output.substr(r.output.find("speed-ups timed in alternation"));
  printed = printed.substr(0, printed.find("\u26a0"));
  EXPECT_EQ(std::count(printed.begin(), printed.end(), '\n'), 2) << "one line a configuration besides the first:\n"
                                                                 << printed;
  const std::string bf16 = speed_up_text(alternating_speed_up(*timed, in_order[1], in_order[0]));
  expect_contains(r.output, "): " + bf16 + "\n");
  // `sweep status` shows them again, a line a configuration, as the sweep printed them.
  const std::string status_text = ampwb({"sweep", "status", "1", "--db", db}).output;
  expect_contains(status_text, "speed-ups timed in alternation, against point 1 (run " + std::to_string(in_order[0]) +
                                   "):\n  point 2 (run " + std::to_string(in_order[1]) + "): " + bf16 + "\n");
  EXPECT_EQ(status_text.find("  point 3 ("), std::string::npos) << "seed 1's fp32 is point 1's configuration:\n"
                                                                << status_text;
  const json speed_ups = json::parse(ampwb({"sweep", "status", "1", "--json", "--db", db}).output);
  ASSERT_EQ(speed_ups["timed_in_alternation"]["speed_ups"].size(), 1u) << speed_ups.dump();
  EXPECT_EQ(speed_ups["timed_in_alternation"]["speed_ups"][0]["text"], bf16);
  EXPECT_EQ(speed_ups["timed_in_alternation"]["baseline_run"], in_order[0]);
  const std::string compared =
      ampwb({"compare", std::to_string(in_order[0]), std::to_string(in_order[1]), "--db", db}).output;
  expect_contains(compared, "timed in alternation (sweep)");
  expect_contains(compared, speed_up_cell(alternating_speed_up(*timed, in_order[1], in_order[0])));  // in its table
  // Below the table, what the alternation's interval is. The trainings' steps were too few for a speed-up of their
  // own ("-"), so there is no bootstrap interval to explain.
  expect_contains(unwrapped(compared), "which holds the median with probability 1 - 2^(1 - rounds), 97% for 6 rounds");
  EXPECT_EQ(compared.find("a bootstrap over blocks"), std::string::npos) << compared;
  // sweep:1 stands for its runs, in its points' order, wherever runs are given.
  const json by_sweep = json::parse(ampwb({"compare", "sweep:1", "--json", "--db", db}).output);
  ASSERT_EQ(by_sweep["runs"].size(), 4u) << by_sweep.dump();
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(by_sweep["runs"][i]["id"], in_order[i]);
  const Result twice = ampwb({"compare", std::to_string(in_order[1]), "sweep:1", "--db", db});
  EXPECT_EQ(twice.status, 1);
  expect_contains(twice.output, "run " + std::to_string(in_order[1]) + " is given twice ('" +
                                    std::to_string(in_order[1]) + "' and 'sweep:1')");
  expect_contains(ampwb({"report", "sweep:9", "--out", dir.file("r.html"), "--db", db}).output,
                  "no sweep 9 in the run store '" + db + "'");
  // An unnamed sweep is listed by what it sweeps, not as an empty name, in a table under its header.
  const std::string listed = ampwb({"sweeps", "--db", db}).output;
  expect_contains(listed, "ID  NAME                         CREATED (UTC)     ON     SLURM JOB  POINTS\n");
  expect_contains(listed, "\n 1  (unnamed: seed × precision)  ");
  expect_contains(listed, "  local             4: 4 finished\n");
  // Point 3 is point 3 everywhere: in the progress lines, the status text and its JSON (the GUI: test_ui_sweeps).
  const std::string shown = ampwb({"sweep", "status", "1", "--db", db}).output;
  expect_contains(shown, "sweep 1 (unnamed: seed × precision): 4 points on local");
  expect_contains(shown, "\n      3  seed=1 precision=fp32 ");
  expect_contains(shown, "\n      4  seed=1 precision=amp-bf16 ");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(status["points"][i]["point"], i + 1);
  expect_contains(ampwb({"sweep", "point", "--point", "0", "--db", db, "1"}).output,
                  "the point is a whole number from 1, got '0'");
  expect_contains(ampwb({"sweep", "point", "--point", "5", "--db", db, "1"}).output,
                  "sweep 1 has 4 points: there is no point 5");
  const Result again = ampwb({"sweep", "point", "--point", "4", "--db", db, "1"});
  EXPECT_EQ(again.status, 0) << again.output;
  expect_contains(again.output, "sweep 1 point 4: finished, nothing to run");
  // A point's run deleted since: the point stays finished, and says where its result went.
  ASSERT_EQ(ampwb({"delete", std::to_string(in_order[2]), "--db", db}).status, 0);
  expect_contains(ampwb({"sweep", "status", "1", "--db", db}).output,
                  "\n      3  seed=1 precision=fp32" + std::string(20, ' ') + "finished, its run deleted\n");
  // The sweep's other runs compare without it, and the comparison says which point is missing.
  const Result without = ampwb({"compare", "sweep:1", "--db", db});
  EXPECT_EQ(without.status, 0) << without.output;
  expect_contains(without.output, "ampwb compare: note: left out, having no run: sweep 1 point 3 (its run deleted)");
}

// A sweep's --checkpoint-dir holds a folder for each point: a folder holds one run's checkpoints.
TEST(SweepCli, EachPointCheckpointsIntoAFolderOfItsOwn) {
  TempDir dir("sweep_checkpoints");
  const std::string db = dir.file("runs.sqlite"), folder = dir.file("mine");
  const Result r = ampwb(tiny_sweep(db, 1, 2, {"--seed", "0,1", "--checkpoint-dir", folder}));
  ASSERT_EQ(r.status, 0) << r.output;
  RunStore store(db, RunStore::Mode::ReadOnly);
  std::set<std::string> folders;
  for (const RunRecord& run : store.runs()) {
    EXPECT_EQ(run.status, RunStatus::Finished) << run.end_reason;
    EXPECT_EQ(fs::path(run.config.checkpoint_dir).parent_path(), fs::path(folder));
    EXPECT_TRUE(fs::exists(run.config.checkpoint_dir + "/checkpoint.ampwb")) << "a folder of the user's is kept";
    folders.insert(run.config.checkpoint_dir);
  }
  EXPECT_EQ(folders.size(), 2u);
}

TEST(SweepCli, RefusesABadValueBeforeWritingAnything) {
  TempDir dir("sweep_refused");
  const std::string db = dir.file("runs.sqlite");
  Result r = ampwb(tiny_sweep(db, 1, 2, {"--precision", "fp32,amp-bf16", "--batch-size", "8,1"}));
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "--batch-size: the batch size must be at least 2");
  EXPECT_FALSE(fs::exists(db)) << "the store was made for a refused sweep";
  r = ampwb(tiny_sweep(db, 1, 2, {"--lr", "0.1,fast"}));
  EXPECT_EQ(r.status, 2) << "a value not of its flag's type, as train says it";
  expect_contains(r.output, "--lr");
  r = ampwb(tiny_sweep(db, 1, 2, {}));
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "a sweep needs a setting with several values");
  // A flag given twice adds to its list: a value in both is said with the list they made.
  r = ampwb(tiny_sweep(db, 1, 2, {"--lr", "0.1", "--lr", "0.1,0.2"}));
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "--lr: '0.1' is given twice (the values of each --lr make one list: 0.1,0.1,0.2)");
  // A stray comma is an empty value, said, not dropped (nor the next flag taken for a value).
  for (const std::string list : {"0,,1", "0,", ",", "0, "}) {
    r = ampwb(tiny_sweep(db, 1, 2, {"--seed", list}));
    EXPECT_EQ(r.status, 1) << list;
    expect_contains(r.output, "--seed: '" + list + "' has an empty value");
  }
  // Spaces around a value are not part of it, as a list is written in prose.
  r = ampwb(tiny_sweep(db, 1, 2, {"--precision", "fp32, amp-bf16 ", "--dry-run"}));
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "point 2/2: precision=amp-bf16\n");
  EXPECT_FALSE(fs::exists(db));
}

// Whether point `index` of sweep 1 has a run for which `holds` is true; false while the store cannot be read yet.
bool point_run_holds(const std::string& db, int index, const std::function<bool(const RunStore&, int64_t)>& holds) {
  if (!fs::exists(db)) return false;
  try {
    RunStore store(db, RunStore::Mode::ReadOnly);
    const std::vector<SweepPoint> points = sweep_points(store, 1);
    if (points.size() <= static_cast<size_t>(index) || points[index].run_id == 0) return false;
    return holds(store, points[index].run_id);
  } catch (const std::exception&) {
    return false;
  }
}

// Point `index` of sweep 1 has a run with `epochs` epochs recorded, or more.
bool point_has_epochs(const std::string& db, int index, size_t epochs) {
  return point_run_holds(db, index, [&](const RunStore& s, int64_t run) { return s.epochs(run).size() >= epochs; });
}

// The checkpoint is recorded just after its epoch's row: a point killed between the two has nothing to resume.
bool point_has_checkpoint(const std::string& db, int index) {
  return point_run_holds(db, index, [](const RunStore& s, int64_t run) { return !s.checkpoints(run).empty(); });
}

// Starts a sweep of three points long enough to interrupt, and sends it `signal` once its first point has an epoch.
int interrupted_sweep(const TempDir& dir, const std::string& db, int signal = SIGINT) {
  std::vector<std::string> argv = tiny_sweep(db, 60, 1, {"--seed", "0,1,2"});
  argv.insert(argv.begin(), AMPWB_BINARY);
  const std::string log = dir.file("sweep.log");
  const pid_t sweep = spawn(argv, log);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!point_has_epochs(db, 0, 1) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(point_has_epochs(db, 0, 1)) << read_text(log);
  ::kill(sweep, signal);
  const int status = wait_exit(sweep);
  EXPECT_EQ(status, 128 + signal) << read_text(log);
  expect_contains(read_text(log), "continue it with ampwb sweep run 1");
  return status;
}

TEST(SweepCli, CtrlCLeavesThePointRequeuedAndSweepRunResumesIt) {
  TempDir dir("sweep_interrupted");
  const std::string db = dir.file("runs.sqlite");
  interrupted_sweep(dir, db);
  int64_t run = 0;
  {
    RunStore store(db, RunStore::Mode::ReadOnly);
    const std::vector<SweepPoint> points = sweep_points(store, 1);
    EXPECT_EQ(points[0].state, SweepPointState::Requeued);
    EXPECT_EQ(points[1].state, SweepPointState::Queued);
    EXPECT_EQ(points[2].state, SweepPointState::Queued);
    run = points[0].run_id;
    ASSERT_NE(run, 0);
    EXPECT_LT(store.epochs(run).size(), 60u);
    EXPECT_EQ(store.run(run).status, RunStatus::Cancelled);
    expect_contains(store.run(run).end_reason, "stopped by the user");
  }
  const Result resumed = ampwb({"sweep", "run", "1", "--no-timing", "--db", db});
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(resumed.output.find("in alternation"), std::string::npos) << resumed.output;
  RunStore store(db, RunStore::Mode::ReadOnly);
  const std::vector<SweepPoint> points = sweep_points(store, 1);
  EXPECT_EQ(points[0].run_id, run) << "the point started over instead of resuming its run";
  EXPECT_EQ(store.run(run).status, RunStatus::Finished);
  EXPECT_EQ(store.epochs(run).size(), 60u);
  for (const SweepPoint& p : points) EXPECT_EQ(p.state, SweepPointState::Finished) << "point " << p.index;
  EXPECT_EQ(store.runs().size(), 3u);
  EXPECT_FALSE(store.alternating_speed(run).has_value()) << "timed despite --no-timing";
}

// `ampwb sweep | head -1`: once the output's reader is gone (a line of the sweep finds it so) the sweep starts no
// other point and says on stderr how to go on, as at a Ctrl-C; no point is left failed or running.
TEST(SweepCli, ASweepWhoseReaderWentAwayStopsAndSaysHowToGoOn) {
  TempDir dir("sweep_reader_gone");
  const std::string db = dir.file("runs.sqlite"), script = dir.file("sweep.sh"), errors = dir.file("stderr");
  std::string command;  // each word quoted for the shell (built up by +=: GCC 12 warns falsely of "'" + string)
  for (const std::string& a : tiny_sweep(db, 4, 1, {"--seed", "0,1,2", "--no-timing"})) command += " '" + a + "'";
  command.insert(0, std::string("'") + AMPWB_BINARY + "'");
  std::ofstream(script) << command << " 2>'" << errors << "' | head -1 >/dev/null\nexit ${PIPESTATUS[0]}\n";
  const int status = std::system(("bash '" + script + "'").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGPIPE) << read_text(errors);
  expect_contains(read_text(errors), "; continue it with ampwb sweep run 1\n");
  RunStore store(db, RunStore::Mode::ReadOnly);
  for (const SweepPoint& p : sweep_points(store, 1))
    EXPECT_TRUE(p.state == SweepPointState::Finished || p.state == SweepPointState::Queued ||
                p.state == SweepPointState::Requeued)
        << "point " << p.index + 1 << " " << sweep_point_state_name(p.state) << ": " << read_text(errors);
}

// A sweep stopped by its terminal's hangup, then its point's checkpoint deleted: the point cannot resume its run and
// trains as a new run, and says why.
TEST(SweepCli, APointWhoseCheckpointIsGoneTrainsAsANewRunAndSaysWhy) {
  TempDir dir("sweep_checkpoint_gone");
  const std::string db = dir.file("runs.sqlite");
  interrupted_sweep(dir, db, SIGHUP);
  int64_t run = 0;
  {
    RunStore store(db, RunStore::Mode::ReadOnly);
    run = sweep_points(store, 1)[0].run_id;
    expect_contains(store.run(run).end_reason, "stopped as its terminal closed (SIGHUP)");
    ASSERT_FALSE(store.checkpoints(run).empty());
    const std::string checkpoint = store.checkpoints(run).back().path;
    ASSERT_TRUE(fs::remove(checkpoint));
    fs::remove(checkpoint + ".prev");
  }
  const Result r = ampwb({"sweep", "point", "--point", "1", "--quiet", "--db", db, "1"});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "sweep 1 point 1: the checkpoint of run " + std::to_string(run));
  expect_contains(r.output, "is missing; a new run trains the point");
  RunStore store(db, RunStore::Mode::ReadOnly);
  const SweepPoint p = sweep_points(store, 1)[0];
  EXPECT_NE(p.run_id, run);
  EXPECT_EQ(p.state, SweepPointState::Finished);
  EXPECT_EQ(store.epochs(p.run_id).size(), 60u);
  EXPECT_EQ(store.run(run).status, RunStatus::Cancelled) << "the run that could not be resumed is kept as it was";
}

// A sweep whose processes were all killed (SIGKILL: nothing could say how its points ended) leaves them marked
// running; the next `sweep run` requeues those whose runs no process records, resumes them, and finishes the sweep.
TEST(SweepCli, SweepRunResumesThePointsOfAKilledSweep) {
  TempDir dir("sweep_killed");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> argv = tiny_sweep(db, 60, 1, {"--seed", "0,1,2", "-j", "2", "--no-timing"});
  argv.insert(argv.begin(), AMPWB_BINARY);
  const std::string log = dir.file("sweep.log");
  const pid_t sweep = spawn(argv, log);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!(point_has_checkpoint(db, 0) && point_has_checkpoint(db, 1)) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(point_has_checkpoint(db, 0) && point_has_checkpoint(db, 1)) << read_text(log);
  // The sweep first, so that it starts no more points; its points' processes lead process groups of their own,
  // each killed by its command line.
  ::kill(sweep, SIGKILL);
  wait_exit(sweep);
  const auto held = [&](int index) { return RunStore(db, RunStore::Mode::ReadOnly).connection().point_held(1, index); };
  EXPECT_TRUE(held(0) && held(1)) << "the points' children train on, but another sweep run could take the points";
  int killed = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string command_line = read_text((entry.path() / "cmdline").string());
    if (command_line.find(db) != std::string::npos && command_line.find("point") != std::string::npos)
      killed += ::kill(std::stoi(entry.path().filename().string()), SIGKILL) == 0;
  }
  EXPECT_EQ(killed, 2);
  {
    // Not this test's children, so not waited for: their locks go once the kernel has ended them.
    RunStore store(db, RunStore::Mode::ReadOnly);
    const std::vector<SweepPoint> points = sweep_points(store, 1);
    const auto locked = [&] {
      return store.recording(points[0].run_id) || store.recording(points[1].run_id) || held(0) || held(1);
    };
    const auto gone = Clock::now() + std::chrono::seconds(30);
    while (locked() && Clock::now() < gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_FALSE(locked()) << "a killed point's process still holds its point or records its run";
    EXPECT_EQ(points[0].state, SweepPointState::Running);
  }
  // Its status says that nothing trains it now, and how to go on.
  const Result status = ampwb({"sweep", "status", "1", "--db", db});
  expect_contains(status.output,
                  "a sweep process that trained it has ended: ampwb sweep run 1 goes on with the points left");
  // Begun with --no-timing, it goes on without the timing.
  const Result resumed = ampwb({"sweep", "run", "1", "--db", db});
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  expect_contains(resumed.output, "point 1/3 was left running by a sweep process that ended: requeued");
  EXPECT_EQ(resumed.output.find("in alternation"), std::string::npos) << resumed.output;
  RunStore store(db, RunStore::Mode::ReadOnly);
  for (const SweepPoint& p : sweep_points(store, 1)) {
    EXPECT_EQ(p.state, SweepPointState::Finished) << "point " << p.index;
    EXPECT_EQ(store.epochs(p.run_id).size(), 60u) << "point " << p.index;
  }
  EXPECT_EQ(store.runs().size(), 3u) << "a killed point started over instead of resuming its run";
}

#ifdef AMPWB_TEST_POSTGRES
// A local sweep into PostgreSQL whose server restarts again and again (an administrator, an upgrade) while its points
// train, start and end: the sweep and its points' processes wait for the server each time, every point's run trains
// once, whole, and the sweep finishes.
TEST(SweepCli, ALocalSweepIntoPostgresqlOutlivesItsServerRestarting) {
  TempDir dir("sweep_postgres_restarts");
  test::PostgresServer server;
  std::vector<std::string> argv = tiny_sweep(server.uri(), 80, 1, {"--seed", "0,1,2", "-j", "2", "--no-timing"});
  argv.insert(argv.begin(), AMPWB_BINARY);
  const std::string log = dir.file("sweep.log");
  const pid_t sweep = spawn(argv, log);
  int restarts = 0, raw = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(240);
  while (::waitpid(sweep, &raw, WNOHANG) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    server.restart();
    ++restarts;
  }
  if (Clock::now() >= deadline) {
    ::kill(sweep, SIGKILL);
    FAIL() << "the sweep did not end in 4 minutes:\n" << read_text(log);
  }
  const std::string output = read_text(log);
  ASSERT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << output;
  EXPECT_GE(restarts, 3) << "the sweep ended before the server restarted often:\n" << output;
  expect_contains(output, "sweep 1: 3 finished");
  RunStore store(server.uri(), RunStore::Mode::ReadOnly);
  for (const SweepPoint& p : sweep_points(store, 1)) {
    EXPECT_EQ(p.state, SweepPointState::Finished) << "point " << p.index;
    EXPECT_EQ(store.run(p.run_id).status, RunStatus::Finished) << "point " << p.index;
    EXPECT_EQ(store.epochs(p.run_id).size(), 80u) << "point " << p.index;
    EXPECT_EQ(store.steps(p.run_id).size(), 80u) << "point " << p.index << ": a step recorded twice, or lost";
  }
  EXPECT_EQ(store.runs().size(), 3u) << output;
}
#endif

TEST(SweepCli, ACancelledSweepStopsItsRunningPointAndRunsNoMore) {
  TempDir dir("sweep_cancelled");
  const std::string db = dir.file("runs.sqlite");
  const int epochs = 600;  // never reached: the cancel comes long before, however fast this machine trains
  std::vector<std::string> argv = tiny_sweep(db, epochs, 1, {"--seed", "0,1,2"});
  argv.insert(argv.begin(), AMPWB_BINARY);
  const std::string log = dir.file("sweep.log");
  const pid_t running = spawn(argv, log);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!point_has_epochs(db, 0, 1) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(point_has_epochs(db, 0, 1)) << read_text(log);
  const Result cancelled = ampwb({"sweep", "cancel", "1", "--db", db});
  ASSERT_EQ(cancelled.status, 0) << cancelled.output;
  expect_contains(cancelled.output, "sweep 1 cancelled: 3 points marked cancelled");
  EXPECT_EQ(wait_exit(running), 0) << read_text(log);
  expect_contains(read_text(log), "sweep 1: 3 cancelled");
  // Said once, by the sweep, as what happened: no Ctrl-C of a `train` that nobody pressed.
  expect_contains(read_text(log), "sweep 1 was cancelled (ampwb sweep cancel, or the workbench)");
  EXPECT_EQ(read_text(log).find("interrupt received"), std::string::npos) << read_text(log);

  RunStore store(db, RunStore::Mode::ReadOnly);
  EXPECT_EQ(store.runs().size(), 1u) << "a point started after the sweep was cancelled";
  const RunRecord run = store.run(sweep_point(store, 1, 0).run_id);
  EXPECT_EQ(run.status, RunStatus::Cancelled);
  EXPECT_LT(store.epochs(run.id).size(), static_cast<size_t>(epochs)) << "the running point went on to its end";
  const Result again = ampwb({"sweep", "run", "1", "--db", db});
  EXPECT_EQ(again.status, 1);
  expect_contains(again.output, "sweep 1 is cancelled: none of its points starts again (ampwb sweep status 1 shows");
  const json status = json::parse(ampwb({"sweep", "status", "1", "--json", "--db", db}).output);
  EXPECT_TRUE(status["cancelled"].get<bool>());
  EXPECT_EQ(status["summary"]["cancelled"], 3);
  const Result listed = ampwb({"sweeps", "--db", db});  // the points say the cancellation: said once
  expect_contains(listed.output, " 3: 3 cancelled\n");
  const Result twice = ampwb({"sweep", "cancel", "1", "--db", db});
  EXPECT_EQ(twice.status, 0) << twice.output;
  expect_contains(twice.output, "sweep 1 is cancelled already");
}

// A dataset folder that is not there is said once, before anything is recorded, not as each point's failure.
TEST(SweepCli, AMissingDatasetFolderIsRefusedBeforeTheSweepIsRecorded) {
  TempDir dir("sweep_no_data");
  const std::string db = dir.file("runs.sqlite");
  const std::string gone = dir.file("moved-away");
  const Result r = ampwb({"sweep", "--data", stripes().string() + "," + gone, "--epochs", "1", "--db", db});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "cannot sweep on '" + gone + "': the dataset folder does not exist");
  EXPECT_EQ(r.output.find("point 1/"), std::string::npos) << "a point ran";
  EXPECT_FALSE(fs::exists(db)) << "a sweep was recorded";

  const std::string file = dir.file("labels.csv");
  std::ofstream(file) << "image,label\n";
  const Result not_folder = ampwb({"sweep", "--data", file, "--seed", "0,1", "--epochs", "1", "--db", db});
  EXPECT_EQ(not_folder.status, 1) << not_folder.output;
  expect_contains(not_folder.output, "cannot sweep on '" + file + "': it is a file, not a dataset folder");
  EXPECT_FALSE(fs::exists(db)) << "a sweep was recorded";
}

// A sweep whose every point ended has nothing to cancel: it stays as it ended, not shown cancelled.
TEST(SweepCli, ASweepThatEndedIsNotCancelled) {
  TempDir dir("sweep_ended");
  const std::string db = dir.file("runs.sqlite");
  RunStore store(db);
  const std::string point = R"({"values": {"seed": "0"}, "config": {}})";
  const int64_t id = create_sweep(store, "ended", R"({"grid": {"seed": [0, 1]}})", "local", {point, point});
  set_point_state(store, id, 0, SweepPointState::Finished);
  const int64_t failed = store.begin_run(TrainConfig{}, RunInfo{}, "");
  store.end_run(failed, {RunStatus::Failed, "out of memory: this run needs 9.9 GiB"}, {}, 1.0);
  set_point_run(store, id, 1, failed);
  set_point_state(store, id, 1, SweepPointState::Failed);
  const Result r = ampwb({"sweep", "cancel", std::to_string(id), "--db", db});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "has nothing left to cancel: every point has ended");
  EXPECT_FALSE(sweep(store, id).cancelled);
  EXPECT_EQ(sweep_point(store, id, 1).state, SweepPointState::Failed);
  // A failed point says why its run failed.
  expect_contains(ampwb({"sweep", "status", std::to_string(id), "--db", db}).output,
                  "failed, run " + std::to_string(failed) + ": out of memory: this run needs 9.9 GiB");
}

// A sweep point's record, {"values", "config"}, of a tiny training on `data`.
std::string tiny_point(const std::string& data) {
  TrainConfig config;
  config.data_dir = data;
  config.depth = 20;
  config.epochs = 1;
  config.batch_size = 4;
  config.threads = 2;
  config.max_steps_per_epoch = 2;
  config.data.validation_fraction = 0.25;
  return nlohmann::json{{"values", {{"seed", "0"}}}, {"config", config}}.dump();
}

// A point refused before its run began (its dataset folder gone) keeps why; --retry-failed trains it again.
TEST(SweepCli, AFailedPointSaysWhyAndRetryFailedTrainsItAgain) {
  TempDir dir("sweep_retry");
  const std::string db = dir.file("runs.sqlite"), data = dir.file("data");
  const std::string point = tiny_point(data);
  {
    RunStore store(db);
    create_sweep(store, "retried", R"({"grid": {"seed": [0]}, "timing": false})", "local", {point});
  }
  Result r = ampwb({"sweep", "run", "1", "--db", db});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "point 1/1 failed: ");
  expect_contains(r.output, data);
  expect_contains(r.output, "ampwb sweep run 1 --retry-failed trains the failed points again");
  r = ampwb({"sweep", "status", "1", "--json", "--db", db});
  expect_contains(json::parse(r.output)["points"][0].value("failure", ""), data);
  fs::create_directory_symlink(stripes(), data);
  r = ampwb({"sweep", "run", "1", "--retry-failed", "--db", db});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "point 1 failed; queued again: a new run trains it");
  RunStore store(db, RunStore::Mode::ReadOnly);
  const SweepPoint p = sweep_point(store, 1, 0);
  EXPECT_EQ(p.state, SweepPointState::Finished);
  EXPECT_EQ(point_failure(p), "");
  EXPECT_EQ(store.run(p.run_id).status, RunStatus::Finished);
  // In a folder of its own: one a failed run left its checkpoint in would be refused it.
  EXPECT_TRUE(store.run(p.run_id).config.checkpoint_dir.ends_with("-point-1-retry-1"))
      << store.run(p.run_id).config.checkpoint_dir;
}

// A copy of a store, its sweep run beside the original's, trains its points in checkpoint folders of its own, though
// both are named runs.sqlite and checkpoint into one folder: the original's points never find theirs taken.
TEST(SweepCli, EachStoreTrainsItsSweepsPointsInFoldersOfItsOwn) {
  TempDir dir("sweep_store_folders");
  nlohmann::json point = nlohmann::json::parse(tiny_point(stripes().string()));
  point["config"]["checkpoint_dir"] = dir.file("checkpoints");
  std::vector<std::string> labels;
  for (const std::string place : {"here", "there"}) {
    fs::create_directories(dir.file(place));
    const std::string db = dir.file(place + "/runs.sqlite");
    {
      RunStore store(db);
      create_sweep(store, "one", R"({"grid": {"seed": [0]}, "timing": false})", "local", {point.dump()});
    }
    ASSERT_EQ(ampwb({"sweep", "run", "1", "--db", db}).status, 0);
    const RunStore store(db, RunStore::Mode::ReadOnly);
    const fs::path folder = store.run(sweep_point(store, 1, 0).run_id).config.checkpoint_dir;
    EXPECT_EQ(folder.parent_path(), fs::path(dir.file("checkpoints")));
    const std::string name = folder.filename();
    EXPECT_TRUE(name.starts_with("sweep-runs-")) << name;
    labels.push_back(name.substr(0, name.find("-1-")));
  }
  EXPECT_NE(labels[0], labels[1]) << "two stores named runs.sqlite share their points' folders";
}

// Under Slurm a SIGTERM is the job preempted or requeued: the run ends interrupted, with a checkpoint to resume.
TEST(SweepCli, ASigtermUnderSlurmEndsTheRunInterruptedAndResumable) {
  TempDir dir("sweep_sigterm");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> argv = {"/usr/bin/env", "SLURM_JOB_ID=4242", AMPWB_BINARY};
  const std::vector<std::string> training = tiny_training(db, 60, 1);
  argv.insert(argv.end(), training.begin(), training.end());
  const std::string log = dir.file("train.log");
  const pid_t train = spawn(argv, log);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (stored_epochs(db, 1) < 1 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_GE(stored_epochs(db, 1), 1) << read_text(log);
  ::kill(train, SIGTERM);
  EXPECT_EQ(wait_exit(train), 1) << read_text(log);
  expect_contains(read_text(log), "Slurm ends job 4242 (SIGTERM)");
  {
    RunStore store(db, RunStore::Mode::ReadOnly);
    const RunRecord run = store.run(1);
    EXPECT_EQ(run.status, RunStatus::Interrupted);
    expect_contains(run.end_reason, "Slurm job 4242 ended by SIGTERM");
    EXPECT_TRUE(store.resumable(1));
  }
  const Result resumed = ampwb({"train", "--resume", "1", "--db", db});
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(stored_epochs(db, 1), 60);
}

// A Slurm sweep's status where squeue and sacct cannot run says so instead of leaving Slurm's view out.
// (Where they can: test_sweep_slurm.cpp.)
TEST(SweepCli, TheStatusOfASlurmSweepSaysWhenSlurmCannotBeAsked) {
  TempDir dir("sweep_no_squeue");
  const std::string db = dir.file("runs.sqlite");
  {
    RunStore store(db, RunStore::Mode::Create);
    const std::string point = R"({"values": {"seed": "0"}, "config": {}})";
    const int64_t id = create_sweep(store, "", R"({"grid": {"seed": [0, 1]}})", "slurm", {point, point});
    add_sweep_slurm_job(store, id, "4242");
  }
  // No Slurm commands on this PATH, whether this machine has them or not.
  const std::vector<std::string> no_slurm = {"/usr/bin/env", "PATH=" + dir.file("empty")};
  const Result text = ampwb({"sweep", "status", "1", "--db", db}, no_slurm);
  ASSERT_EQ(text.status, 0) << text.output;
  expect_contains(text.output, "  point  task  settings");
  expect_contains(text.output, "\n      2     1  seed=0 ");  // point 2 is array task 1
  expect_contains(text.output, "Slurm: cannot say how job array 4242 stands (squeue failed");
  expect_contains(text.output, "sacct failed");
  expect_contains(text.output, "the states above are the run store's");
  const json j = json::parse(ampwb({"sweep", "status", "1", "--json", "--db", db}, no_slurm).output);
  EXPECT_TRUE(j["slurm"]["source"].is_null());
  expect_contains(j["slurm"]["unavailable"].get<std::string>(), "is Slurm installed here?");
}

// Real sbatch failing as it does on a newcomer's machine, said in a user's words: a controller that does not answer
// (a slurm.conf naming a port nobody listens on), and a machine that is no Slurm client (no slurm.conf at all). Either
// way the sweep stays in the store, cancelled.
TEST(SweepCli, ASweepSlurmCannotTakeSaysWhyInAUsersWords) {
  TempDir dir("sweep_no_controller");
  const std::string db = dir.file("runs.sqlite");
  const std::string conf = dir.file("slurm.conf");
  std::ofstream(conf) << "ClusterName=nowhere\nSlurmctldHost=localhost\nSlurmctldPort=1\nMessageTimeout=2\n";
  const std::vector<std::string> argv = tiny_sweep(db, 1, 2, {"--seed", "0,1", "--on", "slurm"});
  const Result down = ampwb(argv, {"/usr/bin/env", "SLURM_CONF=" + conf});
  EXPECT_NE(down.status, 0);
  expect_contains(down.output, "sbatch failed: cannot reach Slurm's controller at the host and port slurm.conf names");
  expect_contains(down.output, "sweep 1 is recorded as cancelled");

  // Debian's slurm-wlm installs no slurm.conf, so without SLURM_CONF sbatch finds none, unless this machine was made a
  // cluster's client.
  if (fs::exists("/etc/slurm/slurm.conf")) return;
  const Result no_client = ampwb(argv, {"/usr/bin/env", "-u", "SLURM_CONF"});
  EXPECT_NE(no_client.status, 0);
  expect_contains(no_client.output, "sbatch failed: this machine is not a Slurm client: sbatch finds no slurm.conf");
  EXPECT_EQ(no_client.output.find("DNS"), std::string::npos) << no_client.output;
  expect_contains(no_client.output, "sweep 2 is recorded as cancelled");
}

// An SQLite store on a network filesystem would be written by Slurm's tasks from several nodes at once: refused before
// anything is recorded, dry run or not, with the way that works. The same store on this machine's disk is taken.
TEST(SweepCli, ASlurmSweepIntoAnSqliteFileOnANetworkFilesystemIsRefused) {
  TempDir dir("sweep_nfs");
  fs::create_directories(dir.file("home"));
  const std::string db = dir.file("home/runs.sqlite");
  const std::vector<std::string> on_nfs = {"/usr/bin/env",
                                           "AMPWB_MOUNTINFO=" + mount_table_with_nfs_at(dir, dir.file("home"))};
  for (const bool dry_run : {false, true}) {
    std::vector<std::string> argv = tiny_sweep(db, 1, 2, {"--seed", "0,1", "--on", "slurm"});
    if (dry_run) argv.push_back("--dry-run");
    const Result r = ampwb(argv, on_nfs);
    EXPECT_EQ(r.status, 1) << r.output;
    expect_contains(r.output, "the run store '" + db + "' is an SQLite file on nfs4, a network filesystem");
    expect_contains(r.output, "record the sweep into PostgreSQL");
    EXPECT_FALSE(fs::exists(db));
  }
  // A store reached through a symbolic link on this machine's disk lies where the link leads.
  RunStore(db, RunStore::Mode::Create);
  fs::create_directories(dir.file("local"));
  fs::create_symlink(db, dir.file("local/runs.sqlite"));
  const Result linked =
      ampwb(tiny_sweep(dir.file("local/runs.sqlite"), 1, 2, {"--seed", "0,1", "--on", "slurm", "--dry-run"}), on_nfs);
  EXPECT_EQ(linked.status, 1) << linked.output;
  expect_contains(linked.output, "is an SQLite file on nfs4, a network filesystem");
  fs::remove(db);
  if (const auto mount = filesystem_of(db); mount && !mount->network) {
    const Result r = ampwb(tiny_sweep(db, 1, 2, {"--seed", "0,1", "--on", "slurm", "--dry-run"}));
    EXPECT_EQ(r.status, 0) << r.output;
    expect_contains(r.output, "#SBATCH --array=0-1\n");
  }
}

TEST(SweepCli, ADryRunPrintsTheSlurmScriptAndRecordsNothing) {
  TempDir dir("sweep_dry");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> argv = tiny_sweep(db, 1, 2, {"--precision", "fp32,amp-fp16", "--seed", "0,1,2"});
  argv.insert(argv.end(), {"--on", "slurm", "--max-parallel", "2", "--partition", "gpu", "--account", "lab", "--time",
                           "1:00:00", "--dry-run"});
  const Result r = ampwb(argv);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"#SBATCH --array=0-5%2\n", "#SBATCH --requeue\n", "#SBATCH --partition=gpu\n",
                           "#SBATCH --account=lab\n", "#SBATCH --time=1:00:00\n", "sweep point --db '"})
    expect_contains(r.output, line);
  EXPECT_EQ(r.output.find("--gres"), std::string::npos) << "a CPU sweep asks for a GPU";
  expect_contains(r.output, "no sweep recorded, nothing submitted");
  EXPECT_FALSE(fs::exists(db));
  argv.insert(argv.end(), {"--device", "cuda"});
  expect_contains(ampwb(argv).output, "#SBATCH --gres=gpu:1\n");

  // A sweep file's grid and Slurm settings; a flag given beside it wins.
  const std::string file = dir.file("sweep.json");
  std::ofstream(file) << R"({"grid": {"seed": [0, 1]}, "settings": {"data": ")" << stripes().string()
                      << R"(", "depth": 20}, "slurm": {"partition": "p2", "max-parallel": 3, "time": "5:00"}})";
  const Result from_file =
      ampwb({"sweep", "--sweep-file", file, "--partition", "p1", "--on", "slurm", "--dry-run", "--db", db});
  ASSERT_EQ(from_file.status, 0) << from_file.output;
  for (const char* line : {"#SBATCH --array=0-1%3\n", "#SBATCH --partition=p1\n", "#SBATCH --time=5:00\n"})
    expect_contains(from_file.output, line);
  const Result twice = ampwb({"sweep", "--sweep-file", file, "--seed", "3", "--dry-run", "--db", db});
  EXPECT_EQ(twice.status, 1);
  expect_contains(twice.output, "--seed is given by the sweep file too");

  // FP8's margin crossed with fp32, which ignores it: the point that would train fp32's run again is left out.
  const Result repeated =
      ampwb(tiny_sweep(db, 1, 2, {"--precision", "fp32,amp-fp8", "--fp8-margin", "0,2", "--dry-run"}));
  ASSERT_EQ(repeated.status, 0) << repeated.output;
  expect_contains(repeated.output, "1 of the grid's 4 combinations would train the same configuration as another");
  expect_contains(repeated.output, "left out: precision=fp32 fp8-margin=2 (as precision=fp32 fp8-margin=0)");
  expect_contains(repeated.output, "point 3/3: precision=amp-fp8 fp8-margin=2");
  // Run, the sweep has 3 points, and its record says which combination has none.
  const std::string trained = dir.file("left_out.sqlite");
  std::vector<std::string> argv_run =
      tiny_sweep(trained, 1, 1, {"--precision", "fp32,amp-fp8", "--fp8-margin", "0,2", "--no-timing"});
  ASSERT_EQ(ampwb(argv_run).status, 0);
  const json status = json::parse(ampwb({"sweep", "status", "1", "--json", "--db", trained}).output);
  EXPECT_EQ(status["points"].size(), 3u);
  EXPECT_EQ(status["grid"]["left_out"], json::array({"precision=fp32 fp8-margin=2 (as precision=fp32 fp8-margin=0)"}));
}

}  // namespace
}  // namespace ampwb
