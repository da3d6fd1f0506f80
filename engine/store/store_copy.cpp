// Copying one run store into another (store_copy.h). Rows are copied column by column, by name, with each column's
// kind read from the source's schema, so both databases' own types (SQLite's INTEGER and REAL, PostgreSQL's BIGINT
// and DOUBLE PRECISION) take the same values, NULL (a NaN) included.
#include "store/store_copy.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "core/hash.h"
#include "store/final_weights.h"
#include "store/run_store.h"
#include "store/sql_connection.h"
#include "store/sqlite.h"
#include "store/store_location.h"
#ifdef AMPWB_HAVE_LIBPQ
#include "store/postgres.h"
#endif

namespace ampwb {
namespace {
namespace fs = std::filesystem;

constexpr int kBusyTimeoutMs = 5000;           // as the store's own connections wait for a writer
// In a copied run's information: the key of the source's name, notes and tags the copy last wrote or brought.
constexpr const char* kCopiedAnnotations = "copied_annotations";
constexpr size_t kParametersPerInsert = 2000;  // rows go in batches of one INSERT: far fewer round trips

std::unique_ptr<SqlConnection> connect(const std::string& location, bool read_only) {
  const StoreLocation where = parse_store_location(location);
  if (where.kind == StoreLocation::Kind::PostgreSql) {
#ifdef AMPWB_HAVE_LIBPQ
    return std::make_unique<PostgresConnection>(where.text, read_only);
#else
    throw StoreError("the run store '" + location_without_password(location) +
                     "' is a PostgreSQL database, and this ampwb was built without libpq");
#endif
  }
  auto db = std::make_unique<SqliteConnection>(sqlite_store_file(location),
                                               read_only ? SqliteDb::Open::ReadOnly : SqliteDb::Open::ReadWrite);
  db->db().check(sqlite3_busy_timeout(db->db().handle(), kBusyTimeoutMs), "sqlite3_busy_timeout", "");
  return db;
}

bool postgres(const SqlConnection& db) { return db.dialect() == SqlConnection::Dialect::PostgreSql; }

bool has_table(SqlConnection& db, const std::string& table) {
  SqlStatement q(db, postgres(db) ? "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND "
                                    "tablename = ?"
                                  : "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?");
  return q.bind(1, table).step() && q.int64(0) > 0;
}

enum class Kind { Integer, Real, Text };

struct Column {
  std::string name;
  Kind kind = Kind::Text;
};

// A table's columns as the database declares them, but those named in `except` (ids each store gives itself, and
// the reference to the run, which the copy sets).
std::vector<Column> columns_of(SqlConnection& db, const std::string& table, const std::vector<std::string>& except) {
  SqlStatement q(db, postgres(db) ? "SELECT column_name, data_type FROM information_schema.columns WHERE "
                                    "table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position"
                                  : "SELECT name, type FROM pragma_table_info(?) ORDER BY cid");
  q.bind(1, table);
  std::vector<Column> out;
  while (q.step()) {
    std::string type = q.text(1);
    std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
    Column c{q.text(0), Kind::Text};
    if (std::find(except.begin(), except.end(), c.name) != except.end()) continue;
    if (type.find("int") != std::string::npos)
      c.kind = Kind::Integer;
    else if (type.find("real") != std::string::npos || type.find("double") != std::string::npos ||
             type.find("float") != std::string::npos)
      c.kind = Kind::Real;
    out.push_back(std::move(c));
  }
  if (out.empty()) throw StoreError("run store '" + db.name() + "': the table " + table + " has no columns");
  return out;
}

std::string names(const std::vector<Column>& columns) {
  std::string out;
  for (const Column& c : columns) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

struct Value {
  bool null = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;
  bool operator==(const Value&) const = default;
};
using Row = std::vector<Value>;

Row read_row(const SqlStatement& q, const std::vector<Column>& columns, int first = 0) {
  Row row(columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    const int c = first + static_cast<int>(i);
    Value& v = row[i];
    v.null = q.is_null(c);
    if (v.null) continue;
    if (columns[i].kind == Kind::Integer)
      v.integer = q.int64(c);
    else if (columns[i].kind == Kind::Real)
      v.real = q.real(c);
    else
      v.text = q.text(c);
  }
  return row;
}

int bind_row(SqlStatement& q, int first, const std::vector<Column>& columns, const Row& row) {
  int p = first;
  for (size_t i = 0; i < columns.size(); ++i, ++p) {
    const Value& v = row[i];
    if (v.null)
      q.bind_null(p);
    else if (columns[i].kind == Kind::Integer)
      q.bind(p, v.integer);
    else if (columns[i].kind == Kind::Real)
      q.bind(p, v.real);
    else
      q.bind(p, v.text);
  }
  return p;
}

std::string parameters(size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) out += i ? ", ?" : "?";
  return out;
}

// Rows of one run into one table of the destination, many to an INSERT; `reference` is the column that names
// the owner (run_id, sweep_id), bound to `owner` in every row.
class BatchInsert {
 public:
  BatchInsert(SqlConnection& db, std::string table, std::string reference, std::vector<Column> columns, int64_t owner)
      : db_(db),
        table_(std::move(table)),
        reference_(std::move(reference)),
        columns_(std::move(columns)),
        owner_(owner),
        batch_(std::max<size_t>(1, kParametersPerInsert / (columns_.size() + 1))) {}

  void add(Row row) {
    pending_.push_back(std::move(row));
    if (pending_.size() == batch_) flush();
  }

  // Writes what is pending; returns how many rows this inserter wrote in all.
  int64_t flush() {
    if (pending_.empty()) return written_;
    std::unique_ptr<SqlStatement>& q = pending_.size() == batch_ ? full_ : partial_;
    if (!q || pending_.size() != batch_) q = std::make_unique<SqlStatement>(db_, sql(pending_.size()));
    int p = 1;
    for (const Row& row : pending_) p = bind_row(q->bind(p, owner_), p + 1, columns_, row);
    q->run();
    written_ += static_cast<int64_t>(pending_.size());
    pending_.clear();
    return written_;
  }

 private:
  std::string sql(size_t rows) const {
    // Appended piece by piece: GCC 12 warns, wrongly, about a literal + a returned string here (-Wrestrict).
    std::string one = "(";
    one += parameters(columns_.size() + 1);
    one += ')';
    std::string values;
    for (size_t i = 0; i < rows; ++i) {
      if (i) values += ", ";
      values += one;
    }
    return "INSERT INTO " + table_ + "(" + reference_ + ", " + names(columns_) + ") VALUES " + values;
  }

  SqlConnection& db_;
  std::string table_, reference_;
  std::vector<Column> columns_;
  int64_t owner_;
  size_t batch_;
  std::vector<Row> pending_;
  std::unique_ptr<SqlStatement> full_, partial_;
  int64_t written_ = 0;
};

// A run's records besides its row: the table, and the order its rows were written in.
struct RunTable {
  const char* name;
  const char* order;
  std::vector<std::string> own_ids;  // the store's own ids of the rows, given anew by the destination
};
const RunTable kRunTables[] = {
    {"epochs", "epoch", {}},
    {"steps", "step", {}},
    {"histograms", "epoch, kind", {}},
    {"checkpoints", "id", {"id"}},
    {"run_details", "rowid", {"rowid"}},  // SQLite's rowid is implicit; PostgreSQL's a column of its own
};

// What says a run is the same run in two stores (store_copy.h): what it keeps for its whole life.
constexpr const char* kIdentityColumns =
    "created, seed, depth, precision, batch_size, lr, optimizer, epochs, image_size, dataset_fingerprint";

std::string identity(const SqlStatement& q, int first) {
  char lr[32];
  std::snprintf(lr, sizeof lr, "%.17g", q.real(first + 5));
  const char separator = '\x1f';
  return q.text(first) + separator + std::to_string(q.int64(first + 1)) + separator +
         std::to_string(q.int64(first + 2)) + separator + q.text(first + 3) + separator +
         std::to_string(q.int64(first + 4)) + separator + lr + separator + q.text(first + 6) + separator +
         std::to_string(q.int64(first + 7)) + separator + std::to_string(q.int64(first + 8)) + separator +
         q.text(first + 9);
}

// A run's tags column, a JSON list of strings; what is not one reads as no tags (the store refuses such a write).
std::vector<std::string> tag_list(const std::string& json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  std::vector<std::string> tags;
  if (j.is_array())
    for (const nlohmann::json& tag : j)
      if (tag.is_string()) tags.push_back(tag.get<std::string>());
  return tags;
}

struct StoredRun {
  int64_t id = 0;
  std::string identity, updated, status, name;
};

std::vector<StoredRun> stored_runs(SqlConnection& db) {
  SqlStatement q(db, std::string("SELECT id, COALESCE(updated, created), status, name, ") + kIdentityColumns +
                         " FROM runs ORDER BY id");
  std::vector<StoredRun> out;
  while (q.step()) out.push_back({q.int64(0), identity(q, 4), q.text(1), q.text(2), q.text(3)});
  return out;
}

std::string location_name(const std::string& location) {
  return is_database_server(location) ? location_without_password(location) : location;
}

// A PostgreSQL store as its server knows it, however its location is spelled (a host name or the socket, another
// user, a service file): the server's start time and port, the database and the schema.
std::string server_store_identity(const std::string& location) {
  const std::unique_ptr<SqlConnection> db = connect(location, true);
  SqlStatement q(*db,
                 "SELECT pg_postmaster_start_time()::text || ' ' || current_setting('port') || ' ' || "
                 "current_database() || ' ' || COALESCE(current_schema(), '')");
  if (!q.step() || q.text(0).empty()) throw StoreError("the server does not say which database it serves");
  return q.text(0);
}

void refuse_same_store(const std::string& source, const std::string& destination) {
  const bool server = is_database_server(source);
  if (server != is_database_server(destination)) return;
  bool same = false;
  if (server) {
    same = location_without_password(source) == location_without_password(destination);
    try {
      same = same || server_store_identity(source) == server_store_identity(destination);
    } catch (const StoreError&) {  // a server that cannot be reached is named by the copy itself
    }
  } else {
    std::error_code ec;
    same = fs::equivalent(sqlite_store_file(source), sqlite_store_file(destination), ec) && !ec;
  }
  if (same)
    throw StoreError("the run store '" + location_name(source) + "' cannot be copied into itself: name another store");
}

class StoreCopy {
 public:
  StoreCopy(const std::string& source, const std::string& destination,
            const std::function<void(const StoreCopyProgress&)>& progress)
      : source_location_(source), progress_(progress) {
    refuse_same_store(source, destination);
    // Opened as stores first: their refusals (not a store, a newer schema, a damaged file) come before any write,
    // and the destination is created or brought to the current schema.
    // The source is read through its store's own read-only connection: a file this user may only read is read as
    // `ampwb runs` reads it.
    source_store_ = std::make_unique<RunStore>(source, RunStore::Mode::ReadOnly);
    from_ = &source_store_->connection();
    try {
      destination_store_ = std::make_unique<RunStore>(destination, RunStore::Mode::Create);
    } catch (const StoreError& e) {
      throw StoreError("cannot copy the runs of '" + source_store_->path() + "': " + e.what());
    }
    to_ = connect(destination, false);
  }

  StoreCopyResult run() {
    // One snapshot of the source for the whole copy.
    from_->exec(postgres(*from_) ? "BEGIN ISOLATION LEVEL REPEATABLE READ" : "BEGIN");
    struct EndRead {
      SqlConnection& db;
      ~EndRead() { db.rollback(); }
    } end_read{*from_};

    std::multimap<std::string, StoredRun> there;  // runs of equal identity (a rare twin) matched in id order
    for (StoredRun& r : stored_runs(*to_)) there.emplace(r.identity, std::move(r));
    const std::vector<StoredRun> runs = stored_runs(*from_);
    run_columns_ = columns_of(*from_, "runs", {"id"});
    for (const RunTable& t : kRunTables) {
      std::vector<std::string> except = t.own_ids;
      except.push_back("run_id");
      table_columns_.push_back(columns_of(*from_, t.name, except));
    }

    for (size_t i = 0; i < runs.size(); ++i) {
      const StoredRun& r = runs[i];
      copy_run(r, there);
      if (progress_) progress_({i + 1, runs.size(), r.name, result_.records});
    }
    remap_alternating_speeds();
    if (has_table(*from_, "sweeps") && has_table(*to_, "sweeps")) copy_sweeps();
    return result_;
  }

 private:
  // The state of a run the snapshot shows running, now: it may have ended since the snapshot was taken.
  std::string status_now(int64_t run) {
    if (!latest_) latest_ = std::make_unique<RunStore>(source_location_, RunStore::Mode::ReadOnly);
    SqlStatement q(latest_->connection(), "SELECT status FROM runs WHERE id = ?");
    return q.bind(1, run).step() ? q.text(0) : std::string();
  }

  void copy_run(const StoredRun& r, std::multimap<std::string, StoredRun>& there) {
    bool abandoned = false;
    if (r.status == "running") {
      // Recording now, or ended after the snapshot: what the snapshot holds is not the whole run.
      if (from_->recorded_elsewhere(r.id) || status_now(r.id) != "running") {
        result_.still_recording.push_back({r.id, r.name});
        return;
      }
      abandoned = true;
    }
    auto found = there.end();
    for (auto [at, end] = there.equal_range(r.identity); at != end && found == there.end(); ++at)
      if (!claimed_.count(at->second.id)) found = at;
    int64_t into = 0;
    if (found != there.end()) {
      claimed_.insert(found->second.id);
      const StoredRun& d = found->second;
      mapped_[r.id] = d.id;
      if (d.id != r.id) result_.renumbered.emplace_back(r.id, d.id);
      const bool recorded_there = d.status == "running" && to_->recorded_elsewhere(d.id);
      if (recorded_there || r.updated <= d.updated) {
        ++result_.already_there;
        if (!recorded_there) bring_annotations(r.id, d.id);
        // A copy made by an older ampwb, or one whose weights could not be copied: its own weights now.
        if (!recorded_there && names_other_weights(d.id)) {
          try {
            own_final_weights(*destination_store_, d.id);
          } catch (const Error&) {  // no failure of the copy's: the next copy tries again
          }
        }
        return;
      }
      into = d.id;
    }
    // The destination's copy being replaced: its own weights file goes once the new one has its own.
    const std::optional<RunRecord> replaced = into ? destination_store_->find_run(into) : std::nullopt;

    SqlStatement read(*from_, "SELECT " + names(run_columns_) + " FROM runs WHERE id = ?");
    if (!read.bind(1, r.id).step()) return;  // deleted before the snapshot: nothing to copy
    Row row = read_row(read, run_columns_);
    read.reset();
    if (abandoned) {  // as recovery marks it (run_store.cpp)
      set_text(row, "status", "interrupted");
      const Value& updated = value_of(row, "updated");
      set_text(row, "ended", updated.null ? value_of(row, "created").text : updated.text);
      set_text(row, "end_reason", kAbandonedRunReason);
      ++result_.interrupted;
    }

    SqlTransaction t(*to_);
    remember_annotations(row);  // the source's, before the destination's are kept beside them
    if (into && keep_annotations(row, into)) ++result_.annotations_kept;
    const std::string source_name = value_of(row, "name").text;
    const bool renamed = unique_name(row, into);
    if (into)  // the name it takes there, once unique
      if (SqlStatement was(*to_, "SELECT name FROM runs WHERE id = ?"); was.bind(1, into).step())
        if (const std::string now = value_of(row, "name").text; was.text(0) != now)
          result_.names_replaced.push_back({into, was.text(0), now});
    if (into) {
      for (const RunTable& table : kRunTables) {
        SqlStatement forget(*to_, std::string("DELETE FROM ") + table.name + " WHERE run_id = ?");
        forget.bind(1, into).run();
      }
      std::string sets;
      for (const Column& c : run_columns_) sets += (sets.empty() ? "" : ", ") + c.name + " = ?";
      SqlStatement update(*to_, "UPDATE runs SET " + sets + " WHERE id = ?");
      update.bind(bind_row(update, 1, run_columns_, row), into).run();
    } else {
      SqlStatement insert(*to_, "INSERT INTO runs(" + names(run_columns_) + ") VALUES (" +
                                    parameters(run_columns_.size()) + ") RETURNING id");
      bind_row(insert, 1, run_columns_, row);
      if (!insert.step()) throw StoreError("run store '" + to_->name() + "': a copied run's row has no id");
      into = insert.int64(0);
      insert.reset();
    }
    if (renamed) result_.renamed.push_back({into, source_name, value_of(row, "name").text});
    int64_t records = 1;
    for (size_t k = 0; k < std::size(kRunTables); ++k) {
      const std::vector<Column>& columns = table_columns_[k];
      SqlStatement rows(*from_, "SELECT " + names(columns) + " FROM " + kRunTables[k].name +
                                    " WHERE run_id = ? ORDER BY " + kRunTables[k].order);
      rows.bind(1, r.id);
      BatchInsert insert(*to_, kRunTables[k].name, "run_id", columns, into);
      while (rows.step()) insert.add(read_row(rows, columns));
      records += insert.flush();
    }
    t.commit();
    result_.records += records;
    ++(found != there.end() ? result_.updated : result_.copied);
    mapped_[r.id] = into;
    if (found == there.end() && into != r.id) result_.renumbered.emplace_back(r.id, into);
    written_.push_back(into);
    claimed_.insert(into);
    // Its final weights as a file of this store's: deleting the run from either store leaves the other's whole.
    const bool owned = own_final_weights(*destination_store_, into);
    if (owned && replaced) {  // unless it is the source's file itself, which an older copy in the same folder named
      std::error_code ec;
      const std::string now = destination_store_->run(into).info.final_weights;
      if (!std::filesystem::equivalent(replaced->info.final_weights, now, ec))
        remove_final_weights(destination_store_->path(), *replaced);
    }
  }

  // Whether a run of the destination names another store's weights file.
  bool names_other_weights(int64_t run) {
    const RunRecord r = destination_store_->run(run);
    return has_final_weights(r) && !owns_final_weights(destination_store_->path(), r);
  }

  // A name picks out one run: where another run of the destination has it, the copy is named NAME-2 (or -3, ...),
  // as the store names a new run. Returns whether it was renamed.
  bool unique_name(Row& row, int64_t run) {
    Value& name = value_of(row, "name");
    SqlStatement taken(*to_, "SELECT 1 FROM runs WHERE name = ? AND id != ?");
    const std::string base = name.text;
    for (int suffix = 2; taken.bind(1, name.text).bind(2, run).step(); ++suffix) {
      taken.reset();
      name.text = base + "-" + std::to_string(suffix);
    }
    return name.text != base;
  }

  // A run replaced by its newer state keeps what users wrote about it in the destination: its notes there (the
  // source's added where they say something else) and its tags there (the source's added). A copy cannot tell which
  // store's edit came later, so it loses neither; a name is one, the source's, and the name it replaces is said.
  // Returns whether the destination's notes or tags were kept beside the source's.
  bool keep_annotations(Row& row, int64_t into) {
    if (!has_column("notes") || !has_column("tags")) return false;  // a source from before them: the destination's stay
    SqlStatement q(*to_, "SELECT name, notes, tags FROM runs WHERE id = ?");
    if (!q.bind(1, into).step()) return false;
    const std::string name = q.text(0), notes = q.text(1), tags = q.text(2);
    bool kept = false;
    if (Value& v = value_of(row, "notes"); v.text.find(notes) == std::string::npos) {
      v.text = v.text.empty() || notes.find(v.text) != std::string::npos ? notes : notes + "\n\n" + v.text;
      kept = true;
    }
    if (Value& v = value_of(row, "tags"); v.text != tags) {
      const std::vector<std::string> source_tags = tag_list(v.text);
      std::vector<std::string> merged = tag_list(tags);
      for (const std::string& tag : source_tags)
        if (std::none_of(merged.begin(), merged.end(), [&](const std::string& had) { return same_tag(had, tag); }))
          merged.push_back(tag);
      kept = kept || merged.size() > source_tags.size();
      v.text = nlohmann::json(merged).dump();
    }
    return kept;
  }

  // A run the destination has as it is may have been renamed, tagged or noted in the source since (an edit leaves
  // its records and their time alone): where the source's name, notes and tags differ from those the copy last
  // brought, they are brought as for a run replaced, nothing lost; where they do not, the destination's own edits stay.
  void bring_annotations(int64_t from, int64_t into) {
    SqlStatement read(*from_, "SELECT " + names(run_columns_) + " FROM runs WHERE id = ?");
    if (!read.bind(1, from).step()) return;
    Row row = read_row(read, run_columns_);
    read.reset();
    SqlTransaction t(*to_);
    SqlStatement q(*to_, "SELECT name, notes, tags, info_json FROM runs WHERE id = ?");
    if (!q.bind(1, into).step()) return;
    const std::string name = q.text(0), notes = q.text(1), tags = q.text(2);
    const nlohmann::json info = nlohmann::json::parse(q.text(3), nullptr, false);
    q.reset();
    const std::string source_now = annotations_key(row);
    if (info.is_object() && info.value(kCopiedAnnotations, std::string()) == source_now) return;
    keep_annotations(row, into);
    unique_name(row, into);
    const std::string now = value_of(row, "name").text;
    const std::string new_notes = has_column("notes") ? value_of(row, "notes").text : notes;
    const std::string new_tags = has_column("tags") ? value_of(row, "tags").text : tags;
    nlohmann::json new_info = info.is_object() ? info : nlohmann::json::object();
    new_info[kCopiedAnnotations] = source_now;
    SqlStatement update(*to_, "UPDATE runs SET name = ?, notes = ?, tags = ?, info_json = ? WHERE id = ?");
    update.bind(1, now).bind(2, new_notes).bind(3, new_tags).bind(4, new_info.dump()).bind(5, into).run();
    t.commit();
    if (now != name) result_.names_replaced.push_back({into, name, now});
    if (now != name || new_notes != notes || new_tags != tags) ++result_.annotations_brought;
  }

  // The source's name, notes and tags as a key, kept in the destination's run information (kCopiedAnnotations) by
  // every copy that writes or brings them.
  std::string annotations_key(Row& row) {
    Hasher hash;
    hash.add(value_of(row, "name").text);
    hash.add(has_column("notes") ? value_of(row, "notes").text : std::string());
    hash.add(has_column("tags") ? value_of(row, "tags").text : std::string());
    return hash.hex();
  }
  void remember_annotations(Row& row) {
    if (!has_column("info_json")) return;  // a source from before run information: brought again next time
    Value& info = value_of(row, "info_json");
    nlohmann::json parsed = nlohmann::json::parse(info.text, nullptr, false);
    if (!parsed.is_object()) return;
    parsed[kCopiedAnnotations] = annotations_key(row);
    info.text = parsed.dump();
  }

  bool has_column(const char* column) const {
    return std::any_of(run_columns_.begin(), run_columns_.end(), [&](const Column& c) { return c.name == column; });
  }

  Value& value_of(Row& row, const std::string& column) {
    for (size_t i = 0; i < run_columns_.size(); ++i)
      if (run_columns_[i].name == column) return row[i];
    throw StoreError("run store '" + from_->name() + "': the table runs has no column " + column);
  }
  void set_text(Row& row, const std::string& column, const std::string& text) {
    Value& v = value_of(row, column);
    v = Value();
    v.text = text;
  }

  // A sweep's speeds timed in alternation name its runs by id: in the destination, by the destination's ids. A run
  // the copy left out (still recording) is left out of the timing too.
  void remap_alternating_speeds() {
    for (const int64_t run : written_) {
      SqlStatement q(*to_, "SELECT rowid, body_json FROM run_details WHERE run_id = ? AND kind = 'alternating_speed'");
      q.bind(1, run);
      std::vector<std::pair<int64_t, std::string>> bodies;
      while (q.step()) bodies.emplace_back(q.int64(0), q.text(1));
      for (auto& [rowid, text] : bodies) {
        nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
        if (!body.is_object() || !body["runs"].is_array()) continue;
        nlohmann::json runs = nlohmann::json::array(), speeds = nlohmann::json::array();
        const nlohmann::json& old_speeds = body["images_per_second"];
        for (size_t i = 0; i < body["runs"].size(); ++i) {
          const auto to =
              body["runs"][i].is_number_integer() ? mapped_.find(body["runs"][i].get<int64_t>()) : mapped_.end();
          if (to == mapped_.end()) continue;
          runs.push_back(to->second);
          if (old_speeds.is_array() && i < old_speeds.size()) speeds.push_back(old_speeds[i]);
        }
        body["runs"] = runs;
        if (old_speeds.is_array()) body["images_per_second"] = speeds;
        SqlTransaction t(*to_);
        SqlStatement update(*to_, "UPDATE run_details SET body_json = ? WHERE rowid = ?");
        update.bind(1, body.dump()).bind(2, rowid).run();
        t.commit();
      }
    }
  }

  // Sweeps and their points, each sweep made the source's; a point's run by the destination's id (none where the
  // copy left its run out).
  void copy_sweeps() {
    const std::vector<Column> sweep_columns = columns_of(*from_, "sweeps", {"id"});
    const std::vector<Column> point_columns = columns_of(*from_, "sweep_points", {"sweep_id", "run_id"});
    const std::string key = "created, name, grid_json";
    std::map<std::string, int64_t> there;
    SqlStatement existing(*to_, "SELECT id, " + key + " FROM sweeps ORDER BY id");
    while (existing.step())
      there.emplace(existing.text(1) + '\x1f' + existing.text(2) + '\x1f' + existing.text(3), existing.int64(0));
    SqlStatement sweeps(*from_, "SELECT id, " + key + ", " + names(sweep_columns) + " FROM sweeps ORDER BY id");
    while (sweeps.step()) {
      const int64_t id = sweeps.int64(0);
      const Row sweep = read_row(sweeps, sweep_columns, 4);
      std::vector<Row> points;
      SqlStatement read_points(
          *from_, "SELECT run_id, " + names(point_columns) + " FROM sweep_points WHERE sweep_id = ? ORDER BY idx");
      read_points.bind(1, id);
      std::vector<Column> with_run = point_columns;
      with_run.push_back({"run_id", Kind::Integer});
      while (read_points.step()) {
        Row p = read_row(read_points, point_columns, 1);
        Value run;
        const auto to = read_points.is_null(0) ? mapped_.end() : mapped_.find(read_points.int64(0));
        run.null = to == mapped_.end();
        if (!run.null) run.integer = to->second;
        p.push_back(run);
        points.push_back(std::move(p));
      }
      const auto found = there.find(sweeps.text(1) + '\x1f' + sweeps.text(2) + '\x1f' + sweeps.text(3));
      if (found != there.end() && same_sweep(found->second, sweep_columns, sweep, with_run, points)) continue;
      SqlTransaction t(*to_);
      int64_t into = 0;
      if (found != there.end()) {
        into = found->second;
        std::string sets;
        for (const Column& c : sweep_columns) sets += (sets.empty() ? "" : ", ") + c.name + " = ?";
        SqlStatement update(*to_, "UPDATE sweeps SET " + sets + " WHERE id = ?");
        update.bind(bind_row(update, 1, sweep_columns, sweep), into).run();
        SqlStatement forget(*to_, "DELETE FROM sweep_points WHERE sweep_id = ?");
        forget.bind(1, into).run();
      } else {
        SqlStatement insert(*to_, "INSERT INTO sweeps(" + names(sweep_columns) + ") VALUES (" +
                                      parameters(sweep_columns.size()) + ") RETURNING id");
        bind_row(insert, 1, sweep_columns, sweep);
        if (!insert.step()) throw StoreError("run store '" + to_->name() + "': a copied sweep's row has no id");
        into = insert.int64(0);
        insert.reset();
      }
      BatchInsert insert(*to_, "sweep_points", "sweep_id", with_run, into);
      for (Row& p : points) insert.add(std::move(p));
      result_.records += 1 + insert.flush();
      t.commit();
      ++result_.sweeps;
    }
  }

  bool same_sweep(int64_t id, const std::vector<Column>& sweep_columns, const Row& sweep,
                  const std::vector<Column>& point_columns, const std::vector<Row>& points) {
    SqlStatement q(*to_, "SELECT " + names(sweep_columns) + " FROM sweeps WHERE id = ?");
    if (!q.bind(1, id).step() || !(read_row(q, sweep_columns) == sweep)) return false;
    SqlStatement p(*to_, "SELECT " + names(point_columns) + " FROM sweep_points WHERE sweep_id = ? ORDER BY idx");
    p.bind(1, id);
    std::vector<Row> there;
    while (p.step()) there.push_back(read_row(p, point_columns));
    return there == points;
  }

  std::string source_location_;
  std::function<void(const StoreCopyProgress&)> progress_;
  std::unique_ptr<RunStore> source_store_, latest_;  // latest_: outside the copy's snapshot of the source
  std::unique_ptr<RunStore> destination_store_;      // held open: it made the destination's schema
  SqlConnection* from_ = nullptr;                    // the source store's
  std::unique_ptr<SqlConnection> to_;
  std::vector<Column> run_columns_;
  std::vector<std::vector<Column>> table_columns_;  // kRunTables' columns
  std::map<int64_t, int64_t> mapped_;               // a source run's id: its id in the destination
  std::set<int64_t> claimed_;                       // the destination's runs a source run was matched with
  std::vector<int64_t> written_;                    // the destination's runs this copy wrote
  StoreCopyResult result_;
};

}  // namespace

StoreCopyResult copy_store(const std::string& source, const std::string& destination,
                           const std::function<void(const StoreCopyProgress&)>& progress) {
  return StoreCopy(source, destination, progress).run();
}

}  // namespace ampwb
