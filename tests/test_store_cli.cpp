// The run store through the real ampwb binary on real image folders: a training killed with SIGKILL, trainings and
// edits at the same time on one file, foreign and read-only files, a full disk, and train --json -> show -> compare
// -> export csv, with every CSV parsed by an RFC 4180 reader and checked against the store; the store commands'
// flags in any order, bad usage refused by name, and valid JSON for infinite values. Also the cost of
// recording against step time (the figures in docs/benchmarks.md, "Run store").
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "image_folder_util.h"
#include "store/run_store.h"
#include "store/store_recorder.h"
#include "train/trainer.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("ampwb_store_cli_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// An image folder for the whole test program, written once.
const fs::path& stripes() {
  static const fs::path folder = [] {
    const fs::path f = make_stripes_folder("store_cli", 40, 16);
    std::atexit(
        [] { fs::remove_all(fs::temp_directory_path() / ("ampwb_test_store_cli_" + std::to_string(::getpid()))); });
    return f;
  }();
  return folder;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts argv[0] with the rest as its arguments (no shell), stdout and stderr into `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

struct Result {
  int status = -1;
  std::string output;
};

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs a program to its end and collects its output.
Result run(const std::vector<std::string>& argv) {
  static int counter = 0;
  const std::string log = (fs::temp_directory_path() /
                           ("ampwb_store_cli_log_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                              .string();
  Result r;
  r.status = wait_exit(spawn(argv, log));
  r.output = read_text(log);
  fs::remove(log);
  return r;
}

// Runs `ampwb ARGS...`, prefixed by `as` (setpriv, to drop root).
Result ampwb(std::vector<std::string> args, const std::vector<std::string>& as = {}) {
  args.insert(args.begin(), AMPWB_BINARY);
  args.insert(args.begin(), as.begin(), as.end());
  return run(args);
}

// ResNet-20 on 60 training images of 16 px, batches of 4 (15 steps an epoch unless capped).
std::vector<std::string> tiny_training(const std::string& db, int epochs, int max_steps = 0) {
  return {"train",
          "--data",
          stripes().string(),
          "--depth",
          "20",
          "--epochs",
          std::to_string(epochs),
          "--batch-size",
          "4",
          "--threads",
          "2",
          "--val-fraction",
          "0.25",
          "--max-steps-per-epoch",
          std::to_string(max_steps),
          "--db",
          db};
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in:\n" << text;
}

// --- an RFC 4180 reader: CRLF record ends, quoted fields with doubled quotes, anything else is an error ---
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    std::string field;
    if (text[i] == '"') {
      ++i;
      for (;;) {
        if (i >= n) throw std::runtime_error("unterminated quoted field");
        if (text[i] == '"') {
          if (i + 1 < n && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += text[i++];
      }
    } else {
      while (i < n && text[i] != ',' && text[i] != '\r' && text[i] != '\n') {
        if (text[i] == '"') throw std::runtime_error("quote inside an unquoted field");
        field += text[i++];
      }
    }
    row.push_back(field);
    if (i >= n) break;
    if (text[i] == ',') {
      ++i;
      if (i >= n) row.push_back("");
      continue;
    }
    if (text.compare(i, 2, "\r\n") != 0) throw std::runtime_error("a record must end with CRLF");
    i += 2;
    rows.push_back(std::move(row));
    row.clear();
  }
  if (!row.empty()) rows.push_back(std::move(row));
  for (const auto& r : rows)
    if (r.size() != rows[0].size()) throw std::runtime_error("records of different lengths");
  return rows;
}

// Rows as maps from the header's column names.
std::vector<std::map<std::string, std::string>> csv_records(const std::string& path) {
  const auto rows = parse_csv(read_text(path));
  std::vector<std::map<std::string, std::string>> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    std::map<std::string, std::string> m;
    for (size_t c = 0; c < rows[0].size(); ++c) m[rows[0][c]] = rows[r][c];
    out.push_back(m);
  }
  return out;
}

double num(const std::string& s) {
  size_t used = 0;
  const double v = std::stod(s, &used);
  EXPECT_EQ(used, s.size()) << s;
  return v;
}

int64_t stored_epochs(const std::string& db, int64_t run) {
  try {
    RunStore store(db, RunStore::Mode::ReadOnly);
    return static_cast<int64_t>(store.epochs(run).size());
  } catch (const StoreError&) {
    return 0;  // not created yet
  }
}

TEST(StoreCli, SigkillMidEpochLeavesAnIntactStoreWithTheRunInterrupted) {
  TempDir dir("sigkill");
  const std::string db = dir.file("runs.sqlite");
  const std::string log = dir.file("train.log");
  std::vector<std::string> argv = tiny_training(db, 200, 6);
  argv.insert(argv.begin(), AMPWB_BINARY);
  const pid_t child = spawn(argv, log);
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  while (stored_epochs(db, 1) < 2 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
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
      return saved.empty() ? 0 : saved.back().epoch;
    } catch (const StoreError&) {
      return 0;
    }
  };
  while (resumes_at() < 4 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  EXPECT_EQ(wait_exit(child), 128 + SIGKILL) << read_text(dir.file("train.log"));
  ASSERT_GE(resumes_at(), 4) << read_text(dir.file("train.log"));
  ASSERT_LE(resumes_at(), 12) << "killed too late to resume anything";

  // Settings that would change the curves are refused by name; the stored configuration is used.
  Result r = ampwb({"train", "--resume", "resumable", "--lr", "0.5", "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "the setting lr cannot change");
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

TEST(StoreCli, SigtermAndSigintStopAfterTheStepWithACheckpointAndExit143And130) {
  for (const int signal : {SIGTERM, SIGINT}) {
    TempDir dir("signal");
    const std::string db = dir.file("runs.sqlite");
    std::vector<std::string> argv = tiny_training(db, 40, 4);  // checkpoints by default, beside the store
    argv.insert(argv.begin(), AMPWB_BINARY);
    const pid_t child = spawn(argv, dir.file("train.log"));
    const auto deadline = Clock::now() + std::chrono::seconds(90);
    auto epochs_stored = [&]() -> size_t {
      try {
        return RunStore(db, RunStore::Mode::ReadOnly).epochs(1).size();
      } catch (const StoreError&) {
        return 0;
      }
    };
    while (epochs_stored() < 2 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(::kill(child, signal), 0);
    EXPECT_EQ(wait_exit(child), 128 + signal) << read_text(dir.file("train.log"));
    expect_contains(read_text(dir.file("train.log")), "stopping after this step");
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
  }
}

TEST(StoreCli, CheckpointsByDefaultAreRemovedWhenTheRunFinishesUnlessKept) {
  TempDir dir("default_checkpoints");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> argv = tiny_training(db, 2, 2);
  ASSERT_EQ(ampwb(argv).status, 0);
  EXPECT_TRUE(!fs::exists(dir.file("checkpoints")) || fs::is_empty(dir.file("checkpoints")))
      << "a finished run's checkpoints are only disk space";
  argv.push_back("--keep-checkpoint");
  ASSERT_EQ(ampwb(argv).status, 0);
  const std::vector<CheckpointInfo> kept = RunStore(db, RunStore::Mode::ReadOnly).checkpoints(2);
  ASSERT_FALSE(kept.empty());
  EXPECT_TRUE(fs::exists(kept.back().path));
  argv.back() = "--no-checkpoint";
  ASSERT_EQ(ampwb(argv).status, 0);
  EXPECT_TRUE(RunStore(db, RunStore::Mode::ReadOnly).checkpoints(3).empty());
}

TEST(StoreCli, ADamagedStoreIsRefusedForWritingAndStoreCheckReportsIt) {
  TempDir dir("damaged");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 3, 3)).status, 0);
  Result r = ampwb({"store", "check", "--db", db});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "is whole");
  {  // scribble over the cell pointers of pages 3 to 8 (the runs, epochs and steps b-trees)
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
  expect_contains(r.output, ".recover");
  r = ampwb(tiny_training(db, 1, 1));
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "the run store '" + db + "' is damaged");
  expect_contains(r.output, "ampwb store backup FILE");
  EXPECT_EQ(r.output.find("epoch 1/1"), std::string::npos) << "refused before training";
  EXPECT_EQ(read_text(db), damaged_bytes) << "nothing was written into the damaged store";
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
  ::kill(child, SIGKILL);
  wait_exit(child);
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "(2 runs)");
  RunStore copy(dir.file("copy.sqlite"), RunStore::Mode::ReadOnly);
  EXPECT_EQ(copy.integrity_check(), "ok");
  ASSERT_EQ(copy.runs().size(), 2u);
  EXPECT_GE(copy.epochs(2).size(), 2u);
  EXPECT_EQ(ampwb({"store", "backup", dir.file("copy.sqlite"), "--db", db}).status, 1) << "never overwrites";
}

TEST(StoreCli, TwoTrainingsAndEditsShareOneFileWithoutLockErrors) {
  TempDir dir("shared");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb({"runs", "--db", db}).status, 0);  // no store yet: an empty list, nothing created
  EXPECT_FALSE(fs::exists(db));
  const int epochs = 80;  // long enough for two rounds of edits to overlap the trainings on a quiet machine
  std::vector<std::string> a = tiny_training(db, epochs, 3), b = tiny_training(db, epochs, 3);
  a.insert(a.begin(), AMPWB_BINARY);
  b.insert(b.begin(), AMPWB_BINARY);
  // One thread each: two OpenMP teams spinning on 2 shared cores would make this test crawl.
  a.insert(a.end(), {"--name", "first", "--threads", "1"});
  b.insert(b.end(), {"--name", "second", "--threads", "1"});
  const pid_t pa = spawn(a, dir.file("a.log"));
  const pid_t pb = spawn(b, dir.file("b.log"));
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (stored_epochs(db, 1) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int edits = 0, status_a = 0;
  bool a_ended = false;
  std::string failures;
  for (int i = 0; i < 5 && !(a_ended = ::waitpid(pa, &status_a, WNOHANG) == pa); ++i) {
    const std::string n = std::to_string(i);
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"rename", "1", std::string("renamed-").append(n), "--db", db},
                                               {"note", "1", std::string("note ").append(n), "--db", db},
                                               {"tag", "1", i % 2 ? "t1" : "t0", "--db", db},
                                               {"runs", "--db", db}}) {
      const Result r = ampwb(args);
      if (r.status != 0) failures.append(args[0]).append(": ").append(r.output).append("\n");
      ++edits;
    }
  }
  if (!a_ended) ::waitpid(pa, &status_a, 0);
  ASSERT_TRUE(WIFEXITED(status_a)) << read_text(dir.file("a.log"));
  EXPECT_EQ(WEXITSTATUS(status_a), 0) << read_text(dir.file("a.log"));
  EXPECT_EQ(wait_exit(pb), 0) << read_text(dir.file("b.log"));
  EXPECT_EQ(failures, "");
  EXPECT_GE(edits, 8) << "the trainings ended before the edits could overlap them";
  for (const char* log : {"a.log", "b.log"})
    EXPECT_EQ(read_text(dir.file(log)).find("locked"), std::string::npos) << read_text(dir.file(log));

  RunStore store(db, RunStore::Mode::Existing);
  EXPECT_EQ(store.integrity_check(), "ok");
  const std::vector<RunRecord> runs = store.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name.rfind("renamed-", 0), 0u) << runs[0].name;
  EXPECT_EQ(runs[0].tags, (std::vector<std::string>{"t0", "t1"}));
  for (const RunRecord& r : runs) {
    EXPECT_EQ(r.status, RunStatus::Finished) << r.name << ": " << r.end_reason;
    EXPECT_EQ(store.epochs(r.id).size(), static_cast<size_t>(epochs));
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

// --- the command line as the parser reads it ----------------------------------------------------------------------

TEST(StoreCli, FlagsGoBeforeOrAfterTheRunAndAMisspeltOneIsRefusedByName) {
  TempDir dir("flag_order");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> train = tiny_training(db, 1, 1);
  train.insert(train.end(), {"--name", "train"});  // named like a command: still a run's name where RUN goes
  ASSERT_EQ(ampwb(train).status, 0);
  const Result before = ampwb({"show", "--json", "train", "--db", db});
  ASSERT_EQ(before.status, 0) << before.output;
  EXPECT_EQ(json::parse(before.output)["run"]["name"], "train");
  EXPECT_EQ(ampwb({"show", "train", "--json", "--db", db}).output, before.output);
  EXPECT_EQ(ampwb({"show", "--db", db, "--json", "1"}).output, before.output);
  EXPECT_EQ(ampwb({"show", "1", "--json=true", "--db=" + db}).output, before.output);
  EXPECT_EQ(ampwb({"show", "1", "--json=false", "--db", db}).output, ampwb({"show", "1", "--db", db}).output);
  EXPECT_EQ(ampwb({"compare", "--json", "1", "train", "--db", db}).output,
            ampwb({"compare", "1", "train", "--db", db, "--json"}).output);

  // Bad usage: exit status 2, and what was wrong on stderr, naming the command and the argument.
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"show", "1", "--jsn", "--db", db}, "ampwb show: error: unknown option --jsn (see ampwb show --help)"},
      {{"show", "--jsn=1", "1", "--db", db}, "unknown option --jsn"},
      {{"show", "1", "2", "--db", db}, "unexpected argument '2'"},
      {{"show", "--db", db}, "RUN is required"},
      {{"show", "1", "--db"}, "--db"},
      {{"compare", "1", "--db", db}, "RUN: At least 2 required"},
      {{"runs", "--status", "done", "--db", db}, "--status: done not in {running,finished,failed,cancelled,"},
      {{"tag", "1", "--db", db}, "TAG is required"},
      {{"export", "png", "1", "--db", db}, "unknown command 'png' (expected csv or chart)"},
      {{"export", "csv", "--out", dir.file("csv"), "--db", db}, "RUN... or --all is required"},
      {{"export", "csv", "1", "--all", "--out", dir.file("csv"), "--db", db}, "excludes"},
      {{"export", "chart", "1", "--metric", "loss", "--out", dir.file("a.png"), "--width", "50", "--db", db},
       "--width: Value 50 not in range 100 to 10000"},
      {{"store"}, "ampwb store: error: needs a command: check or backup"},
      {{"store", "backup", "--db", db}, "FILE is required"},
  };
  for (const auto& [args, message] : refused) {
    const Result r = ampwb(args);
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.output;
    expect_contains(r.output, message);
  }
  EXPECT_EQ(RunStore(db, RunStore::Mode::ReadOnly).run(1).tags.size(), 0u) << "a refused line changes nothing";
}

// Every --json output is JSON a strict reader takes: infinities (and NaN, which SQLite stores as NULL) as null.
TEST(StoreCli, NonFiniteValuesPrintAsNullInEveryJsonOutput) {
  TempDir dir("nonfinite");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 2, 1)).status, 0);
  {  // as a diverged run records them: SQLite reads 9e999 as +infinity
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(handle,
                           "UPDATE epochs SET train_loss = 9e999, validation_loss = -9e999 WHERE epoch = 2;"
                           "UPDATE steps SET loss = 9e999",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(handle);
  }
  ASSERT_TRUE(std::isinf(RunStore(db, RunStore::Mode::ReadOnly).epochs(1).at(1).train_loss));
  Result r = ampwb({"show", "1", "--json", "--steps", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const json show = json::parse(r.output);
  EXPECT_TRUE(show["epochs"][1]["train_loss"].is_null()) << r.output;
  EXPECT_TRUE(show["epochs"][1]["validation_loss"].is_null());
  EXPECT_TRUE(show["summary"]["final_train_loss"].is_null());
  EXPECT_TRUE(show["steps"][0]["loss"].is_null());
  EXPECT_TRUE(show["epochs"][0]["train_loss"].is_number());
  r = ampwb({"runs", "--json", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(json::parse(r.output)[0]["summary"]["final_validation_loss"].is_null());
  r = ampwb({"compare", "1", "1", "--json", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(json::parse(r.output)["runs"][0]["final_train_loss"].is_null());
}

TEST(StoreCli, TrainJsonThenShowCompareAndExportCsvAgreeWithTheStore) {
  TempDir dir("e2e");
  const std::string db = dir.file("runs.sqlite");
  const std::string tricky = "fp32 baseline, \"quoted\" – ünïcode";
  std::vector<std::string> a = tiny_training(db, 2), b = tiny_training(db, 2);
  a.insert(a.end(), {"--name", tricky, "--json"});
  b.insert(b.end(), {"--lr", "0.1", "--json"});
  const Result ra = ampwb(a);
  ASSERT_EQ(ra.status, 0) << ra.output;
  const Result rb = ampwb(b);
  ASSERT_EQ(rb.status, 0) << rb.output;
  const json ja = json::parse(ra.output), jb = json::parse(rb.output);
  EXPECT_EQ(ja["run_id"], 1);
  EXPECT_EQ(jb["run_id"], 2);
  EXPECT_EQ(ja["name"], tricky);
  EXPECT_EQ(ja["status"], "finished");
  EXPECT_EQ(ja["epochs_completed"], 2);

  RunStore store(db, RunStore::Mode::Existing);
  const RunRecord run_a = store.run(1), run_b = store.run(2);
  const std::vector<EpochReport> ea = store.epochs(1), eb = store.epochs(2);
  ASSERT_EQ(ea.size(), 2u);
  const RunSummary sa = summarize(run_a, ea), sb = summarize(run_b, eb);
  EXPECT_EQ(ja["final_validation_accuracy"].get<double>(), ea.back().validation_accuracy);
  EXPECT_EQ(ja["final_train_loss"].get<double>(), ea.back().train_loss);
  EXPECT_EQ(ja["best_validation_accuracy"].get<double>(), sa.best_validation_accuracy);
  EXPECT_EQ(ja["epochs"][1]["images_per_second"].get<double>(), ea[1].images_per_second);

  // show, by name and as JSON
  Result r = ampwb({"show", tricky, "--json", "--steps", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const json show = json::parse(r.output);
  EXPECT_EQ(show["run"]["id"], 1);
  EXPECT_EQ(show["config"]["depth"], 20);
  EXPECT_EQ(show["epochs"][0]["validation_loss"].get<double>(), ea[0].validation_loss);
  EXPECT_EQ(show["summary"]["peak_bytes"].get<size_t>(), sa.peak_bytes);
  EXPECT_EQ(show["steps"].size(), store.steps(1).size());
  r = ampwb({"show", "1", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part : {"configuration", "epochs", "summary", "best validation accuracy", "fingerprint"})
    expect_contains(r.output, part);
  expect_contains(r.output, tricky);

  // compare
  r = ampwb({"compare", "1", "2", "--json", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const json cmp = json::parse(r.output);
  EXPECT_EQ(cmp["differences"]["lr"], (json{"0.05", "0.1"}));
  EXPECT_FALSE(cmp["differences"].contains("depth"));
  EXPECT_EQ(cmp["runs"][0]["speedup"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(cmp["runs"][1]["speedup"].get<double>(), sb.mean_images_per_second / sa.mean_images_per_second);
  EXPECT_EQ(cmp["runs"][1]["mean_epoch_seconds"].get<double>(), sb.mean_epoch_seconds);
  r = ampwb({"compare", "1", "2", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part : {"configuration differences", "speed-up vs run 1", "skipped steps", "final loss scale",
                           "peak memory", "mean epoch time"})
    expect_contains(r.output, part);

  // export csv
  const std::string out = dir.file("csv out");
  r = ampwb({"export", "csv", "1", "2", "--out", out, "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  for (int64_t id : {1, 2}) {
    const std::vector<StepReport> steps = store.steps(id);
    const auto step_rows = csv_records(out + "/run-" + std::to_string(id) + "-steps.csv");
    ASSERT_EQ(step_rows.size(), steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(num(step_rows[i].at("step")), steps[i].step);
      EXPECT_EQ(num(step_rows[i].at("epoch")), steps[i].epoch);
      EXPECT_EQ(num(step_rows[i].at("loss")), steps[i].loss);
      EXPECT_EQ(num(step_rows[i].at("accuracy")), steps[i].accuracy);
      EXPECT_EQ(num(step_rows[i].at("learning_rate")), steps[i].lr);
      EXPECT_EQ(num(step_rows[i].at("grad_norm")), steps[i].grad_norm);
      EXPECT_EQ(num(step_rows[i].at("wall_seconds")), steps[i].wall_seconds);
    }
    const std::vector<EpochReport> epochs = store.epochs(id);
    const auto epoch_rows = csv_records(out + "/run-" + std::to_string(id) + "-epochs.csv");
    ASSERT_EQ(epoch_rows.size(), epochs.size());
    for (size_t i = 0; i < epochs.size(); ++i) {
      EXPECT_EQ(num(epoch_rows[i].at("train_loss")), epochs[i].train_loss);
      EXPECT_EQ(num(epoch_rows[i].at("validation_accuracy")), epochs[i].validation_accuracy);
      EXPECT_EQ(num(epoch_rows[i].at("validation_topk_accuracy")), epochs[i].validation_topk);
      EXPECT_EQ(num(epoch_rows[i].at("seconds")), epochs[i].seconds);
      EXPECT_EQ(num(epoch_rows[i].at("images_per_second")), epochs[i].images_per_second);
      EXPECT_EQ(num(epoch_rows[i].at("data_wait_seconds")), epochs[i].data_wait_seconds);
      EXPECT_EQ(num(epoch_rows[i].at("peak_bytes")), static_cast<double>(epochs[i].peak_bytes));
    }
    const auto summary = csv_records(out + "/run-" + std::to_string(id) + "-summary.csv");
    ASSERT_EQ(summary.size(), 1u);
    const RunRecord rec = store.run(id);
    const RunSummary s = summarize(rec, epochs);
    EXPECT_EQ(summary[0].at("name"), rec.name);
    EXPECT_EQ(summary[0].at("backend"), rec.backend);  // holds commas: quoted
    EXPECT_EQ(num(summary[0].at("best_validation_accuracy")), s.best_validation_accuracy);
    EXPECT_EQ(num(summary[0].at("mean_images_per_second")), s.mean_images_per_second);
    EXPECT_EQ(num(summary[0].at("total_seconds")), s.total_seconds);
    EXPECT_EQ(num(summary[0].at("peak_bytes")), static_cast<double>(s.peak_bytes));
    EXPECT_EQ(num(summary[0].at("learning_rate")), rec.lr);
  }
  const auto all = csv_records(out + "/runs-summary.csv");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].at("name"), tricky);
  const auto long_form = csv_records(out + "/runs-long.csv");
  EXPECT_EQ(long_form.size(), (ea.size() + eb.size()) * 12);
  for (const auto& row : long_form)
    if (row.at("metric") == "validation_accuracy") {
      const auto& epochs = row.at("run_id") == "1" ? ea : eb;
      EXPECT_EQ(num(row.at("value")), epochs.at(static_cast<size_t>(num(row.at("epoch"))) - 1).validation_accuracy);
    }

  // Python's csv module (a standard reader) reads every file the same way.
  if (fs::exists("/usr/bin/python3")) {
    const std::string script =
        "import csv, json, sys, glob, os\n"
        "out = {}\n"
        "for p in sorted(glob.glob(os.path.join(sys.argv[1], '*.csv'))):\n"
        "    with open(p, newline='', encoding='utf-8') as f:\n"
        "        out[os.path.basename(p)] = list(csv.reader(f, strict=True))\n"
        "print(json.dumps(out))\n";
    std::ofstream(dir.file("read.py")) << script;
    const std::string log = dir.file("python.json");
    const pid_t py = spawn({"/usr/bin/python3", dir.file("read.py"), out}, log);
    ASSERT_EQ(wait_exit(py), 0) << read_text(log);
    const json by_python = json::parse(read_text(log));
    EXPECT_EQ(by_python.size(), 8u);
    for (const auto& [name, rows] : by_python.items())
      EXPECT_EQ(rows.get<std::vector<std::vector<std::string>>>(), parse_csv(read_text(out + "/" + name))) << name;
  }

  // delete
  r = ampwb({"delete", "2", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const json left = json::parse(ampwb({"runs", "--json", "--db", db}).output);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]["name"], tricky);
  r = ampwb({"show", "2", "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "no run 2");
}

// --- the cost of recording -------------------------------------------------------------------------------------

class StepTimes : public TrainObserver {
 public:
  void on_step(const StepReport& r) override {
    if (r.epoch == last_epoch_) gaps.push_back(r.wall_seconds - last_);  // within an epoch: one step's time
    last_epoch_ = r.epoch;
    last_ = r.wall_seconds;
  }
  std::vector<double> gaps;

 private:
  int last_epoch_ = 0;
  double last_ = 0;
};

// Forwards to a StepTimes and, when given, to a recorder, timing what each of the recorder's callbacks costs.
class Timed : public TrainObserver {
 public:
  Timed(StepTimes& times, TrainObserver* recorder) : times_(times), recorder_(recorder) {}
  void on_start(const RunInfo& e) override {
    time(start_end, [&] { recorder_->on_start(e); });
  }
  void on_step(const StepReport& e) override {
    times_.on_step(e);
    time(step_seconds, [&] { recorder_->on_step(e); });
  }
  void on_epoch(const EpochReport& e) override {
    if (recorder_) epoch_seconds.push_back(0);
    time(recorder_ ? epoch_seconds.back() : start_end, [&] { recorder_->on_epoch(e); });
  }
  void on_end(const RunEnd& e) override {
    time(start_end, [&] { recorder_->on_end(e); });
  }
  double start_end = 0, step_seconds = 0;
  std::vector<double> epoch_seconds;

 private:
  template <class F>
  void time(double& total, F&& f) {
    if (!recorder_) return;
    const auto t = Clock::now();
    f();
    total += std::chrono::duration<double>(Clock::now() - t).count();
  }
  StepTimes& times_;
  TrainObserver* recorder_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The figures in docs/benchmarks.md ("Run store"). Worst case for the store: a tiny model, so steps are short.
TEST(StoreOverhead, RecordingCostsUnderTwoPercentOfStepTime) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "measures time: a sanitizer's instrumentation slows the step and the store unevenly";
#endif
  TempDir dir("overhead");
  const fs::path data = make_stripes_folder("store_overhead", 120, 16);
  TrainConfig c;
  c.data_dir = data.string();
  c.depth = 20;
  c.epochs = 3;
  c.batch_size = 8;
  c.threads = 2;
  c.data.validation_fraction = 0.2;  // 192 training images: 24 steps an epoch
  RunStore store(dir.file("runs.sqlite"));
  std::vector<double> plain_steps, recorded_steps, plain_runs, recorded_runs, step_costs, epoch_costs, run_costs,
      fractions;
  int64_t steps_per_epoch = 0;
  const int pairs = 4;
  for (int pair = 0; pair < pairs; ++pair) {
    for (bool record : {false, true}) {  // alternating, so drifting machine load hits both alike
      StepTimes times;
      StoreRecorder recorder(store, c);
      Timed timed(times, record ? &recorder : nullptr);
      Trainer trainer(c, &timed);
      const auto start = Clock::now();
      ASSERT_EQ(trainer.run().status, RunStatus::Finished);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      (record ? recorded_steps : plain_steps)
          .insert((record ? recorded_steps : plain_steps).end(), times.gaps.begin(), times.gaps.end());
      (record ? recorded_runs : plain_runs).push_back(seconds);
      if (!record) continue;
      ASSERT_TRUE(recorder.error().empty()) << recorder.error();
      const auto stored = store.steps(recorder.run_id());
      steps_per_epoch = static_cast<int64_t>(stored.size()) / c.epochs;
      step_costs.push_back(timed.step_seconds / static_cast<double>(stored.size()));
      epoch_costs.insert(epoch_costs.end(), timed.epoch_seconds.begin(), timed.epoch_seconds.end());
      run_costs.push_back(timed.start_end);
      double all = timed.start_end + timed.step_seconds;
      for (double e : timed.epoch_seconds) all += e;
      fractions.push_back(all / seconds);
    }
  }
  const double step = median(plain_steps);
  const double per_step = median(step_costs) + median(epoch_costs) / static_cast<double>(steps_per_epoch);
  std::printf("[ overhead ] ResNet-20, 16 px, batch 8, %lld steps an epoch, %d epochs; %d runs each, alternating\n",
              static_cast<long long>(steps_per_epoch), c.epochs, pairs);
  std::printf("[ overhead ] median step %.3f ms without recording, %.3f ms with; median run %.3f s vs %.3f s\n",
              1e3 * step, 1e3 * median(recorded_steps), median(plain_runs), median(recorded_runs));
  std::printf(
      "[ overhead ] recorder: on_step %.2f us a step (batches included), on_epoch %.3f ms an epoch, "
      "start + end %.1f ms a run\n",
      1e6 * median(step_costs), 1e3 * median(epoch_costs), 1e3 * median(run_costs));
  std::printf("[ overhead ] per step (epochs amortized): %.2f us = %.3f%% of a step; whole runs: %.3f%% of wall time\n",
              1e6 * per_step, 100 * per_step / step, 100 * median(fractions));
  EXPECT_LT(per_step / step, 0.02);
  EXPECT_LT(median(fractions), 0.02);
  fs::remove_all(data);
}

// The recorder alone, fed synthetic events as fast as it takes them: what a step and an epoch cost with no
// training around to blur the figure.
TEST(StoreOverhead, RecorderAloneCostsMicrosecondsAStep) {
  TempDir dir("recorder_alone");
  RunStore store(dir.file("runs.sqlite"));
  TrainConfig c;
  c.data_dir = dir.path().string();
  RunInfo info;
  info.steps_per_epoch = 500;
  const int epochs = 40;
  std::vector<double> per_epoch;
  StoreRecorderOptions options;
  options.sync_seconds = 0;  // the worst case: every epoch fsynced
  StoreRecorder recorder(store, c, options);
  recorder.on_start(info);
  const auto start = Clock::now();
  double epoch_seconds = 0;
  for (int e = 1; e <= epochs; ++e) {
    for (int64_t n = 0; n < info.steps_per_epoch; ++n) {
      StepReport s;
      s.epoch = e;
      s.step = (e - 1) * info.steps_per_epoch + n;
      s.loss = 1.0f / static_cast<float>(s.step + 1);
      recorder.on_step(s);
    }
    EpochReport r;
    r.epoch = e;
    const auto t = Clock::now();
    recorder.on_epoch(r);
    per_epoch.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    epoch_seconds += per_epoch.back();
  }
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  recorder.on_end({RunStatus::Finished, ""});
  const double steps = static_cast<double>(epochs) * static_cast<double>(info.steps_per_epoch);
  const double per_step = (total - epoch_seconds) / steps;
  std::printf(
      "[ overhead ] recorder alone: %.2f us a step (200-step batches), %.3f ms an epoch commit with fsync "
      "(median of %d)\n",
      1e6 * per_step, 1e3 * median(per_epoch), epochs);
  EXPECT_EQ(store.steps(recorder.run_id()).size(), static_cast<size_t>(steps));
  EXPECT_LT(per_step, 20e-6);  // 2% of a 1 ms step, far shorter than any real training step
}

}  // namespace
}  // namespace ampwb
