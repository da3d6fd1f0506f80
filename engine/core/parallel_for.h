// One small parallel-for for the engine's short bursts of independent work (checking a dataset's files, computing
// its statistics): spawn, share the indices, join. Long-lived workers (the batch loader's, the store's background
// check) are their own threads, and the tensor math is OpenMP's.
#pragma once

#include <cstddef>
#include <functional>

namespace ampwb {

// Calls fn(index, worker) once for every index in [0, count), on min(threads, count) workers (at least one): the
// calling thread is worker 0, the others are std::threads started here and joined before it returns. Indices are
// handed out one at a time as workers free up, so uneven items (a large image, a slow file) balance themselves;
// `worker` (< max(1, threads)) selects per-worker state such as partial sums or a scratch buffer.
//
// The first exception thrown by fn (on any worker) stops the handing out of indices and is rethrown here once every
// worker has finished the item it was on; later exceptions are dropped. fn must be safe to call concurrently.
void parallel_for(size_t count, int threads, const std::function<void(size_t index, int worker)>& fn);

}  // namespace ampwb
