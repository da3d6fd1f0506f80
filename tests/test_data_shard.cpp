// Data-parallel sharding (data/shard.h): over world sizes 1 to 3 and splits W * batch does not divide, each rank takes
// its strided share of the one shuffled order, the ranks together see every image exactly once per epoch, and every
// rank runs the same number of batches; the plan over many sizes, then the loader on real image folders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "core/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/shard.h"
#include "data_test_util.h"

namespace ampwb {
namespace {
using namespace ampwb::testing;

// Every rank's plan for one split: the same number of batches, none empty, the batches of a step differing by at
// most one image, and the shards' union each sample once (drop_last: full batches, each sample at most once).
void expect_plans_fit(int64_t n, int batch, bool drop_last, int world) {
  const std::string what = "n " + std::to_string(n) + ", batch " + std::to_string(batch) + ", world " +
                           std::to_string(world) + (drop_last ? ", drop_last" : "");
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = 1000 + i;
  std::vector<ShardPlan> plans;
  std::multiset<int64_t> seen;
  for (int r = 0; r < world; ++r) {
    plans.push_back(plan_shard(n, batch, drop_last, {r, world}));
    const ShardPlan& p = plans.back();
    ASSERT_EQ(p.batches(), plans[0].batches()) << what << ", rank " << r;
    ASSERT_EQ(p.begins.front(), 0) << what;
    ASSERT_EQ(p.begins.back(), p.shard_size) << what;
    for (int64_t i = 0; i < p.batches(); ++i) {
      const int64_t size = p.begins[static_cast<size_t>(i) + 1] - p.begins[static_cast<size_t>(i)];
      ASSERT_GE(size, 1) << what << ", rank " << r << ", batch " << i;
      ASSERT_LE(size, batch) << what << ", rank " << r << ", batch " << i;
      if (drop_last) {
        ASSERT_EQ(size, batch) << what;
      }
      // No batch of one image, which batch norm cannot train on, where the last two batches can share evenly.
      if (!drop_last && world > 1 && batch >= 4 && p.batches() >= 2) {
        ASSERT_GE(size, 2) << what << ", rank " << r << ", batch " << i;
      }
      const int64_t first = plans[0].begins[static_cast<size_t>(i) + 1] - plans[0].begins[static_cast<size_t>(i)];
      ASSERT_LE(std::abs(size - first), 1) << what << ", rank " << r << ", batch " << i;
    }
    const std::vector<int64_t> mine = take_shard(order, {r, world}, p.shard_size);
    for (size_t k = 0; k < mine.size(); ++k)
      ASSERT_EQ(mine[k], order[static_cast<size_t>(r) + k * static_cast<size_t>(world)]) << what << ": not strided";
    seen.insert(mine.begin(), mine.end());
  }
  if (drop_last) {
    EXPECT_EQ(plans[0].batches(), n / world / batch) << what;
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size()) << what << ": a sample twice";
  } else {
    EXPECT_EQ(seen, std::multiset<int64_t>(order.begin(), order.end())) << what << ": not every sample once";
  }
}

TEST(DataShard, EverySampleOnceAndTheSameBatchCountOnEveryRank) {
  for (int world = 1; world <= 5; ++world)
    for (int batch = 1; batch <= 7; ++batch)
      for (int64_t n = 0; n <= 60; ++n)
        for (const bool drop_last : {false, true}) {
          // Without padding, equal steps need a batch of 2 or more where W does not divide n, and one image a rank.
          const bool impossible = !drop_last && ((batch == 1 && n % world != 0) || (n > 0 && n < world));
          if (impossible) {
            EXPECT_THROW(plan_shard(n, batch, drop_last, {0, world}), Error) << n << " " << batch << " " << world;
            EXPECT_THROW(plan_shard(n, batch, drop_last, {world - 1, world}), Error) << "every rank refuses alike";
            continue;
          }
          expect_plans_fit(n, batch, drop_last, world);
          if (::testing::Test::HasFatalFailure()) return;
        }
}

TEST(DataShard, WorldSizeOneCutsAsASingleLoaderDoes) {
  for (int batch = 1; batch <= 7; ++batch)
    for (int64_t n = 0; n <= 40; ++n) {
      const ShardPlan keep = plan_shard(n, batch, false, {});
      ASSERT_EQ(keep.batches(), (n + batch - 1) / batch);
      for (int64_t i = 0; i <= keep.batches(); ++i)
        ASSERT_EQ(keep.begins[static_cast<size_t>(i)], std::min(i * batch, n));
      const ShardPlan drop = plan_shard(n, batch, true, {});
      ASSERT_EQ(drop.batches(), n / batch);
      ASSERT_EQ(drop.shard_size, n / batch * batch);
    }
}

// 35 images on 2 ranks at batch 8: shards of 18 and 17, whose last batches would hold 2 and 1 images; every rank
// shares its last two batches evenly instead. One image short and so one batch short (16 of 17): the same.
TEST(DataShard, TheLastTwoBatchesShareEvenlyWhereOneWouldHoldOneImage) {
  EXPECT_EQ(plan_shard(35, 8, false, {0, 2}).begins, (std::vector<int64_t>{0, 8, 13, 18}));
  EXPECT_EQ(plan_shard(35, 8, false, {1, 2}).begins, (std::vector<int64_t>{0, 8, 13, 17}));
  EXPECT_EQ(plan_shard(33, 8, false, {0, 2}).begins, (std::vector<int64_t>{0, 8, 13, 17}));
  EXPECT_EQ(plan_shard(33, 8, false, {1, 2}).begins, (std::vector<int64_t>{0, 8, 12, 16}));
  EXPECT_EQ(plan_shard(36, 8, false, {1, 2}).begins, (std::vector<int64_t>{0, 8, 16, 18})) << "2 images: kept";
}

TEST(DataShard, InvalidRankOrWorldSizeIsRefused) {
  for (const DataShard bad : {DataShard{-1, 2}, DataShard{2, 2}, DataShard{0, 0}, DataShard{0, -3}}) {
    EXPECT_THROW(check_shard(bad), Error) << bad.rank << " of " << bad.world_size;
    EXPECT_THROW(plan_shard(10, 2, false, bad), Error);
  }
  try {
    check_shard({3, 2});
    ADD_FAILURE() << "rank 3 of 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3 must be 0 to 1"), std::string::npos) << e.what();
  }
  try {
    plan_shard(7, 1, false, {0, 2});
    ADD_FAILURE() << "batch size 1 on 2 ranks of 7 images accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch size of 2 or more"), std::string::npos) << e.what();
  }
}

// The loader on a split-folders dataset: train/ holds images 0-22, val/ images 100-110, each id in the blue channel of
// pixel (0, 0).
constexpr int kTrain = 23, kValidation = 11, kSide = 8;

void write_split(const fs::path& root, int first_id, int count) {
  for (int i = 0; i < count; ++i) {
    const int id = first_id + i;
    cv::Mat img = pattern_image(kSide, kSide, id);
    img.at<cv::Vec3b>(0, 0) = cv::Vec3b(static_cast<uint8_t>(id), 0, 0);
    write_image(root / (i % 2 ? "b" : "a") / (std::to_string(id) + ".png"), img);
  }
}

Dataset open_ids(const TempDir& dir) {
  write_split(dir / "train", 0, kTrain);
  write_split(dir / "val", 100, kValidation);
  DatasetOptions o;
  o.cache_dir = "-";
  const Dataset ds = Dataset::open(dir.str(), o);
  EXPECT_EQ(ds.train_size(), kTrain);
  return ds;
}

struct RankEpoch {
  std::vector<int> ids;                      // in the order delivered
  std::vector<std::vector<uint8_t>> images;  // each image's bytes, in the same order
  std::vector<int64_t> sizes;                // each batch's
};

RankEpoch run_epoch(DataLoader& loader, int epoch) {
  loader.start_epoch(epoch);
  RankEpoch e;
  const size_t floats = size_t{kSide} * kSide * 3;
  for (Batch b; loader.next(b);) {
    const float* f = b.images.data_as<float>();
    const uint8_t* bytes = static_cast<const uint8_t*>(b.images.data());
    for (int64_t i = 0; i < b.labels.numel(); ++i) {
      e.ids.push_back(static_cast<int>(std::lround(f[static_cast<size_t>(i) * floats + 2] * 255)));
      const size_t image_bytes = floats * sizeof(float);
      e.images.emplace_back(bytes + static_cast<size_t>(i) * image_bytes,
                            bytes + (static_cast<size_t>(i) + 1) * image_bytes);
    }
    e.sizes.push_back(b.labels.numel());
  }
  return e;
}

LoaderOptions training(int batch) {
  LoaderOptions o;
  o.image_size = kSide;
  o.batch_size = batch;
  o.normalization = "none";
  o.seed = 7;
  o.threads = 2;
  return o;
}

LoaderOptions validation(int batch) {
  LoaderOptions o = training(batch);
  o.shuffle = false;
  return o;
}

// For each world size: the ranks' epochs against the single loader's. Each rank has the same number of batches, its
// images are the single loader's order at r, r + W, ... (byte for byte), and together they are every image once.
// Augmented images move pixel (0, 0): their ids are unreadable, and the bytes alone are compared.
void expect_shards_cover(const Dataset& ds, Split split, const LoaderOptions& options, int epochs) {
  const bool ids_readable = !options.augment;
  DataLoader single(ds, split, options);
  const int64_t n = single.size();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const RankEpoch whole = run_epoch(single, epoch);
    ASSERT_EQ(static_cast<int64_t>(whole.ids.size()), n);
    if (ids_readable) {
      std::multiset<int> expected;
      for (int64_t i = 0; i < n; ++i) expected.insert((split == Split::Train ? 0 : 100) + static_cast<int>(i));
      ASSERT_EQ(std::multiset<int>(whole.ids.begin(), whole.ids.end()), expected) << "the single loader's epoch";
    }
    for (int world = 1; world <= 3; ++world) {
      ASSERT_NE(n % (world * options.batch_size), 0) << "the tail must be uneven for this test to mean anything";
      std::multiset<int> all;
      std::set<int> previous_ranks;
      int64_t batches = -1;
      for (int rank = 0; rank < world; ++rank) {
        LoaderOptions o = options;
        o.shard = {rank, world};
        DataLoader loader(ds, split, o);
        const RankEpoch e = run_epoch(loader, epoch);
        const std::string what = std::string(split_name(split)) + " epoch " + std::to_string(epoch) + ", rank " +
                                 std::to_string(rank) + " of " + std::to_string(world);
        EXPECT_EQ(static_cast<int64_t>(e.sizes.size()), loader.batches_per_epoch()) << what;
        if (batches < 0) batches = loader.batches_per_epoch();
        EXPECT_EQ(loader.batches_per_epoch(), batches) << what << ": every rank must run the same number of steps";
        EXPECT_EQ(static_cast<int64_t>(e.ids.size()), loader.shard_size()) << what;
        ASSERT_EQ(e.ids.size(), (whole.ids.size() - static_cast<size_t>(rank) + world - 1) / world) << what;
        for (size_t k = 0; k < e.ids.size(); ++k) {
          const size_t at = static_cast<size_t>(rank) + k * static_cast<size_t>(world);
          EXPECT_EQ(e.ids[k], whole.ids[at]) << what << ", sample " << k;
          EXPECT_EQ(e.images[k], whole.images[at]) << what << ", sample " << k << ": not the same pixels";
        }
        if (ids_readable) {
          for (const int id : e.ids) EXPECT_EQ(previous_ranks.count(id), 0u) << what << ": image " << id << " twice";
        }
        previous_ranks.insert(e.ids.begin(), e.ids.end());
        all.insert(e.ids.begin(), e.ids.end());
        if (world == 1) {
          EXPECT_EQ(e.ids, whole.ids) << what << ": world size 1 must be the single loader's order";
          EXPECT_EQ(e.images, whole.images) << what;
          EXPECT_EQ(e.sizes, whole.sizes) << what;
        }
      }
      EXPECT_EQ(all, std::multiset<int>(whole.ids.begin(), whole.ids.end()))
          << split_name(split) << " epoch " << epoch << ", world " << world << ": not every image exactly once";
    }
  }
}

TEST(DataShard, TrainingRanksSeeEveryImageOnceAndRunTheSameSteps) {
  TempDir dir("shard_train");
  const Dataset ds = open_ids(dir);
  expect_shards_cover(ds, Split::Train, training(4), 2);
  // With augmentation: a sample's crop and flip are the same whichever rank takes it. Batch 7 on 3 ranks: the third
  // rank's shard of 7 is cut (6, 1) beside the others' (7, 1).
  LoaderOptions augmented = training(7);
  augmented.augment = true;
  augmented.crop = "pad";
  expect_shards_cover(ds, Split::Train, augmented, 1);
}

TEST(DataShard, ValidationRanksSeeEveryImageOnce) {
  TempDir dir("shard_val");
  const Dataset ds = open_ids(dir);
  ASSERT_EQ(ds.validation_size(), kValidation);
  expect_shards_cover(ds, Split::Validation, validation(4), 1);
  // The validation split in its file order, strided: rank 1 of 2 takes ids 101, 103, ...
  LoaderOptions o = validation(4);
  o.shard = {1, 2};
  DataLoader loader(ds, Split::Validation, o);
  DataLoader single(ds, Split::Validation, validation(4));
  const RankEpoch whole = run_epoch(single, 0), mine = run_epoch(loader, 0);
  ASSERT_EQ(mine.ids.size(), 5u);
  for (size_t k = 0; k < mine.ids.size(); ++k) EXPECT_EQ(mine.ids[k], whole.ids[1 + 2 * k]);
}

TEST(DataShard, EpochsShuffleDifferentlyOnEveryRank) {
  TempDir dir("shard_epochs");
  const Dataset ds = open_ids(dir);
  for (int rank = 0; rank < 2; ++rank) {
    LoaderOptions o = training(4);
    o.shard = {rank, 2};
    DataLoader loader(ds, Split::Train, o);
    const RankEpoch first = run_epoch(loader, 0), second = run_epoch(loader, 1);
    EXPECT_NE(first.ids, second.ids) << "rank " << rank << ": epochs 0 and 1 in the same order";
    EXPECT_NE(std::multiset<int>(first.ids.begin(), first.ids.end()),
              std::multiset<int>(second.ids.begin(), second.ids.end()))
        << "rank " << rank << ": the shard's images must change between epochs, not only their order";
    EXPECT_EQ(run_epoch(loader, 0).ids, first.ids) << "an epoch's shard is a function of (seed, epoch)";
  }
}

// 23 images on 2 ranks in batches of 11: rank 0 takes 12, rank 1 takes 11, each cut in two equal halves, since
// (11, 1) and (10, 1) would leave batch norm one image.
TEST(DataShard, LoaderBatchSizesOfAnUnevenTail) {
  TempDir dir("shard_tail");
  const Dataset ds = open_ids(dir);
  LoaderOptions o = training(11);
  o.shard = {0, 2};
  DataLoader first(ds, Split::Train, o);
  o.shard = {1, 2};
  DataLoader second(ds, Split::Train, o);
  EXPECT_EQ(run_epoch(first, 0).sizes, (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(run_epoch(second, 0).sizes, (std::vector<int64_t>{6, 5}));
  EXPECT_EQ(first.shard_size() + second.shard_size(), kTrain);

  // drop_last: floor(23 / 2) = 11 a rank, one batch of 11 each, disjoint.
  o.drop_last = true;
  o.shard = {0, 2};
  DataLoader drop_first(ds, Split::Train, o);
  o.shard = {1, 2};
  DataLoader drop_second(ds, Split::Train, o);
  const RankEpoch a = run_epoch(drop_first, 0), b = run_epoch(drop_second, 0);
  EXPECT_EQ(a.sizes, (std::vector<int64_t>{11}));
  EXPECT_EQ(b.sizes, (std::vector<int64_t>{11}));
  std::set<int> both(a.ids.begin(), a.ids.end());
  both.insert(b.ids.begin(), b.ids.end());
  EXPECT_EQ(both.size(), 22u);
}

TEST(DataShard, LoaderRefusesAnInvalidShard) {
  TempDir dir("shard_invalid");
  const Dataset ds = open_ids(dir);
  for (const DataShard bad : {DataShard{-1, 2}, DataShard{2, 2}, DataShard{0, 0}}) {
    LoaderOptions o = training(4);
    o.shard = bad;
    EXPECT_THROW(DataLoader(ds, Split::Train, o), Error) << bad.rank << " of " << bad.world_size;
  }
  LoaderOptions o = training(1);  // 23 images, 2 ranks, batch 1: equal steps would need an image twice
  o.shard = {0, 2};
  EXPECT_THROW(DataLoader(ds, Split::Train, o), Error);
  o = validation(4);  // 11 validation images on 12 ranks: one rank would have none
  o.shard = {11, 12};
  try {
    DataLoader loader(ds, Split::Validation, o);
    ADD_FAILURE() << "12 ranks over 11 images accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot give each of 12 ranks one"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ampwb
