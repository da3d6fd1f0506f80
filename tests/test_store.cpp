// The run store's file on real SQLite files in temporary folders: schema and marker, migration of a version-1 file,
// refusal of foreign, newer, missing and read-only files, abandoned runs, concurrent writers, a full disk, and where
// the store lives by default. (Records and what is made of them: test_store_records.cpp.)
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
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

#include "store/run_lock.h"
#include "store/run_store.h"
#include "store/sqlite.h"
#include "store/store_recorder.h"
#include "test_store_util.h"
#ifdef AMPWB_TEST_POSTGRES
#include "postgres_proxy.h"
#endif

namespace ampwb {
namespace {
using namespace store_test;

// The tests that run against both kinds of store (test_store_util.h).
class StoreOpen : public StoreTest {};
INSTANTIATE_TEST_SUITE_P(Stores, StoreOpen, ::testing::ValuesIn(backends()), backend_name);

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
  EXPECT_EQ(query_int(path, "PRAGMA user_version"), RunStore::kSchemaVersion);
  RunStore again(path);
  EXPECT_EQ(again.found_schema_version(), RunStore::kSchemaVersion);
  EXPECT_EQ(again.run(1).tags, std::vector<std::string>{"baseline"});
  EXPECT_EQ(again.histograms(2).at(0).counts, (std::vector<int64_t>{1, 2, 3, 4}));
}

// Tags are listed joined by ", " and "; ", and the GUI reads a leading "-" as "remove": a tag that would read as
// others is refused, saying why, and the run's tags stay as they were; a repeat adds nothing and says so.
TEST(RunStore, ATagThatWouldReadAsOthersIsRefusedAndARepeatAddsNothing) {
  TempDir dir("tags");
  RunStore store(dir.file("runs.sqlite"));
  const int64_t id = store.begin_run(config_named("tagged"), info(), "fp");
  EXPECT_TRUE(store.add_tag(id, "keeper"));
  EXPECT_FALSE(store.add_tag(id, "keeper"));
  const std::vector<std::pair<std::string, std::string>> refused = {{"a, b", "cannot hold ',' or ';'"},
                                                                    {"a;b", "cannot hold ',' or ';'"},
                                                                    {"  spaced  ", "cannot begin or end with a space"},
                                                                    {"-neg", "cannot begin with '-'"},
                                                                    {"two\nlines", "line break"},
                                                                    {"", "cannot be empty"}};
  for (const auto& [tag, why] : refused) expect_contains(error_of([&] { store.add_tag(id, tag); }), why);
  EXPECT_EQ(store.run(id).tags, std::vector<std::string>{"keeper"});
  EXPECT_TRUE(store.add_tag(id, "bf16 baseline"));  // a space inside is a tag's own
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

// A child process begins a run named "dies" in the store at `path`, records into it, then is killed without
// reporting an end, as a crashed or killed training would be. True when it died so.
template <class Record>
::testing::AssertionResult record_then_die(const std::string& path, Record record) {
  const pid_t child = ::fork();
  if (child < 0) return ::testing::AssertionFailure() << "fork failed";
  if (child == 0) {
    try {
      RunStore store(path);
      record(store, store.begin_run(config_named("dies"), info(), ""));
    } catch (...) {
      ::_exit(3);
    }
    ::raise(SIGKILL);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the child exited with " << WEXITSTATUS(status);
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

#ifdef AMPWB_TEST_POSTGRES
// A PostgreSQL store: made in an empty database at the current schema version, its tables in the database's schema;
// a database without them is no store to read, one of another application's is left alone, a newer one refused.
TEST(PostgresStore, IsMadeInAnEmptyDatabaseAndRefusesWhatIsNotOne) {
  const std::string uri = postgres_server().uri();
  execute(uri, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
  expect_contains(error_of([&] { RunStore store(uri, RunStore::Mode::Existing); }),
                  "no run store in the PostgreSQL database '" + uri + "'");
  {
    RunStore store(uri);
    EXPECT_EQ(store.found_schema_version(), 0);
    EXPECT_TRUE(store.is_postgresql());
  }
  EXPECT_EQ(query_text(uri, "SELECT value FROM ampwb_meta WHERE key = 'schema_version'"),
            std::to_string(RunStore::kSchemaVersion));
  EXPECT_EQ(RunStore(uri, RunStore::Mode::Existing).found_schema_version(), RunStore::kSchemaVersion);

  execute(uri, "UPDATE ampwb_meta SET value = '9' WHERE key = 'schema_version'");
  expect_contains(error_of([&] { RunStore store(uri); }), "has schema version 9, newer than this ampwb");

  execute(uri, "DROP SCHEMA public CASCADE; CREATE SCHEMA public; CREATE TABLE orders(id INTEGER)");
  const std::string foreign = error_of([&] { RunStore store(uri); });
  expect_contains(foreign, "is not an ampwb run store");
  expect_contains(foreign, "orders");
  EXPECT_EQ(query_int(uri, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), 1);  // left untouched
}

// A password in the URI reaches libpq, and nothing else: not the store's name, not what a run records.
TEST(PostgresStore, APasswordInTheUriIsNeverShownNorStored) {
  const std::string uri = postgres_server().uri();
  execute(uri, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
  RunStore store(uri + "&password=s3cret");
  EXPECT_EQ(store.path(), uri + "&password=***");
  const int64_t id = store.begin_run(config_named("secret"), info(), "");
  EXPECT_EQ(query_int(uri,
                      "SELECT count(*) FROM runs WHERE config_json LIKE '%s3cret%' OR info_json LIKE "
                      "'%s3cret%' OR versions LIKE '%s3cret%'"),
            0);
  store.end_run(id, {RunStatus::Finished, ""}, {}, 1.0);
}

// The server ends the recording process's connection twice (an administrator, a restart, the network): the run goes
// on, its records made again on a new connection; meanwhile another process found its lock free and marked it
// interrupted, and the run says running again once its recorder is back.
// The server ends every connection to the database but the caller's own (an administrator, a restart, the network).
void drop_other_connections(const std::string& uri) {
  execute(uri,
          "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = current_database() "
          "AND pid <> pg_backend_pid()");
}

TEST(PostgresStore, ARunGoesOnWhenItsConnectionIsDropped) {
  const std::string uri = postgres_server().uri();
  execute(uri, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
  RunStore store(uri);
  StoreRecorderOptions options;
  options.batch_steps = 3;
  StoreRecorder recorder(store, config_named("dropped"), options);
  recorder.on_start(info());
  const int64_t id = recorder.run_id();
  for (int64_t n = 0; n < 30; ++n) {
    if (n == 5 || n == 14) drop_other_connections(uri);
    if (n == 14) {
      RunStore other(uri);
      EXPECT_EQ(other.interrupted_on_open(), 1);
    }
    recorder.on_step(step(n));
    if (n % 10 == 9) recorder.on_epoch(epoch(static_cast<int>(n / 10) + 1));
  }
  EXPECT_EQ(RunStore(uri).run(id).status, RunStatus::Running);
  EXPECT_TRUE(RunStore(uri).recording(id));
  recorder.on_end({RunStatus::Finished, ""});
  EXPECT_EQ(recorder.error(), "");
  const RunRecord r = store.run(id);
  EXPECT_EQ(r.status, RunStatus::Finished);
  EXPECT_EQ(store.epochs(id).size(), 3u);
  EXPECT_EQ(store.steps(id).size(), 30u);
  EXPECT_EQ(query_int(uri, "SELECT count(*) FROM steps"), 30);
}

// While a recording process's connection is down, another process finds the run's lock free and resumes the run:
// the run is the resumer's now. The first process, back on a new connection, cannot take the lock again and writes
// nothing more of it, its end included; the resumer's end is the run's.
TEST(PostgresStore, ARunResumedElsewhereWhileItsConnectionWasDownIsLeftToTheResumer) {
  const std::string uri = postgres_server().uri();
  execute(uri, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
  RunStore first_store(uri);
  StoreRecorderOptions options;
  options.batch_steps = 1;
  StoreRecorder first(first_store, config_named("taken over"), options);
  first.on_start(info());
  const int64_t id = first.run_id();
  for (int64_t n = 0; n < 5; ++n) first.on_step(step(n));
  drop_other_connections(uri);
  RunStore second_store(uri);
  EXPECT_EQ(second_store.interrupted_on_open(), 1);
  StoreRecorder second(second_store, config_named("taken over"), options, id);
  RunInfo resumed = info();
  resumed.first_step = 3;
  second.on_start(resumed);
  first.on_step(step(5));                            // finds its connection lost: the step waits for the next
  EXPECT_THROW(first.on_step(step(6)), StoreError);  // on a new connection, without the run's lock: the run fails
  EXPECT_NE(first.error().find("is recorded by another process now"), std::string::npos) << first.error();
  first.on_end({RunStatus::Failed, first.error()});
  EXPECT_EQ(RunStore(uri).run(id).status, RunStatus::Running) << "the first process wrote over the resumer's run";
  for (int64_t n = 3; n < 8; ++n) second.on_step(step(n));
  second.on_end({RunStatus::Finished, ""});
  EXPECT_EQ(second.error(), "");
  const RunRecord r = RunStore(uri).run(id);
  EXPECT_EQ(r.status, RunStatus::Finished);
  EXPECT_EQ(RunStore(uri).steps(id).size(), 8u);
}

// A run recorded through a connection cut at two commits, once after the server made the commit and before its answer
// came (a server's end, the network), once before the COMMIT reached it. The store looks up on a new connection
// whether each was made: the run is begun once, an epoch's layer numerics recorded once, and nothing is lost.
TEST(PostgresStore, ACommitCutOffFromItsAnswerIsLookedUpNotMadeTwice) {
  using Cut = test::PostgresProxy::Cut;
  const std::string uri = postgres_server().uri();
  execute(uri, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
  test::PostgresProxy proxy(postgres_server().socket_file());
  RunStore store(proxy.uri_of(uri));
  StoreRecorderOptions options;
  options.batch_steps = 100;  // the steps and details go with the epoch's commit
  StoreRecorder recorder(store, config_named("cut off"), options);
  proxy.cut_next_commit(Cut::BeforeCommitAnswer);
  recorder.on_start(info());
  ASSERT_EQ(proxy.cuts(), 1);
  EXPECT_EQ(query_int(uri, "SELECT count(*) FROM runs"), 1) << "the run was begun twice";
  const int64_t id = recorder.run_id();
  for (const Cut cut : {Cut::BeforeCommitAnswer, Cut::BeforeCommitSent}) {
    const int e = cut == Cut::BeforeCommitAnswer ? 1 : 2;
    for (int64_t n = 10 * (e - 1); n < 10 * e; ++n) recorder.on_step(step(n));
    LayerNumerics conv;
    conv.epoch = e;
    conv.step = 10 * e - 1;
    conv.layer = "conv1";
    recorder.on_layer_numerics({conv});
    proxy.cut_next_commit(cut);
    recorder.on_epoch(epoch(e));
    EXPECT_EQ(proxy.cuts(), e + 1);
  }
  recorder.on_end({RunStatus::Finished, ""});
  EXPECT_EQ(recorder.error(), "");
  EXPECT_EQ(query_int(uri, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(query_int(uri, "SELECT count(*) FROM run_details WHERE kind = 'layer_numerics'"), 2)
      << "an epoch's details were recorded twice";
  const RunRecord r = RunStore(uri).run(id);
  EXPECT_EQ(r.status, RunStatus::Finished);
  EXPECT_EQ(RunStore(uri).epochs(id).size(), 2u);
  EXPECT_EQ(RunStore(uri).steps(id).size(), 20u);
}
#endif

TEST_P(StoreOpen, ReadOnlyStoreRefusesWritesByName) {
  TempDir dir("readonly");
  const std::string path = new_store(dir);
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

TEST_P(StoreOpen, ARunWhoseProcessDiedIsInterruptedAndKeepsItsEpochs) {
  TempDir dir("abandoned");
  const std::string path = new_store(dir);
  { RunStore create(path); }
  ASSERT_TRUE(record_then_die(path, [](RunStore& store, int64_t id) {  // two epochs, then no end reported
    store.add_epoch(id, epoch(1), {step(0)}, 1.0);
    store.add_epoch(id, epoch(2), {step(10)}, 2.0);
    store.add_steps(id, {step(20)}, 2.5);
  }));
  EXPECT_EQ(query_text(path, "SELECT status FROM runs WHERE id = 1"), "running");  // as the dead process left it
  // PostgreSQL's server process of the dead one ends on its own, a moment later, and drops the run's lock with it.
  for (int tries = 0; !sqlite() && RunStore(path, RunStore::Mode::ReadOnly).recording(1) && tries < 1000; ++tries)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));

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
  if (sqlite()) {
    EXPECT_FALSE(fs::exists(run_lock_path(path, 1)));
  }
}

// Two runs of one process within a second (the GUI's Stop, then Train) never share a checkpoint folder.
TEST(CheckpointFolder, EachNewRunGetsOneOfItsOwn) {
  TempDir dir("checkpoint_folders");
  const std::string db = dir.file("runs.sqlite");
  const std::string first = new_checkpoint_dir(db);
  fs::create_directories(first);
  const std::string second = new_checkpoint_dir(db);
  EXPECT_NE(second, first);
  EXPECT_TRUE(is_own_checkpoint_dir(db, second));
}

// A dead run's lock file is removed only while nobody holds it, and the lock is taken again on a new file.
TEST(RunLockFile, IsRemovedOnlyWhileNobodyHoldsIt) {
  TempDir dir("run_lock");
  const std::string path = dir.file("runs.sqlite-locks/run-1.lock");
  {
    RunLock held = RunLock::acquire(path);
    RunLock::remove_if_free(path);
    EXPECT_TRUE(fs::exists(path)) << "a held lock's file was removed";
    EXPECT_TRUE(RunLock::held_elsewhere(path));
  }  // closed without release: a dead run's leftover
  EXPECT_FALSE(RunLock::held_elsewhere(path));
  RunLock::remove_if_free(path);
  EXPECT_FALSE(fs::exists(path));
  RunLock again = RunLock::acquire(path);
  EXPECT_TRUE(fs::exists(path));
  EXPECT_TRUE(RunLock::held_elsewhere(path));
}

TEST_P(StoreOpen, ALiveRunIsNeverMarkedInterruptedEvenFromTheSameProcess) {
  TempDir dir("alive");
  const std::string path = new_store(dir);
  RunStore recorder(path);
  const int64_t id = recorder.begin_run(config_named("alive"), info(), "");
  RunStore viewer(path);  // a second connection, like the GUI's, in the same process
  EXPECT_EQ(viewer.interrupted_on_open(), 0);
  EXPECT_EQ(viewer.recover_abandoned_runs(), 0);
  EXPECT_EQ(viewer.run(id).status, RunStatus::Running);
  EXPECT_TRUE(viewer.recording(id));
  expect_contains(error_of([&] { viewer.remove(id); }), "is still training (process ");
  recorder.end_run(id, {RunStatus::Finished, ""}, {}, 1.0);
  EXPECT_EQ(viewer.run(id).status, RunStatus::Finished);
  EXPECT_FALSE(viewer.recording(id));
}

// A reader (ampwb runs, show, the GUI) opens a store whose write lock another process holds (a training run's
// commit, a large delete): a current schema needs no migration, and a run to mark as interrupted is shown so.
TEST(RunStore, AReaderOpensAStoreWhoseWriteLockIsHeldElsewhere) {
  TempDir dir("reader-busy");
  const std::string path = dir.file("runs.sqlite");
  { RunStore create(path); }
  ASSERT_TRUE(
      record_then_die(path, [](RunStore& store, int64_t id) { store.add_epoch(id, epoch(1), {step(0)}, 1.0); }));

  SqliteDb writer(path, SqliteDb::Open::ReadWrite);
  writer.exec("BEGIN IMMEDIATE");  // held, as by another process, past the busy timeout
  const RunStore reader(path, RunStore::Mode::Existing);
  EXPECT_EQ(reader.interrupted_on_open(), 0);  // could not be marked
  const RunRecord r = reader.run(1);
  EXPECT_EQ(r.status, RunStatus::Interrupted);
  expect_contains(r.end_reason, "not yet marked");
  EXPECT_EQ(reader.runs().size(), 1u);
  EXPECT_EQ(reader.epochs(1).size(), 1u);
  // A writer (a training run) does not give up its lock so easily: it waits, then says why.
  expect_contains(error_of([&] { RunStore trainer(path, RunStore::Mode::Create); }), "locked");
  writer.exec("COMMIT");
  EXPECT_EQ(query_text(path, "SELECT status FROM runs WHERE id = 1"), "running");  // shown, not written
  EXPECT_EQ(RunStore(path).interrupted_on_open(), 1);                              // the next writer marks it
}

// Another process holding the write lock past SQLite's busy timeout (a delete of millions of steps) delays a
// recording run; it does not fail it. Steps wait for a later batch, the epoch's end waits for the lock.
TEST(StoreRecorder, WaitsOutAStoreLockedLongerThanTheBusyTimeout) {
  TempDir dir("recorder-busy");
  const std::string path = dir.file("runs.sqlite");
  RunStore store(path);
  StoreRecorderOptions options;
  options.batch_steps = 1;
  StoreRecorder recorder(store, config_named("waits"), options);
  recorder.on_start(info());
  const int64_t id = recorder.run_id();
  std::atomic<bool> locked{false};
  std::thread other([&] {
    SqliteDb writer(path, SqliteDb::Open::ReadWrite);
    writer.exec("BEGIN IMMEDIATE");
    locked = true;
    std::this_thread::sleep_for(std::chrono::seconds(7));  // longer than one busy timeout (5 s)
    writer.exec("COMMIT");
  });
  while (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_NO_THROW(recorder.on_step(step(0)));    // its batch fails as busy after 5 s and stays pending
  EXPECT_NO_THROW(recorder.on_epoch(epoch(1)));  // waits for the lock, then stores the epoch and the step
  other.join();
  recorder.on_end({RunStatus::Finished, ""});
  EXPECT_EQ(recorder.error(), "");
  EXPECT_EQ(store.run(id).status, RunStatus::Finished);
  EXPECT_EQ(store.steps(id).size(), 1u);
  EXPECT_EQ(store.epochs(id).size(), 1u);
}

TEST_P(StoreOpen, AnAutomaticNameNeverRepeatsOneAUserChose) {
  TempDir dir("names");
  const std::string path = new_store(dir);
  RunStore store(path);
  const std::string first = store.run(store.begin_run(config_named(""), info(), "")).name;
  ASSERT_EQ(first, "resnet20-amp-bf16-1");
  store.begin_run(config_named("resnet20-amp-bf16-3"), info(), "");  // run 2, named as run 3 would be
  EXPECT_EQ(store.run(store.begin_run(config_named(""), info(), "")).name, "resnet20-amp-bf16-3-2");
  EXPECT_EQ(store.resolve("resnet20-amp-bf16-3"), 2);
}

TEST_P(StoreOpen, RunsAreFoundByIdOrNameOnceEach) {
  TempDir dir("resolve");
  const std::string path = new_store(dir);
  RunStore store(path);
  store.begin_run(config_named("a"), info(), "");
  store.begin_run(config_named("b"), info(), "");
  EXPECT_EQ(store.resolve_each({"b", "1"}), (std::vector<int64_t>{2, 1}));
  expect_contains(error_of([&] { store.resolve_each({"1", "b", "a"}); }), "run 1 is given twice ('1' and 'a')");
  expect_contains(error_of([&] { store.resolve("99999999999999999999"); }), "no run 99999999999999999999");
  expect_contains(error_of([&] { store.resolve("3"); }), "no run 3");
}

TEST_P(StoreOpen, ConcurrentWritersOnOneFileNeverFailAsLocked) {
  TempDir dir("concurrent");
  const std::string path = new_store(dir);
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

// Eight processes record a 200-epoch run each into one store at once (runs on many nodes): every run, epoch and
// step is there once, and none of the writers met an error.
TEST_P(StoreOpen, EightWriterProcessesLoseNothingAndDuplicateNothing) {
  TempDir dir("writers");
  const std::string path = new_store(dir);
  { RunStore create(path); }
  constexpr int kWriters = 8, kEpochs = 200, kStepsPerEpoch = 5;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int status = 0;
      try {
        RunStore store(path);
        StoreRecorder recorder(store, config_named("writer-" + std::to_string(w)));
        recorder.on_start(info());
        for (int e = 1; e <= kEpochs; ++e) {
          for (int s = 0; s < kStepsPerEpoch; ++s)
            recorder.on_step(step(static_cast<int64_t>((e - 1) * kStepsPerEpoch + s), kStepsPerEpoch));
          recorder.on_epoch(epoch(e));
        }
        recorder.on_end({RunStatus::Finished, ""});
        if (!recorder.error().empty()) status = 2;
      } catch (...) {
        status = 3;
      }
      ::_exit(status);
    }
    children.push_back(child);
  }
  for (const pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed: " << status;
  }
  RunStore store(path);
  const std::vector<RunRecord> runs = store.runs();
  ASSERT_EQ(runs.size(), static_cast<size_t>(kWriters));
  for (const RunRecord& r : runs) {
    EXPECT_EQ(r.status, RunStatus::Finished) << r.name;
    EXPECT_EQ(store.epochs(r.id).size(), static_cast<size_t>(kEpochs)) << r.name;
    EXPECT_EQ(store.steps(r.id).size(), static_cast<size_t>(kEpochs * kStepsPerEpoch)) << r.name;
  }
  EXPECT_EQ(query_int(path, "SELECT count(DISTINCT name) FROM runs"), kWriters);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM epochs"), kWriters * kEpochs);
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
}  // namespace
}  // namespace ampwb
