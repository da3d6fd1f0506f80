// Planned offsets for work that allocates the same way every time it runs (a captured training step): the sizes it
// allocated and when each block was freed, recorded once (MemoryTrace), and every block placed at an offset in one
// arena so that no two blocks held at the same time overlap (plan_offsets). Knowing every lifetime in advance, the
// plan comes close to the most the work ever held at once, where handing out freed blocks as requests come cannot.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

namespace ampwb {

struct MemoryTrace {
  static constexpr size_t kHeld = std::numeric_limits<size_t>::max();
  struct Block {
    size_t bytes = 0;
    // The allocations made before this block was freed, counting from the trace's first: block j (j > i) may share
    // block i's memory only if j >= freed_after of i. kHeld: still held when the trace ended.
    size_t freed_after = kHeld;
  };
  std::vector<Block> blocks;  // in the order they were allocated

  // The most bytes held at once: what no plan can go below.
  size_t peak_bytes() const;
};

// Each block's offset in an arena of `arena_bytes`: blocks whose lifetimes overlap never overlap in memory. Greedy
// by size, largest first, each at the lowest offset clear of the blocks placed already that it lives beside (as
// TensorFlow Lite's and XLA's memory planners do).
std::vector<size_t> plan_offsets(const MemoryTrace& trace, size_t& arena_bytes);

}  // namespace ampwb
