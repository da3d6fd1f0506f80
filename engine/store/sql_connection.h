// The run store's SQL goes through this one small interface, so that the same records, schema versions and queries
// serve an SQLite file (sqlite.h) and a PostgreSQL database (postgres.h). Queries are written once, with `?`
// placeholders; what differs between the two is said by the connection (dialect(), replace_into(), begin_write())
// and by the schema each keeps (run_store.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

namespace ampwb {

// One prepared statement of a connection: what SqlStatement forwards to. Parameters 1-based, columns 0-based.
class SqlStatementImpl {
 public:
  virtual ~SqlStatementImpl() = default;
  virtual void bind_int(int index, int64_t value) = 0;
  virtual void bind_real(int index, double value) = 0;  // NaN is stored as NULL in both databases
  virtual void bind_text(int index, const std::string& value) = 0;
  virtual void bind_null(int index) = 0;
  virtual bool step() = 0;   // true while a row is available
  virtual void reset() = 0;  // ready to run again, with new bindings
  virtual bool is_null(int column) const = 0;
  virtual int64_t int64(int column) const = 0;
  virtual double real(int column) const = 0;
  virtual std::string text(int column) const = 0;  // NULL reads as ""
  // Runs a statement whose rows and count nobody reads (SqlStatement::run_deferred), then resets it.
  virtual void run_deferred() {
    while (step()) {
    }
    reset();
  }
};

// "(params), (params), ..." for `rows` rows of one statement's VALUES.
inline std::string value_rows(const std::string& params, int rows) {
  std::string out;
  for (int i = 0; i < rows; ++i) out += (i ? ", (" : "(") + params + ")";
  return out;
}

class SqlConnection {
 public:
  enum class Dialect { Sqlite, PostgreSql };
  virtual ~SqlConnection() = default;

  virtual Dialect dialect() const = 0;
  // The store as messages name it: the SQLite file's path, or the PostgreSQL URI without its password.
  virtual const std::string& name() const = 0;
  // "SQLite 3.40.1", "PostgreSQL 15.5": recorded with each run.
  virtual std::string database_version() const = 0;

  virtual void exec(const std::string& sql) = 0;  // one or more statements without parameters or rows
  virtual std::unique_ptr<SqlStatementImpl> prepare(const std::string& sql) = 0;
  virtual int changes() const = 0;  // rows changed by the last statement run

  // A write transaction: writers queue behind each other (SQLite's BEGIN IMMEDIATE; PostgreSQL: one advisory lock
  // for the store's writers), so a read-check-write inside one (a run's unique name) is never raced.
  virtual void begin_write() = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;  // best effort, while unwinding

  // "INSERT ... VALUES (params), ... `rows` times" that replaces the rows with the same `key` columns (the rows
  // themselves must not share a key).
  virtual std::string replace_into(const std::string& table, const std::string& columns, const std::string& params,
                                   const std::string& key, int rows) const = 0;

  // Who records a run: held by this connection from begin_run until the run's end is written, and dropped by the
  // database or the kernel when the recording process dies (SQLite: a lock file; PostgreSQL: an advisory lock).
  virtual void own_run(int64_t run) = 0;  // throws StoreError when another process records it
  virtual void disown_run(int64_t run) = 0;
  virtual bool recorded_elsewhere(int64_t run) const = 0;
  virtual void forget_run_lock(int64_t run) = 0;  // a run found abandoned: its leftovers (a lock file) go
  // Whether this connection still records `run`: false once it lost the run's lock to another process (PostgreSQL:
  // a connection made again after another process resumed the run). Nothing more of it may be written then.
  virtual bool owns_run(int64_t /*run*/) const { return true; }

  // A sweep's point being trained: held by the process that took it until its child process ended and the point's
  // state is settled, and by that child (a shared hold), so that no other process takes the point, or takes it for
  // abandoned, while either lives. Dropped as a run's lock is when a holder dies.
  // False where a process holds it, this one too. Called inside write transactions, so no other process takes the
  // point between the check and the hold.
  bool try_hold_point(int64_t sweep, int index) {
    if (point_held(sweep, index)) return false;
    join_point(sweep, index);
    return true;
  }
  virtual void join_point(int64_t sweep, int index) = 0;      // the child's hold beside its parent's
  virtual void release_point(int64_t sweep, int index) = 0;
  virtual bool point_held(int64_t sweep, int index) const = 0;  // by any process, this one too
};

// A prepared statement, as the store's code uses it: bind() takes 1-based parameter indexes, readers 0-based
// column indexes.
class SqlStatement {
 public:
  SqlStatement(SqlConnection& db, const std::string& sql) : impl_(db.prepare(sql)) {}

  SqlStatement& bind(int index, int64_t value) { return impl_->bind_int(index, value), *this; }
  SqlStatement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  SqlStatement& bind(int index, double value) { return impl_->bind_real(index, value), *this; }
  SqlStatement& bind(int index, const std::string& value) { return impl_->bind_text(index, value), *this; }
  SqlStatement& bind(int index, const char* value) { return bind(index, std::string(value)); }
  SqlStatement& bind_null(int index) { return impl_->bind_null(index), *this; }

  bool step() { return impl_->step(); }
  void run() {
    while (step()) {
    }
    reset();
  }
  void reset() { impl_->reset(); }
  // run() for a write inside a transaction whose effect only its commit needs: a database server may send it with
  // the transaction's next statement or its commit, in one round trip (PostgreSQL), so its failure is thrown there;
  // changes() does not count it. Outside a transaction, and in SQLite, it is run().
  void run_deferred() { impl_->run_deferred(); }

  bool is_null(int column) const { return impl_->is_null(column); }
  int64_t int64(int column) const { return impl_->int64(column); }
  double real(int column) const { return impl_->real(column); }  // NULL reads as 0
  double real_or_nan(int column) const {
    return is_null(column) ? std::numeric_limits<double>::quiet_NaN() : impl_->real(column);
  }
  std::string text(int column) const { return impl_->text(column); }

 private:
  std::unique_ptr<SqlStatementImpl> impl_;
};

// A write transaction (SqlConnection::begin_write), committed by commit(), rolled back when left without it.
class SqlTransaction {
 public:
  explicit SqlTransaction(SqlConnection& db) : db_(db) { db_.begin_write(); }
  ~SqlTransaction() {
    if (open_) db_.rollback();
  }
  SqlTransaction(const SqlTransaction&) = delete;
  SqlTransaction& operator=(const SqlTransaction&) = delete;
  void commit() {
    db_.commit();
    open_ = false;
  }

 private:
  SqlConnection& db_;
  bool open_ = true;
};

}  // namespace ampwb
