// The resume checks: what must hold for a stored run to continue, and which settings may change when it does.
#include "store/run_resume.h"

#include <filesystem>
#include <optional>
#include <vector>

#include "core/error.h"
#include "store/dataset_fingerprint.h"
#include "train/checkpoint.h"

namespace ampwb {
namespace {

std::string run_words(const RunRecord& r) { return "run " + std::to_string(r.id) + " ('" + r.name + "')"; }

// The global step a checkpoint file was written at; nullopt where it cannot be read (missing, damaged), which the
// trainer meets by falling back to the checkpoint before it, saying so.
std::optional<int64_t> checkpoint_step(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    return load_checkpoint_meta(path).at("global_step").get<int64_t>();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The checkpoint file to resume run `r` from: the one its store recorded last, or, where the store could not record
// a later one (its write failed, the process was killed between the two), the one that replaced it, kept as
// PATH.prev. Another step there means another run wrote the folder since, or a copy of this store (a backup) that
// resumed this run: refused, since resuming would give this run another's training.
std::string recorded_checkpoint(const RunRecord& r, const CheckpointInfo& last) {
  const std::optional<int64_t> step = checkpoint_step(last.path);
  if (!step || *step == last.step) return last.path;
  const std::string previous = previous_checkpoint_path(last.path);
  if (checkpoint_step(previous) == last.step) return previous;
  throw Error("the checkpoint '" + last.path + "' was written after " + std::to_string(*step) + " steps, but " +
              run_words(r) + " stopped after " + std::to_string(last.step) +
              ": another run given the same checkpoint folder, or a copy of this run store (a backup) that resumed "
              "this run, has written there since. Resume the run in the store that went on with it, or train it "
              "anew");
}

}  // namespace

std::string resume_refusal(const RunStore& store, int64_t run) { return resume_refusal(store, store.run(run)); }

std::string resume_refusal(const RunStore& store, const RunRecord& r) {
  const int64_t run = r.id;
  if (r.status == RunStatus::Finished) return run_words(r) + " finished: there is nothing to resume";
  if (store.recording(run))
    return run_words(r) + (is_paused(r) ? " is paused" : " is training") + " in process " + std::to_string(r.pid) +
           " on " + r.host + ": it goes on there (stop it there first to resume it elsewhere)";
  if (!r.unreadable.empty()) return run_words(r) + " cannot be resumed: " + r.unreadable;
  const std::vector<CheckpointInfo> saved = store.checkpoints(run);
  if (saved.empty())
    return r.config.checkpoint_dir.empty()
               ? run_words(r) + " recorded no checkpoint, so it cannot be resumed (train with checkpoints to resume)"
               : run_words(r) +
                     " ended before its first checkpoint (one is written at the end of each epoch and "
                     "when a run is stopped), so it cannot be resumed: train it anew";
  std::error_code ec;
  if (!std::filesystem::exists(saved.back().path, ec) && !std::filesystem::exists(saved.back().path + ".prev", ec))
    return "the checkpoint of " + run_words(r) + ", '" + saved.back().path + "', is missing";
  return {};
}

bool RunStore::resumable(int64_t run) const { return resume_refusal(*this, run).empty(); }

std::string checkpoint_folder_refusal(const RunStore& store, const std::string& folder) {
  if (folder.empty()) return {};
  // The trainer's checkpoint_path(): the folder's checkpoint.ampwb, as each checkpoint's row records it.
  SqlStatement q(store.connection(), "SELECT DISTINCT run_id FROM checkpoints WHERE path = ? ORDER BY run_id");
  q.bind(1, (std::filesystem::path(folder) / "checkpoint.ampwb").string());
  std::vector<int64_t> runs;
  while (q.step()) runs.push_back(q.int64(0));
  q.reset();
  for (const int64_t run : runs) {
    if (!store.recording(run) && !store.resumable(run)) continue;
    return "the checkpoint folder " + folder + " holds the checkpoint " + run_words(store.run(run)) +
           " resumes from: give this run a folder of its own" +
           (store.recording(run) ? ", or wait until run " + std::to_string(run) + " ends"
                                 : ", or resume run " + std::to_string(run) + " first");
  }
  return {};
}

TrainConfig resume_config(const RunStore& store, int64_t run, const ResumeChanges& changes) {
  const std::string refusal = resume_refusal(store, run);
  if (!refusal.empty()) throw Error(refusal);
  const RunRecord r = store.run(run);
  TrainConfig c = r.config;
  c.data_dir = changes.data_dir.value_or(c.data_dir);
  c.threads = changes.threads.value_or(c.threads);
  c.data.cache_budget_mb = changes.cache_budget_mb.value_or(c.data.cache_budget_mb);
  // Runs recorded before fingerprints were stored have none to compare; a folder that cannot be listed is left
  // to the trainer, which names the problem.
  const std::string fingerprint = dataset_fingerprint(c.data_dir);
  if (!r.dataset_fingerprint.empty() && !fingerprint.empty() && fingerprint != r.dataset_fingerprint)
    throw Error("the dataset folder '" + c.data_dir + "' does not hold the files " + run_words(r) +
                " trained on (fingerprint " + fingerprint + ", the run's " + r.dataset_fingerprint +
                "): a file under it was added, removed, renamed or changed in size since, any file, a notes file or "
                "a hidden folder too; resuming on other data would mix two datasets in one run's curves");
  c.resume_from = recorded_checkpoint(r, store.checkpoints(run).back());  // later ones go where they were
  return c;
}

}  // namespace ampwb
