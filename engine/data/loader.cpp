// The prefetching batch loader: worker threads build whole batches into a ring; the consumer takes them in order.
#include "data/loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "core/rng.h"
#include "data/dataset_data.h"
#include "data/transforms.h"

namespace ampwb {
namespace {

using Clock = std::chrono::steady_clock;

enum class Crop { Center, Pad, RandomResized };

uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
  Hasher h;
  h.add_u64(a);
  h.add_u64(b);
  h.add_u64(c);
  return h.digest();
}

}  // namespace

struct DataLoader::State {
  std::shared_ptr<const detail::DatasetData> data;
  const std::vector<detail::Sample>* samples = nullptr;
  LoaderOptions options;
  int size = 0;  // S
  Crop crop = Crop::Center;
  int base_side = 0;      // the cached image: S x S, or shorter side base_side for random-resized crops
  bool cacheable = true;  // false for pixels in memory: building the base image costs no more than a cache read
  Normalization norm;
  detail::NormalizeTable table{Normalization{}};
  int64_t n_batches = 0;
  ShardPlan plan;  // this rank's share of each epoch, cut into n_batches batches
  int ring = 0;

  // Cache, one entry per sample of the split. state: 0 empty, 1 filled, 2 being filled.
  std::unique_ptr<std::atomic<uint8_t>[]> cache_state;
  std::vector<cv::Mat> cache;
  std::atomic<size_t> cache_bytes{0};
  std::atomic<int64_t> cached_images{0}, decoded{0}, cache_hits{0};

  // Samples whose file vanished, shrank or changed: each reported once, by sample position.
  mutable std::mutex lost_mutex;
  std::unordered_set<int64_t> lost_positions;
  std::vector<LostImage> lost;

  // Epoch state, under `mutex`.
  std::mutex mutex;
  std::condition_variable work_ready, batch_ready;
  struct Slot {
    int64_t index = -1;
    bool ready = false;
    Batch batch;
    std::string error;
  };
  std::vector<Slot> slots;
  std::shared_ptr<const std::vector<int64_t>> order;  // sample positions in this epoch's order, this rank's shard
  int epoch = 0;
  bool started = false, stopping = false;
  std::atomic<bool> cancelled{false};
  std::atomic<uint64_t> generation{0};  // bumped by start_epoch(): work of an older epoch is dropped
  int64_t next_claim = 0, next_deliver = 0;
  double wait = 0;
  std::vector<std::thread> workers;

  cv::Mat base_image(int64_t position);  // empty when the sample's file was lost
  void note_lost(int64_t position, const std::string& reason);
  void build(int64_t batch_index, uint64_t gen, const std::vector<int64_t>& order, int epoch, Batch& out);
  void work();
};

// The pre-augmentation image of a sample: from the cache, or decoded (and cached while the budget allows).
cv::Mat DataLoader::State::base_image(int64_t position) {
  const size_t p = static_cast<size_t>(position);
  if (cacheable && cache_state[p].load(std::memory_order_acquire) == 1) {
    cache_hits.fetch_add(1, std::memory_order_relaxed);
    return cache[p];
  }
  const int64_t item = (*samples)[p].item;
  const int min_side = crop == Crop::RandomResized ? base_side : size;
  std::string why;
  cv::Mat decoded = detail::load_bgr(*data, item, min_side, &why);
  if (decoded.empty()) {
    note_lost(position, why);
    return decoded;
  }
  cv::Mat base = crop == Crop::RandomResized ? detail::resize_shorter_side(decoded, base_side)
                                             : detail::center_square(decoded, size);
  this->decoded.fetch_add(1, std::memory_order_relaxed);
  if (cacheable && options.cache_budget_bytes > 0) {
    const size_t bytes = base.total() * base.elemSize();
    uint8_t expected = 0;
    if (cache_bytes.load(std::memory_order_relaxed) + bytes <= options.cache_budget_bytes &&
        cache_state[p].compare_exchange_strong(expected, 2)) {
      if (cache_bytes.fetch_add(bytes) + bytes <= options.cache_budget_bytes) {
        cache[p] = base;
        cached_images.fetch_add(1, std::memory_order_relaxed);
        cache_state[p].store(1, std::memory_order_release);
      } else {  // another worker filled the budget first
        cache_bytes.fetch_sub(bytes);
        cache_state[p].store(0, std::memory_order_release);
      }
    }
  }
  return base;
}

void DataLoader::State::note_lost(int64_t position, const std::string& reason) {
  std::lock_guard lock(lost_mutex);
  if (!lost_positions.insert(position).second) return;
  lost.push_back({data->paths[static_cast<size_t>((*samples)[static_cast<size_t>(position)].item)], reason});
}

void DataLoader::State::build(int64_t batch_index, uint64_t gen, const std::vector<int64_t>& ord, int ep, Batch& out) {
  const int64_t begin = plan.begins[static_cast<size_t>(batch_index)];
  const int64_t n = plan.begins[static_cast<size_t>(batch_index) + 1] - begin;
  const int64_t S = size;
  out.images = Tensor::empty({n, 3, S, S}, options.dtype, Layout::NHWC);
  out.labels = Tensor::empty({n}, DType::I32);
  uint8_t* images = static_cast<uint8_t*>(out.images.data());
  int32_t* labels = out.labels.data_as<int32_t>();
  const size_t image_bytes = static_cast<size_t>(S * S * 3) * dtype_size(options.dtype);
  int64_t kept = 0;  // images written: a lost sample's place goes to the next one
  for (int64_t i = 0; i < n; ++i) {
    // Stop early when cancelled or when the epoch was restarted: what is left is never delivered.
    if (cancelled.load(std::memory_order_relaxed) || generation.load(std::memory_order_relaxed) != gen) return;
    const int64_t position = ord[static_cast<size_t>(begin + i)];
    const cv::Mat base = base_image(position);
    if (base.empty()) continue;
    labels[kept] = (*samples)[static_cast<size_t>(position)].label;
    void* dst = images + static_cast<size_t>(kept++) * image_bytes;
    if (crop == Crop::Center) {
      detail::write_normalized(base, size, 0, 0, false, table, options.dtype, dst);
      continue;
    }
    // Augmentation draws depend on (seed, epoch, sample) only: the same on every run, thread count and cache state.
    Rng rng(mix(options.seed, static_cast<uint64_t>(ep), static_cast<uint64_t>(position)));
    if (crop == Crop::Pad) {
      const int pad = std::max(1, static_cast<int>(std::lround(size / 8.0)));
      const int dx = static_cast<int>(rng.below(static_cast<uint64_t>(2 * pad + 1))) - pad;
      const int dy = static_cast<int>(rng.below(static_cast<uint64_t>(2 * pad + 1))) - pad;
      const bool flip = options.flip && rng.uniform() < 0.5;
      detail::write_normalized(base, size, dx, dy, flip, table, options.dtype, dst);
    } else {
      const cv::Mat cropped = detail::random_resized_crop(base, size, rng);
      const bool flip = options.flip && rng.uniform() < 0.5;
      detail::write_normalized(cropped, size, 0, 0, flip, table, options.dtype, dst);
    }
  }
  if (kept == n) return;
  Batch whole = std::move(out);
  out = Batch{};
  if (kept == 0) return;  // undefined tensors: next() passes the batch over
  out.images = Tensor::empty({kept, 3, S, S}, options.dtype, Layout::NHWC);
  out.labels = Tensor::empty({kept}, DType::I32);
  std::memcpy(out.images.data(), whole.images.data(), static_cast<size_t>(kept) * image_bytes);
  std::memcpy(out.labels.data(), whole.labels.data(), static_cast<size_t>(kept) * sizeof(int32_t));
}

void DataLoader::State::work() {
  for (;;) {
    int64_t index;
    uint64_t gen;
    int ep;
    std::shared_ptr<const std::vector<int64_t>> ord;
    {
      std::unique_lock<std::mutex> lock(mutex);
      work_ready.wait(lock, [&] {
        return stopping || (started && !cancelled && next_claim < n_batches && next_claim < next_deliver + ring);
      });
      if (stopping) return;
      index = next_claim++;
      gen = generation.load();
      ep = epoch;
      ord = order;
    }
    Batch batch;
    std::string error;
    try {
      build(index, gen, *ord, ep, batch);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (gen != generation.load() || cancelled) continue;
    Slot& slot = slots[static_cast<size_t>(index % ring)];
    slot.index = index;
    slot.ready = true;
    slot.batch = std::move(batch);
    slot.error = std::move(error);
    batch_ready.notify_all();
  }
}

DataLoader::DataLoader(const Dataset& dataset, Split split, const LoaderOptions& options)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.data = dataset.data();
  AMPWB_CHECK(s.data, "the dataset was never opened");
  s.samples = &s.data->samples(split);
  s.options = options;
  LoaderOptions& o = s.options;
  AMPWB_CHECK(o.batch_size >= 1, "batch size " << o.batch_size << " must be at least 1");
  AMPWB_CHECK(o.threads >= 1 && o.threads <= kMaxLoaderThreads,
              "loader threads " << o.threads << " must be 1 to " << kMaxLoaderThreads);
  AMPWB_CHECK(is_floating(o.dtype), "loader images must be f32, bf16 or f16, not " << dtype_name(o.dtype));
  s.size = o.image_size > 0 ? o.image_size : std::min(224, std::max(8, dataset.native_image_size()));
  AMPWB_CHECK(s.size >= 8 && s.size <= 4096, "image size " << s.size << " must be 8 to 4096 pixels");
  s.plan = plan_shard(static_cast<int64_t>(s.samples->size()), o.batch_size, o.drop_last, o.shard);
  s.n_batches = s.plan.batches();

  if (!o.augment) {
    s.crop = Crop::Center;
  } else if (o.crop == "pad") {
    s.crop = Crop::Pad;
  } else if (o.crop == "random-resized") {
    s.crop = Crop::RandomResized;
  } else if (o.crop == "auto") {
    s.crop = dataset.native_image_size() <= 64 ? Crop::Pad : Crop::RandomResized;
  } else {
    throw Error("unknown crop '" + o.crop + "' (choose auto, pad or random-resized)");
  }
  // Random-resized crops zoom in up to 3.5x: keep twice the output size so most crops are not enlarged.
  s.base_side = s.crop == Crop::RandomResized ? 2 * s.size : s.size;
  // Pixels already in memory (IDX, CIFAR) are never cached: there is nothing to decode, a resize of a 28 or 32 px
  // image costs microseconds, and a cache of upscaled copies would take memory for nothing (Fashion-MNIST at 64 px:
  // 700 MiB).
  s.cacheable = !s.data->in_memory;

  s.norm = normalization_by_name(o.normalization, dataset, o.threads);
  s.table = detail::NormalizeTable(s.norm);

  const int64_t n = static_cast<int64_t>(s.samples->size());
  s.ring = o.prefetch > 0 ? o.prefetch : o.threads + 1;
  s.slots.resize(static_cast<size_t>(s.ring));
  if (s.cacheable) {
    s.cache_state = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) s.cache_state[static_cast<size_t>(i)].store(0);
    s.cache.resize(static_cast<size_t>(n));
  }
  for (int t = 0; t < o.threads; ++t) s.workers.emplace_back([&s] { s.work(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(s_->mutex);
    s_->stopping = true;
    s_->cancelled = true;
  }
  s_->work_ready.notify_all();
  s_->batch_ready.notify_all();
  for (auto& t : s_->workers) t.join();
}

int64_t DataLoader::size() const { return static_cast<int64_t>(s_->samples->size()); }
int64_t DataLoader::shard_size() const { return s_->plan.shard_size; }
int64_t DataLoader::batches_per_epoch() const { return s_->n_batches; }
int DataLoader::image_size() const { return s_->size; }
int DataLoader::num_classes() const { return static_cast<int>(s_->data->class_names.size()); }
Normalization DataLoader::normalization() const { return s_->norm; }

void DataLoader::start_epoch(int epoch) {
  State& s = *s_;
  auto order = std::make_shared<std::vector<int64_t>>(s.samples->size());
  for (size_t i = 0; i < order->size(); ++i) (*order)[i] = static_cast<int64_t>(i);
  if (s.options.shuffle) {
    Rng rng(mix(s.options.seed, static_cast<uint64_t>(epoch), 0x5eedULL));
    rng.shuffle(order->begin(), order->end());
  }
  // Every rank shuffled the same order above; each keeps its own shard of it.
  if (s.options.shard.world_size > 1 || s.plan.shard_size < static_cast<int64_t>(order->size()))
    order = std::make_shared<std::vector<int64_t>>(take_shard(*order, s.options.shard, s.plan.shard_size));
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.generation.fetch_add(1);
    s.cancelled = false;
    s.started = true;
    s.epoch = epoch;
    s.order = std::move(order);
    s.next_claim = s.next_deliver = 0;
    s.wait = 0;
    for (auto& slot : s.slots) slot = State::Slot{};
  }
  s.work_ready.notify_all();
}

bool DataLoader::next(Batch& out) {
  State& s = *s_;
  bool start = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    start = !s.started;
  }
  if (start) start_epoch(0);
  for (;;) {
    std::unique_lock<std::mutex> lock(s.mutex);
    if (s.cancelled || s.next_deliver >= s.n_batches) return false;
    const int64_t index = s.next_deliver;
    State::Slot& slot = s.slots[static_cast<size_t>(index % s.ring)];
    if (!(slot.ready && slot.index == index)) {
      const auto t0 = Clock::now();
      s.batch_ready.wait(lock, [&] { return s.cancelled || s.stopping || (slot.ready && slot.index == index); });
      s.wait += std::chrono::duration<double>(Clock::now() - t0).count();
      if (s.cancelled || s.stopping) return false;
    }
    if (!slot.error.empty()) {
      const std::string error = slot.error;
      slot = State::Slot{};
      s.cancelled = true;  // the epoch cannot complete
      throw Error(error);
    }
    out = std::move(slot.batch);
    slot = State::Slot{};
    ++s.next_deliver;
    lock.unlock();
    s.work_ready.notify_all();
    if (out.images.defined()) return true;  // else every image of the batch was lost
  }
}

void DataLoader::cancel() {
  {
    std::lock_guard<std::mutex> lock(s_->mutex);
    s_->cancelled = true;
  }
  s_->batch_ready.notify_all();
  s_->work_ready.notify_all();
}

double DataLoader::wait_seconds() const {
  std::lock_guard<std::mutex> lock(s_->mutex);
  return s_->wait;
}

LoaderStats DataLoader::stats() const {
  LoaderStats st;
  st.wait_seconds = wait_seconds();
  st.decoded = s_->decoded.load();
  st.cache_hits = s_->cache_hits.load();
  st.cache_bytes = s_->cache_bytes.load();
  st.cached_images = s_->cached_images.load();
  {
    std::lock_guard lock(s_->lost_mutex);
    st.lost = static_cast<int64_t>(s_->lost.size());
  }
  return st;
}

std::vector<LostImage> DataLoader::lost_images() const {
  std::lock_guard lock(s_->lost_mutex);
  return s_->lost;
}

}  // namespace ampwb
