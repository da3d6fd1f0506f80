// Whether and how a stored run can continue from its checkpoint: decided here once, for the CLI's
// `ampwb train --resume` and the GUI's Resume alike.
#pragma once

#include <cstdint>
#include <string>

#include "store/run_store.h"
#include "train/config.h"

namespace ampwb {

// Why run `run` cannot be resumed, in words for the user ("run 3 ('x') finished: there is nothing to resume");
// empty when it can: it did not finish, no live process records it, its stored configuration reads, and its
// latest checkpoint (or the one before it, which the trainer falls back to) is on disk.
std::string resume_refusal(const RunStore& store, int64_t run);

// The configuration to continue run `run` with: the stored one, resuming from its latest checkpoint. `given` is
// what the user asked for and `defaults` what asking for nothing gives: a setting where they differ is taken when
// it leaves the curves alone (the dataset folder, which may have moved, threads, the cache and the loader's
// threads) and refused by name otherwise. Throws ampwb::Error with resume_refusal's reason when it cannot resume.
TrainConfig resume_config(const RunStore& store, int64_t run, const TrainConfig& given, const TrainConfig& defaults);
// The stored configuration unchanged (the GUI's Resume).
TrainConfig resume_config(const RunStore& store, int64_t run);

}  // namespace ampwb
