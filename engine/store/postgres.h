// The run store's connection to a PostgreSQL database through libpq (sql_connection.h). Built only where CMake
// finds libpq (AMPWB_HAVE_LIBPQ). The connection string is libpq's own: a postgresql:// URI whose parameters
// (host, port, user, dbname, service, sslmode, ...) libpq reads, and whose password, when not in the URI, libpq
// takes from ~/.pgpass or PGPASSFILE. The store never keeps or prints a password: name() is the URI without it.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/sql_connection.h"

struct pg_conn;
struct pg_result;

namespace ampwb {

class PostgresConnection : public SqlConnection {
 public:
  // Connects; throws StoreError naming the URI (without its password) and libpq's reason. `read_only`: every
  // transaction of the connection is read-only, so nothing can be written through it.
  PostgresConnection(const std::string& uri, bool read_only);
  ~PostgresConnection() override;
  PostgresConnection(const PostgresConnection&) = delete;
  PostgresConnection& operator=(const PostgresConnection&) = delete;

  Dialect dialect() const override { return Dialect::PostgreSql; }
  const std::string& name() const override { return name_; }
  std::string database_version() const override;
  void exec(const std::string& sql) override;
  std::unique_ptr<SqlStatementImpl> prepare(const std::string& sql) override;
  int changes() const override { return changes_; }
  // The writers' lock is taken with the transaction's first statement, in its round trip (see run_prepared); the
  // commit goes with the statements deferred to it.
  void begin_write() override { begin_pending_ = in_write_ = true; }
  void commit() override;
  void rollback() noexcept override;
  std::string replace_into(const std::string& table, const std::string& columns, const std::string& params,
                           const std::string& key, int rows) const override;
  void own_run(int64_t run) override;
  void disown_run(int64_t run) override;
  bool recorded_elsewhere(int64_t run) const override;
  bool owns_run(int64_t run) const override { return owned_.count(run) > 0; }
  void forget_run_lock(int64_t) override {}  // the server dropped the lock with its session: nothing is left
  void join_point(int64_t sweep, int index) override;
  void release_point(int64_t sweep, int index) override;
  bool point_held(int64_t sweep, int index) const override;

  // A connection the server dropped (restarted, the session ended by an administrator, the network) is made again
  // before the next statement, with the locks of the runs it records; until then statements fail with
  // StoreError::connection_lost(), and a transaction cut off is the caller's to run again (StoreRecorder does). A
  // commit cut off from its answer is looked up first: where the server made it, commit() returns as made.
  void ensure_connected();

  // Runs `sql` (numbered placeholders; a null value is NULL) as a statement prepared once a session and kept by
  // its text, so the server parses it once; a pending BEGIN, the preparation and the run go in one round trip.
  // Returns the successful result, the caller's to clear; fails otherwise.
  pg_result* run_prepared(const std::string& sql, const std::vector<const char*>& values);
  // Inside a write transaction, keeps `sql` with its values to send with the transaction's next round trip (its
  // next statement run now, or its commit); elsewhere runs it at once (SqlStatement::run_deferred).
  void run_deferred(const std::string& sql, std::vector<std::optional<std::string>> values);

  pg_conn* handle() const { return conn_; }
  void set_changes(int changes) { changes_ = changes; }
  [[noreturn]] void fail(const char* what, const std::string& sql, const char* message) const;

 private:
  void set_up_session();
  void take_run_lock(int64_t run);
  // A session advisory lock: pg_try_advisory_lock's arguments (one placeholder, for `argument`), and the lock as
  // pg_locks shows it.
  struct AdvisoryLock {
    std::string arguments;
    int64_t argument, classid, objid;
    int objsubid;
    bool shared;  // several sessions may hold it
    // "SELECT pg_<function>[_shared](<arguments>)": one of PostgreSQL's advisory lock functions called on it.
    std::string call(const char* function) const {
      return std::string("SELECT pg_") + function + (shared ? "_shared(" : "(") + arguments + ")";
    }
  };
  static AdvisoryLock run_lock(int64_t run);
  static AdvisoryLock point_lock(int64_t sweep, int index);
  bool try_lock(const AdvisoryLock& lock);
  void unlock(const AdvisoryLock& lock);
  bool locked_elsewhere(const AdvisoryLock& lock) const;
  std::string prepared_name(const std::string& sql, bool& fresh);
  pg_result* round_trip(const std::string* sql, const std::vector<const char*>* values, bool commit);
  // Whether transaction `xact`, whose commit was sent when the connection broke, was committed; read on a new
  // connection, made again for a few seconds before it throws connection_lost().
  bool committed_after_loss(const std::string& xact);

  struct Prepared {
    std::string name;
    uint64_t last_used = 0;
  };
  static constexpr size_t kPreparedLimit = 64;  // a session's prepared statements, the least recently used dropped

  pg_conn* conn_ = nullptr;
  std::string name_;
  bool read_only_ = false;
  bool reconnecting_ = false;
  int session_pid_ = 0;        // this session's server process, where it writes
  int64_t session_start_ = 0;  // and its backend_start in pg_stat_activity (microseconds)
  std::set<int64_t> owned_;    // runs whose lock this connection holds
  std::set<std::pair<int64_t, int>> points_;  // sweep points it holds (sweep, index)
  int changes_ = 0;
  bool begin_pending_ = false;                          // begin_write() called, its BEGIN not yet sent
  bool in_write_ = false;                               // from begin_write() to commit() or rollback()
  std::string xact_id_;  // the write transaction's id (pg_current_xact_id), sent back by the server with its BEGIN
  struct Deferred {
    std::string sql;
    std::vector<std::optional<std::string>> values;
  };
  std::vector<Deferred> deferred_;  // run_deferred's statements, not yet sent
  std::unordered_map<std::string, Prepared> prepared_;  // by SQL text, for this session only
  std::vector<std::string> to_deallocate_;              // evicted from prepared_, still on the server
  uint64_t uses_ = 0;
  uint64_t next_name_ = 0;
};

// libpq's version, "15.5", for the version reports.
std::string libpq_version();

}  // namespace ampwb
