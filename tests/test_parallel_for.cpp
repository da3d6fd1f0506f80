// parallel_for (core/parallel_for.h): every index exactly once whatever the thread count, worker numbers in range,
// and an exception from any worker reaches the caller after every worker has stopped.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/parallel_for.h"

namespace ampwb {
namespace {

TEST(ParallelFor, CoversEveryIndexOnceForAnyThreadCount) {
  for (int threads : {-1, 0, 1, 2, 3, 8, 64}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{1000}}) {
      std::vector<std::atomic<int>> seen(count);
      std::atomic<int> bad_worker{0};
      parallel_for(count, threads, [&](size_t i, int worker) {
        seen[i].fetch_add(1);
        if (worker < 0 || worker >= std::max(1, threads)) bad_worker.fetch_add(1);
      });
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(seen[i].load(), 1) << "index " << i << ", threads " << threads;
      EXPECT_EQ(bad_worker.load(), 0) << "threads " << threads;
    }
  }
}

TEST(ParallelFor, RunsOnSeveralThreadsAndKeepsPerWorkerStateApart) {
  constexpr int kThreads = 4;
  std::vector<long> sums(kThreads, 0);  // one per worker, no lock: workers must not share a slot
  std::vector<std::thread::id> ids(kThreads);
  parallel_for(400, kThreads, [&](size_t i, int worker) {
    sums[static_cast<size_t>(worker)] += static_cast<long>(i);
    ids[static_cast<size_t>(worker)] = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // long enough for every worker to take some
  });
  long total = 0;
  for (long s : sums) total += s;
  EXPECT_EQ(total, 399 * 400 / 2);
  EXPECT_EQ(ids[0], std::this_thread::get_id()) << "the caller is worker 0";
  int used = 0;
  for (const auto& id : ids) used += id != std::thread::id();
  EXPECT_GT(used, 1) << "only one thread did the work";
}

TEST(ParallelFor, AnExceptionFromAWorkerReachesTheCallerAndStopsTheRest) {
  for (int threads : {1, 4}) {
    // 1 ms an item: without the stop, the other workers would go on for seconds (2.5 s on 4), far more than a
    // busy machine can delay the failing worker.
    constexpr size_t kItems = 10000;
    std::atomic<size_t> calls{0};
    try {
      parallel_for(kItems, threads, [&](size_t i, int) {
        calls.fetch_add(1);
        if (i == 10) throw Error("item 10 is broken");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
      FAIL() << "no exception reached the caller";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "item 10 is broken");
    }
    EXPECT_LT(calls.load(), kItems / 2) << "the other workers kept going after the failure";
  }
  // Any type, from any worker, and only one of several.
  std::atomic<int> thrown{0};
  EXPECT_THROW(parallel_for(64, 4,
                            [&](size_t, int) {
                              thrown.fetch_add(1);
                              throw std::out_of_range("every item fails");
                            }),
               std::out_of_range);
  EXPECT_GE(thrown.load(), 1);
}

}  // namespace
}  // namespace ampwb
