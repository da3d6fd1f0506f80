// The run store through the real ampwb binary on real image folders, when things go wrong: a training killed with
// SIGKILL and resumed, SIGTERM and SIGINT, trainings and edits at the same time on one file, damaged, foreign and
// read-only files, a full disk, and names from older stores. (The commands' normal use: test_store_cli_commands.cpp.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmath>

#include <csignal>
#include <regex>
#include <sstream>

#include "cjk_columns.h"
#include "store/final_weights.h"
#include "store/sweep_record.h"
#include "test_cli_util.h"

namespace ampwb {
namespace {
using namespace cli_test;

// Waits, at most 90 s, until run 1 of the store `db` has `count` epochs stored.
void wait_for_epochs(const std::string& db, int64_t count) {
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  while (stored_epochs(db, 1) < count && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

TEST(StoreCli, SigkillMidEpochLeavesAnIntactStoreWithTheRunInterrupted) {
  TempDir dir("sigkill");
  const std::string db = dir.file("runs.sqlite");
  const std::string log = dir.file("train.log");
  std::vector<std::string> argv = tiny_training(db, 200, 6);
  argv.insert(argv.begin(), AMPWB_BINARY);
  const pid_t child = spawn(argv, log);
  wait_for_epochs(db, 2);
  ASSERT_GE(stored_epochs(db, 1), 2) << read_text(log);
  // Half an epoch later: inside epoch 3 (or a later one), never between them for long.
  const double epoch_seconds = RunStore(db, RunStore::Mode::ReadOnly).epochs(1).back().seconds;
  std::this_thread::sleep_for(std::chrono::duration<double>(epoch_seconds / 2));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  EXPECT_EQ(wait_exit(child), 128 + SIGKILL);
  EXPECT_EQ(json::parse(ampwb({"runs", "--json", "--db", db}).output)[0]["status"], "interrupted");

  RunStore store(db, RunStore::Mode::Existing);
  EXPECT_EQ(store.integrity_check(), "ok");
  const RunRecord r = store.run(1);
  EXPECT_EQ(r.status, RunStatus::Interrupted);
  const std::vector<EpochReport> epochs = store.epochs(1);
  ASSERT_GE(epochs.size(), 2u);
  EXPECT_LT(epochs.size(), 200u);
  for (size_t i = 0; i < epochs.size(); ++i) {
    EXPECT_EQ(epochs[i].epoch, static_cast<int>(i) + 1);
    EXPECT_GT(epochs[i].seconds, 0);
    EXPECT_GT(epochs[i].train_loss, 0);
  }
  // Every epoch the process printed was stored before it was printed.
  const std::string out = read_text(log);
  size_t printed = 0;
  for (size_t at = 0; (at = out.find("\nepoch ", at)) != std::string::npos; ++at) ++printed;
  EXPECT_GE(printed, 2u);
  EXPECT_GE(epochs.size(), printed);
  // Steps of the completed epochs are all there.
  const int64_t per_epoch = r.info.steps_per_epoch;
  const std::vector<StepReport> steps = store.steps(1);
  EXPECT_GE(static_cast<int64_t>(steps.size()), per_epoch * static_cast<int64_t>(epochs.size()));
}

TEST(StoreCli, AKilledRunResumesFromItsCheckpointAsTheSameRunAndCurve) {
  TempDir dir("resume");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> argv = tiny_training(db, 12, 4);
  argv.insert(argv.end(), {"--checkpoint-dir", dir.file("checkpoints"), "--name", "resumable"});
  argv.insert(argv.begin(), AMPWB_BINARY);
  const pid_t child = spawn(argv, dir.file("train.log"));
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  const auto resumes_at = [&] {  // the epoch the latest checkpoint resumes at
    try {
      const std::vector<CheckpointInfo> saved = RunStore(db, RunStore::Mode::ReadOnly).checkpoints(1);
      return saved.empty() ? 0 : saved.back().resume_epoch;
    } catch (const StoreError&) {
      return 0;
    }
  };
  while (resumes_at() < 4 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  EXPECT_EQ(wait_exit(child), 128 + SIGKILL) << read_text(dir.file("train.log"));
  ASSERT_GE(resumes_at(), 4) << read_text(dir.file("train.log"));
  ASSERT_LE(resumes_at(), 12) << "killed too late to resume anything";
  // Written to a file, an epoch's line says the run's time left.
  const std::string log = read_text(dir.file("train.log"));
  const size_t first_epoch = log.find("epoch 1/12  train loss ");
  ASSERT_NE(first_epoch, std::string::npos) << log;
  expect_contains(log.substr(first_epoch, log.find('\n', first_epoch) - first_epoch), "  ETA ");

  // Settings that would change the curves are refused by name, also where a flag names the default value (fp32,
  // depth 18 here) or repeats the stored one; the stored configuration is used.
  for (const std::vector<std::string>& flag :
       {std::vector<std::string>{"--lr", "0.5"}, {"--precision", "fp32"}, {"--depth", "18"}, {"--epochs", "12"}}) {
    std::vector<std::string> line = {"train", "--resume", "resumable", "--db", db};
    line.insert(line.end(), flag.begin(), flag.end());
    const Result refused = ampwb(line);
    EXPECT_EQ(refused.status, 1) << flag[0];
    expect_contains(refused.output,
                    flag[0] +
                        " cannot be given (only --data, --threads, --cache-mb, --keep-checkpoint, --processes and "
                        "--collective-timeout can)");
  }
  // A new run cannot take the interrupted run's name: `--resume resumable` must keep meaning one run.
  std::vector<std::string> taken = tiny_training(db, 1, 1);
  taken.insert(taken.end(), {"--name", "resumable"});
  Result r = ampwb(taken);
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "run 1 is already named 'resumable'");
  r = ampwb({"train", "--resume", "resumable", "--json", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const json summary = json::parse(r.output);
  EXPECT_EQ(summary["run_id"], 1);
  EXPECT_EQ(summary["status"], "finished");
  r = ampwb({"train", "--resume", "1", "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "finished: there is nothing to resume");

  // The same run again, uninterrupted, for the reference curve.
  std::vector<std::string> reference = tiny_training(db, 12, 4);
  reference.insert(reference.end(), {"--checkpoint-dir", dir.file("reference")});
  ASSERT_EQ(ampwb(reference).status, 0);

  RunStore store(db, RunStore::Mode::Existing);
  ASSERT_EQ(store.runs().size(), 2u);
  const RunRecord resumed = store.run(1);
  EXPECT_EQ(resumed.status, RunStatus::Finished);
  const std::vector<EpochReport> epochs = store.epochs(1), expected = store.epochs(2);
  ASSERT_EQ(epochs.size(), 12u);
  const std::vector<StepReport> steps = store.steps(1), expected_steps = store.steps(2);
  ASSERT_EQ(steps.size(), 48u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].step, static_cast<int64_t>(i));
    EXPECT_EQ(steps[i].loss, expected_steps[i].loss) << "step " << i;
  }
  for (size_t i = 0; i < epochs.size(); ++i) {
    EXPECT_EQ(epochs[i].epoch, static_cast<int>(i) + 1);
    EXPECT_EQ(epochs[i].train_loss, expected[i].train_loss) << "epoch " << i + 1;
    EXPECT_EQ(epochs[i].validation_accuracy, expected[i].validation_accuracy) << "epoch " << i + 1;
  }
}

// SIGHUP is what a closed terminal or a dropped SSH session sends.
TEST(StoreCli, SigtermSighupAndSigintStopAfterTheStepWithACheckpointAndExit143_129And130) {
  for (const int signal : {SIGTERM, SIGHUP, SIGINT}) {
    TempDir dir("signal");
    const std::string db = dir.file("runs.sqlite");
    std::vector<std::string> argv = tiny_training(db, 40, 4);  // checkpoints by default, beside the store
    argv.insert(argv.begin(), AMPWB_BINARY);
    const pid_t child = spawn(argv, dir.file("train.log"));
    wait_for_epochs(db, 2);
    ASSERT_EQ(::kill(child, signal), 0);
    EXPECT_EQ(wait_exit(child), 128 + signal) << read_text(dir.file("train.log"));
    const std::string log = read_text(dir.file("train.log"));
    expect_contains(log, "stopping after this step");
    // Its last line and `show` say "stopped" once, and by what: "stopped by SIGTERM at epoch 3 …", not
    // "stopped: stopped by …"; Ctrl-C's SIGINT is the user's.
    const std::string by = signal == SIGTERM  ? "stopped by SIGTERM at epoch "
                           : signal == SIGHUP ? "stopped as its terminal closed (SIGHUP) at epoch "
                                              : "stopped by the user at epoch ";
    expect_contains(log, "(resnet20-fp32-1) " + by);
    expect_contains(ampwb({"show", "1", "--db", db}).output, "  status     " + by);
    EXPECT_EQ(log.find("stopped: stopped"), std::string::npos) << log;
    {
      RunStore store(db, RunStore::Mode::ReadOnly);
      EXPECT_EQ(store.run(1).status, RunStatus::Cancelled);
      const std::vector<CheckpointInfo> saved = store.checkpoints(1);
      ASSERT_FALSE(saved.empty()) << "a stopped run is resumable";
      EXPECT_NE(saved.back().path.find(dir.file("checkpoints")), std::string::npos) << saved.back().path;
      EXPECT_TRUE(fs::exists(saved.back().path));
    }
    json listed = json::parse(ampwb({"runs", "--json", "--db", db}).output);
    EXPECT_TRUE(listed[0]["resumable"].get<bool>()) << "ampwb runs says which runs can be resumed";
    expect_contains(ampwb({"runs", "--db", db}).output, "RESUME");
    const Result resumed = ampwb({"train", "--resume", "1", "--db", db});
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    listed = json::parse(ampwb({"runs", "--json", "--db", db}).output);
    EXPECT_FALSE(listed[0]["resumable"].get<bool>()) << "a finished run is not";
    RunStore store(db, RunStore::Mode::ReadOnly);
    EXPECT_EQ(store.run(1).status, RunStatus::Finished);
    EXPECT_EQ(store.epochs(1).size(), 40u) << "the curve continues to the last epoch";
    // Finished after a resume, the run's checkpoints beside the store go too, and `show` says so.
    EXPECT_FALSE(fs::exists(fs::path(store.checkpoints(1).back().path).parent_path()));
    const std::string shown = ampwb({"show", "1", "--db", db}).output;
    expect_contains(shown, "(removed)");
    EXPECT_EQ(shown.find("resumes the run"), std::string::npos) << shown;
    EXPECT_FALSE(json::parse(ampwb({"show", "1", "--json", "--db", db}).output)["checkpoints"][0]["on_disk"]);
  }
}

// Under nohup (SIGHUP ignored when it starts) a run outlives its terminal: the hang-up neither stops nor kills it.
TEST(StoreCli, ARunStartedUnderNohupTrainsOnThroughAHangUp) {
  TempDir dir("nohup");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> argv = {"/bin/sh", "-c", "trap '' HUP; exec \"$@\"", "sh", AMPWB_BINARY};
  for (const std::string& arg : tiny_training(db, 6, 4)) argv.push_back(arg);
  const pid_t child = spawn(argv, dir.file("train.log"));
  wait_for_epochs(db, 1);
  ASSERT_EQ(::kill(child, SIGHUP), 0);
  EXPECT_EQ(wait_exit(child), 0) << read_text(dir.file("train.log"));
  EXPECT_EQ(RunStore(db, RunStore::Mode::ReadOnly).run(1).status, RunStatus::Finished);
}

// Images removed from the data folder while a run trains (a sync tool, a colleague tidying up) are skipped as
// corrupt ones are at the start: the run goes on and its notes name them; past a tenth of the data (8 of these 80
// images) it stops, resumable, saying why. --cache-mb 0 makes every epoch read the files again.
TEST(StoreCli, ImagesThatVanishDuringARunAreSkippedAndNotedUntilATenthIsGone) {
  for (const int removed : {3, 16}) {
    TempDir dir("vanishing");
    const std::string db = dir.file("runs.sqlite");
    fs::copy(stripes(), dir.file("data"), fs::copy_options::recursive);
    std::vector<std::string> argv = tiny_training(db, 8);
    argv[2] = dir.file("data");
    argv.insert(argv.end(), {"--cache-mb", "0"});
    argv.insert(argv.begin(), AMPWB_BINARY);
    const pid_t child = spawn(argv, dir.file("train.log"));
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (stored_epochs(db, 1) < 1 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir.file("data")))
      if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    ASSERT_EQ(files.size(), 80u);
    std::vector<std::string> gone;
    for (int i = 0; i < removed; ++i) {
      gone.push_back(files[static_cast<size_t>(i) * 5].string());
      if (i % 2)
        fs::remove(gone.back());
      else
        fs::resize_file(gone.back(), fs::file_size(gone.back()) / 2);  // shrunk: truncated mid-write
    }
    const int status = wait_exit(child);
    const std::string log = read_text(dir.file("train.log"));
    const RunStore store(db, RunStore::Mode::ReadOnly);
    const RunRecord run = store.run(1);
    std::string notes;
    for (const std::string& note : run.info.notes) notes += note + "\n";
    expect_contains(notes, "vanished, shrank or changed since the dataset was read");
    expect_contains(ampwb({"show", "1", "--db", db}).output, "  note       epoch ");
    expect_contains(log, "note: epoch ");
    EXPECT_EQ(log.find("cannot decode"), std::string::npos) << log;
    if (removed == 3) {
      EXPECT_EQ(status, 0) << log;
      EXPECT_EQ(run.status, RunStatus::Finished) << run.end_reason;
      EXPECT_EQ(store.epochs(1).size(), 8u) << "the run goes on";
      expect_contains(notes, "(3 of 80 in all; the run stops past 8)");
      for (const std::string& file : gone) expect_contains(notes, "'" + file + "' (");
      expect_contains(notes, "(unreadable (No such file or directory))");
      expect_contains(notes, "(truncated PNG (");
    } else {
      EXPECT_EQ(status, 1) << log;
      EXPECT_EQ(run.status, RunStatus::Failed);
      expect_contains(run.end_reason, "of the dataset's 80 images vanished, shrank or changed");
      expect_contains(run.end_reason, "moved, unmounted or rewritten? Put it back and resume the run; resumable from");
      expect_contains(log, "moved, unmounted or rewritten?");
      EXPECT_FALSE(store.checkpoints(1).empty());
    }
  }
}

// A dataset folder moved since the run: the resume says so and how to go on, and goes on with --data.
TEST(StoreCli, AResumeWhoseDataFolderMovedSaysHowToGoOn) {
  TempDir dir("moved_data");
  const std::string db = dir.file("runs.sqlite");
  fs::copy(stripes(), dir.file("data"), fs::copy_options::recursive);
  std::vector<std::string> argv = tiny_training(db, 2, 2);
  argv[2] = dir.file("data");
  argv.insert(argv.end(), {"--checkpoint-dir", dir.file("checkpoints")});
  ASSERT_EQ(ampwb(argv).status, 0);
  {  // as if killed after its last checkpoint
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(handle, "UPDATE runs SET status = 'interrupted' WHERE id = 1", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(handle);
  }
  fs::rename(dir.file("data"), dir.file("moved"));
  Result r = ampwb({"train", "--resume", "1", "--db", db});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "run 1 trained on the dataset folder '" + dir.file("data") +
                                "', which is not there now: if it moved, resume with --data FOLDER");
  r = ampwb({"train", "--resume", "1", "--db", db, "--data", dir.file("moved")});
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(StoreCli, ARunKeepsItsDataFolderAbsoluteAndSaysWhatItPassedOverAndWhatItDidNotMeasure) {
  TempDir dir("data_notes");
  const std::string db = dir.file("runs.sqlite");
  fs::copy(stripes(), dir.file("data"), fs::copy_options::recursive);
  const fs::path class_folder = *fs::directory_iterator(dir.file("data"));
  std::ofstream(class_folder / "notes.jpg") << "not a picture\n";
  // Given relative to the working directory, with no validation split.
  std::vector<std::string> argv = tiny_training(db, 1, 1);
  argv[2] = "data";
  argv.insert(argv.end(), {"--val-fraction", "0", "--name", "relative"});
  const Result r = ampwb(argv, {"/usr/bin/env", "-C", dir.path().string()});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "passed over 1 file that cannot be trained on (ampwb dataset inspect " + dir.file("data"));
  expect_contains(r.output, "no validation images: validation is not measured");
  EXPECT_EQ(r.output.find("val loss"), std::string::npos) << r.output;
  const RunRecord run = RunStore(db, RunStore::Mode::ReadOnly).run(1);
  EXPECT_EQ(run.config.data_dir, dir.file("data"));
  EXPECT_TRUE(std::isnan(RunStore(db, RunStore::Mode::ReadOnly).epochs(1).at(0).validation_accuracy))
      << "not measured is NaN (SQLite NULL), not 0%";
  // `dataset inspect` shows the fingerprint the run recorded for the folder.
  const Result inspected = ampwb({"dataset", "inspect", dir.file("data"), "--json"});
  ASSERT_EQ(inspected.status, 0) << inspected.output;
  EXPECT_EQ(json::parse(inspected.output)["fingerprint"], run.dataset_fingerprint);
  expect_contains(ampwb({"show", "relative", "--db", db}).output, "none (the run had no validation images)");
  EXPECT_EQ(r.output.find("is not used"), std::string::npos) << "a fraction the folder's split took";
  EXPECT_EQ(r.output.find("accuracy is not reported"), std::string::npos) << "no validation: no top-k to speak of";

  // Data with a split of its own: a validation fraction asked for is said to be unused, not silently passed over.
  fs::create_directories(dir.file("split"));
  fs::copy(stripes(), dir.file("split/train"), fs::copy_options::recursive);
  fs::copy(stripes(), dir.file("split/val"), fs::copy_options::recursive);
  argv = tiny_training(db, 1, 1);
  argv[2] = dir.file("split");
  argv.insert(argv.end(), {"--val-fraction", "0.5"});
  const Result own_split = ampwb(argv);
  ASSERT_EQ(own_split.status, 0) << own_split.output;
  expect_contains(own_split.output,
                  "the validation fraction (0.5) is not used: the data has a validation split of its own (val/");
}

TEST(StoreCli, AReaderThatGoesAwayStopsTheRunResumablyWithExit141) {
  TempDir dir("sigpipe");
  const std::string db = dir.file("runs.sqlite");
  std::string line = "\"$0\"";
  for (const std::string& arg : tiny_training(db, 40, 4)) line += " '" + arg + "'";
  // `ampwb train | head -n 1`: head leaves after the first line, and a later line finds the pipe closed.
  const Result r = run({"/bin/bash", "-c", line + " | head -n 1; echo \"status ${PIPESTATUS[0]}\"", AMPWB_BINARY});
  expect_contains(r.output, "status 141");
  expect_contains(r.output, "the output's reader is gone: stopping after this step, resumable");
  RunStore store(db, RunStore::Mode::ReadOnly);
  EXPECT_EQ(store.run(1).status, RunStatus::Cancelled);
  EXPECT_TRUE(store.resumable(1)) << "stopped with a checkpoint, not killed";
  // Listed and shown as the workbench shows it, "stopped", and found by that word or by the stored one.
  for (const std::string word : {"stopped", "cancelled"}) {
    const Result listed = ampwb({"runs", "--status", word, "--db", db});
    ASSERT_EQ(listed.status, 0) << listed.output;
    expect_contains(listed.output, " stopped ");
  }
  expect_contains(ampwb({"show", "1", "--db", db}).output,
                  "  status     stopped as its output's reader went away (SIGPIPE) at epoch ");
  expect_contains(ampwb({"runs", "--status", "finished", "--db", db}).output, "no runs");
}

TEST(StoreCli, CheckpointsByDefaultAreRemovedWhenTheRunFinishesUnlessKept) {
  TempDir dir("default_checkpoints");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> argv = tiny_training(db, 2, 2);
  const Result removed = ampwb(argv);
  ASSERT_EQ(removed.status, 0);
  EXPECT_TRUE(!fs::exists(dir.file("checkpoints")) || fs::is_empty(dir.file("checkpoints")))
      << "a finished run's checkpoints are only disk space";
  // The checkpoint lines named a file that is gone now: the last line says so.
  expect_contains(removed.output, "checkpoint: end of epoch 2: ");
  expect_contains(removed.output, " finished, its checkpoint removed (--keep-checkpoint keeps it); ampwb show 1\n");
  argv.push_back("--keep-checkpoint");
  const Result kept_output = ampwb(argv);
  ASSERT_EQ(kept_output.status, 0);
  EXPECT_EQ(kept_output.output.find("checkpoint removed"), std::string::npos) << kept_output.output;
  const std::vector<CheckpointInfo> kept = RunStore(db, RunStore::Mode::ReadOnly).checkpoints(2);
  ASSERT_FALSE(kept.empty());
  EXPECT_TRUE(fs::exists(kept.back().path));
  EXPECT_TRUE(RunStore(db, RunStore::Mode::ReadOnly).run(2).config.keep_checkpoints) << "a resume keeps them too";
  argv.back() = "--no-checkpoint";
  ASSERT_EQ(ampwb(argv).status, 0);
  EXPECT_TRUE(RunStore(db, RunStore::Mode::ReadOnly).checkpoints(3).empty());
  // A run that fails before its first checkpoint (a static scale FP16 overflows at once) leaves no folder behind.
  const std::string store = dir.file("failing.sqlite");
  std::vector<std::string> failing = tiny_training(store, 1);
  failing.insert(failing.end(), {"--precision", "amp-fp16", "--loss-scale", "static:1e9"});
  const Result failed = ampwb(failing);
  ASSERT_EQ(failed.status, 1) << failed.output;
  EXPECT_EQ(RunStore(store, RunStore::Mode::ReadOnly).run(1).status, RunStatus::Failed);
  EXPECT_TRUE(RunStore(store, RunStore::Mode::ReadOnly).checkpoints(1).empty());
  const fs::path folder = RunStore(store, RunStore::Mode::ReadOnly).run(1).config.checkpoint_dir;
  EXPECT_FALSE(fs::exists(folder)) << folder << " holds nothing a resume could use";
}

TEST(StoreCli, ADamagedStoreIsRefusedForWritingAndStoreCheckReportsIt) {
  TempDir dir("damaged");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 3, 3)).status, 0);
  Result r = ampwb({"store", "check", "--db", db});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "is whole");
  // Cut short, damaged where SQLite lists its tables: too damaged for SQLite to copy page by page, so the copy the
  // advice asks for is the file itself.
  const std::string cut = dir.file("cut.sqlite"), cut_copy = dir.file("cut-copy.sqlite");
  fs::copy_file(db, cut);
  fs::resize_file(cut, 40000);
  r = ampwb({"runs", "--db", cut});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "is damaged");
  r = ampwb({"store", "backup", "--db", cut, cut_copy});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "backed up the damaged run store '" + cut + "' to '" + cut_copy + "' file for file");
  EXPECT_EQ(read_text(cut_copy), read_text(cut));
  // An empty file, writable, is not a store yet: said so, without calling it read-only.
  const std::string empty = dir.file("empty.sqlite");
  std::ofstream{empty};
  r = ampwb({"store", "check", "--db", empty});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "'" + empty + "' is an empty file, not yet a run store: there is nothing in it to read");
  r = ampwb({"runs", "--db", empty});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "no runs recorded yet (an empty file, not yet a run store: " + empty + ")");
  EXPECT_EQ(fs::file_size(empty), 0u) << "listing no runs made a store of the file";
  {  // scribble over the cell pointers of pages 3 to 8 (the runs table's among them)
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    for (int page = 3; page <= 8; ++page) {
      f.seekp((page - 1) * 4096 + 8);
      f.write(std::string(64, '\xff').data(), 64);
    }
  }
  const std::string damaged_bytes = read_text(db);
  r = ampwb({"store", "check", "--db", db});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "is damaged");
  expect_contains(r.output, "keep a copy (ampwb store backup --db '" + db + "' FILE)");
  expect_contains(r.output, "(ampwb store recover --db '" + db + "' NEW.sqlite)");
  // The copy the advice asks for is made, damage and all, and said to be so.
  r = ampwb({"store", "backup", "--db", db, dir.file("copy.sqlite")});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "backed up the damaged run store '" + db + "' to '" + dir.file("copy.sqlite") + "'");
  EXPECT_EQ(fs::file_size(dir.file("copy.sqlite")), damaged_bytes.size());
  r = ampwb(tiny_training(db, 1, 1));
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "the run store '" + db + "' is damaged");
  expect_contains(r.output, "ampwb store backup FILE");
  EXPECT_EQ(r.output.find("epoch 1/1"), std::string::npos) << "refused before training";
  EXPECT_EQ(read_text(db), damaged_bytes) << "nothing was written into the damaged store";
  // A command that only reads reads it as it is, saying what is wrong with it, rather than refusing it as writers do.
  r = ampwb({"runs", "--db", db});
  expect_contains(r.output, "ampwb runs: warning: the run store '" + db + "' is damaged");
  expect_contains(r.output, "ampwb runs: reading it as it is: the records on its damaged pages are missing or refused");
  EXPECT_EQ(read_text(db), damaged_bytes);
  // Recovering it reads the damaged file only. (What comes back of pages whose cell pointers point anywhere depends
  // on where the layout put the run: the store below is damaged by whole pages.)
  r = ampwb({"store", "recover", "--db", db, dir.file("nothing.sqlite")});
  EXPECT_TRUE(r.status == 0 || r.status == 1) << r.output;
  expect_contains(r.output, "recovered ");
  EXPECT_EQ(read_text(db), damaged_bytes) << "recovery only reads the damaged store";

  // The way out the advice names, on a store that lost its last page of runs: the others, in a new store that opens
  // and takes new runs, the lost runs named and their ids not given again.
  const std::string three = dir.file("three.sqlite"), recovered = dir.file("recovered.sqlite");
  for (int run = 0; run < 3; ++run) ASSERT_EQ(ampwb(tiny_training(three, 1, 1)).status, 0);
  int64_t kept = 0;  // the runs before the damaged page
  const std::string every_run_lost = dir.file("every-run-lost.sqlite");
  const auto scribble = [](const std::string& file, int64_t page) {  // the page's header: unreadable as a whole
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((page - 1) * 4096);
    f.write(std::string(12, '\xff').data(), 12);
  };
  {
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(three.c_str(), &handle), SQLITE_OK);
    sqlite3_stmt* page = nullptr;  // the b-tree pages holding the runs table's rows, in key order
    ASSERT_EQ(sqlite3_prepare_v2(
                  handle, "SELECT pageno, ncell FROM dbstat WHERE name = 'runs' AND pagetype = 'leaf' ORDER BY path",
                  -1, &page, nullptr),
              SQLITE_OK);
    std::vector<std::pair<int64_t, int64_t>> pages;
    while (sqlite3_step(page) == SQLITE_ROW)
      pages.emplace_back(sqlite3_column_int64(page, 0), sqlite3_column_int64(page, 1));
    sqlite3_finalize(page);
    sqlite3_close(handle);
    ASSERT_GE(pages.size(), 2u) << "a run's row is kilobytes of settings: a page holds one or two";
    kept = 3 - pages.back().second;
    fs::copy_file(three, every_run_lost);
    for (const auto& page : pages) scribble(every_run_lost, page.first);  // every page of runs, in the copy
    scribble(three, pages.back().first);                                  // the last one, in the store
  }
  r = ampwb({"store", "recover", "--db", every_run_lost, dir.file("none.sqlite")});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "could not be read:\n  runs: every run\n");
  expect_contains(r.output, "no run could be read: the new store holds none\n");
  r = ampwb({"store", "recover", "--db", three, recovered});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "recovering what is readable of '" + three + "' into '" + recovered + "'");
  expect_contains(r.output, "recovered " + std::to_string(kept) + " run");
  expect_contains(r.output, "could not be read:\n  runs: runs after run " + std::to_string(kept) + "\n");
  expect_contains(r.output, "read, but their run or sweep was lost:\n  checkpoints: ");
  expect_contains(r.output, "look at it with ampwb runs --db '" + recovered + "'");
  EXPECT_EQ(ampwb({"store", "check", "--db", recovered}).status, 0);
  const Result listed = ampwb({"runs", "--json", "--db", recovered});
  ASSERT_EQ(listed.status, 0) << listed.output;
  std::vector<int64_t> ids, expected_ids;
  for (const json& run : json::parse(listed.output)) ids.push_back(run["id"].get<int64_t>());
  for (int64_t id = 1; id <= kept; ++id) expected_ids.push_back(id);
  EXPECT_EQ(ids, expected_ids);
  ASSERT_EQ(ampwb(tiny_training(recovered, 1, 1)).status, 0);
  EXPECT_EQ(RunStore(recovered, RunStore::Mode::ReadOnly).runs().back().id, 4) << "a lost run's id is not given again";
  r = ampwb({"store", "recover", "--db", three, recovered});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "'" + recovered + "' exists: name a new file for the recovered store");
  // No store, or a file that is not one: said so, without advice to recover what was never a store.
  r = ampwb({"store", "check", "--db", dir.file("missing.sqlite")});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "no run store at '" + dir.file("missing.sqlite") + "'");
  std::ofstream(dir.file("notes.txt")) << "not a database\n";
  r = ampwb({"store", "check", "--db", dir.file("notes.txt")});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "is not a run store (not an SQLite database)");
  EXPECT_EQ(r.output.find("store recover"), std::string::npos) << r.output;
  // A store whose header was zeroed is not called another kind of file: what is missing is said.
  const std::string zeroed = dir.file("zeroed.sqlite");
  { RunStore store(zeroed); }
  {
    std::fstream f(zeroed, std::ios::in | std::ios::out | std::ios::binary);
    f.write(std::string(100, '\0').data(), 100);
  }
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {"store", "check", "--db", zeroed}, {"store", "recover", "--db", zeroed, dir.file("back.sqlite")}}) {
    r = ampwb(command);
    EXPECT_EQ(r.status, 1) << r.output;
    expect_contains(r.output, "'" + zeroed +
                                  "' cannot be read: its first 100 bytes, where an SQLite database keeps "
                                  "its header, are zeros");
  }
  // A whole store of a newer ampwb, and another program's database, are not damaged: said as they are.
  const std::string newer = dir.file("newer.sqlite"), foreign = dir.file("foreign.sqlite");
  { RunStore store(newer); }
  for (const auto& [file, sql] :
       {std::pair{newer, "PRAGMA user_version = 99"},
        std::pair{foreign, "CREATE TABLE notes(text TEXT); INSERT INTO notes VALUES ('x')"}}) {
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &handle), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(handle, sql, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(handle);
    r = ampwb({"store", "check", "--db", file});
    EXPECT_EQ(r.status, 1) << r.output;
    expect_contains(r.output, file == newer ? "newer than this ampwb" : "an SQLite database of another application");
    EXPECT_EQ(r.output.find("is damaged"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("store recover"), std::string::npos) << r.output;
  }
}

// A checkpoint folder that cannot be written fails the run before it starts, not when its first epoch ends, and
// leaves no failed run in the store.
TEST(StoreCli, AnUnwritableCheckpointFolderIsRefusedBeforeTheRunIsStored) {
  TempDir dir("checkpoint-folder");
  const std::string db = dir.file("runs.sqlite"), inside_a_file = dir.file("a-file") + "/checkpoints";
  std::ofstream(dir.file("a-file")) << "not a folder\n";
  std::vector<std::string> args = tiny_training(db, 1, 2);
  args.insert(args.end(), {"--checkpoint-dir", inside_a_file});
  const Result r = ampwb(args);
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "cannot write checkpoints to " + inside_a_file);
  EXPECT_EQ(r.output.find("epoch 1/1"), std::string::npos) << "refused before training: " << r.output;
  EXPECT_TRUE(RunStore(db, RunStore::Mode::Existing).runs().empty());
}

// A resume that passes over a damaged checkpoint for the previous one says so in the run's stored notes, beside those
// its first process wrote.
TEST(StoreCli, AResumeFromThePreviousCheckpointIsInTheRunsNotes) {
  TempDir dir("resume_notes");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> args = tiny_training(db, 2, 2);
  args.push_back("--keep-checkpoint");
  ASSERT_EQ(ampwb(args).status, 0);
  const std::vector<std::string> first_notes = RunStore(db, RunStore::Mode::ReadOnly).run(1).info.notes;
  {  // as if killed after its last epoch was recorded: interrupted, its checkpoints kept
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(handle, "UPDATE runs SET status = 'interrupted'", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(handle);
  }
  const std::string checkpoint = RunStore(db, RunStore::Mode::ReadOnly).checkpoints(1).back().path;
  {
    std::fstream f(checkpoint, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(checkpoint) / 2));
    f.put('\x5a');
  }
  const Result resumed = ampwb({"train", "--resume", "1", "--db", db});
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  const std::vector<std::string> notes = RunStore(db, RunStore::Mode::ReadOnly).run(1).info.notes;
  ASSERT_EQ(notes.size(), first_notes.size() + 1) << resumed.output;
  EXPECT_TRUE(std::equal(first_notes.begin(), first_notes.end(), notes.begin()));
  expect_contains(notes.back(), "is damaged");
  expect_contains(notes.back(), "previous checkpoint");
}

// A folder holds one run's checkpoints: a new run is refused one that holds those of a run that can still resume
// from them (a finished run's are only overwritten), and a configuration copied from a stored run trains with a
// folder of its own, leaving that run's alone.
TEST(StoreCli, ARunIsRefusedAnotherRunsCheckpointFolder) {
  TempDir dir("shared-checkpoints");
  const std::string db = dir.file("runs.sqlite"), folder = dir.file("mine");
  std::vector<std::string> args = tiny_training(db, 1, 2);
  args.insert(args.end(), {"--checkpoint-dir", folder});
  ASSERT_EQ(ampwb(args).status, 0);  // a folder of the user's: kept
  ASSERT_EQ(ampwb(args).status, 0) << "run 1 finished: its checkpoint is only disk space";
  {  // run 2 as if killed after its checkpoint: resumable from the folder
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(handle, "UPDATE runs SET status = 'interrupted' WHERE id = 2", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(handle);
  }
  const std::string kept = read_text(folder + "/checkpoint.ampwb");
  const Result again = ampwb(args);
  EXPECT_EQ(again.status, 1) << again.output;
  expect_contains(again.output, "--checkpoint-dir: the checkpoint folder " + folder + " holds the checkpoint run 2 (");
  expect_contains(again.output, ") resumes from: give this run a folder of its own");
  EXPECT_EQ(read_text(folder + "/checkpoint.ampwb"), kept);
  EXPECT_EQ(RunStore(db, RunStore::Mode::Existing).runs().size(), 2u);
  ASSERT_EQ(ampwb({"train", "--resume", "2", "--db", db}).status, 0) << "run 2 resumes from it";

  std::vector<std::string> kept_run = tiny_training(db, 1, 2);
  kept_run.push_back("--keep-checkpoint");  // run 3, its checkpoint in a folder beside the store
  ASSERT_EQ(ampwb(kept_run).status, 0);
  const json config = json::parse(ampwb({"show", "3", "--json", "--db", db}).output)["config"];
  const std::string own = config["checkpoint_dir"];
  std::ofstream(dir.file("config.json")) << config.dump();
  const Result copied = ampwb({"train", "--config", dir.file("config.json"), "--db", db});
  ASSERT_EQ(copied.status, 0) << copied.output;
  RunStore store(db, RunStore::Mode::ReadOnly);
  EXPECT_NE(store.run(4).config.checkpoint_dir, own);
  EXPECT_TRUE(fs::exists(own + "/checkpoint.ampwb")) << "run 3's checkpoint is gone";
}

// One checkpoint folder, two writers: a run of another store is refused the folder while a run trains into it, and a
// run whose folder another process wrote since (here a backup of the store that resumed the same run) is refused its
// resume, rather than taking on the other's training and being recorded finished with the wrong curve.
TEST(StoreCli, ACheckpointFolderHasOneWriterAndAResumeRefusesACheckpointWrittenSince) {
  TempDir dir("one-writer");
  // The folder where the store keeps the folders it makes itself, which a refused run must not take for its own.
  const std::string db = dir.file("runs.sqlite"), folder = dir.file("checkpoints/shared");
  std::vector<std::string> argv = tiny_training(db, 40, 4);
  argv.insert(argv.end(), {"--checkpoint-dir", folder});
  argv.insert(argv.begin(), AMPWB_BINARY);
  const pid_t child = spawn(argv, dir.file("train.log"));
  wait_for_epochs(db, 1);
  std::vector<std::string> other = tiny_training(dir.file("other.sqlite"), 1, 2);
  other.insert(other.end(), {"--checkpoint-dir", folder});
  const Result refused = ampwb(other);
  EXPECT_EQ(refused.status, 1) << refused.output;
  expect_contains(refused.output, "the checkpoint folder " + folder + " is in use by another training run");
  EXPECT_TRUE(RunStore(dir.file("other.sqlite"), RunStore::Mode::ReadOnly).runs().empty()) << "nothing recorded";
  EXPECT_TRUE(fs::exists(folder + "/checkpoint.lock")) << "the refused run removed the folder the first run holds";
  ASSERT_EQ(::kill(child, SIGINT), 0);
  ASSERT_EQ(wait_exit(child), 130) << read_text(dir.file("train.log"));
  const int64_t stopped_after = RunStore(db, RunStore::Mode::ReadOnly).checkpoints(1).back().step;

  fs::create_directories(dir.file("elsewhere"));
  const std::string backup = dir.file("elsewhere/backup.sqlite");
  ASSERT_EQ(ampwb({"store", "backup", backup, "--db", db}).status, 0);
  const Result went_on = ampwb({"train", "--resume", "1", "--db", backup});
  ASSERT_EQ(went_on.status, 0) << went_on.output;
  const Result resumed = ampwb({"train", "--resume", "1", "--db", db});
  EXPECT_EQ(resumed.status, 1) << resumed.output;
  expect_contains(resumed.output, "but run 1 (");
  expect_contains(resumed.output, ") stopped after " + std::to_string(stopped_after) + ": another run given the same");
  RunStore store(db, RunStore::Mode::ReadOnly);
  EXPECT_EQ(store.run(1).status, RunStatus::Cancelled) << "the original stays as it stopped";
  EXPECT_EQ(store.checkpoints(1).back().step, stopped_after);
}

TEST(StoreCli, BackupWhileARunRecordsIsAWholeStore) {
  TempDir dir("backup");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 1, 2)).status, 0);
  std::vector<std::string> argv = tiny_training(db, 200, 3);
  argv.insert(argv.begin(), AMPWB_BINARY);
  argv.insert(argv.end(), {"--name", "recording"});
  const pid_t child = spawn(argv, dir.file("train.log"));
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  auto epochs_of_second = [&]() -> size_t {
    try {
      return RunStore(db, RunStore::Mode::ReadOnly).epochs(2).size();
    } catch (const StoreError&) {
      return 0;
    }
  };
  while (epochs_of_second() < 2 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const Result r = ampwb({"store", "backup", dir.file("copy.sqlite"), "--db", db});
  // A run still training is not deleted from under its process; the refusal says which process, and how to stop it.
  const Result refused = ampwb({"delete", "2", "--db", db});
  ::kill(child, SIGKILL);
  EXPECT_EQ(refused.status, 1);
  expect_contains(refused.output, "run 2 ('recording') is still training (process " + std::to_string(child) + " on ");
  expect_contains(refused.output, "stop it first, with Stop in the window that trains it or Ctrl-C where");
  wait_exit(child);
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "(2 runs)");
  RunStore copy(dir.file("copy.sqlite"), RunStore::Mode::ReadOnly);
  EXPECT_EQ(copy.integrity_check(), "ok");
  ASSERT_EQ(copy.runs().size(), 2u);
  EXPECT_GE(copy.epochs(2).size(), 2u);
  EXPECT_EQ(ampwb({"store", "backup", dir.file("copy.sqlite"), "--db", db}).status, 1) << "never overwrites";
  // A folder not there yet is made, as `store copy` makes it; one that cannot be made is named.
  const Result made = ampwb({"store", "backup", dir.file("new folder/copy.sqlite"), "--db", db});
  EXPECT_EQ(made.status, 0) << made.output;
  EXPECT_EQ(RunStore(dir.file("new folder/copy.sqlite"), RunStore::Mode::ReadOnly).runs().size(), 2u);
  std::ofstream(dir.file("a file")) << "x";
  const Result nowhere = ampwb({"store", "backup", dir.file("a file/copy.sqlite"), "--db", db});
  EXPECT_EQ(nowhere.status, 1);
  expect_contains(nowhere.output, "cannot write the backup '" + dir.file("a file/copy.sqlite") +
                                      "': cannot make the folder '" + dir.file("a file") + "'");
}

// A backup beside the store and a copy elsewhere hold their runs' final weights as files of their own: deleting a
// run from one store leaves the others' weights whole (they once shared one file, which the delete removed).
TEST(StoreCli, ABackupAndACopyKeepFinalWeightsOfTheirOwn) {
  TempDir dir("own_weights");
  const std::string db = dir.file("runs.sqlite"), backup = dir.file("backup.sqlite"),
                    copy = dir.file("elsewhere/runs.sqlite");
  for (int i = 0; i < 2; ++i) ASSERT_EQ(ampwb(tiny_training(db, 1, 2)).status, 0);
  Result r = ampwb({"store", "backup", backup, "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  fs::create_directories(dir.file("elsewhere"));
  r = ampwb({"store", "copy", db, copy});
  ASSERT_EQ(r.status, 0) << r.output;
  const auto weights_of = [](const std::string& store, int64_t run) {
    return RunStore(store, RunStore::Mode::ReadOnly).run(run).info.final_weights;
  };
  for (int64_t run : {1, 2}) {
    const std::string original = weights_of(db, run);
    ASSERT_FALSE(original.empty());
    for (const std::string& other : {backup, copy}) {
      const std::string own = weights_of(other, run);
      EXPECT_NE(own, original) << other;
      EXPECT_EQ(fs::path(own).parent_path(), fs::path(other).parent_path() / "weights");
      EXPECT_EQ(read_text(own), read_text(original)) << own;
      EXPECT_EQ(fs::hard_link_count(own), 1u) << own << ": a backup shares no file with its store";
    }
  }
  // A copy made by an older ampwb named the original's file: copying again gives it one of its own.
  RunStore(copy, RunStore::Mode::Existing).set_final_weights(1, weights_of(db, 1));
  r = ampwb({"store", "copy", db, copy});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(weights_of(copy, 1), weights_of(db, 1));
  EXPECT_EQ(fs::path(weights_of(copy, 1)).parent_path(), fs::path(copy).parent_path() / "weights");
  const std::string deleted = weights_of(db, 1);
  r = ampwb({"delete", "1", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "deleted run 1 (");
  expect_contains(r.output, "\n  and its final weights: " + deleted + "\n");
  r = ampwb({"delete", "2", "--db", backup});
  ASSERT_EQ(r.status, 0) << r.output;
  for (const auto& [store, run] :
       std::vector<std::pair<std::string, int64_t>>{{backup, 1}, {copy, 1}, {db, 2}, {copy, 2}}) {
    const RunStore s(store, RunStore::Mode::ReadOnly);
    EXPECT_EQ(final_weights_refusal(s, run), "") << store << " run " << run;
    EXPECT_NO_THROW(load_final_weights(s, run)) << store << " run " << run;
  }
  // A weights file gone from under its store is listed as missing, not as there.
  fs::remove(weights_of(copy, 2));
  r = ampwb({"runs", "--db", copy});
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream listing(r.output);
  std::vector<std::string> rows;
  for (std::string row; std::getline(listing, row);) rows.push_back(row);
  ASSERT_EQ(rows.size(), 3u) << r.output;  // the header, runs 1 and 2
  EXPECT_TRUE(rows[1].ends_with(" yes")) << rows[1];
  EXPECT_TRUE(rows[2].ends_with(" missing")) << rows[2];
  r = ampwb({"store", "check", "--db", copy});  // whole, and the loss named
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output,
                  "1 run's final weights file is gone (ampwb predict and export model cannot load it):\n"
                  "  run 2 (");
  r = ampwb({"runs", "--json", "--db", copy});
  ASSERT_EQ(r.status, 0) << r.output;
  const json listed = json::parse(r.output);
  EXPECT_EQ(listed[0]["final_weights_missing"], false);
  EXPECT_EQ(listed[1]["final_weights"], true);  // recorded
  EXPECT_EQ(listed[1]["final_weights_missing"], true);
}

// A store copied with cp beside the original names the original's weights files: deleting a run from the copy
// leaves the file, which the original still uses, and says so; deleting it from the original removes it.
TEST(StoreCli, ACopyMadeWithCpDeletesNoneOfTheOriginalsWeights) {
  TempDir dir("cp_weights");
  const std::string db = dir.file("runs.sqlite"), copy = dir.file("copy.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 1, 2)).status, 0);
  const std::string weights = RunStore(db, RunStore::Mode::ReadOnly).run(1).info.final_weights;
  EXPECT_TRUE(fs::path(weights).filename().string().starts_with("runs.sqlite-run-1-")) << weights;
  fs::copy_file(db, copy);
  Result r = ampwb({"delete", "1", "--yes", "--db", copy});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output,
                  "its final weights file stays, as another store may name it too (a copy of this one, or this one "
                  "under another name): remove it by hand if none does: " +
                      weights);
  EXPECT_TRUE(fs::exists(weights));
  EXPECT_NO_THROW(load_final_weights(RunStore(db, RunStore::Mode::ReadOnly), 1));
  r = ampwb({"delete", "1", "--yes", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "\n  and its final weights: " + weights + "\n");
  EXPECT_FALSE(fs::exists(weights));
  // A file named before files were named after their store may be any store's: kept, and said so.
  ASSERT_EQ(ampwb(tiny_training(db, 1, 2)).status, 0);
  const std::string unnamed = dir.file("weights/run-2-2026-12-01T10-00-00Z-1234.weights");
  fs::rename(RunStore(db, RunStore::Mode::ReadOnly).run(2).info.final_weights, unnamed);
  RunStore(db, RunStore::Mode::Existing).set_final_weights(2, unnamed);
  r = ampwb({"delete", "2", "--yes", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "its final weights file stays, as another store may name it too");
  EXPECT_TRUE(fs::exists(unnamed));
}

TEST(StoreCli, TwoTrainingsAndEditsShareOneFileWithoutLockErrors) {
  TempDir dir("shared");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb({"runs", "--db", db}).status, 0);  // no store yet: an empty list, nothing created
  EXPECT_FALSE(fs::exists(db));
  // Trainings longer than any machine takes for the edits: Ctrl-C ends them once the edits are done, so the edits
  // overlap both however busy the machine is.
  const int epochs = 100000;
  std::vector<std::string> a = tiny_training(db, epochs, 3), b = tiny_training(db, epochs, 3);
  a.insert(a.begin(), AMPWB_BINARY);
  b.insert(b.begin(), AMPWB_BINARY);
  // One thread each: two OpenMP teams spinning on 2 shared cores would make this test crawl.
  a.insert(a.end(), {"--name", "first", "--threads", "1"});
  b.insert(b.end(), {"--name", "second", "--threads", "1"});
  // Killed and reaped however the test ends: left behind, they would train for hours.
  struct Trainings {
    pid_t pids[2];
    ~Trainings() {
      for (const pid_t pid : pids) {
        if (pid <= 0) continue;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } trainings{{spawn(a, dir.file("a.log")), spawn(b, dir.file("b.log"))}};
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while ((stored_epochs(db, 1) == 0 || stored_epochs(db, 2) == 0) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string failures;
  for (int i = 0; i < 5; ++i) {
    const std::string n = std::to_string(i);
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"rename", "1", std::string("renamed-").append(n), "--db", db},
                                               {"note", "1", std::string("note ").append(n), "--db", db},
                                               {"tag", "1", i % 2 ? "t1" : "t0", "--db", db},
                                               {"runs", "--db", db}}) {
      const Result r = ampwb(args);
      if (r.status != 0) failures.append(args[0]).append(": ").append(r.output).append("\n");
    }
  }
  // Ctrl-C, then a minute to write a checkpoint and exit: its exit status, or -1 where it had ended already.
  const auto stop = [](pid_t& pid) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = 0;
      return -1;
    }
    ::kill(pid, SIGINT);
    for (const auto give_up = Clock::now() + std::chrono::seconds(60); ::waitpid(pid, &status, WNOHANG) == 0;) {
      if (Clock::now() > give_up) return -2;  // killed by the guard
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };
  EXPECT_EQ(stop(trainings.pids[0]), 128 + SIGINT) << "-1: it ended during the edits\n" << read_text(dir.file("a.log"));
  EXPECT_EQ(stop(trainings.pids[1]), 128 + SIGINT) << "-1: it ended during the edits\n" << read_text(dir.file("b.log"));
  EXPECT_EQ(failures, "");
  for (const char* log : {"a.log", "b.log"})
    EXPECT_EQ(read_text(dir.file(log)).find("locked"), std::string::npos) << read_text(dir.file(log));

  RunStore store(db, RunStore::Mode::Existing);
  EXPECT_EQ(store.integrity_check(), "ok");
  const std::vector<RunRecord> runs = store.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "renamed-4");
  EXPECT_EQ(runs[0].notes, "note 4");
  EXPECT_EQ(runs[0].tags, (std::vector<std::string>{"t0", "t1"}));
  for (const RunRecord& r : runs) {
    EXPECT_EQ(r.status, RunStatus::Cancelled) << r.name << ": " << r.end_reason;
    EXPECT_GE(store.epochs(r.id).size(), 1u) << r.name;
  }
}

TEST(StoreCli, ForeignAndMalformedFilesAreRefusedAndLeftUntouched) {
  TempDir dir("foreign");
  const std::string text = dir.file("notes.txt");
  std::ofstream(text) << std::string(5000, '#') << "\n";
  const std::string before = read_text(text);
  for (const auto& args : std::vector<std::vector<std::string>>{tiny_training(text, 1), {"runs", "--db", text}}) {
    const Result r = ampwb(args);
    EXPECT_EQ(r.status, 1);
    expect_contains(r.output, "'" + text + "' is not an ampwb run store: it is not an SQLite database");
  }
  EXPECT_EQ(read_text(text), before);

  const std::string foreign = dir.file("other.sqlite");
  {
    SqliteDb db(foreign, SqliteDb::Open::ReadWriteCreate);
    db.exec("CREATE TABLE invoices(id INTEGER, total REAL)");
  }
  const std::string foreign_before = read_text(foreign);
  const Result r = ampwb(tiny_training(foreign, 1));
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "is an SQLite database of another application");
  expect_contains(r.output, "invoices");
  EXPECT_EQ(read_text(foreign), foreign_before);
}

TEST(StoreCli, AReadOnlyLocationGivesAClearErrorAndKeepsTheRuns) {
  TempDir dir("readonly");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 1, 3)).status, 0);
  int64_t slurm_sweep = 0;
  {
    RunStore store(db, RunStore::Mode::Existing);
    const std::string point = R"({"values": {"seed": "0"}, "config": {}})";
    slurm_sweep = create_sweep(store, "on slurm", R"({"grid": {"seed": [0]}})", "slurm", {point});
    add_sweep_slurm_job(store, slurm_sweep, "4242");
  }
  // A stand-in scancel that leaves a mark where "nobody" may write.
  const fs::path bin = dir.file("bin"), marks = dir.file("marks");
  fs::create_directories(bin);
  fs::create_directories(marks);
  fs::permissions(marks, fs::perms::all);
  std::ofstream(bin / "scancel") << "#!/bin/sh\ntouch '" << (marks / "scancel-called").string() << "'\n";
  fs::permissions(bin / "scancel", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                       fs::perms::others_read | fs::perms::others_exec);
  const std::string before = read_text(db);
  // Root ignores permissions: drop to "nobody" for the checks.
  std::vector<std::string> as;
  if (::geteuid() == 0) {
    if (!fs::exists("/usr/bin/setpriv")) GTEST_SKIP() << "running as root without setpriv to drop privileges";
    as = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  }
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                  fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);

  Result r = ampwb(tiny_training(db, 1, 3), as);
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "the run store '" + db + "' is read-only: runs cannot be recorded in it");
  r = ampwb({"rename", "1", "new-name", "--db", db}, as);
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "cannot rename a run: the run store '" + db + "' is read-only");
  r = ampwb({"runs", "--json", "--db", db}, as);  // reading still works
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(json::parse(r.output).size(), 1u);
  // Copied as it is read: the source is only read, and nothing is made before it is known to be readable.
  TempDir copies("read_only_source_copies");
  fs::permissions(copies.path(), fs::perms::all);
  r = ampwb({"store", "copy", db, copies.file("copy.sqlite")}, as);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(RunStore(copies.file("copy.sqlite"), RunStore::Mode::ReadOnly).runs().size(), 1u);
  // A Slurm sweep's cancel is refused before scancel, which would cancel its job with nothing recorded.
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  ::setenv("PATH", (bin.string() + ":" + path).c_str(), 1);
  r = ampwb({"sweep", "cancel", std::to_string(slurm_sweep), "--db", db}, as);
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "cannot cancel a sweep: the run store '" + db + "' is read-only");
  EXPECT_FALSE(fs::exists(marks / "scancel-called")) << "scancel ran for a sweep the store cannot record as cancelled";
  // A new file in a folder that cannot be written.
  r = ampwb(tiny_training(dir.file("new.sqlite"), 1, 3), as);
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, dir.file("new.sqlite"));
  EXPECT_FALSE(fs::exists(dir.file("new.sqlite")));

  EXPECT_EQ(read_text(db), before);
  fs::permissions(dir.path(), fs::perms::owner_all, fs::perm_options::add);
  fs::permissions(db, fs::perms::owner_write, fs::perm_options::add);
  RunStore store(db, RunStore::Mode::Existing);
  EXPECT_EQ(store.run(1).status, RunStatus::Finished);
  EXPECT_EQ(store.epochs(1).size(), 1u);

  // A run killed while recording leaves its latest epochs in the write-ahead log, which a reader without write
  // access to the folder cannot apply: refused, rather than shown without them.
  std::vector<std::string> argv = tiny_training(db, 200, 6);
  argv.insert(argv.begin(), AMPWB_BINARY);
  const pid_t child = spawn(argv, dir.file("killed.log"));
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  while (stored_epochs(db, 2) < 1 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  wait_exit(child);
  ASSERT_GT(fs::file_size(db + "-wal"), 0u);
  fs::remove(db + "-shm");  // with it, SQLite reads the log without writing; without it, not
  fs::permissions(dir.path(), fs::perms::owner_write, fs::perm_options::remove);
  r = ampwb({"runs", "--json", "--db", db}, as);
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "has recent changes in '" + db + "-wal'");
  fs::permissions(dir.path(), fs::perms::owner_write, fs::perm_options::add);
}

TEST(StoreCli, AFullDiskStopsTheRunWithAClearErrorAndKeepsCompletedEpochs) {
  TempDir dir("full");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 1, 3)).status, 0);  // a run that must survive
  // A file size limit stands in for a full disk (SIGXFSZ ignored: writes past it fail with EFBIG).
  std::string command = "trap '' XFSZ; ulimit -f 160; exec";
  command += std::string(" '") + AMPWB_BINARY + "'";
  for (const std::string& a : tiny_training(db, 400, 3)) command += " '" + a + "'";
  command += " --no-checkpoint";  // the store is what fills the disk here (a checkpoint would first)
  const Result r = run({"/bin/bash", "-c", command});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "run store '" + db + "'");
  expect_contains(r.output, "full");
  size_t printed = 0;
  for (size_t at = 0; (at = r.output.find("\nepoch ", at)) != std::string::npos; ++at) ++printed;

  RunStore store(db, RunStore::Mode::Existing);
  EXPECT_EQ(store.integrity_check(), "ok");
  EXPECT_EQ(store.run(1).status, RunStatus::Finished);
  EXPECT_EQ(store.epochs(1).size(), 1u);
  const RunRecord second = store.run(2);
  EXPECT_TRUE(second.status == RunStatus::Failed || second.status == RunStatus::Interrupted);
  EXPECT_GE(store.epochs(2).size(), printed);
  EXPECT_GE(printed, 1u) << "the limit left no room for a single epoch: raise it";
}

// A run that trained to its end but whose end the store refused (here a trigger, where a store locked for a minute
// or a lost database would) keeps its checkpoint: the store shows it interrupted, and it finishes on resume.
TEST(StoreCli, ARunWhoseEndCannotBeRecordedKeepsItsCheckpointAndResumes) {
  TempDir dir("end_unrecorded");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 1, 1)).status, 0);  // run 1 makes the store
  const auto sql = [&](const char* statement) {
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(handle, statement, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(handle);
    sqlite3_close(handle);
  };
  sql("CREATE TRIGGER refuse_end BEFORE UPDATE OF status ON runs WHEN NEW.status = 'finished' "
      "BEGIN SELECT RAISE(ABORT, 'the end cannot be written'); END");
  const Result r = ampwb(tiny_training(db, 1, 2));
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "the run was not fully recorded");
  expect_contains(r.output,
                  "the run store will show run 2 interrupted: once it can be written again, resume the run "
                  "from its last checkpoint with ampwb train --resume 2\n");
  sql("DROP TRIGGER refuse_end");
  {
    RunStore store(db, RunStore::Mode::Existing);
    EXPECT_EQ(store.run(2).status, RunStatus::Interrupted);
    const std::vector<CheckpointInfo> checkpoints = store.checkpoints(2);
    ASSERT_FALSE(checkpoints.empty());
    EXPECT_TRUE(fs::exists(checkpoints.back().path)) << checkpoints.back().path;
  }
  const Result resumed = ampwb({"train", "--resume", "2", "--db", db});
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(RunStore(db, RunStore::Mode::ReadOnly).run(2).status, RunStatus::Finished);
}

// A store that refuses a write midway (here a trigger, where a full disk or a database server gone past the retries
// would) stops a sound training: the run is recorded interrupted, not failed, and its checkpoint finishes it.
TEST(StoreCli, ARunTheStoreStopsMidwayIsInterruptedAndResumes) {
  TempDir dir("store_stops_run");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 1, 1)).status, 0);  // run 1 makes the store
  SqliteDb(db, SqliteDb::Open::ReadWrite)
      .exec(
          "CREATE TRIGGER refuse_epoch BEFORE INSERT ON epochs WHEN NEW.epoch = 2 "
          "BEGIN SELECT RAISE(ABORT, 'no room for epoch 2'); END");
  const Result r = ampwb(tiny_training(db, 3));
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "run 2 interrupted: the run store could not record it: ");
  expect_contains(r.output, "no room for epoch 2");
  expect_contains(r.output, "resume the run from its last checkpoint with ampwb train --resume 2\n");
  {
    RunStore store(db, RunStore::Mode::Existing);
    const RunRecord run = store.run(2);
    EXPECT_EQ(run.status, RunStatus::Interrupted) << run.end_reason;
    expect_contains(run.end_reason, "the run store could not record it: ");
    EXPECT_EQ(store.epochs(2).size(), 1u);
  }
  SqliteDb(db, SqliteDb::Open::ReadWrite).exec("DROP TRIGGER refuse_epoch");
  const Result resumed = ampwb({"train", "--resume", "2", "--db", db});
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  RunStore after(db, RunStore::Mode::ReadOnly);
  EXPECT_EQ(after.run(2).status, RunStatus::Finished);
  EXPECT_EQ(after.epochs(2).size(), 3u);
}

// Each store numbers and names its own runs: the copy says every run whose id changed, and which it renamed to what.
TEST(StoreCli, ACopySaysWhichRunsItRenumberedAndRenamed) {
  TempDir dir("copy_says");
  const std::string source = dir.file("source.sqlite"), destination = dir.file("destination.sqlite");
  std::vector<std::string> there = tiny_training(destination, 1, 1);
  there.insert(there.end(), {"--name", "shared", "--seed", "5"});
  ASSERT_EQ(ampwb(there).status, 0);
  std::vector<std::string> first = tiny_training(source, 1, 1), second = tiny_training(source, 1, 1);
  first.insert(first.end(), {"--name", "shared"});
  second.insert(second.end(), {"--name", "other"});
  ASSERT_EQ(ampwb(first).status, 0);
  ASSERT_EQ(ampwb(second).status, 0);
  const Result r = ampwb({"store", "copy", source, destination});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "; run 2 there is named 'shared-2': another run there had the name 'shared'");
  expect_contains(r.output, "(each store numbers its own runs): run 1 is run 2 there, run 2 is run 3 there\n");
}

TEST(StoreCli, ANameWithAControlCharacterFromAnOlderStoreCannotBreakTheTable) {
  TempDir dir("control_name");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 1, 1)).status, 0);
  {  // as a version that did not refuse them could have stored it
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(handle, "UPDATE runs SET name = 'two' || char(10) || 'lines' || char(9) || 'x'", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(handle);
  }
  const Result r = ampwb({"runs", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "two\\nlines\\tx");
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 2) << "a header and one row:\n" << r.output;
}

// Chinese names take two columns a character in a terminal: the columns after them still line up.
TEST(StoreCli, WideCharactersInANameKeepTheTablesColumnsInLine) {
  TempDir dir("wide_name");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 1, 1)).status, 0);
  ASSERT_EQ(ampwb(tiny_training(db, 1, 1)).status, 0);
  ASSERT_EQ(ampwb({"rename", "1", "混合精度 ResNet-20", "--db", db}).status, 0);
  ASSERT_EQ(ampwb({"rename", "2", "café fp32", "--db", db}).status, 0);
  const Result r = ampwb({"runs", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream lines(r.output);
  std::vector<size_t> created_at;  // the display column where the CREATED column starts, each line
  for (std::string line; std::getline(lines, line);) {
    std::smatch date;  // "2026-12-06 19:40"
    const size_t at = created_at.empty() ? line.find("CREATED")
                      : std::regex_search(line, date, std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d)"))
                          ? static_cast<size_t>(date.position(0))
                          : std::string::npos;
    ASSERT_NE(at, std::string::npos) << line;
    created_at.push_back(testing::cjk_columns(std::string_view(line).substr(0, at)));
  }
  ASSERT_EQ(created_at.size(), 3u) << r.output;
  EXPECT_EQ(created_at[1], created_at[0]) << r.output;
  EXPECT_EQ(created_at[2], created_at[0]) << r.output;
}

}  // namespace
}  // namespace ampwb
