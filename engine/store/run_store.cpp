// The run store's file: opening it (refusal of foreign, newer and damaged files), its schema and migrations,
// recovery of runs whose recording process died, and the store's own checks and backup. Recording is in
// run_store_write.cpp, reading and editing in run_store_read.cpp.
#include "store/run_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <thread>

#include "core/shell_word.h"
#include "store/store_location.h"
#ifdef AMPWB_HAVE_LIBPQ
#include "store/postgres.h"
#endif

namespace ampwb {
namespace {
namespace fs = std::filesystem;

// Migration i takes a file from schema version i to i + 1; a new file runs all of them.
// Never edit a shipped migration: files in the field were made by it. Add the next one.
const char* const kMigrations[] = {
    // 0 -> 1: the first schema.
    R"sql(
      PRAGMA application_id = 1095585879;  -- 0x414d5057, "AMPW"
      CREATE TABLE ampwb_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO ampwb_meta VALUES ('format', 'ampwb run store');
      CREATE TABLE runs(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        created TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'cancelled', 'interrupted')),
        config_json TEXT NOT NULL,
        depth INTEGER NOT NULL, precision TEXT NOT NULL, batch_size INTEGER NOT NULL, lr REAL NOT NULL,
        optimizer TEXT NOT NULL, epochs INTEGER NOT NULL, image_size INTEGER NOT NULL, seed INTEGER NOT NULL,
        dataset_path TEXT NOT NULL, device TEXT NOT NULL, backend TEXT NOT NULL, ampwb_version TEXT NOT NULL,
        ended TEXT, end_reason TEXT NOT NULL DEFAULT '');
      CREATE TABLE epochs(
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        epoch INTEGER NOT NULL,
        train_loss REAL, train_accuracy REAL, validation_loss REAL, validation_accuracy REAL, validation_topk REAL,
        seconds REAL, images_per_second REAL, data_wait_seconds REAL, peak_bytes INTEGER,
        PRIMARY KEY (run_id, epoch));
      CREATE TABLE steps(
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step INTEGER NOT NULL, epoch INTEGER NOT NULL,
        loss REAL, accuracy REAL, lr REAL, loss_scale REAL, skipped INTEGER NOT NULL DEFAULT 0, wall_seconds REAL,
        PRIMARY KEY (run_id, step)) WITHOUT ROWID;
    )sql",
    // 1 -> 2: mixed-precision and bookkeeping fields, gradient histograms, checkpoints.
    R"sql(
      ALTER TABLE runs ADD COLUMN updated TEXT;
      UPDATE runs SET updated = COALESCE(ended, created);
      ALTER TABLE runs ADD COLUMN dataset_fingerprint TEXT NOT NULL DEFAULT '';
      ALTER TABLE runs ADD COLUMN versions TEXT NOT NULL DEFAULT '';
      ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
      ALTER TABLE runs ADD COLUMN pid INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE runs ADD COLUMN info_json TEXT NOT NULL DEFAULT '{}';
      ALTER TABLE runs ADD COLUMN duration_seconds REAL NOT NULL DEFAULT 0;
      UPDATE runs SET duration_seconds = (SELECT COALESCE(SUM(seconds), 0) FROM epochs WHERE run_id = runs.id);
      ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
      ALTER TABLE runs ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
      CREATE INDEX runs_by_name ON runs(name);
      ALTER TABLE epochs ADD COLUMN topk INTEGER NOT NULL DEFAULT 2;
      UPDATE epochs SET topk = COALESCE((SELECT CASE WHEN json_valid(config_json)
                                                     THEN json_extract(config_json, '$.topk') END
                                         FROM runs WHERE runs.id = epochs.run_id), 2);
      ALTER TABLE epochs ADD COLUMN compute_seconds REAL NOT NULL DEFAULT 0;
      ALTER TABLE epochs ADD COLUMN skipped_steps INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE epochs ADD COLUMN loss_scale REAL NOT NULL DEFAULT 1;
      ALTER TABLE steps ADD COLUMN grad_norm REAL;
      CREATE TABLE histograms(
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        epoch INTEGER NOT NULL, kind TEXT NOT NULL, loss_scale REAL NOT NULL,
        min_log2 INTEGER NOT NULL, max_log2 INTEGER NOT NULL,
        bins_json TEXT NOT NULL,  -- counts, bin i = |g| in [2^(min_log2+i), 2^(min_log2+i+1))
        zeros INTEGER NOT NULL, nonfinite INTEGER NOT NULL, total INTEGER NOT NULL,
        underflow_fraction REAL NOT NULL, overflow_fraction REAL NOT NULL,
        PRIMARY KEY (run_id, epoch, kind));
      CREATE TABLE checkpoints(
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        epoch INTEGER NOT NULL, step INTEGER NOT NULL, path TEXT NOT NULL, created TEXT NOT NULL);
      CREATE INDEX checkpoints_by_run ON checkpoints(run_id, step);
    )sql",
    // 2 -> 3: what explains a run (train/run_details.h), each row one record as JSON of its field list.
    R"sql(
      CREATE TABLE run_details(
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('layer_numerics', 'overflow', 'epoch_times', 'confusion')),
        epoch INTEGER NOT NULL, step INTEGER NOT NULL,
        body_json TEXT NOT NULL);
      CREATE INDEX run_details_by_run ON run_details(run_id, kind, step);
    )sql",
    // 3 -> 4: a new kind of run detail, the precision divergence. SQLite cannot change a CHECK constraint: the
    // table is rebuilt, its rows (and their rowids, which order them) kept.
    R"sql(
      CREATE TABLE run_details_4(
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL
          CHECK (kind IN ('layer_numerics', 'overflow', 'epoch_times', 'confusion', 'divergence')),
        epoch INTEGER NOT NULL, step INTEGER NOT NULL,
        body_json TEXT NOT NULL);
      INSERT INTO run_details_4(rowid, run_id, kind, epoch, step, body_json)
        SELECT rowid, run_id, kind, epoch, step, body_json FROM run_details ORDER BY rowid;
      DROP TABLE run_details;
      ALTER TABLE run_details_4 RENAME TO run_details;
      CREATE INDEX run_details_by_run ON run_details(run_id, kind, step);
    )sql",
    // 4 -> 5: a new kind of run detail, a sweep's speeds timed in alternation; rebuilt as 3 -> 4 was.
    R"sql(
      CREATE TABLE run_details_5(
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL
          CHECK (kind IN ('layer_numerics', 'overflow', 'epoch_times', 'confusion', 'divergence',
                          'alternating_speed')),
        epoch INTEGER NOT NULL, step INTEGER NOT NULL,
        body_json TEXT NOT NULL);
      INSERT INTO run_details_5(rowid, run_id, kind, epoch, step, body_json)
        SELECT rowid, run_id, kind, epoch, step, body_json FROM run_details ORDER BY rowid;
      DROP TABLE run_details;
      ALTER TABLE run_details_5 RENAME TO run_details;
      CREATE INDEX run_details_by_run ON run_details(run_id, kind, step);
    )sql",
    // 5 -> 6: sweeps, each a grid of points; a point's run is linked once it starts (sweep_record.h).
    R"sql(
      CREATE TABLE sweeps(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL DEFAULT '',
        created TEXT NOT NULL,
        grid_json TEXT NOT NULL,
        runs_on TEXT NOT NULL CHECK (runs_on IN ('local', 'slurm')),
        slurm_job_id TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL CHECK (state IN ('active', 'cancelled')));
      CREATE TABLE sweep_points(
        sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        settings_json TEXT NOT NULL,
        run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
        state TEXT NOT NULL
          CHECK (state IN ('queued', 'running', 'finished', 'failed', 'cancelled', 'requeued')),
        updated TEXT NOT NULL,
        PRIMARY KEY (sweep_id, idx));
      CREATE INDEX sweep_points_by_run ON sweep_points(run_id);
    )sql",
};
static_assert(std::size(kMigrations) == RunStore::kSchemaVersion, "one migration per schema version");

// A PostgreSQL store keeps the same schema versions: a new database is made at version 5 at once (the SQLite
// migrations before it changed files that no PostgreSQL store ever had), and every later version adds its migration
// here beside SQLite's. The dialect's differences: BIGINT for SQLite's 64-bit INTEGER, DOUBLE PRECISION for its
// 8-byte REAL, identity columns for AUTOINCREMENT, and run_details' `rowid` a column of its own (the order rows were
// written, as SQLite's rowid is). The schema version is ampwb_meta's 'schema_version' (SQLite: PRAGMA user_version).
struct PostgresMigration {
  int from, to;
  const char* sql;
};
constexpr PostgresMigration kPostgresMigrations[] = {
    {0, 5, R"sql(
      CREATE TABLE ampwb_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO ampwb_meta VALUES ('format', 'ampwb run store'), ('schema_version', '0');
      CREATE TABLE runs(
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name TEXT NOT NULL,
        created TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'cancelled', 'interrupted')),
        config_json TEXT NOT NULL,
        depth BIGINT NOT NULL, precision TEXT NOT NULL, batch_size BIGINT NOT NULL, lr DOUBLE PRECISION NOT NULL,
        optimizer TEXT NOT NULL, epochs BIGINT NOT NULL, image_size BIGINT NOT NULL, seed BIGINT NOT NULL,
        dataset_path TEXT NOT NULL, device TEXT NOT NULL, backend TEXT NOT NULL, ampwb_version TEXT NOT NULL,
        ended TEXT, end_reason TEXT NOT NULL DEFAULT '',
        updated TEXT, dataset_fingerprint TEXT NOT NULL DEFAULT '', versions TEXT NOT NULL DEFAULT '',
        host TEXT NOT NULL DEFAULT '', pid BIGINT NOT NULL DEFAULT 0, info_json TEXT NOT NULL DEFAULT '{}',
        duration_seconds DOUBLE PRECISION NOT NULL DEFAULT 0, notes TEXT NOT NULL DEFAULT '',
        tags TEXT NOT NULL DEFAULT '[]');
      CREATE INDEX runs_by_name ON runs(name);
      CREATE TABLE epochs(
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        epoch BIGINT NOT NULL,
        train_loss DOUBLE PRECISION, train_accuracy DOUBLE PRECISION, validation_loss DOUBLE PRECISION,
        validation_accuracy DOUBLE PRECISION, validation_topk DOUBLE PRECISION, seconds DOUBLE PRECISION,
        images_per_second DOUBLE PRECISION, data_wait_seconds DOUBLE PRECISION, peak_bytes BIGINT,
        topk BIGINT NOT NULL DEFAULT 2, compute_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
        skipped_steps BIGINT NOT NULL DEFAULT 0, loss_scale DOUBLE PRECISION NOT NULL DEFAULT 1,
        PRIMARY KEY (run_id, epoch));
      CREATE TABLE steps(
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step BIGINT NOT NULL, epoch BIGINT NOT NULL,
        loss DOUBLE PRECISION, accuracy DOUBLE PRECISION, lr DOUBLE PRECISION, loss_scale DOUBLE PRECISION,
        skipped BIGINT NOT NULL DEFAULT 0, wall_seconds DOUBLE PRECISION, grad_norm DOUBLE PRECISION,
        PRIMARY KEY (run_id, step));
      CREATE TABLE histograms(
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        epoch BIGINT NOT NULL, kind TEXT NOT NULL, loss_scale DOUBLE PRECISION NOT NULL,
        min_log2 BIGINT NOT NULL, max_log2 BIGINT NOT NULL,
        bins_json TEXT NOT NULL,
        zeros BIGINT NOT NULL, nonfinite BIGINT NOT NULL, total BIGINT NOT NULL,
        underflow_fraction DOUBLE PRECISION NOT NULL, overflow_fraction DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (run_id, epoch, kind));
      CREATE TABLE checkpoints(
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        epoch BIGINT NOT NULL, step BIGINT NOT NULL, path TEXT NOT NULL, created TEXT NOT NULL);
      CREATE INDEX checkpoints_by_run ON checkpoints(run_id, step);
      CREATE TABLE run_details(
        rowid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL
          CHECK (kind IN ('layer_numerics', 'overflow', 'epoch_times', 'confusion', 'divergence',
                          'alternating_speed')),
        epoch BIGINT NOT NULL, step BIGINT NOT NULL,
        body_json TEXT NOT NULL);
      CREATE INDEX run_details_by_run ON run_details(run_id, kind, step);
    )sql"},
    {5, 6, R"sql(
      CREATE TABLE sweeps(
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name TEXT NOT NULL DEFAULT '',
        created TEXT NOT NULL,
        grid_json TEXT NOT NULL,
        runs_on TEXT NOT NULL CHECK (runs_on IN ('local', 'slurm')),
        slurm_job_id TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL CHECK (state IN ('active', 'cancelled')));
      CREATE TABLE sweep_points(
        sweep_id BIGINT NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
        idx BIGINT NOT NULL,
        settings_json TEXT NOT NULL,
        run_id BIGINT REFERENCES runs(id) ON DELETE SET NULL,
        state TEXT NOT NULL
          CHECK (state IN ('queued', 'running', 'finished', 'failed', 'cancelled', 'requeued')),
        updated TEXT NOT NULL,
        PRIMARY KEY (sweep_id, idx));
      CREATE INDEX sweep_points_by_run ON sweep_points(run_id);
    )sql"},
};
static_assert(std::end(kPostgresMigrations)[-1].to == RunStore::kSchemaVersion,
              "PostgreSQL's migrations reach the schema version SQLite's do");

constexpr int kBusyTimeoutMs = 5000;

}  // namespace

namespace {
// Where a store's runs checkpoint by default: beside an SQLite file; for a database server, in the user's data
// folder ($XDG_DATA_HOME/ampwb, else ~/.local/share/ampwb), which on a cluster is the shared home.
fs::path checkpoints_folder(const std::string& store_path) {
  if (!is_database_server(store_path)) return fs::absolute(store_path).parent_path() / "checkpoints";
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg && *xdg == '/') return fs::path(xdg) / "ampwb" / "checkpoints";
  const char* home = std::getenv("HOME");
  if (home && *home) return fs::path(home) / ".local" / "share" / "ampwb" / "checkpoints";
  throw StoreError(
      "no place for the checkpoints of a run in a PostgreSQL store: HOME is not set (name a checkpoint "
      "folder in the run's settings)");
}
}  // namespace

std::string new_checkpoint_dir(const std::string& store_path) {
  std::string stamp = utc_now_iso8601();  // 2026-11-23T17:40:00Z: no characters a file name minds but ':'
  std::replace(stamp.begin(), stamp.end(), ':', '-');
  const std::filesystem::path base = checkpoints_folder(store_path) / (stamp + "-" + std::to_string(::getpid()));
  // A second run of this process within the second (the GUI's Stop, then Train) gets a folder of its own too.
  std::filesystem::path folder = base;
  for (int n = 2; std::filesystem::exists(folder); ++n) folder = base.string() + "-" + std::to_string(n);
  return folder.string();
}

bool is_own_checkpoint_dir(const std::string& store_path, const std::string& folder) {
  const std::filesystem::path ours = checkpoints_folder(store_path);
  const std::filesystem::path path = std::filesystem::path(folder).lexically_normal();
  return !folder.empty() && path.parent_path() == ours.lexically_normal();
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string RunStore::default_path() {
  const char* env = std::getenv("AMPWB_DB");
  if (env && *env) return env;
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg && *xdg == '/') return std::string(xdg) + "/ampwb/runs.sqlite";  // XDG: relative values are invalid
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.local/share/ampwb/runs.sqlite";
  throw StoreError("no place for the run store: HOME is not set (name the run store's file, or set AMPWB_DB)");
}

struct RunStore::BackgroundCheck {
  std::mutex mutex;
  std::string problems;  // set when the check found damage
  std::thread thread;
  ~BackgroundCheck() {
    if (thread.joinable()) thread.join();
  }
};

RunStore::RunStore(const std::string& location, Mode mode) {
  // A URI this build cannot open is refused before a file is made of it.
  const StoreLocation where = parse_store_location(location);
  if (where.kind == StoreLocation::Kind::PostgreSql) {
    open_postgres(where.text, mode);
    return;
  }
  const std::string path = sqlite_store_file(location);
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (mode != Mode::Create && !exists)
    throw StoreError("no run store at '" + path + "' (it is created by the first `ampwb train`)");
  if (exists && fs::is_directory(path, ec)) throw StoreError("the run store '" + path + "' is a folder, not a file");
  if (mode == Mode::Create && !exists) {
    const fs::path folder = fs::path(path).parent_path();
    if (!folder.empty()) {
      fs::create_directories(folder, ec);
      if (ec) throw StoreError("cannot create the folder of the run store '" + path + "': " + ec.message());
    }
  }
  open_checked(path, mode);
}

RunStore::~RunStore() = default;  // runs still owned stay `running` until the next open finds their lock free

namespace {
struct Probe {
  int64_t application_id = 0;
  int version = 0;
  std::vector<std::string> tables;
  bool has_meta = false;
};

// Reads what identifies the file, writing nothing.
Probe probe(SqliteDb& db) {
  Probe p;
  SqliteStatement app(db, "PRAGMA application_id");
  if (app.step()) p.application_id = app.int64(0);
  SqliteStatement version(db, "PRAGMA user_version");
  if (version.step()) p.version = static_cast<int>(version.int64(0));
  SqliteStatement tables(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  while (tables.step()) {
    p.tables.push_back(tables.text(0));
    if (p.tables.back() == "ampwb_meta") p.has_meta = true;
  }
  return p;
}

std::string join(const std::vector<std::string>& items, size_t max_items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) {
    if (i) out += ", ";
    out += items[i];
  }
  if (items.size() > max_items) out += ", ...";
  return out;
}

// WAL, so that readers never block the writer. Switching a new file to WAL needs it to itself, and SQLite answers
// BUSY at once rather than waiting: two processes creating one store at the same moment retry for the busy timeout.
void enable_wal(SqliteDb& db) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    try {
      SqliteStatement(db, "PRAGMA journal_mode = WAL").run();
      return;
    } catch (const StoreError& e) {
      if (e.sqlite_code() != SQLITE_BUSY || std::chrono::steady_clock::now() > give_up) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}
}  // namespace

void RunStore::open_checked(const std::string& path, Mode mode) {
  const SqliteDb::Open how = mode == Mode::Create     ? SqliteDb::Open::ReadWriteCreate
                             : mode == Mode::Existing ? SqliteDb::Open::ReadWrite
                                                      : SqliteDb::Open::ReadOnly;
  open_sqlite(path, how);
  read_only_ = mode == Mode::ReadOnly || sqlite_->read_only();
  if (mode == Mode::Create && read_only_)
    throw StoreError(
        "the run store '" + path +
        "' is read-only: runs cannot be recorded in it (check its permissions, or choose another run store)");
  sqlite_->check(sqlite3_busy_timeout(sqlite_->handle(), kBusyTimeoutMs), "sqlite3_busy_timeout", "");

  Probe p;
  try {
    p = probe(*sqlite_);
  } catch (const StoreError& e) {
    if (e.sqlite_code() == SQLITE_CORRUPT) throw StoreError(damaged_store_message(path, e.what()), SQLITE_CORRUPT);
    if (e.sqlite_code() == SQLITE_NOTADB)
      throw StoreError("'" + path + "' is not an ampwb run store: it is not an SQLite database (left untouched; " +
                           "choose another run store)",
                       SQLITE_NOTADB);
    // A WAL database in a folder this process cannot write has no -shm to share: read it as immutable.
    const bool cannot_share = e.sqlite_code() == SQLITE_CANTOPEN || e.sqlite_code() == SQLITE_READONLY;
    if (mode == Mode::Create || !cannot_share) throw;
    // An immutable read sees the main file only: runs still in the write-ahead log would be missing, silently.
    std::error_code ec;
    if (fs::file_size(path + "-wal", ec) > 0 && !ec)
      throw StoreError("the run store '" + path + "' has recent changes in '" + path +
                       "-wal' that only a process with write access to its folder can read: open it with write "
                       "access once, or copy the store's folder somewhere writable");
    open_sqlite(path, SqliteDb::Open::Immutable);
    read_only_ = true;
    p = probe(*sqlite_);
  }
  found_version_ = p.version;
  const bool empty =
      p.tables.empty() && p.version == 0 && (p.application_id == 0 || p.application_id == kApplicationId);
  const bool ours = p.application_id == kApplicationId && p.has_meta;
  if (!empty && !ours)
    throw StoreError("'" + path + "' is not an ampwb run store: it is an SQLite database of another application " +
                     "(application_id " + std::to_string(p.application_id) + ", tables: " + join(p.tables, 6) +
                     "); left untouched, choose another run store");
  if (p.version > kSchemaVersion)
    throw StoreError("the run store '" + path + "' has schema version " + std::to_string(p.version) +
                     ", newer than this ampwb " AMPWB_VERSION " reads (" + std::to_string(kSchemaVersion) +
                     "): use a newer ampwb");
  if (read_only_) {
    if (empty) throw StoreError("'" + path + "' is an empty file, not yet a run store: there is nothing in it to read");
    if (p.version < kSchemaVersion)
      throw StoreError("the run store '" + path + "' has the older schema version " + std::to_string(p.version) +
                       " and is read-only here: open it once with write access to upgrade it");
    return;
  }
  if (!empty) {  // a damaged store is refused before anything is written into it
    std::error_code ec;
    if (fs::file_size(path, ec) <= kStoreCheckedBeforeWritingBytes) {
      std::string problems;
      try {
        problems = quick_check();
      } catch (const StoreError& e) {  // damage can also stop the check itself
        problems = e.what();
      }
      if (problems != "ok") throw StoreError(damaged_store_message(path, problems), SQLITE_CORRUPT);
    } else {
      background_check_ = std::make_shared<BackgroundCheck>();
      background_check_->thread = std::thread([check = background_check_.get(), path] {
        try {
          const std::string problems = RunStore(path, Mode::ReadOnly).quick_check();
          if (problems != "ok") {
            std::lock_guard lock(check->mutex);
            check->problems = problems;
          }
        } catch (const std::exception& e) {
          std::lock_guard lock(check->mutex);
          check->problems = e.what();
        }
      });
    }
  }
  enable_wal(*sqlite_);
  db_->exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON");
  migrate();
  try {
    interrupted_on_open_ = recover_abandoned_runs();
  } catch (const StoreError& e) {
    // A reader (runs, show, the GUI) still opens a store that another process is writing to, or whose disk is
    // full: the runs it would have marked read as interrupted without being marked (report_abandoned).
    const int code = e.sqlite_code();
    if (mode != Mode::Existing || (code != SQLITE_BUSY && code != SQLITE_FULL && code != SQLITE_READONLY)) throw;
  }
}

void RunStore::open_sqlite(const std::string& path, SqliteDb::Open how) {
  auto connection = std::make_unique<SqliteConnection>(path, how);
  sqlite_ = &connection->db();
  db_ = std::move(connection);
}

void RunStore::open_postgres(const std::string& uri, Mode mode) {
#ifdef AMPWB_HAVE_LIBPQ
  db_ = std::make_unique<PostgresConnection>(uri, mode == Mode::ReadOnly);
  read_only_ = mode == Mode::ReadOnly;
  std::vector<std::string> tables;
  SqlStatement list(*db_, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename");
  while (list.step()) tables.push_back(list.text(0));
  const bool has_meta = std::find(tables.begin(), tables.end(), "ampwb_meta") != tables.end();
  bool ours = false;
  if (has_meta) {
    SqlStatement meta(*db_, "SELECT key, value FROM ampwb_meta WHERE key IN ('format', 'schema_version')");
    while (meta.step()) {
      if (meta.text(0) == "format") ours = meta.text(1) == "ampwb run store";
      if (meta.text(0) == "schema_version") found_version_ = std::atoi(meta.text(1).c_str());
    }
  }
  if (!tables.empty() && !ours)
    throw StoreError("the PostgreSQL database '" + path() +
                     "' is not an ampwb run store: it holds another application's tables (" + join(tables, 6) +
                     "); left untouched, choose another database");
  if (found_version_ > kSchemaVersion)
    throw StoreError("the run store '" + path() + "' has schema version " + std::to_string(found_version_) +
                     ", newer than this ampwb " AMPWB_VERSION " reads (" + std::to_string(kSchemaVersion) +
                     "): use a newer ampwb");
  if (tables.empty() && mode != Mode::Create)
    throw StoreError("no run store in the PostgreSQL database '" + path() +
                     "' (it is created by the first `ampwb train`)");
  if (read_only_) {
    if (found_version_ < kSchemaVersion)
      throw StoreError("the run store '" + path() + "' has the older schema version " + std::to_string(found_version_) +
                       " and is opened read-only: open it once for writing");
    return;
  }
  migrate();
  interrupted_on_open_ = recover_abandoned_runs();
#else
  (void)mode;
  throw StoreError("the run store '" + location_without_password(uri) +
                   "' is a PostgreSQL database, and this ampwb was built without libpq (Debian: libpq-dev); use an "
                   "SQLite file's path");
#endif
}

void RunStore::migrate() {
  if (db_->dialect() == SqlConnection::Dialect::PostgreSql) {
    // Each step re-reads the version inside its write transaction, under the writers' lock: another process may be
    // creating the store too.
    for (;;) {
      SqlTransaction t(*db_);
      int version = 0;
      SqlStatement exists(*db_, "SELECT to_regclass('ampwb_meta') IS NOT NULL");
      if (exists.step() && exists.int64(0) == 1) {
        SqlStatement q(*db_, "SELECT value FROM ampwb_meta WHERE key = 'schema_version'");
        if (q.step()) version = std::atoi(q.text(0).c_str());
      }
      if (version >= kSchemaVersion) {
        t.commit();
        return;
      }
      const auto step = std::find_if(std::begin(kPostgresMigrations), std::end(kPostgresMigrations),
                                     [version](const PostgresMigration& m) { return m.from == version; });
      if (step == std::end(kPostgresMigrations))
        throw StoreError("the run store '" + path() + "' has schema version " + std::to_string(version) +
                         ", which no migration of this ampwb starts from");
      db_->exec(step->sql);
      db_->exec("UPDATE ampwb_meta SET value = '" + std::to_string(step->to) + "' WHERE key = 'schema_version'");
      t.commit();
    }
  }
  // A current store opens without the write lock, which a training run may hold: no version is ever lowered.
  if (found_version_ >= kSchemaVersion) return;
  // Each step re-reads the version inside its write transaction: another process may be migrating too.
  for (;;) {
    SqlTransaction t(*db_);
    SqlStatement q(*db_, "PRAGMA user_version");
    const int version = q.step() ? static_cast<int>(q.int64(0)) : 0;
    q.reset();
    if (version >= kSchemaVersion) {
      t.commit();
      return;
    }
    db_->exec(kMigrations[version]);
    db_->exec("PRAGMA user_version = " + std::to_string(version + 1));
    t.commit();
  }
}

int RunStore::recover_abandoned_runs() {
  if (read_only_) return 0;
  // A first look without the write lock: readers opening the store while a run records must not queue behind it.
  const auto abandoned_now = [this] {
    std::vector<int64_t> ids;
    SqlStatement running(*db_, "SELECT id FROM runs WHERE status = 'running'");
    while (running.step()) {
      const int64_t id = running.int64(0);
      if (!owned_.count(id) && !db_->recorded_elsewhere(id)) ids.push_back(id);
    }
    return ids;
  };
  if (abandoned_now().empty()) return 0;
  // Decided again inside the write transaction: a run that ended meanwhile is no longer `running`, and a run
  // still running keeps its lock until its end is committed.
  SqlTransaction t(*db_);
  const std::vector<int64_t> abandoned = abandoned_now();
  SqlStatement mark(*db_,
                    "UPDATE runs SET status = 'interrupted', ended = COALESCE(updated, created), end_reason = ? "
                    "WHERE id = ? AND status = 'running'");
  for (int64_t id : abandoned) mark.bind(1, kAbandonedRunReason).bind(2, id).run();
  t.commit();
  for (int64_t id : abandoned) db_->forget_run_lock(id);
  recovered_.insert(recovered_.end(), abandoned.begin(), abandoned.end());
  return static_cast<int>(abandoned.size());
}

std::string damaged_store_message(const std::string& path, const std::string& problems) {
  // SQLite's first line may be a heading ("*** in database main ***"): name the first real problem.
  std::string first = problems.substr(0, problems.find('\n'));
  if (first.starts_with("***") && problems.find('\n') != std::string::npos) {
    const size_t from = problems.find('\n') + 1;
    first = problems.substr(from, problems.find('\n', from) - from);
  }
  return "the run store '" + path + "' is damaged (SQLite: " + first +
         "): nothing more is written into it. Keep a copy (AMPWB_DB=" + shell_word(path) +
         " ampwb store backup FILE), then recover what is readable into a new store (AMPWB_DB=" + shell_word(path) +
         " ampwb store recover NEW.sqlite); `ampwb store check` lists every problem";
}

void RunStore::require_writable(const char* what) const {
  if (read_only_) throw StoreError("cannot " + std::string(what) + ": the run store '" + path() + "' is read-only");
  if (background_check_) {
    std::lock_guard lock(background_check_->mutex);
    if (!background_check_->problems.empty())
      throw StoreError(
          "cannot " + std::string(what) + ": " + damaged_store_message(path(), background_check_->problems),
          SQLITE_CORRUPT);
  }
}

namespace {
// The rows of a PRAGMA, one a line ("ok", or SQLite's problems).
std::string pragma_lines(SqliteDb& db, const char* pragma) {
  SqliteStatement q(db, pragma);
  std::string out;
  while (q.step()) {
    if (!out.empty()) out += '\n';
    out += q.text(0);
  }
  return out;
}
}  // namespace

// PostgreSQL keeps its own pages whole (checksums, WAL): the store's check there reads every row of every table
// and finds the rows no run owns, which a damaged or hand-edited store would have.
std::string RunStore::database_check() const {
  std::string problems;
  for (const char* table : {"epochs", "steps", "histograms", "checkpoints", "run_details"}) {
    SqlStatement orphans(*db_,
                         std::string("SELECT count(*) FROM ") + table + " WHERE run_id NOT IN (SELECT id FROM runs)");
    if (orphans.step() && orphans.int64(0) > 0) {
      if (!problems.empty()) problems += '\n';
      problems += std::to_string(orphans.int64(0)) + " rows of " + table + " belong to no run";
    }
  }
  SqlStatement rows(*db_, "SELECT count(*) FROM runs");
  rows.step();
  return problems.empty() ? "ok" : problems;
}

std::string RunStore::quick_check() const {
  return sqlite_ ? pragma_lines(*sqlite_, "PRAGMA quick_check") : database_check();
}

void RunStore::backup_to(const std::string& file) const {
  if (!sqlite_)
    throw StoreError("the run store '" + path() +
                     "' is a PostgreSQL database: back it up with PostgreSQL's own tools (pg_dump -Fc -d URI -f " +
                     file + ")");
  if (fs::exists(file)) throw StoreError("'" + file + "' exists: a backup never overwrites a file");
  SqliteDb copy(file, SqliteDb::Open::ReadWriteCreate);
  sqlite3_backup* backup = sqlite3_backup_init(copy.handle(), "main", sqlite_->handle(), "main");
  if (!backup) copy.check(sqlite3_errcode(copy.handle()), "sqlite3_backup_init", "");
  // All pages in one step, inside one read transaction: a consistent snapshot; in WAL mode writers go on meanwhile.
  const int stepped = sqlite3_backup_step(backup, -1);
  const int finished = sqlite3_backup_finish(backup);
  if (stepped != SQLITE_DONE || finished != SQLITE_OK) {
    std::error_code ignored;
    fs::remove(file, ignored);
    const int code = stepped != SQLITE_DONE ? stepped : finished;  // kept: a damaged store is copied otherwise
    throw StoreError("cannot back up the run store '" + path() + "' to '" + file + "': " + sqlite3_errstr(code), code);
  }
}

std::string RunStore::integrity_check() const {
  return sqlite_ ? pragma_lines(*sqlite_, "PRAGMA integrity_check") : database_check();
}

}  // namespace ampwb
