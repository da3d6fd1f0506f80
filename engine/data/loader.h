// The batch loader: decodes and transforms images on its own std::threads (not OpenMP, so it runs beside the
// training thread's OpenMP compute), into a ring of prefetched batches.
//
//   Dataset ds = Dataset::open(dir, {});
//   DataLoader train(ds, Split::Train, {.image_size = 64, .batch_size = 64, .augment = true, .seed = 1});
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     train.start_epoch(epoch);                   // the order of this epoch: a function of (seed, epoch) only
//     for (Batch b; train.next(b);) step(b.images, b.labels);
//     log(train.wait_seconds());                  // how long next() blocked this epoch
//   }
//
// Data-parallel training: each process passes its rank and the world size (options.shard) with the same seed, and
// takes its own shard of every epoch's order, the same number of batches on every rank (data/shard.h).
//
// Batches: images (n, 3, S, S) in NHWC layout, normalized, in options.dtype; labels (n) I32. The same seed gives
// the same batches, pixel for pixel, whatever the thread count and whether an image came from the cache.
//
// Cache: the decoded, resized 8-bit image of each sample (S x S; for random-resized crops the image with its
// shorter side at 2 S) is kept while the cache holds less than cache_budget_bytes, so with a dataset that fits,
// epochs after the first decode nothing. Past the budget the rest streams: decoded each time, memory flat.
// IDX and CIFAR pixels are in memory already and are not cached (nothing to decode; resizing them is cheap).
// Memory: the cache, plus (prefetch + threads + 1) batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/normalization.h"
#include "data/shard.h"

namespace ampwb {

constexpr int kMaxLoaderThreads = 256;

struct LoaderOptions {
  int image_size = 0;  // S; 0 = the dataset's native size (median shorter side), at most 224
  int batch_size = 64;
  bool shuffle = true;        // a new order every epoch, from (seed, epoch)
  bool augment = false;       // training crops and flips (see crop, flip); else resize + center crop
  std::string crop = "auto";  // with augment: "random-resized", "pad", or "auto" (pad when the dataset's
                              // images are 64 px or less, as for MNIST and CIFAR; random-resized otherwise)
  bool flip = true;           // with augment: mirror left-right with probability 1/2
  bool drop_last = false;     // drop a last batch smaller than batch_size (with a shard: data/shard.h)
  uint64_t seed = 0;
  DataShard shard;                              // this process's share of each epoch: rank r of world_size
  int threads = 2;                              // decoding threads, 1 to kMaxLoaderThreads
  int prefetch = 0;                             // batches ready ahead of the consumer; 0 = threads + 1
  size_t cache_budget_bytes = size_t{2} << 30;  // per loader; 0 = no cache
  std::string normalization = "dataset";        // "dataset" (the training split's statistics), "imagenet", "none"
  DType dtype = DType::F32;                     // F32, BF16 or F16
};

struct Batch {
  Tensor images;  // (n, 3, S, S) NHWC, normalized
  Tensor labels;  // (n) I32
};

struct LoaderStats {
  double wait_seconds = 0;  // this epoch: time next() blocked
  int64_t decoded = 0;      // since construction: images built from their source (file decode or pixel copy)
  int64_t cache_hits = 0;   // since construction: images taken from the cache
  size_t cache_bytes = 0;   // held by the cache now
  int64_t cached_images = 0;
  int64_t lost = 0;  // since construction: samples skipped because their file vanished, shrank or changed
};

// A sample whose file vanished, shrank or changed after the dataset was read: skipped like a corrupt file is at
// the start, its batch one image smaller.
struct LostImage {
  std::string path;
  std::string reason;  // "unreadable (No such file or directory)", "truncated JPEG ...", "now 8x8 px, read as 12x12"
};

class DataLoader {
 public:
  DataLoader(const Dataset& dataset, Split split, const LoaderOptions& options);
  ~DataLoader();  // stops the workers (after the image each one is on)
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t size() const;               // samples in the split
  int64_t shard_size() const;         // samples this rank takes each epoch: size() at world size 1 without drop_last
  int64_t batches_per_epoch() const;  // the same on every rank of a shard
  int image_size() const;  // S
  int num_classes() const;

  // Starts (or restarts) an epoch: the previous one's pending batches are dropped.
  void start_epoch(int epoch);
  // The next batch of the epoch, blocking until it is ready. False at the end of the epoch or after cancel().
  // An image whose file vanished or changed since the dataset was read is left out of its batch (lost_images());
  // a batch that lost every image is passed over, so with a shard that rank runs a step fewer than the others, which
  // a data-parallel trainer must allow for. Without start_epoch(), the first call starts epoch 0.
  bool next(Batch& out);
  // From any thread: next() returns false promptly (well within 100 ms) until the next start_epoch().
  void cancel();

  double wait_seconds() const;  // time next() blocked this epoch
  LoaderStats stats() const;
  std::vector<LostImage> lost_images() const;  // each lost sample once, in the order they were met
  Normalization normalization() const;  // the statistics in use

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ampwb
