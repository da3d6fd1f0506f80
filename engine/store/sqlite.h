// A thin RAII layer over the SQLite C API. Every sqlite3 call goes through SqliteDb::check, which throws a
// StoreError naming the database file, the call, the SQL and SQLite's own message (plus errno where the OS failed).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "store/run_lock.h"
#include "store/sql_connection.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ampwb {

// A run store problem: an unusable file, a failed read or write. The message names the file.
class StoreError : public Error {
 public:
  // A database server's connection dropped, or could not be made: what failed may be tried again (reconnecting.h).
  static constexpr int kConnectionLost = -1;
  explicit StoreError(const std::string& message, int sqlite_code = 0) : Error(message), code_(sqlite_code) {}
  int sqlite_code() const { return code_; }  // SQLite's primary result code, 0 when SQLite did not fail
  bool connection_lost() const { return code_ == kConnectionLost; }
  bool damaged() const;                      // the file's content is corrupt (not: busy, full, newer, foreign)
  bool not_a_database() const;               // the file does not begin as an SQLite database does

 private:
  int code_;
};

class SqliteDb {
 public:
  // Immutable: read-only without the -shm file a WAL database otherwise needs, for a file in a folder this
  // process cannot write (SQLite then assumes no one changes the file while it is open).
  enum class Open { ReadWriteCreate, ReadWrite, ReadOnly, Immutable };

  SqliteDb(const std::string& path, Open mode);  // throws StoreError naming the file
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs one or more statements that return no rows.
  void exec(const std::string& sql);

  // Throws StoreError when rc is neither SQLITE_OK, SQLITE_ROW nor SQLITE_DONE; names `call` and `sql`.
  void check(int rc, const char* call, const std::string& sql) const;

  int64_t last_insert_rowid() const;
  int changes() const;     // rows changed by the last statement
  bool read_only() const;  // SQLite opened the file read-only (write-protected file or Open::ReadOnly)
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// A prepared statement. bind() takes 1-based parameter indexes, column readers 0-based column indexes.
class SqliteStatement {
 public:
  SqliteStatement(SqliteDb& db, const std::string& sql);
  ~SqliteStatement();
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  SqliteStatement& bind(int index, int64_t value);
  SqliteStatement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  SqliteStatement& bind(int index, double value);  // NaN is stored as NULL (SQLite has no NaN)
  SqliteStatement& bind(int index, const std::string& value);
  SqliteStatement& bind(int index, const char* value) { return bind(index, std::string(value)); }
  SqliteStatement& bind_null(int index);

  bool step();   // true while a row is available
  void run();    // steps to completion and resets, for statements without results
  void reset();  // ready to run again with new bindings

  bool is_null(int column) const;
  int64_t int64(int column) const;
  double real(int column) const;         // NULL reads as 0
  double real_or_nan(int column) const;  // NULL reads as NaN (how a stored NaN comes back)
  std::string text(int column) const;    // NULL reads as ""

 private:
  SqliteDb& db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE on construction (takes the write lock up front, so the busy timeout applies instead of a
// read-to-write upgrade failing with SQLITE_BUSY), COMMIT on commit(), ROLLBACK when left without commit.
class SqliteTransaction {
 public:
  explicit SqliteTransaction(SqliteDb& db);
  ~SqliteTransaction();
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;
  void commit();

 private:
  SqliteDb& db_;
  bool open_ = true;
};

const char* sqlite_library_version();

// The run store's connection to an SQLite file (sql_connection.h); a run's owner holds its lock file (run_lock.h).
class SqliteConnection : public SqlConnection {
 public:
  SqliteConnection(const std::string& path, SqliteDb::Open mode) : db_(path, mode) {}
  SqliteDb& db() { return db_; }

  Dialect dialect() const override { return Dialect::Sqlite; }
  const std::string& name() const override { return db_.path(); }
  std::string database_version() const override;
  void exec(const std::string& sql) override { db_.exec(sql); }
  std::unique_ptr<SqlStatementImpl> prepare(const std::string& sql) override;
  int changes() const override { return db_.changes(); }
  void begin_write() override { db_.exec("BEGIN IMMEDIATE"); }
  void commit() override { db_.exec("COMMIT"); }
  void rollback() noexcept override;
  std::string replace_into(const std::string& table, const std::string& columns, const std::string& params,
                           const std::string& key, int rows) const override;
  void own_run(int64_t run) override;
  void disown_run(int64_t run) override;
  bool recorded_elsewhere(int64_t run) const override;
  void forget_run_lock(int64_t run) override;
  void release_point(int64_t sweep, int index) override;
  void join_point(int64_t sweep, int index) override;
  bool point_held(int64_t sweep, int index) const override;

  // Statements run and reset, kept for the next prepare() of the same SQL: preparing costs as much as running a
  // small write, and a run's epoch prepares the same ten each time. Declared after db_, so finalized before it closes.
  using IdleStatements = std::unordered_multimap<std::string, std::unique_ptr<SqliteStatement>>;

 private:
  SqliteDb db_;
  std::shared_ptr<IdleStatements> idle_ = std::make_shared<IdleStatements>();
  std::map<int64_t, RunLock> locks_;
  std::map<std::pair<int64_t, int>, RunLock> points_;
};

}  // namespace ampwb
