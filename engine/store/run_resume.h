// Whether and how a stored run can continue from its checkpoint: decided here once, for the CLI's
// `ampwb train --resume` and the GUI's Resume alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/run_store.h"
#include "train/config.h"

namespace ampwb {

// Why run `run` cannot be resumed, in words for the user ("run 3 ('x') finished: there is nothing to resume");
// empty when it can: it did not finish, no live process records it, its stored configuration reads, and its
// latest checkpoint (or the one before it, which the trainer falls back to) is on disk.
std::string resume_refusal(const RunStore& store, int64_t run);
// The same for a run's row as read already (a list of runs: no row read twice).
std::string resume_refusal(const RunStore& store, const RunRecord& run);

// Why a new run cannot checkpoint into `folder`, in words for the user: a run of the store checkpoints there that is
// running or can still be resumed, and the new run would overwrite what that run resumes from. Empty otherwise: a
// finished run's checkpoints, or a file no run recorded, are only overwritten.
std::string checkpoint_folder_refusal(const RunStore& store, const std::string& folder);

// What a resumed run may change: the settings that leave its curves alone. Unset: as stored.
struct ResumeChanges {
  std::optional<std::string> data_dir;  // the dataset folder, which may have moved (its files may not change)
  std::optional<int> threads;
  std::optional<int64_t> cache_budget_mb;
};

// The configuration to continue run `run` with: the stored one with `changes`, resuming from its latest
// checkpoint. Throws ampwb::Error with resume_refusal's reason when it cannot resume, and when the dataset folder
// no longer holds the files the run trained on (its fingerprint differs: resuming would mix two datasets in one
// run's curves).
TrainConfig resume_config(const RunStore& store, int64_t run, const ResumeChanges& changes = {});

}  // namespace ampwb
