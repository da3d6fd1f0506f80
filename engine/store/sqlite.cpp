// SQLite C API wrapper: checked calls, prepared statements, immediate transactions.
#include "store/sqlite.h"

#include <sqlite3.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "store/sqlite_locks.h"

namespace ampwb {

bool StoreError::damaged() const { return code_ == SQLITE_CORRUPT || code_ == SQLITE_NOTADB; }
bool StoreError::not_a_database() const { return code_ == SQLITE_NOTADB; }

namespace {

// What a user can do about the common failures; SQLite's own message says what happened.
const char* hint(int extended) {
  switch (extended) {
    case SQLITE_IOERR_WRITE:
    case SQLITE_IOERR_FSYNC:
    case SQLITE_IOERR_TRUNCATE:
    case SQLITE_IOERR_SHMSIZE:
      return "writing to the disk failed: the disk may be full or the file over a size limit; what was stored "
             "before is kept";
    default:
      break;
  }
  switch (extended & 0xff) {
    case SQLITE_READONLY:
      return "the file or its folder is read-only";
    case SQLITE_FULL:
      return "the disk is full; what was stored before is kept";
    case SQLITE_NOTADB:
      return "the file is not an SQLite database";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "another process kept the database locked for longer than the busy timeout";
    case SQLITE_CANTOPEN:
      return "check that the folder exists and is writable";
    case SQLITE_CORRUPT:
      return "the database file is damaged";
    case SQLITE_IOERR:
      return "the operating system refused a read or write";
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return "permission denied";
    default:
      return nullptr;
  }
}

std::string shorten(const std::string& sql) {
  std::string s;
  for (char c : sql) s += (c == '\n' || c == '\t') ? ' ' : c;
  const size_t start = s.find_first_not_of(' ');
  s = start == std::string::npos ? "" : s.substr(start);
  return s.size() > 160 ? s.substr(0, 157) + "..." : s;
}

[[noreturn]] void fail(sqlite3* db, const std::string& path, int rc, const char* call, const std::string& sql) {
  std::string message = "run store '" + path + "': " + call + " failed";
  if (!sql.empty()) message += " on \"" + shorten(sql) + "\"";
  const int extended = db ? sqlite3_extended_errcode(db) : rc;
  message += ": ";
  message += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  message += " (code " + std::to_string(extended);
  const int os_errno = db ? sqlite3_system_errno(db) : 0;
  if (os_errno != 0 && (rc & 0xff) != SQLITE_BUSY)
    message += ", errno " + std::to_string(os_errno) + ": " + std::strerror(os_errno);
  message += ")";
  if (const char* h = hint(extended)) message += std::string("; ") + h;
  throw StoreError(message, rc & 0xff);
}

// file: URI of a path, with the characters URIs reserve percent-encoded.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x21 || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      uri += buf;
    } else {
      uri += static_cast<char>(c);
    }
  }
  return uri + "?immutable=1";
}

}  // namespace

SqliteDb::SqliteDb(const std::string& path, Open mode) : path_(path) {
  sqlite_locks_survive_other_descriptors();
  int flags = SQLITE_OPEN_NOMUTEX;  // one thread at a time per connection (documented in run_store.h)
  switch (mode) {
    case Open::ReadWriteCreate:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
    case Open::ReadWrite:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case Open::ReadOnly:
      flags |= SQLITE_OPEN_READONLY;
      break;
    case Open::Immutable:
      flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
      break;
  }
  const int rc =
      sqlite3_open_v2(mode == Open::Immutable ? immutable_uri(path).c_str() : path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    try {
      fail(db_, path_, rc, "sqlite3_open_v2", "");
    } catch (...) {
      sqlite3_close(db_);
      db_ = nullptr;
      throw;
    }
  }
  sqlite3_extended_result_codes(db_, 1);
}

SqliteDb::~SqliteDb() {
  // Statements are RAII objects that never outlive the connection, so close cannot report SQLITE_BUSY.
  if (db_) sqlite3_close(db_);
}

void SqliteDb::check(int rc, const char* call, const std::string& sql) const {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
  fail(db_, path_, rc, call, sql);
}

void SqliteDb::exec(const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  sqlite3_free(error);  // the same text as sqlite3_errmsg, which check() reports
  check(rc, "sqlite3_exec", sql);
}

int64_t SqliteDb::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int SqliteDb::changes() const { return sqlite3_changes(db_); }
bool SqliteDb::read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }

SqliteStatement::SqliteStatement(SqliteDb& db, const std::string& sql) : db_(db), sql_(sql) {
  db_.check(sqlite3_prepare_v2(db_.handle(), sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr),
            "sqlite3_prepare_v2", sql);
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

SqliteStatement& SqliteStatement::bind(int index, int64_t value) {
  db_.check(sqlite3_bind_int64(stmt_, index, value), "sqlite3_bind_int64", sql_);
  return *this;
}

SqliteStatement& SqliteStatement::bind(int index, double value) {
  db_.check(sqlite3_bind_double(stmt_, index, value), "sqlite3_bind_double", sql_);
  return *this;
}

SqliteStatement& SqliteStatement::bind(int index, const std::string& value) {
  db_.check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT),
            "sqlite3_bind_text", sql_);
  return *this;
}

SqliteStatement& SqliteStatement::bind_null(int index) {
  db_.check(sqlite3_bind_null(stmt_, index), "sqlite3_bind_null", sql_);
  return *this;
}

bool SqliteStatement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(stmt_);  // leaves the statement reusable; check() reports the step's error
  db_.check(rc, "sqlite3_step", sql_);
  return false;
}

void SqliteStatement::run() {
  while (step()) {
  }
  reset();
}

void SqliteStatement::reset() {
  sqlite3_reset(stmt_);  // returns the last step's error, already reported by step()
  sqlite3_clear_bindings(stmt_);
}

bool SqliteStatement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int64_t SqliteStatement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }
double SqliteStatement::real(int column) const { return sqlite3_column_double(stmt_, column); }

double SqliteStatement::real_or_nan(int column) const {
  return is_null(column) ? std::numeric_limits<double>::quiet_NaN() : sqlite3_column_double(stmt_, column);
}

std::string SqliteStatement::text(int column) const {
  const unsigned char* t = sqlite3_column_text(stmt_, column);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt_, column)) : std::string();
}

SqliteTransaction::SqliteTransaction(SqliteDb& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

SqliteTransaction::~SqliteTransaction() {
  if (open_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);  // best effort while unwinding
}

void SqliteTransaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

const char* sqlite_library_version() { return sqlite3_libversion(); }

namespace {
// Where the idle statements are fewer than this, a statement done with is kept for reuse, else finalized: the
// batches of steps make a statement for each row count.
constexpr size_t kMaxIdleStatements = 64;

class SqliteStatementImpl : public SqlStatementImpl {
 public:
  SqliteStatementImpl(std::unique_ptr<SqliteStatement> q, std::string sql,
                      std::weak_ptr<SqliteConnection::IdleStatements> idle)
      : q_(std::move(q)), sql_(std::move(sql)), idle_(std::move(idle)) {}
  ~SqliteStatementImpl() override {
    const std::shared_ptr<SqliteConnection::IdleStatements> idle = idle_.lock();
    if (!idle || idle->size() >= kMaxIdleStatements) return;
    q_->reset();
    idle->emplace(std::move(sql_), std::move(q_));
  }
  void bind_int(int index, int64_t value) override { q_->bind(index, value); }
  void bind_real(int index, double value) override { q_->bind(index, value); }
  void bind_text(int index, const std::string& value) override { q_->bind(index, value); }
  void bind_null(int index) override { q_->bind_null(index); }
  bool step() override { return q_->step(); }
  void reset() override { q_->reset(); }
  bool is_null(int column) const override { return q_->is_null(column); }
  int64_t int64(int column) const override { return q_->int64(column); }
  double real(int column) const override { return q_->real(column); }
  std::string text(int column) const override { return q_->text(column); }

 private:
  std::unique_ptr<SqliteStatement> q_;
  std::string sql_;
  std::weak_ptr<SqliteConnection::IdleStatements> idle_;
};
}  // namespace

std::string SqliteConnection::database_version() const { return std::string("SQLite ") + sqlite3_libversion(); }

std::unique_ptr<SqlStatementImpl> SqliteConnection::prepare(const std::string& sql) {
  std::unique_ptr<SqliteStatement> q;
  if (const auto it = idle_->find(sql); it != idle_->end()) {
    q = std::move(it->second);
    idle_->erase(it);
  } else {
    q = std::make_unique<SqliteStatement>(db_, sql);
  }
  return std::make_unique<SqliteStatementImpl>(std::move(q), sql, idle_);
}

void SqliteConnection::rollback() noexcept { sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr); }

std::string SqliteConnection::replace_into(const std::string& table, const std::string& columns,
                                           const std::string& params, const std::string&, int rows) const {
  return "INSERT OR REPLACE INTO " + table + "(" + columns + ") VALUES " + value_rows(params, rows);
}

void SqliteConnection::own_run(int64_t run) { locks_[run] = RunLock::acquire(run_lock_path(db_.path(), run)); }

void SqliteConnection::disown_run(int64_t run) {
  const auto it = locks_.find(run);
  if (it == locks_.end()) return;
  it->second.release();
  locks_.erase(it);
}

bool SqliteConnection::recorded_elsewhere(int64_t run) const {
  return RunLock::held_elsewhere(run_lock_path(db_.path(), run));
}

void SqliteConnection::join_point(int64_t sweep, int index) {
  points_[{sweep, index}] = RunLock::acquire_shared(point_lock_path(db_.path(), sweep, index));
}

void SqliteConnection::release_point(int64_t sweep, int index) {
  const auto it = points_.find({sweep, index});
  if (it == points_.end()) return;
  it->second.release_shared();
  points_.erase(it);
}

// A probe's exclusive lock fails against any holder's shared one, this connection's own too.
bool SqliteConnection::point_held(int64_t sweep, int index) const {
  return RunLock::held_elsewhere(point_lock_path(db_.path(), sweep, index));
}

void SqliteConnection::forget_run_lock(int64_t run) {
  RunLock::remove_if_free(run_lock_path(db_.path(), run));  // a leftover; harmless if it stays
}

}  // namespace ampwb
