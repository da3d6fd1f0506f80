// Recovering a damaged SQLite run store (store_recover.h). Values go from the damaged file to the new one as SQLite
// holds them (sqlite3_value), so each keeps its type, NULL included.
#include "store/store_recover.h"

#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "store/final_weights.h"
#include "store/run_store.h"
#include "store/sqlite.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;

using Key = std::vector<int64_t>;
constexpr int64_t kBeforeEveryKey = std::numeric_limits<int64_t>::min();
constexpr int64_t kLastKey = std::numeric_limits<int64_t>::max();
constexpr int64_t kProgressEvery = 10000;
constexpr int kIslandProbes = 15;  // keys tried inside each stretch between two failed reads (4 levels of midpoints)

// A damaged page reads as one of these; anything else (a full disk, no memory, a lock) is not damage.
bool unreadable(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR;
}

// A name in SQL: quoted, but for the rowid, which a quoted name would take for a column of that name where one exists.
std::string quoted(const std::string& name) {
  if (name == "rowid") return name;
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A prepared statement whose step() reports SQLite's code, so that a read of a damaged page can be told apart.
class Prepared {
 public:
  Prepared(SqliteDb& db, const std::string& sql) : db_(db), sql_(sql) {
    db.check(sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr), "sqlite3_prepare_v2", sql);
  }
  ~Prepared() { sqlite3_finalize(stmt_); }
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;

  int step() { return sqlite3_step(stmt_); }
  void fail(int rc) const { db_.check(rc, "sqlite3_step", sql_); }  // throws: rc is neither a row nor the end
  sqlite3_stmt* get() const { return stmt_; }

 private:
  SqliteDb& db_;
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

// One table of the damaged store, as its schema declares it.
struct Table {
  std::string name, create_sql;
  std::vector<std::string> columns;  // in declared order
  std::vector<std::string> key;      // "rowid", or a WITHOUT ROWID table's primary key: the order of its b-tree
  bool copies_rowid = false;         // the rowid is copied besides the columns (no INTEGER PRIMARY KEY holds it)
  std::string owner, owner_kind;     // the column naming the run or sweep a row belongs to ("run_id", "run")
};

Table describe(SqliteDb& db, const std::string& name, const std::string& create_sql) {
  Table t{name, create_sql, {}, {}, false, {}, {}};
  std::vector<std::pair<int, std::string>> primary;
  std::string primary_type;
  SqliteStatement columns(db, "SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid");
  columns.bind(1, name);
  while (columns.step()) {
    t.columns.push_back(columns.text(0));
    if (columns.int64(2) > 0) {
      primary.emplace_back(static_cast<int>(columns.int64(2)), columns.text(0));
      primary_type = columns.text(1);
    }
  }
  SqliteStatement kind(db, "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?");
  const bool without_rowid = kind.bind(1, name).step() && kind.int64(0) != 0;
  if (without_rowid) {
    std::sort(primary.begin(), primary.end());
    for (const auto& [order, column] : primary) t.key.push_back(column);
  } else {
    t.key = {"rowid"};
    // An INTEGER PRIMARY KEY column is the rowid under its own name.
    std::transform(primary_type.begin(), primary_type.end(), primary_type.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    t.copies_rowid = !(primary.size() == 1 && primary_type == "INTEGER");
  }
  const auto has = [&t](const char* column) {
    return std::find(t.columns.begin(), t.columns.end(), column) != t.columns.end();
  };
  if (name == "runs" || name == "sweeps")
    t.owner = "id", t.owner_kind = name == "runs" ? "run" : "sweep";
  else if (has("sweep_id"))
    t.owner = "sweep_id", t.owner_kind = "sweep";
  else if (has("run_id"))
    t.owner = "run_id", t.owner_kind = "run";
  return t;
}

// Where rows were lost, in words: "runs between run 2 and run 5", "rows of run 3".
std::string lost_words(const Table& t, std::optional<int64_t> before, std::optional<int64_t> after) {
  const auto name = [&t](int64_t id) { return t.owner_kind + " " + std::to_string(id); };
  if (t.owner_kind.empty()) return "some of its rows";
  if (t.owner == "id") {  // the runs or sweeps themselves
    const std::string plural = t.owner_kind + "s";
    if (before && after) return plural + " between " + name(*before) + " and " + name(*after);
    if (before) return plural + " after " + name(*before);
    if (after) return plural + " before " + name(*after);
    return "every " + t.owner_kind;
  }
  if (before && after && *before == *after) return "rows of " + name(*before);
  // Rows kept in writing order (epochs, details) interleave runs that recorded at once: the lower id first.
  if (before && after)
    return "rows from " + name(std::min(*before, *after)) + "'s to " + name(std::max(*before, *after)) + "'s";
  if (before) return "rows from " + name(*before) + "'s on";
  if (after) return "rows up to " + name(*after) + "'s";
  return "every row";
}

class Recovery {
 public:
  Recovery(SqliteDb& from, SqliteDb& to, const std::function<void(const StoreRecoverProgress&)>& progress)
      : from_(from), to_(to), progress_(progress) {}

  StoreRecoverResult& result() { return result_; }

  // The runs of the new file that a lost stretch may have held records of: those from the run read before it to
  // the one read after it. Rows are in key or writing order, so the rows lost are theirs.
  void find_incomplete_runs() {
    SqliteStatement runs(to_, "SELECT id FROM runs");
    while (runs.step())
      for (const auto& [before, after] : runs_beside_lost_)
        if (const int64_t id = runs.int64(0); (!before || id >= std::min(*before, after.value_or(*before))) &&
                                              (!after || id <= std::max(*after, before.value_or(*after))))
          result_.incomplete_runs.insert(id);
  }

  // Every readable row of `t`, in key order, into the new file's table of the same name.
  void copy(const Table& t) {
    std::vector<std::string> inserted = t.columns;
    if (t.copies_rowid) inserted.push_back("rowid");
    std::vector<std::string> names;
    for (const std::string& c : inserted) names.push_back(quoted(c));
    // A garbled row (a key repeated, a value the schema refuses) is left out, not the whole recovery.
    Prepared insert(to_, "INSERT OR IGNORE INTO " + quoted(t.name) + "(" + joined(names) + ") VALUES (" +
                             joined(std::vector<std::string>(inserted.size(), "?")) + ")");
    std::optional<Key> last, from;  // `last` is none before the first row, and after a key that is not a number
    std::optional<int64_t> last_owner;
    bool stretch_open = false;  // a lost stretch began after `last`; the next row read ends it
    int64_t rows = 0, rows_at_probe = 0;
    for (;;) {
      Prepared read(from_, select(t, from.has_value(), false));
      if (from) bind_key(read, *from);
      int rc;
      while ((rc = read.step()) == SQLITE_ROW) {
        const std::optional<Key> key = key_of(read, t);
        const std::optional<int64_t> owner = owner_of(read, t);
        if (key && last && *key <= *last) {  // out of order: a damaged page read as if whole
          rc = SQLITE_CORRUPT;
          break;
        }
        if (stretch_open) {
          lost(t, last_owner, owner);
          stretch_open = false;
        }
        for (size_t i = 0; i < inserted.size(); ++i)
          to_.check(sqlite3_bind_value(insert.get(), static_cast<int>(i) + 1,
                                       sqlite3_column_value(read.get(), static_cast<int>(t.key.size() + 1 + i))),
                    "sqlite3_bind_value", t.name);
        if (const int written = insert.step(); written != SQLITE_DONE) insert.fail(written);
        sqlite3_reset(insert.get());
        ++(to_.changes() > 0 ? result_.rows : result_.garbled[t.name]);
        if (++rows % kProgressEvery == 0 && progress_) progress_({t.name, rows});
        last = key;
        last_owner = owner;
      }
      if (rc == SQLITE_DONE) break;
      if (!unreadable(rc)) read.fail(rc);
      stretch_open = true;
      // After a key that is not a number no later key can be probed for: the rest of the table is lost. A read that
      // fails where its probe read goes on probing past that point.
      const bool moved = rows > rows_at_probe || !from;
      from = moved && rows > 0 && !last ? std::nullopt : next_readable(t, moved ? last : from);
      rows_at_probe = rows;
      if (!from) break;
    }
    if (stretch_open) lost(t, last_owner, std::nullopt);
    if (progress_) progress_({t.name, rows});
  }

 private:
  // The table's key, then its owner, then the columns (and rowid) to copy, in key order; from `from` when `from`.
  static std::string select(const Table& t, bool from, bool first_only) {
    std::vector<std::string> read;
    for (const std::string& k : t.key) read.push_back(quoted(k));
    read.push_back(t.owner.empty() ? "NULL" : quoted(t.owner));
    for (const std::string& c : t.columns) read.push_back(quoted(c));
    if (t.copies_rowid) read.push_back("rowid");
    std::string where;
    if (from)
      where = " WHERE (" + joined(std::vector<std::string>(read.begin(), read.begin() + t.key.size())) + ") >= (" +
              joined(std::vector<std::string>(t.key.size(), "?")) + ")";
    return "SELECT " + joined(read) + " FROM " + quoted(t.name) + " NOT INDEXED" + where + " ORDER BY " +
           joined(std::vector<std::string>(read.begin(), read.begin() + t.key.size())) + (first_only ? " LIMIT 1" : "");
  }

  void bind_key(Prepared& q, const Key& key) {
    for (size_t i = 0; i < key.size(); ++i)
      from_.check(sqlite3_bind_int64(q.get(), static_cast<int>(i) + 1, key[i]), "sqlite3_bind_int64", "");
  }

  static std::optional<Key> key_of(Prepared& q, const Table& t) {
    Key key;
    for (size_t i = 0; i < t.key.size(); ++i) {
      if (sqlite3_column_type(q.get(), static_cast<int>(i)) != SQLITE_INTEGER) return std::nullopt;
      key.push_back(sqlite3_column_int64(q.get(), static_cast<int>(i)));
    }
    return key;
  }

  static std::optional<int64_t> owner_of(Prepared& q, const Table& t) {
    const int column = static_cast<int>(t.key.size());
    if (sqlite3_column_type(q.get(), column) != SQLITE_INTEGER) return std::nullopt;
    return sqlite3_column_int64(q.get(), column);
  }

  // A distance in (from, to) at which `reads` holds, trying midpoints breadth first, at most `probes` of them.
  template <class Reads>
  static std::optional<uint64_t> inside(uint64_t from, uint64_t to, int probes, const Reads& reads) {
    std::vector<std::pair<uint64_t, uint64_t>> stretches = {{from, to}}, next;
    while (probes > 0 && !stretches.empty()) {
      for (const auto& [low, high] : stretches) {
        if (high - low < 2 || probes-- <= 0) continue;
        const uint64_t middle = low + (high - low) / 2;
        if (reads(middle)) return middle;
        next.insert(next.end(), {{low, middle}, {middle, high}});
      }
      stretches.swap(next);
      next.clear();
    }
    return std::nullopt;
  }

  // Whether the table reads from `from` on: its first row there, or its end, comes back without a damaged page. A
  // seek into a damaged page can also come back with a row made of its garbage: a real row is where its key says,
  // so a seek for that key must find it again.
  bool readable_from(const Table& t, const Key& from) {
    const std::optional<Key> found = first_key(t, from);
    if (!found) return false;
    return found->empty() || *found == from || first_key(t, *found) == found;
  }

  // The key of the table's first row from `from` on (empty: none there, or a key that is not a number); none when the
  // read fails or gives a key before `from`.
  std::optional<Key> first_key(const Table& t, const Key& from) {
    Prepared q(from_, select(t, true, true));
    bind_key(q, from);
    const int rc = q.step();
    if (rc == SQLITE_DONE) return Key{};
    if (rc != SQLITE_ROW) {
      if (!unreadable(rc)) q.fail(rc);
      return std::nullopt;
    }
    const std::optional<Key> key = key_of(q, t);
    if (!key) return Key{};
    if (*key < from) return std::nullopt;
    return key;
  }

  // The smallest key after `last` (before every key when none was read) from which the table reads again; none when
  // no later key reads. The key's columns are searched from the last one.
  std::optional<Key> next_readable(const Table& t, const std::optional<Key>& last) {
    const Key base = last.value_or(Key(t.key.size(), kBeforeEveryKey));
    for (size_t j = t.key.size(); j-- > 0;)
      if (std::optional<Key> key = search(t, base, j)) return key;
    return std::nullopt;
  }

  // The smallest key after `base` that reads, among those that share base's columns before j: a step past `base`
  // in column j, doubled until a read succeeds, then halved back to the smallest that does. Where that value v is
  // found, keys of v - 1 in column j with later columns past their least may read too: they are searched first.
  std::optional<Key> search(const Table& t, const Key& base, size_t j) {
    // Keys after `base` in column j, by their distance from it (unsigned: it may span every int64).
    const uint64_t room = static_cast<uint64_t>(kLastKey) - static_cast<uint64_t>(base[j]);
    const auto at = [&](uint64_t distance) {
      Key k(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(j));
      k.push_back(static_cast<int64_t>(static_cast<uint64_t>(base[j]) + distance));
      k.resize(t.key.size(), kBeforeEveryKey);
      return k;
    };
    uint64_t failed = 0, reads = 0;        // reads fail at `failed`; 0 for `reads`: no key found yet
    std::vector<uint64_t> failures = {0};  // then the read that succeeded, so that its stretch is tried too
    for (uint64_t distance = 1; distance <= room && distance > failed;
         distance = distance > room / 2 ? room : distance * 2) {
      if (readable_from(t, at(distance))) {
        reads = distance;
        break;
      }
      failed = distance;
      failures.push_back(distance);
    }
    if (reads == 0) return std::nullopt;
    failures.push_back(reads);
    // Each step doubled may have stepped over a readable page between two damaged ones: a few keys inside each
    // stretch between failed reads are tried, the nearest stretch first.
    for (size_t i = 1; i < failures.size(); ++i)
      if (const std::optional<uint64_t> island = inside(failures[i - 1], failures[i], kIslandProbes,
                                                        [&](uint64_t d) { return readable_from(t, at(d)); })) {
        failed = failures[i - 1];
        reads = *island;
        break;
      }
    while (reads - failed > 1) {
      const uint64_t middle = failed + (reads - failed) / 2;
      (readable_from(t, at(middle)) ? reads : failed) = middle;
    }
    if (j + 1 < t.key.size() && reads > 1)  // at(0) is `base` itself, whose later columns the caller searched
      if (std::optional<Key> within = search(t, at(reads - 1), j + 1)) return within;
    return at(reads);
  }

  void lost(const Table& t, std::optional<int64_t> before, std::optional<int64_t> after) {
    result_.lost.push_back({t.name, lost_words(t, before, after)});
    if (t.owner_kind == "run" && t.owner != "id") runs_beside_lost_.emplace_back(before, after);
  }

  SqliteDb& from_;
  SqliteDb& to_;
  // Of each stretch lost from a table of runs' records, the runs whose rows were read on either side (none: the
  // stretch reaches the table's start or end).
  std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> runs_beside_lost_;
  const std::function<void(const StoreRecoverProgress&)>& progress_;
  StoreRecoverResult result_;
};

// A file cut short (a full disk, a copy interrupted) still has a header that counts its pages, and SQLite trusts that
// count while the header's change counter says it is current: every query then fails as malformed, the table of
// contents on page 1 included.
struct CutShort {
  int64_t pages_held = 0, pages_counted = 0;
  uint32_t change_counter = 0;
};
std::optional<CutShort> cut_short(const std::string& file) {
  unsigned char header[100] = {};
  std::ifstream in(file, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(header), sizeof header)) return std::nullopt;
  const auto u32 = [&](int at) {
    return uint32_t{header[at]} << 24 | uint32_t{header[at + 1]} << 16 | uint32_t{header[at + 2]} << 8 |
           uint32_t{header[at + 3]};
  };
  const int64_t page_size = header[16] == 0 && header[17] == 1 ? 65536 : header[16] << 8 | header[17];
  std::error_code ec;
  const int64_t bytes = static_cast<int64_t>(fs::file_size(file, ec));
  const int64_t counted = u32(28);
  if (ec || u32(24) != u32(92) || page_size < 512 || counted * page_size <= bytes) return std::nullopt;
  return CutShort{bytes / page_size, counted, u32(24)};
}

// Such a file is read through a private copy whose count is marked stale (the counter it is valid for changed), so
// that SQLite counts the pages the file holds and the rows of the missing pages are lost as any damaged page's are.
// The copy (and its -wal, if any) goes once the recovery ends.
class CutShortCopy {
 public:
  CutShortCopy(const std::string& damaged, const std::string& beside) {
    const std::optional<CutShort> cut = cut_short(damaged);
    if (!cut) return;
    path_ = beside + ".reading-" + std::to_string(::getpid());
    try {
      std::error_code ec;
      fs::copy_file(damaged, path_, fs::copy_options::overwrite_existing);
      if (fs::exists(damaged + "-wal", ec))
        fs::copy_file(damaged + "-wal", path_ + "-wal", fs::copy_options::overwrite_existing);
      const uint32_t stale = cut->change_counter + 1;
      const char valid_for[4] = {static_cast<char>(stale >> 24), static_cast<char>(stale >> 16),
                                 static_cast<char>(stale >> 8), static_cast<char>(stale)};
      std::fstream patch(path_, std::ios::binary | std::ios::in | std::ios::out);
      patch.seekp(92);
      if (!patch.write(valid_for, sizeof valid_for).flush()) throw StoreError("its header could not be written");
    } catch (const std::exception& e) {  // a full disk, as often as not: no part of the copy stays behind
      remove();
      throw StoreError("cannot read '" + damaged + "', cut short, through a copy beside '" + beside +
                       "' (it needs as much free space as the store): " + e.what());
    }
    words_ = cut_short_words(damaged);
  }
  ~CutShortCopy() { remove(); }
  CutShortCopy(const CutShortCopy&) = delete;
  CutShortCopy& operator=(const CutShortCopy&) = delete;

  const std::string& path() const { return path_; }    // empty where the file is read as it is
  const std::string& words() const { return words_; }  // cut_short_words() of the damaged file

 private:
  void remove() {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"})
      if (!path_.empty()) fs::remove(path_ + suffix, ec);
  }
  std::string path_, words_;
};

int64_t pragma(SqliteDb& db, const char* name) {
  SqliteStatement q(db, std::string("PRAGMA ") + name);
  return q.step() ? q.int64(0) : 0;
}

// Keeps AUTOINCREMENT from handing out ids up to `used` again (a lost run's, say).
void raise_sequence(SqliteDb& db, const std::string& table, int64_t used) {
  SqliteStatement keep(db,
                       "INSERT INTO sqlite_sequence(name, seq) SELECT ?1, ?2 WHERE NOT EXISTS "
                       "(SELECT 1 FROM sqlite_sequence WHERE name = ?1)");
  keep.bind(1, table).bind(2, used).run();
  SqliteStatement raise(db, "UPDATE sqlite_sequence SET seq = max(seq, ?2) WHERE name = ?1");
  raise.bind(1, table).bind(2, used).run();
}

// Rows whose run or sweep was lost: deleted where the reference cascades, unlinked where it is set to NULL, as
// deleting that run or sweep would have done. Repeated until nothing changes, for references of references. The
// lost ids they name stay used.
void leave_out_orphans(SqliteDb& db, const std::vector<Table>& tables, StoreRecoverResult& result) {
  const auto autoincrement = [&tables](const std::string& name) {
    return std::any_of(tables.begin(), tables.end(), [&name](const Table& t) {
      return t.name == name && t.create_sql.find("AUTOINCREMENT") != std::string::npos;
    });
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (const Table& t : tables) {
      SqliteStatement references(db, "SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list(?)");
      references.bind(1, t.name);
      std::vector<std::array<std::string, 4>> list;
      while (references.step())
        list.push_back({references.text(0), references.text(1), references.text(2), references.text(3)});
      for (const auto& [parent, column, parent_column, on_delete] : list) {
        if (autoincrement(parent)) {
          SqliteStatement used(db, "SELECT max(" + quoted(column) + ") FROM " + quoted(t.name));
          if (used.step() && !used.is_null(0)) raise_sequence(db, parent, used.int64(0));
        }
        const std::string missing = quoted(column) + " IS NOT NULL AND " + quoted(column) + " NOT IN (SELECT " +
                                    quoted(parent_column.empty() ? "rowid" : parent_column) + " FROM " +
                                    quoted(parent) + ")";
        const bool unlink = on_delete == "SET NULL";
        // A sweep point whose run was lost keeps which run that was: not one deleted, as a point without a run reads.
        const std::string lost =
            t.name == "sweep_points" && column == "run_id"
                ? "settings_json = CASE WHEN json_valid(settings_json) THEN json_set(settings_json, '$.run_lost', " +
                      quoted(column) + ") ELSE settings_json END, "
                : "";
        db.exec(unlink ? "UPDATE " + quoted(t.name) + " SET " + lost + quoted(column) + " = NULL WHERE " + missing
                       : "DELETE FROM " + quoted(t.name) + " WHERE " + missing);
        if (db.changes() == 0) continue;
        (unlink ? result.unlinked : result.orphans)[t.name] += db.changes();
        if (!unlink) result.rows -= db.changes();
        changed = true;
      }
    }
  }
}

// Adds `note` to the run information of each run in `runs` (as RunStore::add_note does), in the file being made.
void add_note(SqliteDb& db, const std::set<int64_t>& runs, const std::string& note) {
  for (const int64_t run : runs) {
    SqliteStatement read(db, "SELECT info_json FROM runs WHERE id = ?");
    if (!read.bind(1, run).step()) continue;
    nlohmann::json info = nlohmann::json::parse(read.text(0), nullptr, false);
    if (!info.is_object()) continue;  // unreadable already: the run says so where it is shown
    if (!info["notes"].is_array()) info["notes"] = nlohmann::json::array();
    info["notes"].push_back(note);
    SqliteStatement write(db, "UPDATE runs SET info_json = ? WHERE id = ?");
    write.bind(1, info.dump()).bind(2, run).run();
  }
}

}  // namespace

std::string cut_short_words(const std::string& sqlite_file) {
  const std::optional<CutShort> cut = cut_short(sqlite_file);
  return cut ? "the file ends after " + std::to_string(cut->pages_held) + " of the " +
                   std::to_string(cut->pages_counted) + " pages its header counts (cut short)"
             : "";
}

std::string not_sqlite_words(const std::string& file) {
  char header[100] = {};
  std::ifstream in(file, std::ios::binary);
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(file, ec);
  if (in.read(header, sizeof header) && !ec && bytes >= 1024 && bytes % 512 == 0 &&
      std::all_of(std::begin(header), std::end(header), [](char c) { return c == 0; }))
    return "cannot be read: its first 100 bytes, where an SQLite database keeps its header, are zeros (a run store "
           "whose header was overwritten, or not a run store at all), and no program reads a store without its "
           "header: restore it from a backup";
  return "is not a run store (not an SQLite database)";
}

// A recovery stopped outright (Ctrl-C, a kill) leaves its files beside the destination, "<destination>.recovering-PID"
// and "<destination>.reading-PID" (with their -wal, -shm, -journal): those of a process that is gone are only disk
// space, and are removed before another recovery into the same destination.
void remove_files_of_stopped_recoveries(const std::string& destination) {
  std::error_code ec;
  const fs::path target = fs::absolute(destination, ec);
  const std::string stem = target.filename().string();
  for (const fs::directory_entry& entry : fs::directory_iterator(target.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string kind : {".recovering-", ".reading-"}) {
      if (!name.starts_with(stem + kind)) continue;
      const std::string rest = name.substr(stem.size() + kind.size());  // "PID" or "PID-wal"
      const long pid = std::strtol(rest.c_str(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
    }
  }
}

StoreRecoverResult recover_store(const std::string& damaged, const std::string& destination,
                                 const std::function<void(const StoreRecoverProgress&)>& progress) {
  std::error_code ec;
  if (fs::exists(destination, ec))
    throw StoreError("'" + destination + "' exists: name a new file for the recovered store (nothing is overwritten)");
  const fs::path folder = fs::absolute(destination, ec).parent_path();
  if (!fs::is_directory(folder, ec))
    throw StoreError("cannot write '" + destination + "': the folder " + folder.string() + " does not exist");
  {
    char magic[16] = {};
    std::ifstream(damaged, std::ios::binary).read(magic, sizeof magic);
    if (std::string(magic, sizeof magic) != std::string("SQLite format 3\0", 16))
      throw StoreError("'" + damaged + "' " + not_sqlite_words(damaged) + ": there is nothing to recover");
  }
  remove_files_of_stopped_recoveries(destination);
  const CutShortCopy whole_count(damaged, destination);
  SqliteDb from(whole_count.path().empty() ? damaged : whole_count.path(), SqliteDb::Open::ReadOnly);
  std::vector<Table> tables;
  std::vector<std::string> later;  // indexes, triggers and views: made once the rows are in
  int64_t application_id = 0, version = 0;
  try {
    // Each page checked whole as it is read (its cells within it), so a damaged page fails rather than giving rows
    // made of garbage; and one snapshot, should a process still write into the file.
    from.exec("PRAGMA cell_size_check = ON; BEGIN");
    application_id = pragma(from, "application_id");
    version = pragma(from, "user_version");
    SqliteStatement schema(from, "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid");
    std::vector<std::array<std::string, 3>> entries;
    while (schema.step()) entries.push_back({schema.text(0), schema.text(1), schema.text(2)});
    for (const auto& [type, name, sql] : entries) {
      if (type != "table")
        later.push_back(sql);
      else if (!name.starts_with("sqlite_"))
        tables.push_back(describe(from, name, sql));
    }
  } catch (const StoreError& e) {
    if (!e.damaged()) throw;
    throw StoreError("the run store '" + damaged +
                         "' is damaged where SQLite lists its tables, so none of them can be found: " + e.what(),
                     e.sqlite_code());
  }
  const bool has_runs = std::any_of(tables.begin(), tables.end(), [](const Table& t) { return t.name == "runs"; });
  if (application_id != RunStore::kApplicationId || !has_runs)
    throw StoreError("'" + damaged + "' is not a run store: there is nothing of ampwb's to recover");
  if (version > RunStore::kSchemaVersion)
    throw StoreError("the run store '" + damaged + "' was made by a newer ampwb (schema version " +
                     std::to_string(version) + "; this one knows up to " + std::to_string(RunStore::kSchemaVersion) +
                     "): recover it with that ampwb");

  // Written under a name of its own, and renamed once whole: a recovery cut short leaves no half store behind.
  const std::string partial = destination + ".recovering-" + std::to_string(::getpid());
  StoreRecoverResult result;
  try {
    SqliteDb to(partial, SqliteDb::Open::ReadWriteCreate);
    to.exec("PRAGMA foreign_keys = OFF; PRAGMA application_id = " + std::to_string(application_id) +
            "; PRAGMA user_version = " + std::to_string(version) + "; BEGIN");
    for (const Table& t : tables) to.exec(t.create_sql);
    Recovery recovery(from, to, progress);
    for (const Table& t : tables) recovery.copy(t);
    // Ids AUTOINCREMENT handed out stay used, a lost run's included, where the damaged file still says which.
    try {
      SqliteStatement sequences(from, "SELECT name, seq FROM sqlite_sequence");
      while (sequences.step()) raise_sequence(to, sequences.text(0), sequences.int64(1));
    } catch (const StoreError& e) {
      if (!e.damaged()) throw;
    }
    leave_out_orphans(to, tables, recovery.result());
    recovery.find_incomplete_runs();
    result = std::move(recovery.result());
    result.cut_short = whole_count.words();
    add_note(to, result.incomplete_runs,
             "recovered from a damaged run store: some of its records could not be read, so its curves may have gaps");
    for (const std::string& sql : later) to.exec(sql);
    to.exec("COMMIT");
    SqliteStatement check(to, "PRAGMA integrity_check");
    if (!check.step() || check.text(0) != "ok")
      throw StoreError("the recovered store '" + partial + "' fails SQLite's integrity check: " + check.text(0));
  } catch (...) {
    fs::remove(partial, ec);
    throw;
  }
  // A hard link, unlike a rename, never replaces a file that appeared meanwhile.
  if (::link(partial.c_str(), destination.c_str()) != 0) {
    const int error = errno;
    if (error != EPERM && error != ENOTSUP && error != EXDEV) {
      fs::remove(partial, ec);
      throw StoreError(error == EEXIST
                           ? "'" + destination + "' appeared while the store was recovered: nothing is overwritten"
                           : "cannot write '" + destination + "': " + std::strerror(error));
    }
    fs::rename(partial, destination);  // a file system without hard links
  } else {
    fs::remove(partial, ec);
  }

  // Opened as a store: brought to this build's schema, and runs whose recording process is gone marked interrupted.
  // Its runs get final weights files of their own, as a backup's do: deleting a run from the damaged store, kept
  // beside it, must not take the recovered run's weights. Where that cannot be done the recovery stands all the same.
  RunStore recovered(destination, RunStore::Mode::Existing);
  const std::vector<RunRecord> runs = recovered.runs();
  result.runs = static_cast<int>(runs.size());
  for (const RunRecord& r : runs) {
    try {
      own_final_weights(recovered, r.id);
    } catch (const Error& e) {
      result.weights_shared.push_back(e.what());
    }
  }
  return result;
}

}  // namespace ampwb
