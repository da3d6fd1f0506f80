// The run store on real SQLite files in temporary folders: schema and marker, every field recorded and read back,
// step batching, migration of a version-1 file, refusal of foreign files, abandoned runs, concurrent writers, a
// full disk, resume bookkeeping, and the CSV primitives.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "store/csv_export.h"
#include "store/dataset_fingerprint.h"
#include "store/run_store.h"
#include "store/sqlite.h"
#include "store/store_recorder.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;

// A fresh folder, removed with everything in it at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("ampwb_store_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int64_t query_int(const std::string& db_path, const std::string& sql) {
  SqliteDb db(db_path, SqliteDb::Open::ReadOnly);
  SqliteStatement q(db, sql);
  EXPECT_TRUE(q.step()) << sql;
  return q.int64(0);
}

std::string query_text(const std::string& db_path, const std::string& sql) {
  SqliteDb db(db_path, SqliteDb::Open::ReadOnly);
  SqliteStatement q(db, sql);
  EXPECT_TRUE(q.step()) << sql;
  return q.text(0);
}

TrainConfig config_named(const std::string& name) {
  TrainConfig c;
  c.name = name;
  c.data_dir = "/data/somewhere";
  c.depth = 20;
  c.epochs = 4;
  c.batch_size = 16;
  c.lr = 0.1f;
  c.seed = 0xfedcba9876543210ull;  // above 2^63: must survive the signed INTEGER column
  c.precision = precision_preset("amp-bf16");
  c.topk = 3;
  return c;
}

RunInfo info() {
  RunInfo i;
  i.model_summary = "ResNet-20 (small stem, 10 classes)";
  i.backend_description = "cpu (oneDNN 2.6.3, avx512_core_bf16, 2 threads)";
  i.precision_summary = "amp-bf16";
  i.image_size = 16;
  i.train_images = 800;
  i.validation_images = 200;
  i.class_names = {"a", "b"};
  i.dataset_layout = "class-folders";
  i.steps_per_epoch = 50;
  return i;
}

StepReport step(int64_t n, int steps_per_epoch = 10) {
  StepReport s;
  s.step = n;
  s.epoch = static_cast<int>(n / steps_per_epoch) + 1;
  s.loss = 2.0f / static_cast<float>(n + 1);
  s.accuracy = 0.125f * static_cast<float>(n % 8);
  s.lr = 0.1f;
  s.loss_scale = 65536.0f;
  s.grad_norm = 1.5f + static_cast<float>(n);
  s.wall_seconds = 0.01 * static_cast<double>(n);
  return s;
}

EpochReport epoch(int n) {
  EpochReport e;
  e.epoch = n;
  e.train_loss = 1.0 / n;
  e.train_accuracy = 0.5 + 0.01 * n;
  e.validation_loss = 1.1 / n;
  e.validation_accuracy = 0.4 + 0.1 * n;
  e.validation_topk = 0.9;
  e.topk = 3;
  e.seconds = 2.5 * n;
  e.images_per_second = 320 + n;
  e.data_wait_seconds = 0.25;
  e.compute_seconds = 2.0;
  e.skipped_steps = n;
  e.loss_scale = 32768.0 / n;
  e.peak_bytes = (size_t{5} << 32) + static_cast<size_t>(n);  // above 32 bits
  return e;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

GradientHistogram histogram(int epoch, const std::string& kind, int min_log2, std::vector<int64_t> counts) {
  GradientHistogram h;
  h.epoch = epoch;
  h.kind = kind;
  h.min_log2 = min_log2;
  h.max_log2 = min_log2 + static_cast<int>(counts.size()) - 1;
  h.counts = std::move(counts);
  for (int64_t c : h.counts) h.total += c;
  return h;
}

TEST(RunStore, NewFileHasMarkerSchemaVersionAndWal) {
  TempDir dir("new");
  const std::string path = dir.file("sub/folder/runs.sqlite");  // folders are created
  {
    RunStore store(path);
    EXPECT_EQ(store.found_schema_version(), 0);
    EXPECT_FALSE(store.read_only());
    EXPECT_TRUE(store.runs().empty());
  }
  EXPECT_EQ(query_int(path, "PRAGMA user_version"), RunStore::kSchemaVersion);
  EXPECT_EQ(query_int(path, "PRAGMA application_id"), RunStore::kApplicationId);
  EXPECT_EQ(query_text(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query_text(path, "SELECT value FROM ampwb_meta WHERE key = 'format'"), "ampwb run store");
  RunStore again(path);
  EXPECT_EQ(again.found_schema_version(), RunStore::kSchemaVersion);
}

TEST(RunStore, RecordsEveryFieldAndReadsItBack) {
  TempDir dir("fields");
  RunStore store(dir.file("runs.sqlite"));
  const TrainConfig config = config_named("bf16 \"quoted\", ünïcode");
  const int64_t id = store.begin_run(config, info(), "0123456789abcdef");
  EXPECT_EQ(store.run(id).status, RunStatus::Running);
  EXPECT_TRUE(store.recording(id));

  std::vector<StepReport> steps;
  for (int64_t n = 0; n < 10; ++n) steps.push_back(step(n));
  steps[3].skipped = true;
  steps[3].grad_norm = std::numeric_limits<float>::infinity();
  steps[4].grad_norm = std::numeric_limits<float>::quiet_NaN();
  store.add_steps(id, {steps.begin(), steps.begin() + 4}, 1.0);
  store.add_epoch(id, epoch(1), {steps.begin() + 4, steps.end()}, 2.0);
  GradientHistogram h;
  h.epoch = 1;
  h.kind = "weight";
  h.counts.assign(static_cast<size_t>(h.max_log2 - h.min_log2 + 1), 0);
  h.counts[3] = 17;
  h.counts.back() = 1LL << 40;
  h.zeros = 5;
  h.nonfinite = 1;
  h.total = 23;
  h.underflow_fraction = 0.125;
  h.overflow_fraction = 0.0625;
  h.loss_scale = 1024;
  store.add_histogram(id, h);
  store.add_checkpoint(id, {1, 5, "/ckpt/run-1-epoch-1.ampwb"});
  store.add_checkpoint(id, {1, 9, "/ckpt/run-1-epoch-1.ampwb"});  // overwrote the file: replaces the row
  store.end_run(id, {RunStatus::Cancelled, "stopped by the user after epoch 1"}, {step(10)}, 3.5);

  const RunRecord r = store.run(id);
  EXPECT_EQ(r.name, config.name);
  EXPECT_EQ(r.status, RunStatus::Cancelled);
  EXPECT_EQ(r.end_reason, "stopped by the user after epoch 1");
  EXPECT_FALSE(r.ended.empty());
  EXPECT_EQ(r.depth, 20);
  EXPECT_EQ(r.precision, "amp-bf16");
  EXPECT_EQ(r.batch_size, 16);
  EXPECT_EQ(r.lr, static_cast<double>(0.1f));
  EXPECT_EQ(r.optimizer, "sgd");
  EXPECT_EQ(r.epochs, 4);
  EXPECT_EQ(r.image_size, 16);
  EXPECT_EQ(r.seed, 0xfedcba9876543210ull);
  EXPECT_EQ(r.dataset_path, "/data/somewhere");
  EXPECT_EQ(r.dataset_fingerprint, "0123456789abcdef");
  EXPECT_EQ(r.device, "cpu");
  EXPECT_EQ(r.backend, info().backend_description);
  EXPECT_EQ(r.ampwb_version, AMPWB_VERSION);
  expect_contains(r.versions, "SQLite 3.");
  EXPECT_EQ(r.pid, ::getpid());
  EXPECT_DOUBLE_EQ(r.duration_seconds, 3.5);
  EXPECT_TRUE(r.unreadable.empty()) << r.unreadable;
  EXPECT_EQ(r.config.seed, config.seed);
  EXPECT_EQ(r.config.precision.mode, PrecisionMode::AmpBf16);
  EXPECT_EQ(r.config.topk, 3);
  EXPECT_EQ(r.info.train_images, 800);
  EXPECT_EQ(r.info.model_summary, info().model_summary);

  const std::vector<StepReport> got = store.steps(id);
  ASSERT_EQ(got.size(), 11u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(got[i].step, steps[i].step);
    EXPECT_EQ(got[i].epoch, steps[i].epoch);
    EXPECT_EQ(got[i].loss, steps[i].loss);
    EXPECT_EQ(got[i].accuracy, steps[i].accuracy);
    EXPECT_EQ(got[i].loss_scale, steps[i].loss_scale);
    EXPECT_EQ(got[i].skipped, steps[i].skipped);
    EXPECT_EQ(got[i].wall_seconds, steps[i].wall_seconds);
  }
  EXPECT_TRUE(std::isinf(got[3].grad_norm));  // SQLite keeps infinities
  EXPECT_TRUE(std::isnan(got[4].grad_norm));  // and NaN comes back as NaN, not 0
  EXPECT_EQ(got[5].grad_norm, steps[5].grad_norm);

  const std::vector<EpochReport> epochs = store.epochs(id);
  ASSERT_EQ(epochs.size(), 1u);
  const EpochReport e = epoch(1);
  EXPECT_EQ(epochs[0].train_loss, e.train_loss);
  EXPECT_EQ(epochs[0].validation_accuracy, e.validation_accuracy);
  EXPECT_EQ(epochs[0].validation_topk, e.validation_topk);
  EXPECT_EQ(epochs[0].topk, 3);
  EXPECT_EQ(epochs[0].seconds, e.seconds);
  EXPECT_EQ(epochs[0].images_per_second, e.images_per_second);
  EXPECT_EQ(epochs[0].data_wait_seconds, e.data_wait_seconds);
  EXPECT_EQ(epochs[0].compute_seconds, e.compute_seconds);
  EXPECT_EQ(epochs[0].skipped_steps, e.skipped_steps);
  EXPECT_EQ(epochs[0].loss_scale, e.loss_scale);
  EXPECT_EQ(epochs[0].peak_bytes, e.peak_bytes);

  const std::vector<GradientHistogram> hs = store.histograms(id);
  ASSERT_EQ(hs.size(), 1u);
  EXPECT_EQ(hs[0].counts, h.counts);
  EXPECT_EQ(hs[0].kind, "weight");
  EXPECT_EQ(hs[0].zeros, 5);
  EXPECT_EQ(hs[0].nonfinite, 1);
  EXPECT_EQ(hs[0].total, 23);
  EXPECT_EQ(hs[0].underflow_fraction, 0.125);
  EXPECT_EQ(hs[0].overflow_fraction, 0.0625);
  EXPECT_EQ(hs[0].loss_scale, 1024);

  const std::vector<CheckpointInfo> cs = store.checkpoints(id);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].path, "/ckpt/run-1-epoch-1.ampwb");
  EXPECT_EQ(cs[0].step, 9);
  EXPECT_FALSE(store.recording(id));
  EXPECT_FALSE(fs::exists(run_lock_path(store.path(), id)));
  EXPECT_EQ(store.integrity_check(), "ok");
}

TEST(RunStore, UnnamedRunsGetADescriptiveName) {
  TempDir dir("unnamed");
  RunStore store(dir.file("runs.sqlite"));
  const int64_t id = store.begin_run(config_named(""), info(), "");
  EXPECT_EQ(store.run(id).name, "resnet20-amp-bf16-" + std::to_string(id));
}

TEST(StoreRecorder, BatchesStepsAndCommitsEachEpochAtOnce) {
  TempDir dir("batch");
  const std::string path = dir.file("runs.sqlite");
  RunStore store(path);
  RunStore reader(path, RunStore::Mode::ReadOnly);  // another connection sees only what is committed
  StoreRecorderOptions options;
  options.batch_steps = 5;
  options.batch_seconds = 1e9;
  StoreRecorder recorder(store, config_named("batched"), options);
  recorder.on_start(info());
  const int64_t id = recorder.run_id();
  ASSERT_NE(id, 0);
  for (int64_t n = 0; n < 4; ++n) recorder.on_step(step(n));
  EXPECT_EQ(reader.steps(id).size(), 0u);
  recorder.on_step(step(4));
  EXPECT_EQ(reader.steps(id).size(), 5u);
  for (int64_t n = 5; n < 12; ++n) recorder.on_step(step(n));
  EXPECT_EQ(reader.steps(id).size(), 10u);
  recorder.on_epoch(epoch(1));  // the epoch takes the pending steps with it
  EXPECT_EQ(reader.steps(id).size(), 12u);
  EXPECT_EQ(reader.epochs(id).size(), 1u);
  EXPECT_EQ(reader.run(id).status, RunStatus::Running);
  recorder.on_step(step(12));
  recorder.on_end({RunStatus::Finished, ""});
  EXPECT_EQ(reader.steps(id).size(), 13u);
  EXPECT_EQ(reader.run(id).status, RunStatus::Finished);
  EXPECT_TRUE(recorder.error().empty());
}

TEST(StoreRecorder, FlushesStepsAtLeastEverySoOften) {
  TempDir dir("timed");
  const std::string path = dir.file("runs.sqlite");
  RunStore store(path);
  RunStore reader(path, RunStore::Mode::ReadOnly);
  StoreRecorderOptions options;
  options.batch_steps = 1000;
  options.batch_seconds = 0.05;
  StoreRecorder recorder(store, config_named("timed"), options);
  recorder.on_start(info());
  recorder.on_step(step(0));
  EXPECT_EQ(reader.steps(recorder.run_id()).size(), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  recorder.on_step(step(1));
  EXPECT_EQ(reader.steps(recorder.run_id()).size(), 2u);
}

// Schema version 1 exactly as it shipped, created by hand (not through RunStore).
void create_version1_store(const std::string& path) {
  SqliteDb db(path, SqliteDb::Open::ReadWriteCreate);
  db.exec(R"sql(
    PRAGMA application_id = 1095585879;
    CREATE TABLE ampwb_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO ampwb_meta VALUES ('format', 'ampwb run store');
    CREATE TABLE runs(
      id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, created TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'cancelled', 'interrupted')),
      config_json TEXT NOT NULL, depth INTEGER NOT NULL, precision TEXT NOT NULL, batch_size INTEGER NOT NULL,
      lr REAL NOT NULL, optimizer TEXT NOT NULL, epochs INTEGER NOT NULL, image_size INTEGER NOT NULL,
      seed INTEGER NOT NULL, dataset_path TEXT NOT NULL, device TEXT NOT NULL, backend TEXT NOT NULL,
      ampwb_version TEXT NOT NULL, ended TEXT, end_reason TEXT NOT NULL DEFAULT '');
    CREATE TABLE epochs(
      run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, epoch INTEGER NOT NULL,
      train_loss REAL, train_accuracy REAL, validation_loss REAL, validation_accuracy REAL, validation_topk REAL,
      seconds REAL, images_per_second REAL, data_wait_seconds REAL, peak_bytes INTEGER,
      PRIMARY KEY (run_id, epoch));
    CREATE TABLE steps(
      run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL, epoch INTEGER NOT NULL,
      loss REAL, accuracy REAL, lr REAL, loss_scale REAL, skipped INTEGER NOT NULL DEFAULT 0, wall_seconds REAL,
      PRIMARY KEY (run_id, step)) WITHOUT ROWID;
    INSERT INTO runs VALUES (1, 'old run', '2026-01-02T03:04:05Z', 'finished', '{"depth": 56, "topk": 5}', 56,
                             'fp32', 128, 0.1, 'sgd', 2, 32, 7, '/data/cifar', 'cpu', 'cpu (oneDNN 2.6.3)',
                             '0.0.9', '2026-01-02T04:00:00Z', '');
    INSERT INTO epochs VALUES (1, 1, 1.5, 0.45, 1.4, 0.5, 0.9, 100.0, 500.0, 1.0, 1000000);
    INSERT INTO epochs VALUES (1, 2, 1.0, 0.65, 1.1, 0.6, 0.95, 110.0, 480.0, 1.5, 1000000);
    INSERT INTO steps VALUES (1, 0, 1, 2.3, 0.1, 0.1, 1.0, 0, 0.5);
    PRAGMA user_version = 1;
  )sql");
}

TEST(RunStore, MigratesAVersion1File) {
  TempDir dir("migrate");
  const std::string path = dir.file("old.sqlite");
  create_version1_store(path);
  {
    RunStore store(path);
    EXPECT_EQ(store.found_schema_version(), 1);
    const RunRecord r = store.run(1);
    EXPECT_EQ(r.name, "old run");
    EXPECT_EQ(r.status, RunStatus::Finished);
    EXPECT_EQ(r.updated, "2026-01-02T04:00:00Z");  // filled from `ended`
    EXPECT_DOUBLE_EQ(r.duration_seconds, 210.0);   // the sum of the epochs' seconds
    EXPECT_TRUE(r.tags.empty());
    const std::vector<EpochReport> epochs = store.epochs(1);
    ASSERT_EQ(epochs.size(), 2u);
    EXPECT_EQ(epochs[1].validation_accuracy, 0.6);
    EXPECT_EQ(epochs[0].topk, 5);  // taken from the stored configuration
    EXPECT_EQ(epochs[0].loss_scale, 1.0);
    ASSERT_EQ(store.steps(1).size(), 1u);
    EXPECT_TRUE(std::isnan(store.steps(1)[0].grad_norm));  // unknown in version 1
    // The upgraded file records new runs with every version-2 field.
    const int64_t id = store.begin_run(config_named("new run"), info(), "fp");
    EXPECT_EQ(id, 2);
    store.add_histogram(id, histogram(1, "activation", -2, {1, 2, 3, 4}));
    store.end_run(id, {RunStatus::Finished, ""}, {}, 1.0);
    store.add_tag(1, "baseline");
    EXPECT_EQ(store.integrity_check(), "ok");
  }
  EXPECT_EQ(query_int(path, "PRAGMA user_version"), 2);
  RunStore again(path);
  EXPECT_EQ(again.found_schema_version(), 2);
  EXPECT_EQ(again.run(1).tags, std::vector<std::string>{"baseline"});
  EXPECT_EQ(again.histograms(2).at(0).counts, (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST(RunStore, RefusesAFileThatIsNotSQLiteAndLeavesItUntouched) {
  TempDir dir("notdb");
  const std::string path = dir.file("notes.txt");
  std::ofstream(path) << std::string(3000, 'x') << "\nnot a database at all\n";
  const std::string before = read_bytes(path);
  for (RunStore::Mode mode : {RunStore::Mode::Create, RunStore::Mode::Existing, RunStore::Mode::ReadOnly}) {
    const std::string message = error_of([&] { RunStore store(path, mode); });
    expect_contains(message, path);
    expect_contains(message, "not an SQLite database");
  }
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_FALSE(fs::exists(path + "-wal"));
}

TEST(RunStore, RefusesAnotherApplicationsSQLiteFileAndLeavesItUntouched) {
  TempDir dir("foreign");
  const std::string path = dir.file("contacts.db");
  {
    SqliteDb db(path, SqliteDb::Open::ReadWriteCreate);
    db.exec("CREATE TABLE contacts(name TEXT, phone TEXT); INSERT INTO contacts VALUES ('Ada', '123');");
  }
  const std::string before = read_bytes(path);
  const std::string message = error_of([&] { RunStore store(path); });
  expect_contains(message, path);
  expect_contains(message, "another application");
  expect_contains(message, "contacts");
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(query_text(path, "PRAGMA journal_mode"), "delete");  // not switched to WAL
}

TEST(RunStore, RefusesANewerSchema) {
  TempDir dir("newer");
  const std::string path = dir.file("runs.sqlite");
  { RunStore store(path); }
  {
    SqliteDb db(path, SqliteDb::Open::ReadWrite);
    db.exec("PRAGMA user_version = 9");
  }
  const std::string message = error_of([&] { RunStore store(path); });
  expect_contains(message, "schema version 9");
  expect_contains(message, "newer");
}

TEST(RunStore, MissingFileIsAnErrorUnlessCreating) {
  TempDir dir("missing");
  const std::string path = dir.file("none.sqlite");
  expect_contains(error_of([&] { RunStore store(path, RunStore::Mode::Existing); }), "no run store at '" + path);
  EXPECT_FALSE(fs::exists(path));
}

TEST(RunStore, ReadOnlyStoreRefusesWritesByName) {
  TempDir dir("readonly");
  const std::string path = dir.file("runs.sqlite");
  int64_t id = 0;
  {
    RunStore store(path);
    id = store.begin_run(config_named("kept"), info(), "");
    store.end_run(id, {RunStatus::Finished, ""}, {step(0)}, 1.0);
  }
  RunStore store(path, RunStore::Mode::ReadOnly);
  EXPECT_TRUE(store.read_only());
  EXPECT_EQ(store.run(id).name, "kept");
  const std::string message = error_of([&] { store.rename(id, "other"); });
  expect_contains(message, "read-only");
  expect_contains(message, path);
  expect_contains(error_of([&] { store.begin_run(config_named("x"), info(), ""); }), "read-only");
}

TEST(RunStore, ARunWhoseProcessDiedIsInterruptedAndKeepsItsEpochs) {
  TempDir dir("abandoned");
  const std::string path = dir.file("runs.sqlite");
  { RunStore create(path); }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // records two epochs, then dies without reporting an end
    try {
      RunStore store(path);
      const int64_t id = store.begin_run(config_named("dies"), info(), "");
      store.add_epoch(id, epoch(1), {step(0)}, 1.0);
      store.add_epoch(id, epoch(2), {step(10)}, 2.0);
      store.add_steps(id, {step(20)}, 2.5);
    } catch (...) {
      ::_exit(3);
    }
    ::raise(SIGKILL);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exit " << WEXITSTATUS(status);
  EXPECT_EQ(query_text(path, "SELECT status FROM runs WHERE id = 1"), "running");  // as the dead process left it

  RunStore store(path);
  EXPECT_EQ(store.interrupted_on_open(), 1);
  EXPECT_EQ(store.integrity_check(), "ok");
  const RunRecord r = store.run(1);
  EXPECT_EQ(r.status, RunStatus::Interrupted);
  expect_contains(r.end_reason, "ended without reporting an end");
  EXPECT_EQ(r.ended, r.updated);  // the last sign of life
  EXPECT_EQ(store.epochs(1).size(), 2u);
  EXPECT_EQ(store.steps(1).size(), 3u);
  EXPECT_EQ(query_text(path, "SELECT status FROM runs WHERE id = 1"), "interrupted");  // written, not just shown
  EXPECT_FALSE(fs::exists(run_lock_path(path, 1)));
}

TEST(RunStore, ALiveRunIsNeverMarkedInterruptedEvenFromTheSameProcess) {
  TempDir dir("alive");
  const std::string path = dir.file("runs.sqlite");
  RunStore recorder(path);
  const int64_t id = recorder.begin_run(config_named("alive"), info(), "");
  RunStore viewer(path);  // a second connection, like the GUI's, in the same process
  EXPECT_EQ(viewer.interrupted_on_open(), 0);
  EXPECT_EQ(viewer.recover_abandoned_runs(), 0);
  EXPECT_EQ(viewer.run(id).status, RunStatus::Running);
  EXPECT_TRUE(viewer.recording(id));
  expect_contains(error_of([&] { viewer.remove(id); }), "being recorded");
  recorder.end_run(id, {RunStatus::Finished, ""}, {}, 1.0);
  EXPECT_EQ(viewer.run(id).status, RunStatus::Finished);
  EXPECT_FALSE(viewer.recording(id));
}

TEST(RunStore, ConcurrentWritersOnOneFileNeverFailAsLocked) {
  TempDir dir("concurrent");
  const std::string path = dir.file("runs.sqlite");
  { RunStore create(path); }
  std::atomic<int64_t> id{0};
  std::string recorder_error, editor_error;
  std::thread recorder([&] {
    try {
      RunStore store(path);
      StoreRecorderOptions options;
      options.batch_steps = 20;
      StoreRecorder r(store, config_named("busy"), options);
      r.on_start(info());
      id = r.run_id();
      for (int64_t n = 0; n < 3000; ++n) {
        r.on_step(step(n, 300));
        if (n % 300 == 299) r.on_epoch(epoch(static_cast<int>(n / 300) + 1));
      }
      r.on_end({RunStatus::Finished, ""});
      recorder_error = r.error();
    } catch (const std::exception& e) {
      recorder_error = e.what();
    }
  });
  std::thread editor([&] {
    try {
      RunStore store(path);
      while (id == 0) std::this_thread::yield();
      for (int i = 0; i < 200; ++i) {
        const std::string n = std::to_string(i);
        store.rename(id, std::string("busy-").append(n));
        store.add_tag(id, std::string("t").append(std::to_string(i % 3)));
        store.set_notes(id, std::string("note ").append(n));
      }
    } catch (const std::exception& e) {
      editor_error = e.what();
    }
  });
  recorder.join();
  editor.join();
  EXPECT_EQ(recorder_error, "");
  EXPECT_EQ(editor_error, "");
  RunStore store(path);
  const RunRecord r = store.run(id);
  EXPECT_EQ(r.name, "busy-199");
  EXPECT_EQ(r.notes, "note 199");
  EXPECT_EQ(r.tags, (std::vector<std::string>{"t0", "t1", "t2"}));
  EXPECT_EQ(r.status, RunStatus::Finished);
  EXPECT_EQ(store.steps(id).size(), 3000u);
  EXPECT_EQ(store.epochs(id).size(), 10u);
}

TEST(RunStore, AFullDiskFailsClearlyAndKeepsWhatWasStored) {
  TempDir dir("full");
  const std::string path = dir.file("runs.sqlite");
  { RunStore create(path); }
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The file size limit stands in for a full disk: writes past it fail (SIGXFSZ ignored, so with EFBIG).
    ::close(pipe_fds[0]);
    std::string message = "(no error)";
    int code = 2;
    try {
      RunStore store(path);
      StoreRecorder recorder(store, config_named("fills the disk"));
      recorder.on_start(info());
      recorder.on_epoch(epoch(1));
      recorder.on_epoch(epoch(2));
      std::signal(SIGXFSZ, SIG_IGN);
      const rlim_t limit = fs::file_size(path) + (fs::exists(path + "-wal") ? fs::file_size(path + "-wal") : 0);
      rlimit r{limit + 16384, limit + 16384};
      ::setrlimit(RLIMIT_FSIZE, &r);
      try {
        for (int e = 3; e < 100000; ++e) {
          for (int64_t n = 0; n < 200; ++n) {
            StepReport s = step(e * 1000 + n);
            s.epoch = e;
            recorder.on_step(s);
          }
          recorder.on_epoch(epoch(e));
        }
      } catch (const StoreError& e) {
        message = e.what();
        code = 0;
      }
      recorder.on_end({RunStatus::Failed, message});  // must not throw, whatever the disk says
      message += "\n--- error(): " + recorder.error();
    } catch (const std::exception& e) {
      message = std::string("unexpected: ") + e.what();
      code = 4;
    }
    const ssize_t written = ::write(pipe_fds[1], message.data(), message.size());
    ::_exit(written < 0 ? 5 : code);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << message;
  expect_contains(message, "run store '" + path + "'");
  // SQLITE_FULL ("the disk is full") or a failed write ("the disk may be full"), depending on how the write failed.
  expect_contains(message, "disk");
  expect_contains(message, "full");
  expect_contains(message, "stored before is kept");

  RunStore store(path);
  EXPECT_EQ(store.integrity_check(), "ok");
  const RunRecord r = store.run(1);
  EXPECT_TRUE(r.status == RunStatus::Interrupted || r.status == RunStatus::Failed) << run_status_name(r.status);
  const std::vector<EpochReport> epochs = store.epochs(1);
  ASSERT_GE(epochs.size(), 2u);
  for (size_t i = 0; i < epochs.size(); ++i) EXPECT_EQ(epochs[i].epoch, static_cast<int>(i) + 1);
  // Every stored epoch came with its steps: commits are all or nothing.
  for (const EpochReport& e : epochs) {
    if (e.epoch >= 3) {
      EXPECT_EQ(query_int(path, "SELECT COUNT(*) FROM steps WHERE epoch = " + std::to_string(e.epoch)), 200);
    }
  }
}

TEST(RunStore, ResolvesIdsAndUniqueNames) {
  TempDir dir("resolve");
  RunStore store(dir.file("runs.sqlite"));
  const int64_t a = store.begin_run(config_named("alpha"), info(), "");
  const int64_t b = store.begin_run(config_named("twin"), info(), "");
  const int64_t c = store.begin_run(config_named("twin"), info(), "");
  EXPECT_EQ(store.resolve(std::to_string(a)), a);
  EXPECT_EQ(store.resolve("alpha"), a);
  const std::string ambiguous = error_of([&] { store.resolve("twin"); });
  expect_contains(ambiguous, "2 runs are named 'twin' (ids " + std::to_string(b) + ", " + std::to_string(c) + ")");
  expect_contains(error_of([&] { store.resolve("nobody"); }), "no run named 'nobody'");
  expect_contains(error_of([&] { store.resolve("99"); }), "no run 99");
  expect_contains(error_of([&] { store.rename(a, "42"); }), "cannot be a number");
  expect_contains(error_of([&] { store.rename(a, ""); }), "cannot be empty");
  store.rename(c, "triplet");
  EXPECT_EQ(store.resolve("twin"), b);
}

TEST(RunStore, DeleteRemovesTheRunAndAllItsRows) {
  TempDir dir("delete");
  const std::string path = dir.file("runs.sqlite");
  RunStore store(path);
  const int64_t keep = store.begin_run(config_named("keep"), info(), "");
  const int64_t gone = store.begin_run(config_named("gone"), info(), "");
  for (int64_t id : {keep, gone}) {
    store.add_epoch(id, epoch(1), {step(0), step(1)}, 1.0);
    store.add_histogram(id, histogram(1, "weight", 0, {1, 2}));
    store.add_checkpoint(id, {1, 1, "/c"});
    store.end_run(id, {RunStatus::Finished, ""}, {}, 1.0);
  }
  store.remove(gone);
  expect_contains(error_of([&] { store.run(gone); }), "no run " + std::to_string(gone));
  for (const char* table : {"steps", "epochs", "histograms", "checkpoints"}) {
    EXPECT_EQ(query_int(path, std::string("SELECT COUNT(*) FROM ") + table + " WHERE run_id = " + std::to_string(gone)),
              0)
        << table;
    EXPECT_GT(query_int(path, std::string("SELECT COUNT(*) FROM ") + table + " WHERE run_id = " + std::to_string(keep)),
              0)
        << table;
  }
}

TEST(StoreRecorder, ContinuingARunReplacesWhatIsReportedAgain) {
  TempDir dir("continue");
  RunStore store(dir.file("runs.sqlite"));
  int64_t id = 0;
  {
    StoreRecorder first(store, config_named("resumable"));
    first.on_start(info());
    id = first.run_id();
    for (int64_t n = 0; n < 25; ++n) {  // epochs 1 and 2 complete, epoch 3 half done
      first.on_step(step(n));
      if (n % 10 == 9) first.on_epoch(epoch(static_cast<int>(n / 10) + 1));
    }
    first.on_end({RunStatus::Cancelled, "stopped"});
  }
  EXPECT_EQ(store.steps(id).size(), 25u);
  RunInfo resumed = info();
  resumed.first_epoch = 2;  // say the checkpoint was taken after epoch 1
  StoreRecorder second(store, config_named("resumable"), {}, id);
  second.on_start(resumed);
  EXPECT_EQ(second.run_id(), id);
  EXPECT_EQ(store.run(id).status, RunStatus::Running);
  EXPECT_EQ(store.epochs(id).size(), 1u);
  for (int64_t n = 10; n < 40; ++n) {
    second.on_step(step(n));
    if (n % 10 == 9) second.on_epoch(epoch(static_cast<int>(n / 10) + 1));
  }
  second.on_end({RunStatus::Finished, ""});
  const RunRecord r = store.run(id);
  EXPECT_EQ(r.status, RunStatus::Finished);
  EXPECT_EQ(r.end_reason, "");
  EXPECT_GE(r.duration_seconds, 0.0);
  EXPECT_EQ(store.epochs(id).size(), 4u);
  const std::vector<StepReport> steps = store.steps(id);
  ASSERT_EQ(steps.size(), 40u);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].step, static_cast<int64_t>(i));
  EXPECT_THROW(StoreRecorder(store, config_named("x"), {}, 999), StoreError);
}

TEST(RunStore, DefaultPathFollowsAmpwbDbThenXdgThenHome) {
  const auto saved = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto db = saved("AMPWB_DB"), xdg = saved("XDG_DATA_HOME"), home = saved("HOME");
  ::setenv("AMPWB_DB", "/x/runs.db", 1);
  ::setenv("XDG_DATA_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(RunStore::default_path(), "/x/runs.db");
  ::unsetenv("AMPWB_DB");
  EXPECT_EQ(RunStore::default_path(), "/xdg/ampwb/runs.sqlite");
  ::setenv("XDG_DATA_HOME", "relative/ignored", 1);  // the XDG spec: relative values are invalid
  EXPECT_EQ(RunStore::default_path(), "/home/u/.local/share/ampwb/runs.sqlite");
  ::unsetenv("XDG_DATA_HOME");
  EXPECT_EQ(RunStore::default_path(), "/home/u/.local/share/ampwb/runs.sqlite");
  for (auto [name, value] : {std::pair{"AMPWB_DB", db}, std::pair{"XDG_DATA_HOME", xdg}, std::pair{"HOME", home}}) {
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
}

TEST(DatasetFingerprint, ChangesWithFilesAndNotWithoutThem) {
  TempDir dir("fingerprint");
  fs::create_directories(dir.path() / "a");
  std::ofstream(dir.file("a/1.png")) << "abc";
  std::ofstream(dir.file("a/2.png")) << "defg";
  const std::string first = dataset_fingerprint(dir.path().string());
  EXPECT_EQ(first.size(), 16u);
  EXPECT_EQ(dataset_fingerprint(dir.path().string()), first);
  std::ofstream(dir.file("a/2.png")) << "defgh";  // resized
  const std::string resized = dataset_fingerprint(dir.path().string());
  EXPECT_NE(resized, first);
  fs::rename(dir.file("a/2.png"), dir.file("a/3.png"));
  EXPECT_NE(dataset_fingerprint(dir.path().string()), resized);
  EXPECT_EQ(dataset_fingerprint(dir.file("missing")), "");
}

TEST(DatasetFingerprint, KeepsTheValueStoredRunsHave) {
  // Runs store this value (runs.dataset_fingerprint) and `ampwb compare` sets them side by side: a folder must get
  // the value it always got, or an older run would seem to come from other data. Computed independently (Python,
  // FNV-1a 64 over "a.txt\0", 3 as 8 little-endian bytes, "sub/b.bin\0", 1000 likewise).
  TempDir dir("fingerprint_value");
  fs::create_directories(dir.path() / "sub");
  std::ofstream(dir.file("a.txt")) << "abc";
  std::ofstream(dir.file("sub/b.bin")) << std::string(1000, 'b');
  EXPECT_EQ(dataset_fingerprint(dir.path().string()), "ae6a8ccc007b1600");
}

TEST(Csv, QuotesPerRfc4180AndWritesExactNumbers) {
  EXPECT_EQ(csv_quote("plain"), "plain");
  EXPECT_EQ(csv_quote("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_quote("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_quote("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_quote("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv_quote("ünïcode"), "ünïcode");
  for (double v : {0.1, 1.0 / 3.0, 1e-300, 123456789.125, -2.5e17, static_cast<double>(0.05f)})
    EXPECT_EQ(std::strtod(csv_number(v).c_str(), nullptr), v) << csv_number(v);
  EXPECT_EQ(csv_number(2.0), "2");
  EXPECT_EQ(csv_number(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(csv_number(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(Csv, AWriterThatIsNotClosedLeavesNoFile) {
  TempDir dir("csvpartial");
  const std::string path = dir.file("out.csv");
  {
    CsvWriter w(path);
    w.field("a").field(1).end_row();
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));
  CsvWriter w(path);
  w.field("a").field(1.5).end_row();
  w.close();
  EXPECT_EQ(read_bytes(path), "a,1.5\r\n");
  expect_contains(error_of([&] { CsvWriter bad(dir.file("no/such/folder/x.csv")); }), "no/such/folder/x.csv");
}

TEST(StoredConfig, InputsTheFuzzerFoundAreRefusedByName) {
  // fuzz/corpus/store_record/regress-*: JSON that made nlohmann cast 7e30 to int (undefined behaviour).
  int seen = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(AMPWB_FUZZ_CORPUS) / "store_record")) {
    if (!entry.path().filename().string().starts_with("regress-")) continue;
    std::ifstream in(entry.path());
    const nlohmann::json j = nlohmann::json::parse(in);
    try {
      j.get<TrainConfig>();
      ADD_FAILURE() << entry.path() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stored configuration's"), std::string::npos) << e.what();
    }
    ++seen;
  }
  EXPECT_GE(seen, 1);
  const nlohmann::json huge_lr = {{"lr", 1e300}}, fractional_depth = {{"depth", 18.5}};
  EXPECT_THROW(huge_lr.get<TrainConfig>(), Error);
  EXPECT_THROW(fractional_depth.get<TrainConfig>(), Error);
  EXPECT_EQ(nlohmann::json({{"depth", 50}}).get<TrainConfig>().depth, 50);
}

}  // namespace
}  // namespace ampwb
