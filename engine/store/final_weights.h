// A run's final weights, kept beside the store when the run finishes (train/model_weights.h has what they hold):
// for an SQLite store in <store folder>/weights/, for PostgreSQL in the data folder its checkpoints default to
// ($XDG_DATA_HOME/ampwb/weights, else ~/.local/share/ampwb/weights). The run's information (info_json,
// RunInfo::final_weights) records the file's path; the file's checksums say whether it is whole. This is how the
// CLI's predict and the exports (engine/export) load a stored run's network.
//
//   RunStore store(path, RunStore::Mode::ReadOnly);
//   const int64_t run = store.resolve("7");
//   const ModelWeights w = load_final_weights(store, run);  // throws with the reason when it has none
//   w.model.depth, w.model.num_classes, w.preprocessing.mean, w.preprocessing.class_names, w.tensor("param/fc.weight")
#pragma once

#include <cstdint>
#include <string>

#include "store/run_store.h"
#include "train/model_weights.h"

namespace ampwb {

// The folder a store's runs keep their final weights in.
std::string final_weights_folder(const std::string& store_path);
// A new file there for run `run`, named after the store: <store file>-run-<id>-<UTC time>-<pid>.weights, or
// <server and database>-run-<id>-... for a database server's store (unique among stores sharing the folder).
std::string new_final_weights_path(const std::string& store_path, int64_t run);

// Whether the run records final weights (the file may still be missing or damaged: load_final_weights says).
bool has_final_weights(const RunRecord& run);
// What a list of runs says of them: "yes", "missing" (recorded, the file gone), or "" (none recorded).
std::string final_weights_state(const RunRecord& run);
// Why run `run` has no final weights to load, in words for the user ("run 3 ('x') failed before its first epoch
// ended: it has no final weights"); empty when it records a file that exists.
std::string final_weights_refusal(const RunStore& store, int64_t run);
std::string final_weights_refusal(const RunRecord& run);  // the same for a row read already
// The run's final weights, provenance filled in. Throws ampwb::Error with final_weights_refusal's reason, or naming
// the file when it is unreadable or damaged (a checksum fails).
ModelWeights load_final_weights(const RunStore& store, int64_t run);

// Writes `weights` as run `run`'s final weights (a new file in final_weights_folder) and records the file in the
// run; returns its path. Throws ampwb::Error (the file) or StoreError (the record).
std::string keep_final_weights(RunStore& store, int64_t run, const ModelWeights& weights);
// The note a finished run's record gets when its final weights were not kept on purpose.
inline constexpr const char* kFinalWeightsNotKeptNote = "its final weights were not kept, as its settings asked";
// The start of the note a finished run's record gets when its final weights could not be written (a full disk).
inline constexpr const char* kFinalWeightsNotWrittenNote = "its final weights could not be written";
// Gives run `run`, copied into `store` from another store (store copy, store backup), a weights file of its own in
// this store's folder: a copy, never a hard link, so that a backup's weights survive damage to the original's file
// (and the other way round), and deleting the run from either store leaves the other's whole. Returns whether it made
// one: not for a run without final weights, nor for one whose file is missing. Throws ampwb::Error naming the file
// when it cannot copy it.
bool own_final_weights(RunStore& store, int64_t run);
// Whether the run's weights file is the store's at `store_path` to remove: in its folder and named after it. A run of
// a store copied with cp names the other store's file, which that store still uses; a file named before files were
// named after their store may be any store's, and is no store's to remove.
bool owns_final_weights(const std::string& store_path, const RunRecord& run);
// Removes the run's weights file (a run being deleted from the store at `store_path`) where the store owns it. A file
// already gone is no error.
void remove_final_weights(const std::string& store_path, const RunRecord& run);

}  // namespace ampwb
