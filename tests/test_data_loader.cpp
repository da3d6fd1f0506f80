// The loader on real files: exact pixels out (RGB, NHWC, normalized), augmentation that is what it claims,
// determinism per seed whatever the threads and the cache, the last-batch policy, the cache (the second epoch decodes
// nothing), cancellation within 100 ms, flat memory when streaming, and IDX/CIFAR/Fashion-MNIST through the loader.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <opencv2/imgproc.hpp>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/half.h"
#include "data/data_benchmark.h"
#include "data/dataset.h"
#include "data/dataset_data.h"
#include "data/loader.h"
#include "data_test_util.h"

namespace ampwb {
namespace {
using namespace ampwb::testing;
using Clock = std::chrono::steady_clock;

DatasetOptions options_with(double fraction = 0.0) {
  DatasetOptions o;
  o.cache_dir = "-";
  o.validation_fraction = fraction;
  return o;
}

// Two classes of `per_class` images; image i's pixel (0, 0) holds i in its blue channel (an id the tests can read).
void make_id_folder(const fs::path& root, int per_class, int width, int height, const std::string& ext = ".png") {
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < per_class; ++i) {
      const int id = c * per_class + i;
      cv::Mat img = pattern_image(width, height, id);
      img.at<cv::Vec3b>(0, 0) = cv::Vec3b(static_cast<uint8_t>(id), 0, 0);
      char name[32];
      std::snprintf(name, sizeof name, "%03d%s", i, ext.c_str());
      write_image(root / (c ? "b" : "a") / name, img);
    }
}

struct Epoch {
  std::vector<std::vector<uint8_t>> images;  // raw bytes of each batch's images tensor
  std::vector<std::vector<int32_t>> labels;
  std::vector<int64_t> sizes;
  bool operator==(const Epoch&) const = default;
};

Epoch run_epoch(DataLoader& loader, int epoch) {
  loader.start_epoch(epoch);
  Epoch e;
  for (Batch b; loader.next(b);) {
    const uint8_t* p = static_cast<const uint8_t*>(b.images.data());
    e.images.emplace_back(p, p + b.images.nbytes());
    e.labels.emplace_back(b.labels.data_as<int32_t>(), b.labels.data_as<int32_t>() + b.labels.numel());
    e.sizes.push_back(b.labels.numel());
  }
  return e;
}

LoaderOptions plain(int size, int batch) {
  LoaderOptions o;
  o.image_size = size;
  o.batch_size = batch;
  o.shuffle = false;
  o.normalization = "none";
  return o;
}

TEST(DataLoader, PixelsAreTheImageInRgbNhwc) {
  TempDir dir("pixels");
  make_id_folder(dir.path(), 3, 16, 16);
  write_image(dir / "b" / "wide.png", pattern_image(24, 16, 77));  // center square, then resized
  const Dataset ds = Dataset::open(dir.str(), options_with());
  DataLoader loader(ds, Split::Train, plain(8, 7));
  Batch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_FALSE(loader.next(b)) << "7 images: one batch";
  // The batch just returned is gone; take it again.
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next(b));
  ASSERT_EQ(b.images.shape(), (Shape{7, 3, 8, 8}));
  EXPECT_EQ(b.images.layout(), Layout::NHWC);
  EXPECT_EQ(b.images.dtype(), DType::F32);
  EXPECT_EQ(b.labels.dtype(), DType::I32);
  const int32_t* labels = b.labels.data_as<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(labels, labels + 7), (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1}));

  // Every image against OpenCV: center square, INTER_AREA to 8x8, BGR -> RGB, v / 255.
  const auto& data = *ds.data();
  const float* px = b.images.data_as<float>();
  for (int i = 0; i < 7; ++i) {
    const cv::Mat src = cv::imread(data.paths[static_cast<size_t>(data.train[static_cast<size_t>(i)].item)]);
    const int side = std::min(src.cols, src.rows);
    cv::Mat expected;
    cv::resize(src(cv::Rect((src.cols - side) / 2, (src.rows - side) / 2, side, side)), expected, cv::Size(8, 8), 0, 0,
               cv::INTER_AREA);
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x)
        for (int c = 0; c < 3; ++c)
          ASSERT_EQ(px[((i * 8 + y) * 8 + x) * 3 + c], expected.at<cv::Vec3b>(y, x)[2 - c] / 255.0f)
              << "image " << i << " (" << y << "," << x << ") channel " << c;
  }
}

TEST(DataLoader, NormalizationAndDtypes) {
  TempDir dir("norm");
  for (int i = 0; i < 4; ++i) {
    write_image(dir / "red" / (std::to_string(i) + ".png"), cv::Mat(8, 8, CV_8UC3, cv::Scalar(0, 0, 255)));
    write_image(dir / "blue" / (std::to_string(i) + ".png"), cv::Mat(8, 8, CV_8UC3, cv::Scalar(255, 0, 0)));
  }
  TempDir cache("norm_cache");
  DatasetOptions o = options_with();
  o.cache_dir = cache.str();
  const Dataset ds = Dataset::open(dir.str(), o);
  LoaderOptions lo = plain(8, 8);
  lo.normalization = "dataset";
  DataLoader loader(ds, Split::Train, lo);
  const Normalization n = loader.normalization();
  EXPECT_FLOAT_EQ(n.mean[0], 0.5f);
  EXPECT_FLOAT_EQ(n.mean[1], 0.0f);
  EXPECT_FLOAT_EQ(n.mean[2], 0.5f);
  EXPECT_FLOAT_EQ(n.stddev[0], 0.5f);
  EXPECT_FLOAT_EQ(n.stddev[1], 1.0f / 255.0f);  // a constant channel: floored at one grey level
  EXPECT_FLOAT_EQ(n.stddev[2], 0.5f);
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache.path() / "statistics")) files += e.is_regular_file();
  EXPECT_EQ(files, 1) << "statistics not kept in the cache folder";

  Batch b;
  ASSERT_TRUE(loader.next(b));
  // Blue comes first (sorted class names): R = (0 - 0.5) / 0.5 = -1, B = (1 - 0.5) / 0.5 = 1.
  EXPECT_FLOAT_EQ(b.images.data_as<float>()[0], -1.0f);
  EXPECT_FLOAT_EQ(b.images.data_as<float>()[2], 1.0f);

  lo.normalization = "imagenet";
  lo.dtype = DType::BF16;
  DataLoader bf16(ds, Split::Train, lo);
  ASSERT_TRUE(bf16.next(b));
  EXPECT_EQ(b.images.dtype(), DType::BF16);
  const uint16_t* h = static_cast<const uint16_t*>(b.images.data());
  EXPECT_EQ(h[0], float_to_bfloat16_bits((0.0f - 0.485f) / 0.229f));
  EXPECT_EQ(h[2], float_to_bfloat16_bits((1.0f - 0.406f) / 0.225f));

  lo.normalization = "median";
  EXPECT_THROW(DataLoader(ds, Split::Train, lo), Error);
  lo.normalization = "none";
  lo.dtype = DType::I32;
  EXPECT_THROW(DataLoader(ds, Split::Train, lo), Error);
}

TEST(DataLoader, SameSeedSameBatchesWhateverThreadsAndCache) {
  TempDir dir("determinism");
  make_id_folder(dir.path(), 12, 40, 30, ".jpg");
  const Dataset ds = Dataset::open(dir.str(), options_with(0.25));
  for (const char* crop : {"pad", "random-resized"}) {
    LoaderOptions o = plain(24, 5);
    o.shuffle = true;
    o.augment = true;
    o.crop = crop;
    o.seed = 42;
    o.threads = 1;
    o.cache_budget_bytes = 0;
    DataLoader one(ds, Split::Train, o);
    o.threads = 3;
    o.cache_budget_bytes = size_t{64} << 20;
    DataLoader three(ds, Split::Train, o);
    const Epoch a0 = run_epoch(one, 0), a1 = run_epoch(one, 1);
    EXPECT_EQ(a0, run_epoch(three, 0)) << crop;
    EXPECT_EQ(a1, run_epoch(three, 1)) << crop << " (from the cache this time)";
    EXPECT_NE(a0.labels, a1.labels) << crop << ": epochs must differ in order";
    o.seed = 43;
    DataLoader other(ds, Split::Train, o);
    EXPECT_NE(run_epoch(other, 0), a0) << crop;
  }
}

// Pad-and-random-crop is a shift of the image by at most S/8 with black filling, maybe mirrored; nothing else.
TEST(DataLoader, PadCropIsAShiftAndFlipOfTheImage) {
  TempDir dir("padcrop");
  make_id_folder(dir.path(), 4, 16, 16);
  const Dataset ds = Dataset::open(dir.str(), options_with());
  DataLoader base(ds, Split::Train, plain(16, 8));
  LoaderOptions o = plain(16, 8);
  o.augment = true;
  o.crop = "pad";
  o.seed = 3;
  DataLoader aug(ds, Split::Train, o);
  Batch clean, shifted;
  ASSERT_TRUE(base.next(clean));
  ASSERT_TRUE(aug.next(shifted));
  const float* a = clean.images.data_as<float>();
  const float* s = shifted.images.data_as<float>();
  int flips = 0, moved = 0;
  for (int i = 0; i < 8; ++i) {
    bool found = false;
    for (int flip = 0; flip < 2 && !found; ++flip)
      for (int dy = -2; dy <= 2 && !found; ++dy)
        for (int dx = -2; dx <= 2 && !found; ++dx) {
          bool same = true;
          for (int y = 0; y < 16 && same; ++y)
            for (int x = 0; x < 16 && same; ++x) {
              const int sy = y + dy, sx = (flip ? 15 - x : x) + dx;
              for (int c = 0; c < 3; ++c) {
                const float want =
                    sy >= 0 && sy < 16 && sx >= 0 && sx < 16 ? a[((i * 16 + sy) * 16 + sx) * 3 + c] : 0.0f;
                if (s[((i * 16 + y) * 16 + x) * 3 + c] != want) same = false;
              }
            }
          if (same) {
            found = true;
            flips += flip;
            moved += dx != 0 || dy != 0;
          }
        }
    EXPECT_TRUE(found) << "image " << i << " is not a padded crop of the original";
  }
  EXPECT_GT(flips, 0);
  EXPECT_GT(moved, 0);
}

TEST(DataLoader, LastBatchKeptOrDropped) {
  TempDir dir("lastbatch");
  make_id_folder(dir.path(), 10, 8, 8);
  write_image(dir / "a" / "extra.png", [] {
    cv::Mat m = pattern_image(8, 8, 99);
    m.at<cv::Vec3b>(0, 0) = cv::Vec3b(20, 0, 0);
    return m;
  }());
  const Dataset ds = Dataset::open(dir.str(), options_with());
  ASSERT_EQ(ds.train_size(), 21);
  LoaderOptions o = plain(8, 4);
  o.shuffle = true;
  DataLoader keep(ds, Split::Train, o);
  EXPECT_EQ(keep.batches_per_epoch(), 6);
  const Epoch e = run_epoch(keep, 0);
  EXPECT_EQ(e.sizes, (std::vector<int64_t>{4, 4, 4, 4, 4, 1}));
  // Every image exactly once: the ids written in pixel (0, 0).
  std::multiset<int> ids;
  for (const auto& bytes : e.images) {
    const float* f = reinterpret_cast<const float*>(bytes.data());
    for (size_t i = 0; i < bytes.size() / sizeof(float) / 192; ++i)
      ids.insert(static_cast<int>(std::lround(f[i * 192 + 2] * 255)));
  }
  std::multiset<int> all;
  for (int i = 0; i < 21; ++i) all.insert(i);
  EXPECT_EQ(ids, all);

  o.drop_last = true;
  DataLoader drop(ds, Split::Train, o);
  EXPECT_EQ(drop.batches_per_epoch(), 5);
  EXPECT_EQ(run_epoch(drop, 0).sizes, (std::vector<int64_t>{4, 4, 4, 4, 4}));
}

// Files that vanish or shrink after the dataset was read are left out of their batch, a batch that lost every image
// is passed over, and each loss is reported once, with why (the trainer notes them in the run).
TEST(DataLoader, ImagesThatVanishAreLeftOutAndABatchWithNoneLeftIsPassedOver) {
  TempDir dir("vanish");
  make_id_folder(dir.path(), 4, 8, 8);  // ids 0-3 in a/000.png..003.png, 4-7 in b/
  const Dataset ds = Dataset::open(dir.str(), options_with());
  LoaderOptions o = plain(8, 2);
  o.cache_budget_bytes = 0;  // every epoch reads the files again
  o.threads = 1;             // the losses in the order of the batches
  DataLoader loader(ds, Split::Train, o);
  // The ids of each batch, from pixel (0, 0) of each image.
  const auto ids_of = [](const Epoch& e) {
    std::vector<std::vector<int>> ids;
    for (const auto& bytes : e.images) {
      const float* f = reinterpret_cast<const float*>(bytes.data());
      ids.emplace_back();
      for (size_t i = 0; i < bytes.size() / sizeof(float) / 192; ++i)
        ids.back().push_back(static_cast<int>(std::lround(f[i * 192 + 2] * 255)));
    }
    return ids;
  };
  const std::vector<std::vector<int>> before = ids_of(run_epoch(loader, 0));
  ASSERT_EQ(before.size(), 4u);
  const auto path_of = [&](int id) {
    char name[32];
    std::snprintf(name, sizeof name, "%03d.png", id % 4);
    return dir.path() / (id < 4 ? "a" : "b") / name;
  };
  fs::remove(path_of(before[0][0]));
  fs::remove(path_of(before[0][1]));
  fs::resize_file(path_of(before[2][1]), fs::file_size(path_of(before[2][1])) / 2);

  for (int epoch = 1; epoch <= 2; ++epoch) {
    const std::vector<std::vector<int>> after = ids_of(run_epoch(loader, epoch));
    EXPECT_EQ(after, (std::vector<std::vector<int>>{before[1], {before[2][0]}, before[3]})) << "epoch " << epoch;
  }
  const std::vector<LostImage> lost = loader.lost_images();
  ASSERT_EQ(lost.size(), 3u) << "each once, however many epochs met it";
  EXPECT_EQ(loader.stats().lost, 3);
  EXPECT_EQ(lost[0].path, path_of(before[0][0]).string());
  EXPECT_NE(lost[0].reason.find("unreadable (No such file or directory)"), std::string::npos) << lost[0].reason;
  EXPECT_EQ(lost[2].path, path_of(before[2][1]).string());
  EXPECT_NE(lost[2].reason.find("truncated PNG"), std::string::npos) << lost[2].reason;
}

TEST(DataLoader, CacheMeansTheSecondEpochDecodesNothing) {
  TempDir dir("cache");
  make_id_folder(dir.path(), 8, 30, 20, ".jpg");
  const Dataset ds = Dataset::open(dir.str(), options_with());
  LoaderOptions o = plain(16, 5);
  o.shuffle = true;
  DataLoader cached(ds, Split::Train, o);
  run_epoch(cached, 0);
  EXPECT_EQ(cached.stats().decoded, 16);
  EXPECT_EQ(cached.stats().cached_images, 16);
  EXPECT_EQ(cached.stats().cache_bytes, 16u * 16 * 16 * 3);
  run_epoch(cached, 1);
  EXPECT_EQ(cached.stats().decoded, 16) << "the second epoch decoded";
  EXPECT_EQ(cached.stats().cache_hits, 16);

  o.cache_budget_bytes = 0;
  DataLoader uncached(ds, Split::Train, o);
  run_epoch(uncached, 0);
  run_epoch(uncached, 1);
  EXPECT_EQ(uncached.stats().decoded, 32);

  o.cache_budget_bytes = 5 * 16 * 16 * 3;  // room for five
  DataLoader partial(ds, Split::Train, o);
  run_epoch(partial, 0);
  EXPECT_EQ(partial.stats().cached_images, 5);
  EXPECT_LE(partial.stats().cache_bytes, o.cache_budget_bytes);
  run_epoch(partial, 1);
  EXPECT_EQ(partial.stats().decoded, 16 + 11);
}

TEST(DataLoader, CancelReturnsWithin100ms) {
  TempDir dir("cancel");
  // Large noisy PNGs, one decoding thread, no cache: a batch takes well over 100 ms to build.
  cv::Mat noise(900, 900, CV_8UC3);
  cv::randu(noise, 0, 256);
  const std::vector<uint8_t> png = encode(".png", noise, {cv::IMWRITE_PNG_COMPRESSION, 1});
  for (int i = 0; i < 12; ++i) write_bytes(dir / (i % 2 ? "a" : "b") / (std::to_string(i) + ".png"), png);
  const Dataset ds = Dataset::open(dir.str(), options_with());
  LoaderOptions o = plain(32, 12);
  o.threads = 1;
  o.cache_budget_bytes = 0;
  auto loader = std::make_unique<DataLoader>(ds, Split::Train, o);
  loader->start_epoch(0);
  auto consumer = std::async(std::launch::async, [&] {
    Batch b;
    const bool got = loader->next(b);
    return std::make_pair(got, Clock::now());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto cancelled_at = Clock::now();
  loader->cancel();
  const auto [got, returned_at] = consumer.get();
  EXPECT_FALSE(got) << "the batch was ready before cancel(): make it slower";
  const double ms = std::chrono::duration<double, std::milli>(returned_at - cancelled_at).count();
  EXPECT_LT(ms, 100.0);
  Batch b;
  EXPECT_FALSE(loader->next(b));
  // A new epoch delivers again, and destruction mid-epoch does not wait for the epoch.
  loader->start_epoch(1);
  EXPECT_TRUE(loader->next(b));
  const auto t0 = Clock::now();
  loader.reset();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
}

TEST(DataLoader, StreamingPastTheBudgetKeepsMemoryFlat) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "measures resident memory: a sanitizer's shadow memory and quarantine change it";
#endif
  TempDir dir("stream");
  // 320 images; a full cache at 192 px would hold 320 * 110 KiB = 35 MiB. The budget is 2 MiB.
  for (int i = 0; i < 320; ++i)
    write_image(dir / (i % 2 ? "a" : "b") / (std::to_string(i) + ".jpg"), pattern_image(256, 200, i));
  const Dataset ds = Dataset::open(dir.str(), options_with());
  LoaderOptions o = plain(192, 4);
  o.shuffle = true;
  o.cache_budget_bytes = size_t{2} << 20;
  DataLoader loader(ds, Split::Train, o);
  const size_t before = resident_bytes();
  ASSERT_GT(before, 0u) << "no /proc/self/status";
  std::vector<size_t> after;
  for (int e = 0; e < 3; ++e) {
    run_epoch(loader, e);
    after.push_back(resident_bytes());
  }
  const LoaderStats st = loader.stats();
  EXPECT_LE(st.cache_bytes, o.cache_budget_bytes);
  EXPECT_EQ(st.decoded, 3 * 320 - 2 * st.cached_images);
  const double mib = 1048576.0;
  // Batches in flight (about 8 of 1.7 MiB) plus the budget; a growing cache would add 35 MiB.
  EXPECT_LT((static_cast<double>(after[2]) - static_cast<double>(before)) / mib, 20.0);
  EXPECT_LT((static_cast<double>(after[2]) - static_cast<double>(after[0])) / mib, 3.0) << "memory grew after epoch 1";
}

TEST(DataLoader, IdxAndCifarPixelsReachTheBatch) {
  TempDir idx("idx_loader");
  std::vector<uint8_t> px(4 * 8 * 8), labels = {0, 1, 0, 1};
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
  write_bytes(idx / "train-images-idx3-ubyte", idx_images(px, 4, 8, 8));
  write_bytes(idx / "train-labels-idx1-ubyte", idx_labels(labels));
  write_bytes(idx / "t10k-images-idx3-ubyte.gz", gzip(idx_images(px, 4, 8, 8)));
  write_bytes(idx / "t10k-labels-idx1-ubyte.gz", gzip(idx_labels(labels)));
  const Dataset ds = Dataset::open(idx.str(), options_with());
  DataLoader loader(ds, Split::Validation, plain(16, 4));  // 8x8 grey up to 16x16
  Batch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.images.shape(), (Shape{4, 3, 16, 16}));
  EXPECT_EQ(loader.stats().cached_images, 0) << "pixels in memory need no cache";
  EXPECT_EQ(loader.stats().decoded, 4);
  DataLoader native(ds, Split::Validation, plain(8, 4));  // at the native size: the pixels themselves
  ASSERT_TRUE(native.next(b));
  const float* f = b.images.data_as<float>();
  // Validation order: by class, then file order: images 0, 2 (class 0), 1, 3 (class 1).
  const int image_of[4] = {0, 2, 1, 3};
  for (int i = 0; i < 4; ++i)
    for (int p = 0; p < 64; ++p)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(f[(i * 64 + p) * 3 + c], px[static_cast<size_t>(image_of[i] * 64 + p)] / 255.0f);
  EXPECT_EQ(native.stats().cache_bytes, 0u);

  TempDir cifar("cifar_loader");
  write_bytes(cifar / "data_batch_1.bin", cifar_batch({1, 0}, 0));
  write_bytes(cifar / "data_batch_2.bin", cifar_batch({0}, 2));
  const Dataset cd = Dataset::open(cifar.str(), options_with());
  EXPECT_EQ(cd.class_names(), (std::vector<std::string>{"0", "1"}));
  DataLoader cl(cd, Split::Train, plain(32, 3));
  ASSERT_TRUE(cl.next(b));
  // First sample: class 0, file order: record 1 of data_batch_1 (index 1).
  const float* g = b.images.data_as<float>();
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(g[(5 * 32 + 7) * 3 + c], cifar_value(c, 5, 7, 0, 1) / 255.0f) << "channel " << c;
}

TEST(DataLoader, FashionMnistStatistics) {
  std::string path;
  try {
    path = builtin_sample_dataset();
  } catch (const Error&) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const Dataset ds = Dataset::open(path, options_with());
  LoaderOptions o;
  o.batch_size = 256;
  o.augment = true;
  DataLoader loader(ds, Split::Train, o);
  EXPECT_EQ(loader.image_size(), 28);
  // The published statistics of Fashion-MNIST's training set: mean 0.2860, standard deviation 0.3530.
  const Normalization n = loader.normalization();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(n.mean[c], 0.2860, 0.0005);
    EXPECT_NEAR(n.stddev[c], 0.3530, 0.0005);
  }
  Batch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.images.shape(), (Shape{256, 3, 28, 28}));
  EXPECT_EQ(loader.batches_per_epoch(), 235);
}

}  // namespace
}  // namespace ampwb
