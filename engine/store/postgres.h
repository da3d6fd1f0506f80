// The run store's connection to a PostgreSQL database through libpq (sql_connection.h). Built only where CMake
// finds libpq (AMPWB_HAVE_LIBPQ). The connection string is libpq's own: a postgresql:// URI whose parameters
// (host, port, user, dbname, service, sslmode, ...) libpq reads, and whose password, when not in the URI, libpq
// takes from ~/.pgpass or PGPASSFILE. The store never keeps or prints a password: name() is the URI without it.
#pragma once

#include <set>
#include <string>

#include "store/sql_connection.h"

struct pg_conn;

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
  void begin_write() override;
  void commit() override { exec("COMMIT"); }
  void rollback() noexcept override;
  std::string replace_into(const std::string& table, const std::string& columns, const std::string& params,
                           const std::string& key, int rows) const override;
  void own_run(int64_t run) override;
  void disown_run(int64_t run) override;
  bool recorded_elsewhere(int64_t run) const override;
  void forget_run_lock(int64_t) override {}  // the server dropped the lock with its session: nothing is left

  // A connection the server dropped (restarted, the session ended by an administrator, the network) is made again
  // before the next statement, with the locks of the runs it records; until then statements fail with
  // StoreError::connection_lost(), and a transaction cut off is the caller's to run again (StoreRecorder does).
  void ensure_connected();

  pg_conn* handle() const { return conn_; }
  void set_changes(int changes) { changes_ = changes; }
  [[noreturn]] void fail(const char* what, const std::string& sql, const char* message) const;

 private:
  void set_up_session();
  void take_run_lock(int64_t run);

  pg_conn* conn_ = nullptr;
  std::string name_;
  bool read_only_ = false;
  bool reconnecting_ = false;
  std::set<int64_t> owned_;  // runs whose lock this connection holds
  int changes_ = 0;
};

// libpq's version, "15.5", for the version reports.
std::string libpq_version();

}  // namespace ampwb
