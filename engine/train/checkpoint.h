// Checkpoints: everything a run needs to continue exactly where it was (FP32 master weights, batch-norm
// statistics, optimizer state, loss-scaler state, random-number state, epoch and step, partial epoch sums).
//
// File format: "AMPWBCK1", a little-endian uint64 byte count, a JSON header (metadata plus, per tensor, its name,
// dtype, shape and byte offset), then the raw tensor bytes. Written to a temporary file, flushed to disk and
// renamed over the old one, so a crash leaves either the old checkpoint or the new one, never half of one.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace ampwb {

struct Checkpoint {
  nlohmann::json meta;
  std::vector<std::pair<std::string, Tensor>> tensors;  // CPU tensors

  const Tensor& tensor(const std::string& name) const;  // throws naming a missing tensor
};

// Throws ampwb::Error naming the path and the cause (full disk, read-only folder, ...); an existing checkpoint
// at path is left intact on failure.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
// Throws ampwb::Error when the file is missing, truncated or not a checkpoint.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace ampwb
