// Checkpoints: everything a run needs to continue exactly where it was (FP32 master weights, batch-norm
// statistics, optimizer state, loss-scaler state, random-number state, epoch and step, partial epoch sums).
//
// File format: "AMPWBCK2", a little-endian uint64 byte count, a JSON header (metadata plus, per tensor, its name,
// dtype, shape, byte offset and CRC-32C), the header's own CRC-32C (uint32), then the raw tensor bytes. Written to a
// temporary file, flushed to disk, read back and checked, then moved into place; the checkpoint it replaces stays
// beside it as PATH.prev. A crash leaves whole checkpoints only, and a damaged one (a flipped byte) is refused by
// name, with the previous one to fall back to. "AMPWBCK1" files (no checksums) still load.
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
// Throws ampwb::Error when the file is missing, truncated, damaged (a checksum fails) or not a checkpoint.
Checkpoint load_checkpoint(const std::string& path);
// The metadata alone (epoch, steps, configuration), without reading the tensors; throws as load_checkpoint does.
nlohmann::json load_checkpoint_meta(const std::string& path);
// The checkpoint at path, or where that one is unreadable the previous one (PATH.prev), saying so in *note.
Checkpoint load_checkpoint_or_previous(const std::string& path, std::string* note);
std::string previous_checkpoint_path(const std::string& path);

}  // namespace ampwb
