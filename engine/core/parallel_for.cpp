// The spawn-and-join parallel-for with exceptions carried back to the caller.
#include "core/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace ampwb {

void parallel_for(size_t count, int threads, const std::function<void(size_t index, int worker)>& fn) {
  if (count == 0) return;
  const int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(1, threads)), count));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto work = [&](int worker) {
    try {
      for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < count;) fn(i, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  try {
    for (int w = 1; w < workers; ++w) pool.emplace_back(work, w);
  } catch (const std::system_error&) {
    // No more threads to be had (a process limit): the ones started, and this one, do the work.
  }
  work(0);
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace ampwb
