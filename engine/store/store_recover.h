// Recovering what is readable of a damaged SQLite run store into a new file, as SQLite's shell's `.recover` would
// (Debian's sqlite3 shell cannot: it lacks the page reader that needs). Every table is read from its own b-tree in
// key order, never through an index. Where a read meets a damaged page, the smallest later key from which the table
// reads again is found by probing further keys, and the rows between are reported lost. The new file has the damaged
// one's schema, version and rows under their own ids, so runs keep their ids and checkpoints; indexes are built
// anew. Rows whose run or sweep was lost are left out, as deleting that run or sweep would have taken them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ampwb {

// Rows of one table that could not be read.
struct LostRows {
  std::string table;
  std::string words;  // where, in words: "runs between run 2 and run 5", "rows from run 3's to run 4's"
};

struct StoreRecoverResult {
  int64_t rows = 0;                         // rows in the new store, every table's together
  int runs = 0;                             // runs in the new store
  std::vector<LostRows> lost;               // every stretch a read could not cross
  std::map<std::string, int64_t> garbled;   // per table: rows read but refused (a repeated key, a value out of place)
  std::map<std::string, int64_t> orphans;   // per table: rows left out because their run or sweep was lost
  std::map<std::string, int64_t> unlinked;  // per table: rows kept, their link to a lost run cleared (sweep points)
  std::set<int64_t> incomplete_runs;        // runs kept whose records a lost stretch may hold; each gets a note
  std::vector<std::string> weights_shared;  // why a run still names the damaged store's weights file, if one does
  std::string cut_short;  // "the file ends after 244 of the 477 pages its header counts", for a file cut short
};

struct StoreRecoverProgress {
  std::string table;
  int64_t rows = 0;  // read so far from this table
};

// Reads the SQLite run store at `damaged` (only reads it) and writes what is readable into a new store at
// `destination`, which must not exist; it appears there only once whole (written as "<destination>.recovering-PID"
// first, whose leftovers from a recovery killed midway the next one removes). Throws StoreError when `damaged` is not a
// run store or its table of contents cannot be read, and when `destination` exists or cannot be written.
// `progress` is called after each table and every 10,000 rows.
// "the file ends after 244 of the 477 pages its header counts (cut short)" for an SQLite file shorter than its header
// says (a full disk, a copy interrupted), which SQLite reads as malformed throughout; else empty.
std::string cut_short_words(const std::string& sqlite_file);
// What to say of `file`, which does not read as an SQLite database, after its quoted name: "is not a run store (not
// an SQLite database)", or, where its header's 100 bytes are zeros in a file of whole pages, that it cannot be read
// without its header (the rest may be a store's, but no reader finds it).
std::string not_sqlite_words(const std::string& file);

StoreRecoverResult recover_store(const std::string& damaged, const std::string& destination,
                                 const std::function<void(const StoreRecoverProgress&)>& progress = {});

}  // namespace ampwb
