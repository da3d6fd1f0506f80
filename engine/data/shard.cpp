// A rank's shard of an epoch's order and its cut into batches, the same number on every rank.
#include "data/shard.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ampwb {

void check_shard(const DataShard& shard) {
  AMPWB_CHECK(shard.world_size >= 1, "world size " << shard.world_size << " must be at least 1");
  AMPWB_CHECK(shard.rank >= 0 && shard.rank < shard.world_size, "rank " << shard.rank << " must be 0 to "
                                                                        << shard.world_size - 1 << " (world size "
                                                                        << shard.world_size << ")");
}

ShardPlan plan_shard(int64_t samples, int batch_size, bool drop_last, const DataShard& shard) {
  check_shard(shard);
  AMPWB_CHECK(batch_size >= 1, "batch size " << batch_size << " must be at least 1");
  AMPWB_CHECK(samples >= 0, "a split of " << samples << " samples");
  const int64_t W = shard.world_size, B = batch_size;
  const int64_t smallest = samples / W;           // the last ranks' shards when W does not divide
  const int64_t largest = (samples + W - 1) / W;  // the first ranks' shards
  const int64_t mine = samples > shard.rank ? (samples - shard.rank + W - 1) / W : 0;
  ShardPlan plan;
  if (drop_last) {
    const int64_t batches = smallest / B;
    plan.shard_size = batches * B;
    for (int64_t i = 0; i <= batches; ++i) plan.begins.push_back(i * B);
    return plan;
  }
  const int64_t batches = (largest + B - 1) / B;
  // Checked on the smallest shard, not this rank's, so that every rank refuses alike instead of one waiting forever.
  AMPWB_CHECK(smallest >= batches,
              (smallest == 0
                   ? "the split's " + std::to_string(samples) + " images cannot give each of " + std::to_string(W) +
                         " ranks one"
                   : "batch size 1 on " + std::to_string(W) + " ranks cannot give every rank the same " +
                         "number of steps with each of the split's " + std::to_string(samples) + " images once (" +
                         std::to_string(W) + " does not divide it): use a batch " + "size of 2 or more, or drop_last"));
  plan.shard_size = mine;
  for (int64_t i = 0; i <= batches; ++i) plan.begins.push_back(std::min(i * B, mine));
  // The smallest shard's last batch empty or of one image: every rank shares its last two batches' images evenly,
  // since batch norm cannot train on one image and a step one rank cannot take is skipped by all.
  if (W > 1 && batches >= 2 && smallest - (batches - 1) * B < 2) {
    const int64_t both = mine - (batches - 2) * B;
    plan.begins[static_cast<size_t>(batches - 1)] = mine - both / 2;
  }
  return plan;
}

std::vector<int64_t> take_shard(const std::vector<int64_t>& order, const DataShard& shard, int64_t count) {
  check_shard(shard);
  std::vector<int64_t> taken;
  taken.reserve(static_cast<size_t>(std::max<int64_t>(count, 0)));
  for (size_t i = static_cast<size_t>(shard.rank); i < order.size() && static_cast<int64_t>(taken.size()) < count;
       i += static_cast<size_t>(shard.world_size)) {
    taken.push_back(order[i]);
  }
  AMPWB_CHECK(static_cast<int64_t>(taken.size()) == count, "rank " << shard.rank << " of " << shard.world_size
                                                                   << " takes " << count << " samples of an order of "
                                                                   << order.size());
  return taken;
}

}  // namespace ampwb
