// Planned offsets for a recorded allocation trace (see memory_plan.h).
#include "core/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace ampwb {

size_t MemoryTrace::peak_bytes() const {
  std::vector<std::pair<size_t, long long>> changes;  // (allocation index, bytes held from then on)
  for (size_t i = 0; i < blocks.size(); ++i) {
    changes.emplace_back(i, static_cast<long long>(blocks[i].bytes));
    if (blocks[i].freed_after != kHeld)
      changes.emplace_back(blocks[i].freed_after, -static_cast<long long>(blocks[i].bytes));
  }
  // At one index, frees first: a block freed before the next allocation lends it its memory.
  std::sort(changes.begin(), changes.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.second < b.second; });
  long long held = 0, peak = 0;
  for (const auto& [index, change] : changes) peak = std::max(peak, held += change);
  return static_cast<size_t>(peak);
}

std::vector<size_t> plan_offsets(const MemoryTrace& trace, size_t& arena_bytes) {
  const std::vector<MemoryTrace::Block>& blocks = trace.blocks;
  const size_t n = blocks.size();
  // Blocks i < j live at the same time when j is allocated before i is freed.
  auto overlap_in_time = [&](size_t i, size_t j) {
    return i < j ? j < blocks[i].freed_after : i < blocks[j].freed_after;
  };
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return blocks[a].bytes > blocks[b].bytes; });
  std::vector<size_t> offsets(n, 0);
  std::vector<size_t> placed;                    // in placing order
  std::vector<std::pair<size_t, size_t>> taken;  // [begin, end) of the placed blocks that live beside this one
  arena_bytes = 0;
  for (const size_t i : order) {
    taken.clear();
    for (const size_t j : placed)
      if (overlap_in_time(i, j)) taken.emplace_back(offsets[j], offsets[j] + blocks[j].bytes);
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (const auto& [begin, end] : taken) {
      if (offset + blocks[i].bytes <= begin) break;  // fits in the gap before this one
      offset = std::max(offset, end);
    }
    offsets[i] = offset;
    arena_bytes = std::max(arena_bytes, offset + blocks[i].bytes);
    placed.push_back(i);
  }
  return offsets;
}

}  // namespace ampwb
