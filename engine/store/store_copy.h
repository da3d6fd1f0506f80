// Copying the runs of one run store into another: an SQLite file into a PostgreSQL database and back, or into
// another SQLite file (a backup of a PostgreSQL store is such a copy, store_commands). Every run is copied with all
// its records: its row (notes, tags and run information included), epochs, steps, histograms, checkpoints and the
// details that explain it, in the order they were written; then the sweeps and their points where both stores have
// them.
//
// Identity: a run is the same run in both stores when its creation time and the settings it keeps for its whole
// life (seed, depth, precision, batch size, learning rate, optimizer, planned epochs, image size and dataset
// fingerprint) are equal. Ids differ between stores, names change with a rename, host and pid with a resume on
// another node: none of them can say which run is which. So a copy made again adds nothing twice, and copying back
// the other way finds the originals. A run already in the destination is replaced when the source's is newer (its
// `updated` time is later: the run was resumed since), else left as it is. A sweep is the same sweep when its
// creation time, name and grid are equal; its state and its points are made the source's.
//
// Consistency: the source is read in one read transaction, a snapshot that runs recording meanwhile do not change.
// A run that a live process still records is not copied (copy again once it ends); a run whose recording process
// died is copied as interrupted, as opening the source for writing would have marked it. Each run is written in
// one write transaction of the destination, so a copy cut short leaves whole runs only, and copying again
// completes it.
//
// Final weights: each copied run gets a weights file of its own beside the destination (final_weights.h's
// own_final_weights: a copy), so neither damage to one file nor a delete from one store takes the other's.
//
// Names: a name picks out one run in a store, so a copied run whose name another run of the destination has is
// named NAME-2 (or -3, ...), as the store names a new run. A run replaced by its newer state keeps its notes and tags
// in the destination, the source's added: a copy cannot tell which store's edit came later, so it loses neither. Its
// name becomes the source's, and the name it had there is said. A run the destination has as it is gets the same
// where the source's name, notes or tags changed since a copy last wrote them (edits leave a run's time alone; the
// copy keeps a key of what it wrote in the run's information), and keeps the destination's own edits where not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ampwb {

struct StoreCopyProgress {
  size_t run = 0, runs = 0;  // this is run `run` (1-based) of `runs` in the source
  std::string name;          // its name
  int64_t records = 0;       // the records written so far, every run's rows together
};

struct StoreCopyResult {
  int copied = 0;         // runs new to the destination
  int updated = 0;        // runs the destination had in an older state, replaced
  int already_there = 0;  // runs the destination had as they are (or newer), left alone
  struct SourceRun {
    int64_t id = 0;  // in the source
    std::string name;
  };
  std::vector<SourceRun> still_recording;  // runs a live process records in the source, not copied
  int interrupted = 0;       // of those copied or updated: whose recording process had died, copied as interrupted
  int annotations_kept = 0;  // of those updated: whose own notes or tags in the destination stay, the source's added
  int annotations_brought = 0;  // of those already there: renamed, tagged or noted in the source since, brought
  struct NameReplaced {
    int64_t run = 0;  // its id in the destination
    std::string was, now;
  };
  // Of those copied or updated: named NAME-2 (-3, ...) where another run there had the name (`was`, the source's).
  std::vector<NameReplaced> renamed;
  std::vector<NameReplaced> names_replaced;  // of those updated: named otherwise in the destination, now the source's
  int sweeps = 0;           // sweeps copied or brought up to date
  int64_t records = 0;      // rows written: runs, epochs, steps, histograms, checkpoints, details, sweep points
  // The runs whose id in the destination is not the source's (each store numbers its own): source id, its id there.
  std::vector<std::pair<int64_t, int64_t>> renumbered;
};

// Copies every run of the store at `source` into the store at `destination` (locations as store_location.h reads
// them; an SQLite destination that does not exist is created, an empty PostgreSQL database gets the store's
// tables). Refuses, before writing anything, a destination that is not a run store, has a newer schema than this
// build, or is the source itself; the source is only read. `progress` is called after each run.
StoreCopyResult copy_store(const std::string& source, const std::string& destination,
                           const std::function<void(const StoreCopyProgress&)>& progress = {});

}  // namespace ampwb
