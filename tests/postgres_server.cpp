// The private PostgreSQL server of the tests: the server's own programs (initdb, pg_ctl) run as child processes,
// libpq checks that the server answers and creates the database.
#include "postgres_server.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#ifndef AMPWB_POSTGRES_BINDIR
#define AMPWB_POSTGRES_BINDIR "/usr/lib/postgresql/15/bin"
#endif

namespace ampwb::test {
namespace {
namespace fs = std::filesystem;

constexpr int kPort = 5432;  // only names the socket file (.s.PGSQL.5432): no TCP port is opened
constexpr const char* kSuperuser = "ampwb";

// The last `count` lines of a log file, for a failure message.
std::string last_lines(const fs::path& file, size_t count = 15) {
  std::ifstream in(file);
  if (!in) return "(no " + file.string() + ")";
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > count) lines.pop_front();
  }
  std::string text;
  for (const std::string& line : lines) text += "\n  " + line;
  return text;
}

// Runs `argv` (no shell) in `folder` as `user` (when not empty), its output appended to `log`; its exit status.
int run_program(std::vector<std::string> argv, const std::string& user, const fs::path& folder, const fs::path& log) {
  // As root, initdb and postgres refuse to run (a server bug must not own the machine). runuser (util-linux) switches
  // user without PAM asking for a password, as root only; setpriv would also work but leaves HOME and USER as root's.
  if (!user.empty()) argv.insert(argv.begin(), {"runuser", "-u", user, "--"});
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    // The server's folder: the unprivileged user may not be able to enter the test's working folder.
    if (::chdir(folder.c_str()) != 0) ::_exit(126);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// `text` as a URI query value: unreserved characters and '/' as they are, the rest percent-encoded.
std::string uri_value(const std::string& text) {
  std::string out;
  for (const unsigned char ch : text) {
    if (std::isalnum(ch) || std::string("-._~/").find(static_cast<char>(ch)) != std::string::npos) {
      out += static_cast<char>(ch);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", ch);
      out += hex;
    }
  }
  return out;
}

std::string connection_uri(const std::string& database, const fs::path& folder) {
  return "postgresql:///" + database + "?host=" + uri_value(folder.string()) + "&port=" + std::to_string(kPort) +
         "&user=" + kSuperuser;
}

}  // namespace

PostgresServer::PostgresServer(const std::string& database) {
  const std::string bin = AMPWB_POSTGRES_BINDIR;
  for (const char* program : {"initdb", "pg_ctl", "postgres"})
    if (::access((bin + "/" + program).c_str(), X_OK) != 0)
      throw std::runtime_error("no PostgreSQL server program " + bin + "/" + program +
                               " (Debian: apt-get install postgresql-15, or scripts/install-deps.sh)");

  std::string pattern = (fs::temp_directory_path() / "ampwb-pg-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a folder for the PostgreSQL server");
  folder_ = pattern;
  if (socket_file().string().size() >= 100)  // sockaddr_un holds 108 bytes
    throw std::runtime_error("the PostgreSQL socket's path is too long for a Unix socket: " + socket_file().string() +
                             " (set TMPDIR to a shorter folder)");
  if (::geteuid() == 0) {
    // The package's own unprivileged user (postgresql-common creates it); the folder becomes its own.
    const passwd* pw = ::getpwnam("postgres");
    if (!pw) pw = ::getpwnam("nobody");
    if (!pw || ::chown(folder_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      stop_and_remove();
      throw std::runtime_error("running as root, and no user 'postgres' or 'nobody' to run the PostgreSQL server as");
    }
    run_as_ = pw->pw_name;
  }

  const fs::path folder = folder_;  // stop_and_remove forgets folder_
  const fs::path setup_log = folder_ / "setup.log", server_log = folder_ / "server.log";
  // No fsync, no locale: a throwaway cluster, made in well under a second.
  if (run_program({bin + "/initdb", "-D", (folder_ / "data").string(), "-A", "trust", "-U", kSuperuser, "-E", "UTF8",
                   "--no-locale", "--no-sync"},
                  run_as_, folder_, setup_log) != 0) {
    const std::string as = run_as_.empty() ? ""
                                           : " as " + run_as_ + " (every folder above " + folder_.string() +
                                                 " must let " + run_as_ + " in)";
    const std::string why = "initdb failed" + as + "; " + setup_log.string() + " ends:" + last_lines(setup_log);
    stop_and_remove(/*keep_logs=*/true);
    throw std::runtime_error(why + "\n(the logs are kept in " + folder.string() + ")");
  }
  // pg_ctl hands -o to the server through a shell: the quotes are the shell's.
  const std::string options = "-c listen_addresses='' -c unix_socket_directories='" + folder_.string() +
                              "' -c port=" + std::to_string(kPort) + " -c fsync=off";
  started_ = true;  // from here, a half-started server is stopped too
  const int started = run_program({bin + "/pg_ctl", "-D", (folder_ / "data").string(), "-l", server_log.string(), "-o",
                                   options, "-w", "-t", "60", "start"},
                                  run_as_, folder_, setup_log);
  // pg_ctl -w already waits for the server; PQping is what a client will see. Bounded: 60 s at most.
  const std::string admin = connection_uri("postgres", folder_);
  PGPing ping = PQPING_NO_RESPONSE;
  for (int attempt = 0; started == 0 && attempt < 600; ++attempt) {
    ping = PQping(admin.c_str());
    if (ping == PQPING_OK) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (ping != PQPING_OK) {
    const std::string why = "the PostgreSQL server did not start (pg_ctl exit status " + std::to_string(started) +
                            (started == 0 ? ", then no answer to PQping" : "") + "); " + server_log.string() +
                            " ends:" + last_lines(server_log) + "\n" + setup_log.string() +
                            " ends:" + last_lines(setup_log);
    stop_and_remove(/*keep_logs=*/true);
    throw std::runtime_error(why + "\n(the logs are kept in " + folder.string() + ")");
  }

  PGconn* conn = PQconnectdb(admin.c_str());
  std::string problem;
  if (PQstatus(conn) != CONNECTION_OK) {
    problem = std::string("cannot connect to the PostgreSQL server: ") + PQerrorMessage(conn);
  } else {
    char* name = PQescapeIdentifier(conn, database.c_str(), database.size());
    PGresult* result = PQexec(conn, ("CREATE DATABASE " + std::string(name)).c_str());
    if (PQresultStatus(result) != PGRES_COMMAND_OK)
      problem = "cannot create the database '" + database + "': " + PQresultErrorMessage(result);
    PQclear(result);
    PQfreemem(name);
  }
  PQfinish(conn);
  if (!problem.empty()) {
    stop_and_remove();
    throw std::runtime_error(problem);
  }
  uri_ = connection_uri(database, folder_);
}

PostgresServer::~PostgresServer() { stop_and_remove(); }

fs::path PostgresServer::socket_file() const { return folder_ / (".s.PGSQL." + std::to_string(kPort)); }

void PostgresServer::restart() {
  const fs::path log = folder_ / "setup.log";
  // pg_ctl restart starts the server with the options it was started with (postmaster.opts).
  const int status = run_program({std::string(AMPWB_POSTGRES_BINDIR) + "/pg_ctl", "-D", (folder_ / "data").string(),
                                  "-l", (folder_ / "server.log").string(), "-m", "fast", "-w", "-t", "60", "restart"},
                                 run_as_, folder_, log);
  if (status != 0)
    throw std::runtime_error("pg_ctl restart failed (exit status " + std::to_string(status) + "); " + log.string() +
                             " ends:" + last_lines(log));
}

void PostgresServer::stop_and_remove(bool keep_logs) noexcept {
  if (folder_.empty()) return;
  std::error_code ec;
  if (started_ && fs::exists(folder_ / "data" / "postmaster.pid", ec)) {  // else pg_ctl start failed: nothing runs
    const fs::path log = folder_ / "setup.log";
    // Fast: clients are disconnected and the server stops at once, without waiting for their sessions to end.
    const int status = run_program({std::string(AMPWB_POSTGRES_BINDIR) + "/pg_ctl", "-D", (folder_ / "data").string(),
                                    "-m", "fast", "-w", "-t", "60", "stop"},
                                   run_as_, folder_, log);
    if (status != 0)
      std::fprintf(stderr, "PostgresServer: pg_ctl stop failed (exit status %d); %s ends:%s\n", status, log.c_str(),
                   last_lines(log).c_str());
  }
  started_ = false;
  fs::remove_all(keep_logs ? folder_ / "data" : folder_, ec);
  folder_.clear();
}

}  // namespace ampwb::test
