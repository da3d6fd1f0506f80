// libpq behind the run store's connection interface: statements sent with their values as text, write
// transactions serialised by an advisory lock, a run's owner marked by a session advisory lock.
#include "store/postgres.h"

#include <libpq-fe.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "store/sqlite.h"  // StoreError
#include "store/store_location.h"

namespace ampwb {
namespace {

// "AMPW": the key of the store's advisory locks. The writers' lock is the one-key lock of this value; a run's owner
// holds the two-key lock (this value, the run's id), a space apart from the first; a sweep point's holder a one-key
// lock of its own, shared (point_lock).
constexpr int64_t kLockKey = 1095585879;

// A session's start in pg_stat_activity, in microseconds: with its process id, it names one session for good.
constexpr const char* kSessionStart = "CAST(extract(epoch FROM backend_start) * 1000000 AS bigint)";

// libpq's message on one line: without its trailing newline, its indented hint ("\n\tIs the server running ...?") a
// sentence of its own, other line breaks "; ".
std::string trimmed(std::string message) {
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  std::string out;
  for (size_t i = 0; i < message.size(); ++i) {
    if (message[i] != '\n') {
      out += message[i];
      continue;
    }
    const bool hint = i + 1 < message.size() && message[i + 1] == '\t';
    if (hint) ++i;
    out += hint ? (out.ends_with('.') || out.ends_with('?') ? " " : ". ") : "; ";
  }
  return out;
}

std::string shorten(const std::string& sql) {
  std::string s;
  for (char c : sql) s += (c == '\n' || c == '\t') ? ' ' : c;
  const size_t start = s.find_first_not_of(' ');
  s = start == std::string::npos ? "" : s.substr(start);
  return s.size() > 160 ? s.substr(0, 157) + "..." : s;
}

// The store's queries are written with `?` (SQLite's placeholders); PostgreSQL numbers them: $1, $2, ...
std::string numbered_placeholders(const std::string& sql) {
  std::string out;
  int n = 0;
  bool quoted = false;
  for (char c : sql) {
    if (c == '\'') quoted = !quoted;
    if (c == '?' && !quoted) {
      out += '$';
      out += std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

// The shortest text that reads back as the same double: as exact as "%.17g", and cheaper for an epoch's hundreds of
// values.
std::string real_text(double value) {
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  const auto [end, error] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, error == std::errc() ? end : buf);
}

class PostgresStatement : public SqlStatementImpl {
 public:
  PostgresStatement(PostgresConnection& db, const std::string& sql) : db_(db), sql_(numbered_placeholders(sql)) {}
  ~PostgresStatement() override { PQclear(result_); }

  void bind_int(int index, int64_t value) override { set(index, std::to_string(value)); }
  void bind_real(int index, double value) override {
    if (std::isnan(value))
      set(index, std::nullopt);  // NULL, as SQLite keeps a NaN
    else
      set(index, real_text(value));
  }
  void bind_text(int index, const std::string& value) override { set(index, value); }
  void bind_null(int index) override { set(index, std::nullopt); }

  bool step() override {
    if (!result_) execute();
    return ++row_ < PQntuples(result_);
  }
  void run_deferred() override {
    db_.run_deferred(sql_, std::move(values_));
    reset();
  }
  void reset() override {
    PQclear(result_);
    result_ = nullptr;
    row_ = -1;
    values_.clear();
  }

  bool is_null(int column) const override { return PQgetisnull(result_, row_, column) == 1; }
  int64_t int64(int column) const override {
    const char* text = PQgetvalue(result_, row_, column);
    if (text[0] == 't' || text[0] == 'f') return text[0] == 't';  // a boolean the server computed
    return std::strtoll(text, nullptr, 10);
  }
  double real(int column) const override { return std::strtod(PQgetvalue(result_, row_, column), nullptr); }
  std::string text(int column) const override {
    return std::string(PQgetvalue(result_, row_, column), PQgetlength(result_, row_, column));
  }

 private:
  void set(int index, std::optional<std::string> value) {
    if (values_.size() < static_cast<size_t>(index)) values_.resize(index);
    values_[index - 1] = std::move(value);
  }

  void execute() {
    std::vector<const char*> values;
    for (const auto& v : values_) values.push_back(v ? v->c_str() : nullptr);
    result_ = db_.run_prepared(sql_, values);
    db_.set_changes(std::atoi(PQcmdTuples(result_)));
    row_ = -1;
  }

  PostgresConnection& db_;
  std::string sql_;
  std::vector<std::optional<std::string>> values_;
  PGresult* result_ = nullptr;
  int row_ = -1;
};

}  // namespace

PostgresConnection::PostgresConnection(const std::string& uri, bool read_only)
    : name_(location_without_password(uri)), read_only_(read_only) {
  conn_ = PQconnectdb(uri.c_str());
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    const std::string reason = conn_ ? PQerrorMessage(conn_) : "out of memory";
    PQfinish(conn_);
    conn_ = nullptr;
    throw StoreError("cannot connect to the PostgreSQL run store '" + name_ + "': " + trimmed(reason),
                     StoreError::kConnectionLost);  // a restarting server refuses for a few seconds
  }
  // Quiet: "relation exists, skipping" and the like.
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  set_up_session();
}

void PostgresConnection::set_up_session() {
  exec("SET client_min_messages = warning");
  if (read_only_) {
    exec("SET default_transaction_read_only = on");
    return;
  }
  SqlStatement start(*this,
                     std::string("SELECT ") + kSessionStart + " FROM pg_stat_activity WHERE pid = pg_backend_pid()");
  session_pid_ = PQbackendPID(conn_);
  session_start_ = start.step() ? start.int64(0) : 0;
}

void PostgresConnection::ensure_connected() {
  if (PQstatus(conn_) == CONNECTION_OK || reconnecting_) return;
  reconnecting_ = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{reconnecting_};
  const int lost_pid = session_pid_;
  const int64_t lost_start = session_start_;  // kept until a new session is set up: a failed reset changes neither
  PQreset(conn_);
  prepared_.clear();  // the server's prepared statements went with the old session
  to_deallocate_.clear();
  if (PQstatus(conn_) != CONNECTION_OK)
    fail("reconnecting", "", PQerrorMessage(conn_));  // still lost: the caller may try again later
  set_up_session();
  // A session the network cut off may still run on the server, holding the runs' locks, and a transaction whose
  // commit is to be looked up (committed_after_loss): it is ended first, matched by its start so that no other is.
  if (lost_start != 0) {
    SqlStatement end(*this, std::string("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid = ") +
                                "CAST(? AS integer) AND " + kSessionStart + " = ?");
    end.bind(1, static_cast<int64_t>(lost_pid)).bind(2, lost_start).run();
  }
  // The runs this connection records lost their locks with the old session: taken again, and a run that another
  // process marked interrupted meanwhile is running again (it never stopped). A run another process resumed
  // meanwhile is that process's now: this one writes nothing more of it.
  std::string lost;
  for (const int64_t run : std::set<int64_t>(owned_)) {
    try {
      take_run_lock(run);
    } catch (const StoreError& e) {
      if (e.connection_lost()) throw;  // lost again while being made: tried again with the next write
      owned_.erase(run);
      lost += (lost.empty() ? "run " : ", run ") + std::to_string(run);
      continue;
    }
    SqlStatement resumed(*this,
                         "UPDATE runs SET status = 'running', ended = NULL, end_reason = '' WHERE id = ? AND "
                         "status = 'interrupted'");
    resumed.bind(1, run).run();
  }
  // The sweep points it holds too (shared holds, taken again whoever else holds them now).
  for (const auto& [sweep, index] : points_) try_lock(point_lock(sweep, index));
  if (!lost.empty())
    throw StoreError(lost + " in the run store '" + name_ +
                     "' is recorded by another process now: it resumed the run while this process's connection to "
                     "the server was down, and this process records no more of it");
}

PostgresConnection::~PostgresConnection() { PQfinish(conn_); }  // the server drops the session's locks

void PostgresConnection::fail(const char* what, const std::string& sql, const char* message) const {
  std::string full = "run store '" + name_ + "': " + what + " failed";
  if (!sql.empty()) full += " on \"" + shorten(sql) + "\"";
  full += ": " + trimmed(message ? message : "");
  if (PQstatus(conn_) != CONNECTION_OK)
    throw StoreError(full + " (the connection to the server is lost)", StoreError::kConnectionLost);
  throw StoreError(full);
}

std::string PostgresConnection::database_version() const {
  const char* version = PQparameterStatus(conn_, "server_version");
  return std::string("PostgreSQL ") + (version ? version : "?");
}

void PostgresConnection::exec(const std::string& sql) {
  ensure_connected();
  if (!deferred_.empty()) PQclear(round_trip(nullptr, nullptr, false));  // a text of many statements goes alone
  std::string text = sql;
  if (begin_pending_ && !reconnecting_) {
    text = "BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(kLockKey) + "); " + sql;
    begin_pending_ = false;
  }
  PGresult* result = PQexec(conn_, text.c_str());
  const ExecStatusType status = PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    const std::string message = PQresultErrorMessage(result);
    PQclear(result);
    fail("a statement", text, message.c_str());
  }
  PQclear(result);
}

std::unique_ptr<SqlStatementImpl> PostgresConnection::prepare(const std::string& sql) {
  return std::make_unique<PostgresStatement>(*this, sql);
}

void PostgresConnection::commit() {
  in_write_ = false;
  struct Ended {
    std::string& id;
    ~Ended() { id.clear(); }
  } ended{xact_id_};
  if (begin_pending_ && deferred_.empty()) {
    begin_pending_ = false;  // nothing was written: no transaction was opened
    return;
  }
  ensure_connected();
  PQclear(round_trip(nullptr, nullptr, true));
}

void PostgresConnection::rollback() noexcept {
  in_write_ = false;
  deferred_.clear();
  xact_id_.clear();
  if (begin_pending_) {
    begin_pending_ = false;  // nothing was sent
    return;
  }
  PQclear(PQexec(conn_, "ROLLBACK"));
}

void PostgresConnection::run_deferred(const std::string& sql, std::vector<std::optional<std::string>> values) {
  if (in_write_ && !reconnecting_) {
    deferred_.push_back({sql, std::move(values)});
    return;
  }
  std::vector<const char*> pointers;
  for (const auto& v : values) pointers.push_back(v ? v->c_str() : nullptr);
  PGresult* result = run_prepared(sql, pointers);
  set_changes(std::atoi(PQcmdTuples(result)));
  PQclear(result);
}

// The name of the session's prepared statement for `sql`; `fresh` when it is yet to be prepared (a new name, the
// least recently used statement evicted past the limit, deallocated with the next round trip).
std::string PostgresConnection::prepared_name(const std::string& sql, bool& fresh) {
  const auto found = prepared_.find(sql);
  fresh = found == prepared_.end();
  if (!fresh) {
    found->second.last_used = ++uses_;
    return found->second.name;
  }
  if (prepared_.size() >= kPreparedLimit) {
    auto oldest = prepared_.begin();
    for (auto it = prepared_.begin(); it != prepared_.end(); ++it)
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    to_deallocate_.push_back(oldest->second.name);
    prepared_.erase(oldest);
  }
  return "ampwb_" + std::to_string(++next_name_);
}

PGresult* PostgresConnection::run_prepared(const std::string& sql, const std::vector<const char*>& values) {
  ensure_connected();
  const bool with_begin = begin_pending_ && !reconnecting_;  // the reconnection's own statements run before it
  const auto found = prepared_.find(sql);
  if (found == prepared_.end() || with_begin || !deferred_.empty() || !to_deallocate_.empty())
    return round_trip(&sql, &values, false);
  found->second.last_used = ++uses_;
  PGresult* result =
      PQexecPrepared(conn_, found->second.name.c_str(), static_cast<int>(values.size()), values.data(), nullptr,
                     nullptr, 0);
  const ExecStatusType status = PQresultStatus(result);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    const std::string message = PQresultErrorMessage(result);
    PQclear(result);
    fail("a statement", sql, message.c_str());
  }
  return result;
}

// One round trip (a pipeline) for all that is due: a pending BEGIN and the writers' lock, the deferred statements,
// `sql` (when given; its result is returned, the caller's to clear) and the COMMIT (with `commit`), each statement
// prepared first where this session has not yet. Each part's result is read in order; a part after a failed one
// is skipped by the server (PGRES_PIPELINE_ABORTED), and the first failure is thrown, naming its statement. The
// deallocations go last, so that they never hold up the rest; one a transaction's error skipped is sent again the
// next time.
PGresult* PostgresConnection::round_trip(const std::string* sql, const std::vector<const char*>* values, bool commit) {
  struct Part {
    enum Kind { Begin, Lock, XactId, Prepare, Deferred, Statement, Commit, Deallocate } kind;
    std::string sql;
    std::string name;  // of the prepared statement
    std::vector<const char*> values;
  };
  std::vector<Part> parts;
  if (begin_pending_ && !reconnecting_) {
    parts.push_back({Part::Begin, "BEGIN", "", {}});
    parts.push_back({Part::Lock, "SELECT pg_advisory_xact_lock(" + std::to_string(kLockKey) + ")", "", {}});
    parts.push_back({Part::XactId, "SELECT pg_current_xact_id()", "", {}});
    begin_pending_ = false;  // sent now; a failure leaves the transaction to the caller's rollback
  }
  std::unordered_map<std::string, std::string> preparing;  // prepared in this round trip: once each
  const auto add = [&](Part::Kind kind, const std::string& text, std::vector<const char*> part_values) {
    std::string name;
    if (const auto it = preparing.find(text); it != preparing.end()) {
      name = it->second;
    } else {
      bool fresh = false;
      name = prepared_name(text, fresh);
      if (fresh) {
        preparing[text] = name;
        parts.push_back({Part::Prepare, text, name, {}});
      }
    }
    parts.push_back({kind, text, name, std::move(part_values)});
  };
  std::vector<Deferred> deferred;
  if (!reconnecting_) deferred.swap(deferred_);  // sent now, whatever comes of it: a failure fails the transaction
  for (const Deferred& d : deferred) {
    std::vector<const char*> pointers;
    for (const auto& v : d.values) pointers.push_back(v ? v->c_str() : nullptr);
    add(Part::Deferred, d.sql, std::move(pointers));
  }
  if (sql) add(Part::Statement, *sql, *values);
  if (commit) parts.push_back({Part::Commit, "COMMIT", "", {}});
  for (const std::string& old : to_deallocate_) parts.push_back({Part::Deallocate, "DEALLOCATE " + old, "", {}});

  bool sent = PQenterPipelineMode(conn_) == 1;
  for (size_t i = 0; sent && i < parts.size(); ++i) {
    const Part& part = parts[i];
    if (part.kind == Part::Prepare)
      sent = PQsendPrepare(conn_, part.name.c_str(), part.sql.c_str(), 0, nullptr) == 1;
    else if (part.kind == Part::Deferred || part.kind == Part::Statement)
      sent = PQsendQueryPrepared(conn_, part.name.c_str(), static_cast<int>(part.values.size()), part.values.data(),
                                 nullptr, nullptr, 0) == 1;
    else
      sent = PQsendQueryParams(conn_, part.sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
    // The transaction's id sent back at once, not with the rest at the sync: it reaches this process before the
    // commit is made, so that a commit whose answer the connection lost can be looked up (committed_after_loss).
    if (sent && part.kind == Part::XactId) sent = PQsendFlushRequest(conn_) == 1;
  }
  if (sent) sent = PQpipelineSync(conn_) == 1;
  if (!sent) {
    const std::string message = PQerrorMessage(conn_);
    if (PQpipelineStatus(conn_) != PQ_PIPELINE_OFF && PQstatus(conn_) == CONNECTION_OK && PQpipelineSync(conn_) == 1) {
      // What went is ended by a sync and its results dropped: each query's end with a null, then the sync's.
      size_t ends = 0;
      while (ends <= parts.size() && PQstatus(conn_) == CONNECTION_OK) {
        PGresult* r = PQgetResult(conn_);
        if (!r) {
          ++ends;
          continue;
        }
        const bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
        PQclear(r);
        if (sync) break;
      }
      PQexitPipelineMode(conn_);
    }
    fail("a statement", sql ? *sql : parts.empty() ? "" : parts.front().sql, message.c_str());
  }

  PGresult* statement_result = nullptr;
  bool failed = false;  // a part other than a deallocation did not run
  bool committed = false;
  std::string error, error_sql;
  std::vector<std::string> deallocated;
  for (const Part& part : parts) {
    PGresult* r = PQgetResult(conn_);
    if (!r) {  // the connection broke: no more results come
      if (error.empty()) error = PQerrorMessage(conn_), error_sql = part.sql;
      failed = failed || part.kind != Part::Deallocate;
      break;
    }
    while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);  // a query's results end with a null
    const ExecStatusType status = PQresultStatus(r);
    const bool ok = status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK;
    if (ok && part.kind == Part::Prepare) prepared_[part.sql] = {part.name, ++uses_};
    if (ok && part.kind == Part::XactId) xact_id_ = PQgetvalue(r, 0, 0);
    if (ok && part.kind == Part::Commit) committed = std::string(PQcmdStatus(r)) == "COMMIT";
    if (ok && part.kind == Part::Deallocate) deallocated.push_back(part.sql.substr(11));
    if (!ok && part.kind != Part::Deallocate) failed = true;
    if (!ok && error.empty() && status != PGRES_PIPELINE_ABORTED) error = PQresultErrorMessage(r), error_sql = part.sql;
    if (ok && part.kind == Part::Statement)
      statement_result = r;
    else
      PQclear(r);
  }
  if (PQstatus(conn_) == CONNECTION_OK) {
    while (PGresult* r = PQgetResult(conn_)) {  // the sync's result ends the pipeline
      const bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
      PQclear(r);
      if (sync) break;
    }
    PQexitPipelineMode(conn_);
  }
  for (const std::string& old : deallocated) std::erase(to_deallocate_, old);
  if (commit && !committed && PQstatus(conn_) != CONNECTION_OK && !xact_id_.empty()) {
    // The server may have made the commit before the connection broke: running the transaction again would write its
    // rows twice. Whether it did is looked up on a new connection; where it did, the commit stands.
    if (committed_after_loss(xact_id_)) return nullptr;
    throw StoreError(
        "run store '" + name_ + "': a commit was not made, the connection to the server lost: " + trimmed(error),
        StoreError::kConnectionLost);
  }
  if (failed || (sql && !statement_result)) {
    PQclear(statement_result);
    if (error.empty()) error = commit ? "the commit was not made" : "the statement was not run";
    fail(commit ? "a commit" : "a statement", error_sql.empty() ? (sql ? *sql : "COMMIT") : error_sql,
         error.c_str());
  }
  if (!error.empty()) {  // only a deallocation can fail after all else ran: what was asked stands
    to_deallocate_.clear();
  }
  return statement_result;
}

// A server that restarts takes seconds; one away longer leaves the outcome unknown, and the caller's retry (the
// store's writes are made again while the connection is lost, StoreRecorder) may then write a transaction twice.
bool PostgresConnection::committed_after_loss(const std::string& xact) {
  constexpr int kAttempts = 10;  // a second apart
  for (int attempt = 1;; ++attempt) {
    try {
      ensure_connected();  // ends the old session, so that its transaction has ended too, committed or not
      SqlStatement status(*this, "SELECT pg_xact_status(CAST(? AS xid8))");
      const std::string found = status.bind(1, xact).step() ? status.text(0) : "";
      if (found == "committed" || found == "aborted") return found == "committed";
    } catch (const StoreError& e) {
      if (!e.connection_lost() || attempt == kAttempts) throw;
    }
    if (attempt == kAttempts)
      throw StoreError("run store '" + name_ + "': whether transaction " + xact +
                           " was committed is unknown: the server says it is still in progress",
                       StoreError::kConnectionLost);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

std::string PostgresConnection::replace_into(const std::string& table, const std::string& columns,
                                             const std::string& params, const std::string& key, int rows) const {
  std::string sql = "INSERT INTO " + table + "(" + columns + ") VALUES " + value_rows(params, rows) + " ON CONFLICT (" +
                    key + ") DO UPDATE SET ";
  const std::string keys = ", " + key + ",";
  bool first = true;
  for (size_t from = 0; from < columns.size();) {
    size_t end = columns.find(',', from);
    if (end == std::string::npos) end = columns.size();
    std::string column = columns.substr(from, end - from);
    column.erase(0, column.find_first_not_of(' '));
    column.erase(column.find_last_not_of(' ') + 1);
    if (keys.find(", " + column + ",") == std::string::npos) {
      sql += (first ? "" : ", ") + column + " = EXCLUDED." + column;
      first = false;
    }
    from = end + 1;
  }
  return sql;
}

void PostgresConnection::own_run(int64_t run) {
  take_run_lock(run);
  owned_.insert(run);
}

void PostgresConnection::take_run_lock(int64_t run) {
  if (!try_lock(run_lock(run)))
    throw StoreError("cannot record run " + std::to_string(run) + " in the run store '" + name_ +
                     "': another process is recording it");
}

PostgresConnection::AdvisoryLock PostgresConnection::run_lock(int64_t run) {
  return {std::to_string(kLockKey) + ", CAST(? AS integer)", run, kLockKey, run, 2, false};
}

PostgresConnection::AdvisoryLock PostgresConnection::point_lock(int64_t sweep, int index) {
  // One bigint key, its top bits set: apart from the writers' lock, whose key is below 2^32.
  const int64_t key = (int64_t{1} << 62) | (sweep << 24) | index;
  return {"CAST(? AS bigint)", key, key >> 32, key & 0xffffffff, 1, true};
}

bool PostgresConnection::try_lock(const AdvisoryLock& lock) {
  SqlStatement take(*this, lock.call("try_advisory_lock"));
  return take.bind(1, lock.argument).step() && take.int64(0) == 1;
}

void PostgresConnection::unlock(const AdvisoryLock& lock) {
  SqlStatement(*this, lock.call("advisory_unlock")).bind(1, lock.argument).run();
}

bool PostgresConnection::locked_elsewhere(const AdvisoryLock& lock) const {
  // Another session's lock, in this database (advisory locks are per database).
  SqlStatement held(const_cast<PostgresConnection&>(*this),
                    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = CAST(? AS oid) AND "
                    "objid = CAST(? AS oid) AND objsubid = CAST(? AS integer) AND pid <> pg_backend_pid() AND "
                    "database = (SELECT oid FROM pg_database WHERE datname = current_database())");
  return held.bind(1, lock.classid).bind(2, lock.objid).bind(3, lock.objsubid).step();
}

void PostgresConnection::disown_run(int64_t run) {
  owned_.erase(run);
  unlock(run_lock(run));
}

bool PostgresConnection::recorded_elsewhere(int64_t run) const { return locked_elsewhere(run_lock(run)); }

void PostgresConnection::join_point(int64_t sweep, int index) {
  if (points_.count({sweep, index})) return;  // held once: one release lets go
  if (!try_lock(point_lock(sweep, index)))    // a shared lock: refused only where one holds it exclusively, none does
    throw StoreError("cannot hold sweep " + std::to_string(sweep) + "'s point " + std::to_string(index + 1) +
                     " in the run store '" + name_ + "'");
  points_.insert({sweep, index});
}

void PostgresConnection::release_point(int64_t sweep, int index) {
  if (points_.erase({sweep, index})) unlock(point_lock(sweep, index));
}

bool PostgresConnection::point_held(int64_t sweep, int index) const {
  return points_.count({sweep, index}) || locked_elsewhere(point_lock(sweep, index));
}

std::string libpq_version() {
  const int v = PQlibVersion();  // 150005
  return std::to_string(v / 10000) + "." + std::to_string(v % 100);
}

}  // namespace ampwb
