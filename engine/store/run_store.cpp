// The SQLite run store: schema and migrations, refusal of foreign files, recovery of abandoned runs, and the
// reads and writes of runs, epochs, steps, histograms and checkpoints.
#include "store/run_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

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
};
static_assert(std::size(kMigrations) == RunStore::kSchemaVersion, "one migration per schema version");

constexpr int kBusyTimeoutMs = 5000;

const char* const kRunColumns =
    "id, name, created, updated, ended, status, end_reason, config_json, depth, precision, batch_size, lr, "
    "optimizer, epochs, image_size, seed, dataset_path, dataset_fingerprint, device, backend, ampwb_version, "
    "versions, host, pid, info_json, duration_seconds, notes, tags";

RunStatus parse_status(const std::string& s) {
  for (RunStatus st :
       {RunStatus::Running, RunStatus::Finished, RunStatus::Failed, RunStatus::Cancelled, RunStatus::Interrupted})
    if (s == run_status_name(st)) return st;
  throw StoreError("unknown run status '" + s + "' in the run store");
}

RunRecord read_run(const SqliteStatement& q) {
  RunRecord r;
  int c = 0;
  r.id = q.int64(c++);
  r.name = q.text(c++);
  r.created = q.text(c++);
  r.updated = q.text(c++);
  r.ended = q.text(c++);
  r.status = parse_status(q.text(c++));
  r.end_reason = q.text(c++);
  r.config_json = q.text(c++);
  r.depth = static_cast<int>(q.int64(c++));
  r.precision = q.text(c++);
  r.batch_size = static_cast<int>(q.int64(c++));
  r.lr = q.real(c++);
  r.optimizer = q.text(c++);
  r.epochs = static_cast<int>(q.int64(c++));
  r.image_size = static_cast<int>(q.int64(c++));
  r.seed = static_cast<uint64_t>(q.int64(c++));  // stored as the same 64 bits
  r.dataset_path = q.text(c++);
  r.dataset_fingerprint = q.text(c++);
  r.device = q.text(c++);
  r.backend = q.text(c++);
  r.ampwb_version = q.text(c++);
  r.versions = q.text(c++);
  r.host = q.text(c++);
  r.pid = q.int64(c++);
  r.info_json = q.text(c++);
  r.duration_seconds = q.real(c++);
  r.notes = q.text(c++);
  const nlohmann::json tags = nlohmann::json::parse(q.text(c++), nullptr, false);
  if (tags.is_array())
    for (const auto& t : tags)
      if (t.is_string()) r.tags.push_back(t.get<std::string>());
  return r;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
}

// The device from a backend description such as "cpu (oneDNN 2.6.3, avx512_core, 2 threads)".
std::string device_of(const std::string& backend, const std::string& fallback) {
  const size_t end = backend.find_first_of(" (:");
  const std::string d = backend.substr(0, end);
  return d.empty() ? fallback : d;
}

// The synchronous level for durable commits (a run's end, some epochs): WAL with NORMAL already survives a killed
// process; FULL also survives a power cut, for the price of an fsync (a few ms; see StoreRecorderOptions).
class DurableCommits {
 public:
  explicit DurableCommits(SqliteDb& db) : db_(db) { db_.exec("PRAGMA synchronous = FULL"); }
  ~DurableCommits() {
    try {
      db_.exec("PRAGMA synchronous = NORMAL");
    } catch (const StoreError&) {
      // Only the speed of later step batches depends on it.
    }
  }

 private:
  SqliteDb& db_;
};

}  // namespace

void check_run_name(const std::string& name) {
  if (name.empty()) throw Error("a run name cannot be empty");
  if (all_digits(name)) throw Error("a run name cannot be a number ('" + name + "' would read as a run id)");
  for (const unsigned char ch : name)
    if (ch < 0x20 || ch == 0x7f)  // a newline or tab would break every table, CSV file and report it is printed in
      throw Error("a run name cannot hold control characters (newlines, tabs, ...)");
}

std::string new_checkpoint_dir(const std::string& store_path) {
  std::string stamp = utc_now_iso8601();  // 2026-11-23T17:40:00.123Z: no characters a file name minds but ':'
  std::replace(stamp.begin(), stamp.end(), ':', '-');
  return (std::filesystem::absolute(store_path).parent_path() / "checkpoints" /
          (stamp + "-" + std::to_string(::getpid())))
      .string();
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
  throw StoreError("no place for the run store: HOME is not set (pass --db FILE or set AMPWB_DB)");
}

struct RunStore::BackgroundCheck {
  std::mutex mutex;
  std::string problems;  // set when the check found damage
  std::thread thread;
  ~BackgroundCheck() {
    if (thread.joinable()) thread.join();
  }
};

RunStore::RunStore(const std::string& path, Mode mode) {
  if (path.empty()) throw StoreError("the run store path is empty");
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
  db_ = std::make_unique<SqliteDb>(path, how);
  read_only_ = mode == Mode::ReadOnly || db_->read_only();
  if (mode == Mode::Create && read_only_)
    throw StoreError("the run store '" + path +
                     "' is read-only: runs cannot be recorded in it (check its permissions, or pass --db FILE)");
  db_->check(sqlite3_busy_timeout(db_->handle(), kBusyTimeoutMs), "sqlite3_busy_timeout", "");

  Probe p;
  try {
    p = probe(*db_);
  } catch (const StoreError& e) {
    if (e.sqlite_code() == SQLITE_CORRUPT) throw StoreError(damaged_store_message(path, e.what()));
    if (e.sqlite_code() == SQLITE_NOTADB)
      throw StoreError("'" + path + "' is not an ampwb run store: it is not an SQLite database (left untouched; " +
                       "pass another --db FILE)");
    // A WAL database in a folder this process cannot write has no -shm to share: read it as immutable.
    const bool cannot_share = e.sqlite_code() == SQLITE_CANTOPEN || e.sqlite_code() == SQLITE_READONLY;
    if (mode == Mode::Create || !cannot_share) throw;
    db_ = std::make_unique<SqliteDb>(path, SqliteDb::Open::Immutable);
    read_only_ = true;
    p = probe(*db_);
  }
  found_version_ = p.version;
  const bool empty =
      p.tables.empty() && p.version == 0 && (p.application_id == 0 || p.application_id == kApplicationId);
  const bool ours = p.application_id == kApplicationId && p.has_meta;
  if (!empty && !ours)
    throw StoreError("'" + path + "' is not an ampwb run store: it is an SQLite database of another application " +
                     "(application_id " + std::to_string(p.application_id) + ", tables: " + join(p.tables, 6) +
                     "); left untouched, pass another --db FILE");
  if (p.version > kSchemaVersion)
    throw StoreError("the run store '" + path + "' has schema version " + std::to_string(p.version) +
                     ", newer than this ampwb " AMPWB_VERSION " reads (" + std::to_string(kSchemaVersion) +
                     "): use a newer ampwb");
  if (read_only_) {
    if (empty) throw StoreError("'" + path + "' is an empty file, not yet a run store, and it is read-only");
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
      if (problems != "ok") throw StoreError(damaged_store_message(path, problems));
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
  enable_wal(*db_);
  db_->exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON");
  migrate();
  interrupted_on_open_ = recover_abandoned_runs();
}

void RunStore::migrate() {
  // Each step re-reads the version inside its write transaction: another process may be migrating too.
  for (;;) {
    SqliteTransaction t(*db_);
    SqliteStatement q(*db_, "PRAGMA user_version");
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
    SqliteStatement running(*db_, "SELECT id FROM runs WHERE status = 'running'");
    while (running.step()) {
      const int64_t id = running.int64(0);
      if (!owned_.count(id) && !RunLock::held_elsewhere(run_lock_path(path(), id))) ids.push_back(id);
    }
    return ids;
  };
  if (abandoned_now().empty()) return 0;
  // Decided again inside the write transaction: a run that ended meanwhile is no longer `running`, and a run
  // still running keeps its lock until its end is committed.
  SqliteTransaction t(*db_);
  const std::vector<int64_t> abandoned = abandoned_now();
  SqliteStatement mark(*db_,
                       "UPDATE runs SET status = 'interrupted', ended = COALESCE(updated, created), end_reason = ? "
                       "WHERE id = ? AND status = 'running'");
  for (int64_t id : abandoned)
    mark.bind(1, "the recording process ended without reporting an end (killed, crashed or powered off)")
        .bind(2, id)
        .run();
  t.commit();
  for (int64_t id : abandoned) {
    std::error_code ec;
    fs::remove(run_lock_path(path(), id), ec);  // a leftover; harmless if it stays
  }
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
         "): nothing more is written into it. Keep a copy (ampwb store backup FILE --db '" + path +
         "'), then recover what is readable into a new store with SQLite's shell (Debian: sqlite3): sqlite3 '" + path +
         "' .recover | sqlite3 recovered.sqlite; `ampwb store check` lists every problem";
}

void RunStore::require_writable(const char* what) const {
  if (read_only_) throw StoreError("cannot " + std::string(what) + ": the run store '" + path() + "' is read-only");
  if (background_check_) {
    std::lock_guard lock(background_check_->mutex);
    if (!background_check_->problems.empty())
      throw StoreError("cannot " + std::string(what) + ": " +
                       damaged_store_message(path(), background_check_->problems));
  }
}

bool RunStore::resumable(int64_t run) const {
  if (this->run(run).status == RunStatus::Finished || recording(run)) return false;
  const std::vector<CheckpointInfo> saved = checkpoints(run);
  if (saved.empty()) return false;
  std::error_code ec;
  return fs::exists(saved.back().path, ec) || fs::exists(saved.back().path + ".prev", ec);
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

std::string RunStore::quick_check() const { return pragma_lines(*db_, "PRAGMA quick_check"); }

void RunStore::backup_to(const std::string& file) const {
  if (fs::exists(file)) throw StoreError("'" + file + "' exists: a backup never overwrites a file");
  SqliteDb copy(file, SqliteDb::Open::ReadWriteCreate);
  sqlite3_backup* backup = sqlite3_backup_init(copy.handle(), "main", db_->handle(), "main");
  if (!backup) copy.check(sqlite3_errcode(copy.handle()), "sqlite3_backup_init", "");
  // All pages in one step, inside one read transaction: a consistent snapshot; in WAL mode writers go on meanwhile.
  const int stepped = sqlite3_backup_step(backup, -1);
  const int finished = sqlite3_backup_finish(backup);
  if (stepped != SQLITE_DONE || finished != SQLITE_OK) {
    std::error_code ignored;
    fs::remove(file, ignored);
    throw StoreError("cannot back up the run store '" + path() + "' to '" + file +
                     "': " + sqlite3_errstr(stepped != SQLITE_DONE ? stepped : finished));
  }
}

// --- recording ---

int64_t RunStore::begin_run(const TrainConfig& config, const RunInfo& info, const std::string& dataset_fingerprint) {
  require_writable("record a run");
  if (!config.name.empty()) check_run_name(config.name);
  nlohmann::json config_json = config;
  nlohmann::json info_json = {{"model", info.model_summary},
                              {"precision", info.precision_summary},
                              {"compute", info.compute},
                              {"image_size", info.image_size},
                              {"train_images", info.train_images},
                              {"validation_images", info.validation_images},
                              {"classes", info.class_names},
                              {"layout", info.dataset_layout},
                              {"steps_per_epoch", info.steps_per_epoch},
                              {"first_epoch", info.first_epoch},
                              {"notes", info.notes}};
  const std::string now = utc_now_iso8601();
  const std::string versions =
      std::string("ampwb " AMPWB_VERSION ", SQLite ") + sqlite3_libversion() + ", g++ " __VERSION__;
  SqliteTransaction t(*db_);
  SqliteStatement insert(*db_,
                         "INSERT INTO runs(name, created, updated, status, config_json, depth, precision, batch_size, "
                         "lr, optimizer, epochs, image_size, seed, dataset_path, dataset_fingerprint, device, backend, "
                         "ampwb_version, versions, host, pid, info_json) "
                         "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind(1, config.name)
      .bind(2, now)
      .bind(3, now)
      .bind(4, config_json.dump())
      .bind(5, config.depth)
      .bind(6, mode_name(config.precision.mode))
      .bind(7, config.batch_size)
      .bind(8, static_cast<double>(config.lr))
      .bind(9, config.optimizer.kind)
      .bind(10, config.epochs)
      .bind(11, info.image_size > 0 ? info.image_size : config.image_size)
      .bind(12, static_cast<int64_t>(config.seed))  // the same 64 bits; read_run casts back
      .bind(13, config.data_dir)
      .bind(14, dataset_fingerprint)
      .bind(15, device_of(info.backend_description, config.device))
      .bind(16, info.backend_description)
      .bind(17, AMPWB_VERSION)
      .bind(18, versions)
      .bind(19, host_name())
      .bind(20, static_cast<int64_t>(::getpid()))
      .bind(21, info_json.dump());
  insert.run();
  const int64_t id = db_->last_insert_rowid();
  if (config.name.empty()) {
    SqliteStatement name(*db_, "UPDATE runs SET name = ? WHERE id = ?");
    name.bind(1, "resnet" + std::to_string(config.depth) + "-" + mode_name(config.precision.mode) + "-" +
                     std::to_string(id))
        .bind(2, id)
        .run();
  }
  // Locked before the row becomes visible, so no other process can see it running without an owner.
  RunLock lock = RunLock::acquire(run_lock_path(path(), id));
  t.commit();
  owned_[id] = std::move(lock);
  return id;
}

void RunStore::reopen_run(int64_t run_id, const RunInfo& info) {
  require_writable("resume a run");
  const RunRecord r = run(run_id);
  if (recording(run_id)) throw StoreError("run " + std::to_string(run_id) + " is being recorded by another process");
  RunLock lock = RunLock::acquire(run_lock_path(path(), run_id));
  SqliteTransaction t(*db_);
  SqliteStatement reopen(*db_,
                         "UPDATE runs SET status = 'running', ended = NULL, end_reason = '', updated = ?, host = ?, "
                         "pid = ? WHERE id = ?");
  reopen.bind(1, utc_now_iso8601()).bind(2, host_name()).bind(3, static_cast<int64_t>(::getpid())).bind(4, run_id);
  reopen.run();
  for (const char* table : {"epochs", "histograms"}) {
    SqliteStatement forget(*db_, std::string("DELETE FROM ") + table + " WHERE run_id = ? AND epoch >= ?");
    forget.bind(1, run_id).bind(2, info.first_epoch).run();
  }
  t.commit();
  owned_[run_id] = std::move(lock);
}

void RunStore::forget_steps_from(int64_t run, int64_t first_step) {
  require_writable("forget steps");
  SqliteStatement forget(*db_, "DELETE FROM steps WHERE run_id = ? AND step >= ?");
  forget.bind(1, run).bind(2, first_step).run();
}

void RunStore::insert_steps(int64_t run, const std::vector<StepReport>& steps) {
  if (steps.empty()) return;
  SqliteStatement insert(*db_,
                         "INSERT OR REPLACE INTO steps(run_id, step, epoch, loss, accuracy, lr, loss_scale, skipped, "
                         "grad_norm, wall_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const StepReport& s : steps) {
    insert.bind(1, run)
        .bind(2, s.step)
        .bind(3, s.epoch)
        .bind(4, static_cast<double>(s.loss))
        .bind(5, static_cast<double>(s.accuracy))
        .bind(6, static_cast<double>(s.lr))
        .bind(7, static_cast<double>(s.loss_scale))
        .bind(8, s.skipped ? 1 : 0)
        .bind(9, static_cast<double>(s.grad_norm))
        .bind(10, s.wall_seconds);
    insert.run();
  }
}

void RunStore::touch(int64_t run, double duration_seconds) {
  SqliteStatement update(*db_, "UPDATE runs SET updated = ?, duration_seconds = ? WHERE id = ?");
  update.bind(1, utc_now_iso8601()).bind(2, duration_seconds).bind(3, run).run();
}

void RunStore::add_steps(int64_t run, const std::vector<StepReport>& steps, double duration_seconds) {
  require_writable("record steps");
  SqliteTransaction t(*db_);
  insert_steps(run, steps);
  touch(run, duration_seconds);
  t.commit();
}

void RunStore::add_epoch(int64_t run, const EpochReport& e, const std::vector<StepReport>& steps,
                         double duration_seconds, bool sync) {
  require_writable("record an epoch");
  std::optional<DurableCommits> durable;
  if (sync) durable.emplace(*db_);
  SqliteTransaction t(*db_);
  insert_steps(run, steps);
  SqliteStatement insert(*db_,
                         "INSERT OR REPLACE INTO epochs(run_id, epoch, train_loss, train_accuracy, validation_loss, "
                         "validation_accuracy, validation_topk, topk, seconds, images_per_second, data_wait_seconds, "
                         "compute_seconds, skipped_steps, loss_scale, peak_bytes) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind(1, run)
      .bind(2, e.epoch)
      .bind(3, e.train_loss)
      .bind(4, e.train_accuracy)
      .bind(5, e.validation_loss)
      .bind(6, e.validation_accuracy)
      .bind(7, e.validation_topk)
      .bind(8, e.topk)
      .bind(9, e.seconds)
      .bind(10, e.images_per_second)
      .bind(11, e.data_wait_seconds)
      .bind(12, e.compute_seconds)
      .bind(13, e.skipped_steps)
      .bind(14, e.loss_scale)
      .bind(15, static_cast<int64_t>(e.peak_bytes));
  insert.run();
  touch(run, duration_seconds);
  t.commit();
}

void RunStore::add_histogram(int64_t run, const GradientHistogram& h) {
  require_writable("record a histogram");
  SqliteStatement insert(*db_,
                         "INSERT OR REPLACE INTO histograms(run_id, epoch, kind, loss_scale, min_log2, max_log2, "
                         "bins_json, zeros, nonfinite, total, underflow_fraction, overflow_fraction) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind(1, run)
      .bind(2, h.epoch)
      .bind(3, h.kind)
      .bind(4, h.loss_scale)
      .bind(5, h.min_log2)
      .bind(6, h.max_log2)
      .bind(7, nlohmann::json(h.counts).dump())
      .bind(8, h.zeros)
      .bind(9, h.nonfinite)
      .bind(10, h.total)
      .bind(11, h.underflow_fraction)
      .bind(12, h.overflow_fraction);
  insert.run();
}

void RunStore::add_checkpoint(int64_t run, const CheckpointInfo& c) {
  require_writable("record a checkpoint");
  // A checkpoint written to the path of an earlier one replaced it: only the newest row may point at the file.
  SqliteTransaction t(*db_);
  SqliteStatement replaced(*db_, "DELETE FROM checkpoints WHERE run_id = ? AND path = ?");
  replaced.bind(1, run).bind(2, c.path).run();
  SqliteStatement insert(*db_, "INSERT INTO checkpoints(run_id, epoch, step, path, created) VALUES (?, ?, ?, ?, ?)");
  insert.bind(1, run).bind(2, c.epoch).bind(3, c.step).bind(4, c.path).bind(5, utc_now_iso8601()).run();
  t.commit();
}

void RunStore::end_run(int64_t run, const RunEnd& end, const std::vector<StepReport>& steps, double duration_seconds) {
  require_writable("record the end of a run");
  {
    DurableCommits durable(*db_);
    SqliteTransaction t(*db_);
    insert_steps(run, steps);
    const std::string now = utc_now_iso8601();
    SqliteStatement update(*db_,
                           "UPDATE runs SET status = ?, end_reason = ?, ended = ?, updated = ?, duration_seconds = ? "
                           "WHERE id = ?");
    update.bind(1, run_status_name(end.status))
        .bind(2, end.reason)
        .bind(3, now)
        .bind(4, now)
        .bind(5, duration_seconds)
        .bind(6, run)
        .run();
    t.commit();
  }
  abandon_run(run);  // the row now says how it ended: give up ownership
}

void RunStore::abandon_run(int64_t run) {
  auto it = owned_.find(run);
  if (it == owned_.end()) return;
  it->second.release();
  owned_.erase(it);
}

// --- reading ---

std::vector<RunRecord> RunStore::runs() const {
  std::vector<RunRecord> out;
  SqliteStatement q(*db_, std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY id");
  while (q.step()) out.push_back(read_run(q));
  for (RunRecord& r : out) report_abandoned(r);
  return out;
}

RunRecord RunStore::run(int64_t id) const {
  SqliteStatement q(*db_, std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?");
  q.bind(1, id);
  if (!q.step()) throw StoreError("no run " + std::to_string(id) + " in the run store '" + path() + "'");
  RunRecord r = read_run(q);
  report_abandoned(r);
  return r;
}

void RunStore::report_abandoned(RunRecord& r) const {
  // Only a read-only store gets here with abandoned runs (a writable one recovered them on open).
  if (r.status == RunStatus::Running && read_only_ && !recording(r.id)) {
    r.status = RunStatus::Interrupted;
    r.end_reason = "the recording process ended without reporting an end (not yet marked: the store is read-only)";
  }
}

int64_t RunStore::resolve(const std::string& id_or_name) const {
  if (all_digits(id_or_name)) {
    const int64_t id = std::stoll(id_or_name);
    SqliteStatement q(*db_, "SELECT id FROM runs WHERE id = ?");
    q.bind(1, id);
    if (!q.step()) throw StoreError("no run " + id_or_name + " in the run store '" + path() + "'");
    return id;
  }
  SqliteStatement q(*db_, "SELECT id FROM runs WHERE name = ? ORDER BY id");
  q.bind(1, id_or_name);
  std::vector<int64_t> ids;
  while (q.step()) ids.push_back(q.int64(0));
  if (ids.empty())
    throw StoreError("no run named '" + id_or_name + "' in the run store '" + path() + "' (ampwb runs lists them)");
  if (ids.size() > 1) {
    std::string list;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) list += ", ";
      list += std::to_string(ids[i]);
    }
    throw StoreError(std::to_string(ids.size()) + " runs are named '" + id_or_name + "' (ids " + list +
                     "): give an id");
  }
  return ids[0];
}

std::vector<EpochReport> RunStore::epochs(int64_t run) const {
  std::vector<EpochReport> out;
  SqliteStatement q(*db_,
                    "SELECT epoch, train_loss, train_accuracy, validation_loss, validation_accuracy, validation_topk, "
                    "topk, seconds, images_per_second, data_wait_seconds, compute_seconds, skipped_steps, loss_scale, "
                    "peak_bytes FROM epochs WHERE run_id = ? ORDER BY epoch");
  q.bind(1, run);
  while (q.step()) {
    EpochReport e;
    int c = 0;
    e.epoch = static_cast<int>(q.int64(c++));
    e.train_loss = q.real_or_nan(c++);
    e.train_accuracy = q.real_or_nan(c++);
    e.validation_loss = q.real_or_nan(c++);
    e.validation_accuracy = q.real_or_nan(c++);
    e.validation_topk = q.real_or_nan(c++);
    e.topk = static_cast<int>(q.int64(c++));
    e.seconds = q.real(c++);
    e.images_per_second = q.real(c++);
    e.data_wait_seconds = q.real(c++);
    e.compute_seconds = q.real(c++);
    e.skipped_steps = q.int64(c++);
    e.loss_scale = q.real_or_nan(c++);
    e.peak_bytes = static_cast<size_t>(q.int64(c++));
    out.push_back(e);
  }
  return out;
}

std::vector<StepReport> RunStore::steps(int64_t run) const {
  std::vector<StepReport> out;
  SqliteStatement q(*db_,
                    "SELECT epoch, step, loss, accuracy, lr, loss_scale, skipped, grad_norm, wall_seconds "
                    "FROM steps WHERE run_id = ? ORDER BY step");
  q.bind(1, run);
  while (q.step()) {
    StepReport s;
    s.epoch = static_cast<int>(q.int64(0));
    s.step = q.int64(1);
    s.loss = static_cast<float>(q.real_or_nan(2));
    s.accuracy = static_cast<float>(q.real_or_nan(3));
    s.lr = static_cast<float>(q.real_or_nan(4));
    s.loss_scale = static_cast<float>(q.real_or_nan(5));
    s.skipped = q.int64(6) != 0;
    s.grad_norm = static_cast<float>(q.real_or_nan(7));
    s.wall_seconds = q.real(8);
    out.push_back(s);
  }
  return out;
}

std::vector<GradientHistogram> RunStore::histograms(int64_t run) const {
  std::vector<GradientHistogram> out;
  SqliteStatement q(*db_,
                    "SELECT epoch, kind, min_log2, max_log2, bins_json, zeros, nonfinite, total, underflow_fraction, "
                    "overflow_fraction, loss_scale FROM histograms WHERE run_id = ? ORDER BY epoch, kind");
  q.bind(1, run);
  while (q.step()) {
    GradientHistogram h;
    h.epoch = static_cast<int>(q.int64(0));
    h.kind = q.text(1);
    h.min_log2 = static_cast<int>(q.int64(2));
    h.max_log2 = static_cast<int>(q.int64(3));
    const nlohmann::json bins = nlohmann::json::parse(q.text(4), nullptr, false);
    if (!bins.is_array())
      throw StoreError("run store '" + path() + "': damaged histogram bins for run " + std::to_string(run));
    h.counts = bins.get<std::vector<int64_t>>();
    h.zeros = q.int64(5);
    h.nonfinite = q.int64(6);
    h.total = q.int64(7);
    h.underflow_fraction = q.real(8);
    h.overflow_fraction = q.real(9);
    h.loss_scale = q.real(10);
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<CheckpointInfo> RunStore::checkpoints(int64_t run) const {
  std::vector<CheckpointInfo> out;
  SqliteStatement q(*db_, "SELECT epoch, step, path FROM checkpoints WHERE run_id = ? ORDER BY step, id");
  q.bind(1, run);
  while (q.step()) out.push_back({static_cast<int>(q.int64(0)), q.int64(1), q.text(2)});
  return out;
}

bool RunStore::recording(int64_t run) const {
  return owned_.count(run) > 0 || RunLock::held_elsewhere(run_lock_path(path(), run));
}

// --- editing ---

void RunStore::rename(int64_t run_id, const std::string& name) {
  require_writable("rename a run");
  check_run_name(name);
  SqliteStatement update(*db_, "UPDATE runs SET name = ? WHERE id = ?");
  update.bind(1, name).bind(2, run_id).run();
  if (db_->changes() == 0) throw StoreError("no run " + std::to_string(run_id) + " in the run store '" + path() + "'");
}

void RunStore::set_notes(int64_t run_id, const std::string& notes) {
  require_writable("change the notes of a run");
  SqliteStatement update(*db_, "UPDATE runs SET notes = ? WHERE id = ?");
  update.bind(1, notes).bind(2, run_id).run();
  if (db_->changes() == 0) throw StoreError("no run " + std::to_string(run_id) + " in the run store '" + path() + "'");
}

void RunStore::set_tags(int64_t run_id, const std::vector<std::string>& tags) {
  SqliteStatement update(*db_, "UPDATE runs SET tags = ? WHERE id = ?");
  update.bind(1, nlohmann::json(tags).dump()).bind(2, run_id).run();
}

void RunStore::add_tag(int64_t run_id, const std::string& tag) {
  require_writable("tag a run");
  if (tag.empty()) throw Error("a tag cannot be empty");
  SqliteTransaction t(*db_);  // read-modify-write of the tag list, atomic against other writers
  std::vector<std::string> tags = run(run_id).tags;
  if (std::find(tags.begin(), tags.end(), tag) == tags.end()) tags.push_back(tag);
  set_tags(run_id, tags);
  t.commit();
}

void RunStore::remove_tag(int64_t run_id, const std::string& tag) {
  require_writable("untag a run");
  SqliteTransaction t(*db_);
  std::vector<std::string> tags = run(run_id).tags;
  const auto it = std::find(tags.begin(), tags.end(), tag);
  if (it == tags.end()) throw Error("run " + std::to_string(run_id) + " has no tag '" + tag + "'");
  tags.erase(it);
  set_tags(run_id, tags);
  t.commit();
}

void RunStore::remove(int64_t run_id) {
  require_writable("delete a run");
  const RunRecord r = run(run_id);
  if (r.status == RunStatus::Running && recording(run_id))
    throw StoreError("run " + std::to_string(run_id) + " ('" + r.name +
                     "') is being recorded by a running process: cancel it first");
  SqliteTransaction t(*db_);
  for (const char* table : {"steps", "epochs", "histograms", "checkpoints"}) {
    SqliteStatement del(*db_, std::string("DELETE FROM ") + table + " WHERE run_id = ?");
    del.bind(1, run_id).run();
  }
  SqliteStatement del(*db_, "DELETE FROM runs WHERE id = ?");
  del.bind(1, run_id).run();
  t.commit();
}

std::string RunStore::integrity_check() const { return pragma_lines(*db_, "PRAGMA integrity_check"); }

}  // namespace ampwb
