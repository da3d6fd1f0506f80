// A private PostgreSQL 15 server for tests: a fresh cluster (initdb) in a temporary folder, listening on a Unix
// socket in that folder only (no TCP port), one database in it, stopped and removed by the destructor. The tests of
// a PostgreSQL run store run against a real server this way, never against the machine's own.
#pragma once

#include <filesystem>
#include <string>

namespace ampwb::test {

class PostgresServer {
 public:
  // Starts the server and creates `database`. Throws std::runtime_error saying why it could not, with the last
  // lines of the log that says more, kept in the folder (the caller's test then fails: a server that cannot start is
  // not a skip).
  explicit PostgresServer(const std::string& database = "ampwb_test");
  ~PostgresServer();  // pg_ctl stop -m fast, then removes the folder
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // libpq's connection URI of the database: postgresql:///DATABASE?host=FOLDER&port=5432&user=ampwb
  const std::string& uri() const { return uri_; }
  // The folder of the server's socket; the socket file itself, present while the server runs.
  const std::filesystem::path& socket_folder() const { return folder_; }
  std::filesystem::path socket_file() const;
  // Stops the server (fast: its clients' connections end at once) and starts it again, as an administrator's restart
  // does; throws std::runtime_error saying why where it could not.
  void restart();

 private:
  void stop_and_remove(bool keep_logs = false) noexcept;  // keep_logs: for a failed start, to read them

  std::filesystem::path folder_;  // the cluster (data/), the socket, and the logs
  std::string run_as_;            // the unprivileged user the server runs as when this process is root; else empty
  bool started_ = false;
  std::string uri_;
};

}  // namespace ampwb::test
