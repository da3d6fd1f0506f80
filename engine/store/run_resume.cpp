// The resume checks: what must hold for a stored run to continue, and which settings may change when it does.
#include "store/run_resume.h"

#include <filesystem>
#include <vector>

#include "core/error.h"

namespace ampwb {
namespace {

std::string run_words(const RunRecord& r) { return "run " + std::to_string(r.id) + " ('" + r.name + "')"; }

}  // namespace

std::string resume_refusal(const RunStore& store, int64_t run) {
  const RunRecord r = store.run(run);
  if (r.status == RunStatus::Finished) return run_words(r) + " finished: there is nothing to resume";
  if (store.recording(run)) return run_words(r) + " is being recorded by a running process";
  if (!r.unreadable.empty()) return run_words(r) + " cannot be resumed: " + r.unreadable;
  const std::vector<CheckpointInfo> saved = store.checkpoints(run);
  if (saved.empty())
    return run_words(r) + " recorded no checkpoint, so it cannot be resumed (train with checkpoints to resume)";
  std::error_code ec;
  if (!std::filesystem::exists(saved.back().path, ec) && !std::filesystem::exists(saved.back().path + ".prev", ec))
    return "the checkpoint of " + run_words(r) + ", '" + saved.back().path + "', is missing";
  return {};
}

bool RunStore::resumable(int64_t run) const { return resume_refusal(*this, run).empty(); }

TrainConfig resume_config(const RunStore& store, int64_t run, const TrainConfig& given, const TrainConfig& defaults) {
  const std::string refusal = resume_refusal(store, run);
  if (!refusal.empty()) throw Error(refusal);
  const RunRecord r = store.run(run);
  TrainConfig c = r.config;
  const auto asked = config_settings(given), unasked = config_settings(defaults);
  for (size_t i = 0; i < asked.size(); ++i) {
    const std::string& key = asked[i].first;
    if (asked[i].second == unasked[i].second) continue;  // not given (or given as its default)
    if (key == "data_dir")
      c.data_dir = given.data_dir;
    else if (key == "threads")
      c.threads = given.threads;
    else if (key == "data.cache_budget_mb")
      c.data.cache_budget_mb = given.data.cache_budget_mb;
    else if (key == "data.loader_threads")
      c.data.loader_threads = given.data.loader_threads;
    else
      throw Error("resuming " + run_words(r) + " continues its stored configuration; the setting " + key +
                  " cannot change (only the dataset folder, threads and the cache can: --data, --threads, --cache-mb)");
  }
  c.resume_from = store.checkpoints(run).back().path;  // the run keeps writing its checkpoints where they were
  return c;
}

TrainConfig resume_config(const RunStore& store, int64_t run) { return resume_config(store, run, {}, {}); }

}  // namespace ampwb
