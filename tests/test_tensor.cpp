// Tensors, the allocator's accounting and the RNG's determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/memory_plan.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace ampwb {
namespace {

TEST(Tensor, ShapesSizesAndLayouts) {
  Tensor t = Tensor::empty({2, 3, 4, 5}, DType::F16, Layout::NHWC);
  EXPECT_EQ(t.numel(), 120);
  EXPECT_EQ(t.nbytes(), 240u);
  EXPECT_EQ(t.describe(), "f16[2,3,4,5] nhwc cpu");
  EXPECT_EQ(offset4(t, 1, 2, 3, 4), ((1 * 4 + 3) * 5 + 4) * 3 + 2);
  EXPECT_THROW(Tensor::empty({2, -1}, DType::F32), Error);
}

TEST(Tensor, FloatRoundTripThroughEveryLayoutAndDtype) {
  std::vector<float> values(2 * 3 * 2 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 7.25f;
  for (Layout layout : {Layout::NCHW, Layout::NHWC})
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      Tensor t = tensor_from_floats(values, {2, 3, 2, 4}, dtype, layout);
      EXPECT_EQ(to_float_vector(t), values) << t.describe();  // all values exact in 8 mantissa bits
    }
}

// FP8 storage (a GPU that computes in FP8 fills it; the host reads it for tests and looks): values round to the
// format on the way in, nearest even and saturating, and widen exactly; the CPU backend converts it in either layout.
TEST(Tensor, Fp8StorageRoundsOnTheWayInAndConvertsOnTheCpu) {
  const std::vector<float> values{0.0f, 1.0f, -1.0625f, 3.3f, 500.0f, -70000.0f, 0.001f, 2.5f};
  CpuBackend cpu({1});
  for (const Fp8Format format : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    const DType dtype = format == Fp8Format::E4M3 ? DType::F8E4M3 : DType::F8E5M2;
    std::vector<float> want;
    for (const float v : values) want.push_back(round_to_fp8(format, v));
    const Tensor t = tensor_from_floats(values, {2, 1, 2, 2}, dtype);
    EXPECT_EQ(t.nbytes(), values.size());
    EXPECT_EQ(to_float_vector(t), want) << t.describe();
    Tensor wide = Tensor::empty(t.shape(), DType::F32, Layout::NHWC);
    cpu.convert(t, wide);
    EXPECT_EQ(to_float_vector(wide), want) << "widened into NHWC";
    Tensor back = Tensor::empty(t.shape(), dtype, Layout::NHWC);
    cpu.convert(wide, back);
    EXPECT_EQ(to_float_vector(back), want) << "narrowed again";
  }
  EXPECT_EQ(parse_dtype("f8e4m3"), DType::F8E4M3);
  EXPECT_EQ(parse_dtype("f8e5m2"), DType::F8E5M2);
}

TEST(Allocator, TracksLiveAndPeakBytesAndReusesBlocks) {
  Allocator& a = cpu_allocator();
  const MemoryStats before = a.stats();
  a.reset_peak();
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({1000}, DType::F32);  // 4000 bytes, 4032 rounded to cache lines
    first = t.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_EQ(a.stats().live_bytes, before.live_bytes + 4032);
    Tensor u = Tensor::empty({10}, DType::F32);
    EXPECT_EQ(a.stats().peak_live_bytes, before.live_bytes + 4032 + 64);
  }
  EXPECT_EQ(a.stats().live_bytes, before.live_bytes);
  EXPECT_EQ(a.stats().peak_live_bytes, before.live_bytes + 4032 + 64);
  Tensor again = Tensor::empty({1000}, DType::F32);
  EXPECT_EQ(again.data(), first) << "a freed block of the same size is reused";
}

// A captured graph's pool: its blocks go back to it and to nobody else until it is released, and count as live.
TEST(Allocator, APrivatePoolKeepsItsBlocksFromEveryoneElseUntilReleased) {
  Allocator& a = cpu_allocator();
  const int pool = a.new_pool();
  const size_t live_before = a.stats().live_bytes;
  void* pooled = nullptr;
  a.begin_pool(pool);
  {
    Tensor t = Tensor::empty({3001}, DType::F32);  // a size no other test uses
    pooled = t.data();
  }
  Tensor again = Tensor::empty({3001}, DType::F32);
  EXPECT_EQ(again.data(), pooled) << "freed while filling, the block is the pool's to hand out again";
  again = Tensor();
  a.end_pool();
  EXPECT_EQ(a.stats().live_bytes, live_before + 12032) << "a pool's free block is still the replays'";
  Tensor outside = Tensor::empty({3001}, DType::F32);
  EXPECT_NE(outside.data(), pooled) << "the shared cache never hands out a pool's block";
  std::thread other([&] {
    a.begin_pool(pool);
    Tensor t = Tensor::empty({3001}, DType::F32);
    EXPECT_EQ(t.data(), pooled) << "any thread filling the pool gets its blocks";
    a.end_pool();
  });
  other.join();
  outside = Tensor();
  a.release_pool(pool);
  EXPECT_EQ(a.stats().live_bytes, live_before);
  Tensor after = Tensor::empty({3001}, DType::F32);
  Tensor second = Tensor::empty({3001}, DType::F32);
  EXPECT_TRUE(after.data() == pooled || second.data() == pooled) << "released, the block is the shared cache's";
}

// Inside a pool a freed block serves any later allocation it fits with at most 4x its size, the smallest first;
// a larger block keeps its own size in the accounting, also when it outlives the pool.
TEST(Allocator, APoolHandsAFreedBlockToTheSmallestLaterAllocationItFits) {
  Allocator& a = cpu_allocator();
  const int pool = a.new_pool();
  const size_t live_before = a.stats().live_bytes;
  void *big = nullptr, *middle = nullptr;
  a.begin_pool(pool);
  {
    Tensor b = Tensor::empty({5003}, DType::F32);  // 20032 bytes (sizes no other test uses)
    Tensor m = Tensor::empty({2503}, DType::F32);  // 10048
    big = b.data();
    middle = m.data();
  }
  Tensor fits_middle = Tensor::empty({2401}, DType::F32);  // 9664: the middle block is the best fit
  EXPECT_EQ(fits_middle.data(), middle);
  Tensor tiny = Tensor::empty({1001}, DType::F32);  // 4032: the big block is over 4x its size
  EXPECT_NE(tiny.data(), big);
  Tensor fits_big = Tensor::empty({4001}, DType::F32);  // 16064
  EXPECT_EQ(fits_big.data(), big);
  a.end_pool();
  EXPECT_EQ(a.stats().live_bytes, live_before + 20032 + 10048 + 4032) << "every block the pool holds, at its size";
  fits_middle = Tensor();
  tiny = Tensor();
  a.release_pool(pool);
  EXPECT_EQ(a.stats().live_bytes, live_before + 20032) << "the big block, still held, counts at its own size";
  fits_big = Tensor();
  EXPECT_EQ(a.stats().live_bytes, live_before);
  Tensor again = Tensor::empty({5003}, DType::F32);
  EXPECT_EQ(again.data(), big) << "freed after the pool, the big block is the shared cache's at its own size";
}

// ---- Planned pools (core/memory_plan.h) ---------------------------------------------------------------------------

// Random traces: blocks of 64 bytes to 64 KiB, each freed some allocations later or held to the end.
MemoryTrace random_trace(Rng& rng, size_t n) {
  MemoryTrace trace;
  for (size_t i = 0; i < n; ++i) {
    const size_t bytes = 64 * (1 + rng.next_u64() % 1024);
    const size_t lives = 1 + rng.next_u64() % 20;
    trace.blocks.push_back({bytes, rng.next_u64() % 8 == 0 ? MemoryTrace::kHeld : std::min(n, i + lives)});
  }
  return trace;
}

TEST(MemoryPlan, BlocksThatLiveTogetherNeverShareMemory) {
  Rng rng(17);
  for (int round = 0; round < 20; ++round) {
    const MemoryTrace trace = random_trace(rng, 300);
    size_t arena = 0;
    const std::vector<size_t> offsets = plan_offsets(trace, arena);
    const auto& b = trace.blocks;
    for (size_t i = 0; i < b.size(); ++i) {
      ASSERT_LE(offsets[i] + b[i].bytes, arena);
      for (size_t j = i + 1; j < b.size(); ++j) {
        if (j >= b[i].freed_after) continue;  // i is freed before j is allocated
        ASSERT_TRUE(offsets[i] + b[i].bytes <= offsets[j] || offsets[j] + b[j].bytes <= offsets[i])
            << "blocks " << i << " and " << j << " live together and overlap";
      }
    }
    EXPECT_GE(arena, trace.peak_bytes());
  }
}

// Where the peak is reachable by laying blocks end to end, the plan reaches it: a forward pass's activations, held
// until a backward pass frees them in reverse, with gradients that each live one step.
TEST(MemoryPlan, AForwardAndBackwardPassFitInItsPeak) {
  MemoryTrace trace;
  const size_t sizes[] = {4096, 8192, 2048, 16384, 1024};
  const size_t n = std::size(sizes);
  for (size_t i = 0; i < n; ++i) trace.blocks.push_back({sizes[i], 2 * n - i});          // activation i
  for (size_t i = 0; i < n; ++i) trace.blocks.push_back({sizes[n - 1 - i], n + i + 2});  // its gradient
  size_t arena = 0;
  plan_offsets(trace, arena);
  EXPECT_EQ(arena, trace.peak_bytes());
  // The peak: the second gradient (16384) beside the first (1024) and the four activations not yet freed.
  EXPECT_EQ(trace.peak_bytes(), size_t{4096 + 8192 + 2048 + 16384 + 1024 + 16384});
}

// A pool planned from the trace of a first filling hands a second filling that allocates alike its blocks in one
// arena, reusing memory as the trace allows, and counts the arena as live.
TEST(Allocator, APlannedPoolPlacesAFillingThatFollowsItsTraceInOneArena) {
  Allocator& a = cpu_allocator();
  auto fill = [&](int pool, std::vector<void*>* where) {
    a.begin_pool(pool);
    Tensor x = Tensor::empty({6007}, DType::F32);  // sizes no other test uses
    Tensor y = Tensor::empty({12007}, DType::F32);
    if (where) where->insert(where->end(), {x.data(), y.data()});
    x = Tensor();
    Tensor z = Tensor::empty({6007}, DType::F32);  // may take x's memory
    if (where) where->push_back(z.data());
    y = Tensor();
    z = Tensor();
    Tensor held = Tensor::empty({18007}, DType::F32);  // may take all of it
    if (where) where->push_back(held.data());
    a.end_pool();
    return held;
  };
  const int measuring = a.new_pool(), planned = a.new_pool();
  const size_t live_at_start = a.stats().live_bytes;
  Tensor first = fill(measuring, nullptr);
  const MemoryTrace trace = a.pool_trace(measuring);
  ASSERT_EQ(trace.blocks.size(), 4u);
  EXPECT_EQ(trace.blocks[0].freed_after, 2u);
  EXPECT_EQ(trace.blocks[3].freed_after, MemoryTrace::kHeld);
  const size_t live_before = a.stats().live_bytes;
  a.plan_pool(planned, trace);
  const size_t arena = a.stats().live_bytes - live_before;
  EXPECT_EQ(arena, trace.peak_bytes()) << "the planned arena holds the trace's peak, no more";
  std::vector<void*> where;
  Tensor second = fill(planned, &where);
  EXPECT_EQ(a.stats().live_bytes, live_before + arena) << "every block from the arena, counted with it";
  const char* lowest = static_cast<const char*>(*std::min_element(where.begin(), where.end()));
  for (void* p : where) EXPECT_LT(static_cast<const char*>(p) - lowest, static_cast<std::ptrdiff_t>(arena));
  EXPECT_NE(where[0], where[1]) << "x and y live together";
  first = Tensor();
  a.release_pool(measuring);
  a.release_pool(planned);
  EXPECT_EQ(a.stats().live_bytes, live_at_start + arena) << "the arena stays while a block in it is held";
  second = Tensor();
  EXPECT_EQ(a.stats().live_bytes, live_at_start) << "and goes to the shared cache with its last block";
}

// A filling that goes another way than its plan never gets memory a held block uses: an allocation of another size,
// or one whose planned place a block freed later than the trace said still holds, comes from the pool's blocks.
TEST(Allocator, APlannedPoolNeverHandsOutMemoryABlockStillHolds) {
  Allocator& a = cpu_allocator();
  const int measuring = a.new_pool(), planned = a.new_pool();
  a.begin_pool(measuring);
  {
    Tensor x = Tensor::empty({7001}, DType::F32);
    x = Tensor();
    Tensor y = Tensor::empty({7001}, DType::F32);  // planned over x
  }
  a.end_pool();
  const MemoryTrace trace = a.pool_trace(measuring);
  a.plan_pool(planned, trace);
  a.begin_pool(planned);
  Tensor x = Tensor::empty({7001}, DType::F32);
  Tensor y = Tensor::empty({7001}, DType::F32);  // x is still held: not over it
  Tensor z = Tensor::empty({9001}, DType::F32);  // beyond the plan
  a.end_pool();
  EXPECT_NE(x.data(), y.data());
  const char* xb = static_cast<const char*>(x.data());
  const char* yb = static_cast<const char*>(y.data());
  EXPECT_TRUE(yb + y.nbytes() <= xb || xb + x.nbytes() <= yb) << "y overlaps x, which is still held";
  x = y = z = Tensor();
  a.release_pool(measuring);
  a.release_pool(planned);
}

TEST(Rng, SameSeedSameNumbersAndSaneDistributions) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
  Rng r(7);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double v = r.normal();
    sum += v;
    sq += v * v;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 50000; ++i) ++counts[r.below(5)];
  for (int count : counts) EXPECT_NEAR(count, 10000, 400);
  // The generator's state can be saved and restored (checkpoints).
  const Rng::State saved = r.state();
  const uint64_t next = r.next_u64();
  r.set_state(saved);
  EXPECT_EQ(r.next_u64(), next);
}

}  // namespace
}  // namespace ampwb
