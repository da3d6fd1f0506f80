// A rank's share of each epoch in data-parallel training, with PyTorch DistributedSampler's semantics: every rank
// shuffles the whole split with the same seed and epoch, then rank r of W takes the order's samples r, r + W,
// r + 2W, ... and cuts them into batches of the per-process batch size.
//
// The uneven tail: DistributedSampler by default pads the order with its first samples until W divides it, so
// some images are seen twice an epoch; this shard never pads, so every image is seen exactly once per epoch across
// the ranks (their shards differ by at most one image), which keeps the epoch's loss and accuracy those of the
// whole split. Every rank still runs the same number of batches, since the gradient all-reduce waits for every
// rank at every step, and at every step the ranks' batches differ by at most one image. Where the smallest shard's
// last batch would be empty or hold one image (batch norm cannot train on one, and a step one rank cannot take is
// skipped by every rank), every rank shares its last two batches' images evenly; with a batch size of 2 or 3 that can
// still leave one image, and that step is skipped. Where equal steps are impossible (batch size 1 with W not
// dividing the split, or fewer images than ranks) every rank refuses alike.
// With drop_last, as DistributedSampler(drop_last=True) with DataLoader(drop_last=True): every rank takes
// floor(floor(N / W) / B) full batches and the rest of the epoch's order is left out.
//
// At world size 1 the shard is the whole order, cut as a single-process loader cuts it.
#pragma once

#include <cstdint>
#include <vector>

namespace ampwb {

struct DataShard {
  int rank = 0;        // this process, 0 to world_size - 1
  int world_size = 1;  // the processes sharing each epoch
};

// Where one rank's batches lie in its shard of an epoch: batch i is the shard's samples [begins[i], begins[i + 1]).
struct ShardPlan {
  int64_t shard_size = 0;       // samples this rank takes each epoch
  std::vector<int64_t> begins;  // batches() + 1 boundaries, the last one shard_size
  int64_t batches() const { return static_cast<int64_t>(begins.size()) - 1; }
};

// Throws Error unless world_size >= 1 and 0 <= rank < world_size.
void check_shard(const DataShard& shard);

// This rank's batches for a split of `samples`; batches() is the same on every rank. Throws Error where the same
// number of batches on every rank and each image once per epoch cannot both hold (see above).
ShardPlan plan_shard(int64_t samples, int batch_size, bool drop_last, const DataShard& shard);

// The rank's samples of an epoch's order: order[rank], order[rank + W], ..., the first `count` of them.
std::vector<int64_t> take_shard(const std::vector<int64_t>& order, const DataShard& shard, int64_t count);

}  // namespace ampwb
