// Dataset scanning on folders built at test time: a messy image folder with every kind of damage and oddity
// (asserting the exact report), the split layouts, IDX and CIFAR folders, the errors, the split's determinism and
// the check cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cjk_columns.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/dataset_data.h"
#include "data/file_checks.h"
#include "data_test_util.h"

namespace ampwb {
namespace {
using namespace ampwb::testing;

DatasetOptions no_disk_cache() {
  DatasetOptions o;
  o.cache_dir = std::string("-");  // (a string literal trips GCC 12's false -Wrestrict here)
  return o;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;
Pairs skipped_of(const DatasetReport& r) {
  Pairs p;
  for (const auto& s : r.skipped) p.push_back({s.path, s.reason});
  return p;
}

std::string error_of(const std::string& root, const DatasetOptions& o = no_disk_cache()) {
  try {
    Dataset::open(root, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The messy folder: every case of the issue, with known sizes.
//   cats/           5 good images (one nested two levels down, one CMYK, one progressive, one padded after EOI)
//                   and every kind of bad file; a symlink loop, a broken link, a FIFO
//   chiens à poil/  7 good images: 16-bit, palette, grey, alpha PNGs, BMP, TIFF, WebP
//   solo/           one image
//   empty class/    nothing;  only bad/: a zero-byte file;  .git/: hidden;  stray.png at the top
void make_messy_folder(const fs::path& root) {
  const fs::path cats = root / "cats", dogs = root / "chiens à poil";
  write_image(cats / "c1.png", pattern_image(40, 30, 1));
  write_image(cats / "c2.JPG", pattern_image(64, 48, 2));
  write_image(cats / "c3_progressive.jpeg", pattern_image(50, 50, 3), {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  write_bytes(cats / "cmyk.jpg", kCmykJpeg, sizeof kCmykJpeg);
  std::vector<uint8_t> padded = encode(".jpg", pattern_image(32, 24, 4));
  padded.insert(padded.end(), 16, 0x00);
  write_bytes(cats / "padded.jpg", padded);
  write_image(cats / "nested" / "deeper" / "n1.png", pattern_image(20, 25, 5));

  const std::vector<uint8_t> jpg = encode(".jpg", pattern_image(60, 40, 6));
  write_bytes(cats / "truncated.jpg",
              std::vector<uint8_t>(jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() / 2)));
  const std::vector<uint8_t> png = encode(".png", pattern_image(60, 40, 7));
  write_bytes(cats / "truncated.png",
              std::vector<uint8_t>(png.begin(), png.begin() + static_cast<long>(png.size() / 2)));
  write_bytes(cats / "no_iend.png", std::vector<uint8_t>(png.begin(), png.end() - 12));
  write_bytes(cats / "corrupt_crc.png", png_with_bad_crc(png));
  write_bytes(cats / "empty.jpg", std::vector<uint8_t>{});
  write_text(cats / "notes.jpg", "shopping list\nmilk\n");
  write_bytes(cats / "garbage.png", std::vector<uint8_t>{0x00, 0x13, 0x37, 0xfe, 0xed, 0xbe, 0xef});
  write_text(cats / "readme.txt", "cats");
  write_text(cats / "Dancing.GIF", "GIF89a");
  write_image(cats / ".hidden.png", pattern_image(8, 8));
  fs::create_symlink("..", cats / "loop");
  fs::create_symlink("nowhere.png", cats / "broken.png");
  ::mkfifo((cats / "pipe.jpg").c_str(), 0600);

  cv::Mat wide(17, 33, CV_16UC3);
  for (int y = 0; y < 17; ++y)
    for (int x = 0; x < 33; ++x) wide.at<cv::Vec3w>(y, x) = cv::Vec3w(static_cast<uint16_t>(x * 1000), 300, 65535);
  write_image(dogs / "d1_16bit.png", wide);
  write_bytes(dogs / "d2_palette.png", kPalettePng, sizeof kPalettePng);
  write_image(dogs / "d3.bmp", pattern_image(12, 10, 8));
  write_image(dogs / "d4.tiff", pattern_image(14, 9, 9));
  write_image(dogs / "d5.webp", pattern_image(30, 20, 10));
  write_image(dogs / "d6_grey.png", pattern_image(24, 24, 11, CV_8UC1));
  write_image(dogs / "d7_alpha.PNG", pattern_image(26, 28, 12, CV_8UC4));

  write_image(root / "solo" / "only.png", pattern_image(31, 31, 13));
  fs::create_directories(root / "empty class");
  write_bytes(root / "only bad" / "zero.png", std::vector<uint8_t>{});
  write_text(root / ".git" / "HEAD", "ref: refs/heads/main\n");
  write_image(root / "stray.png", pattern_image(8, 8, 14));
}

TEST(DataScan, MessyFolderExactReport) {
  TempDir dir("messy");
  make_messy_folder(dir.path());
  const Dataset ds = Dataset::open(dir.str(), no_disk_cache());
  const DatasetReport& r = ds.report();

  EXPECT_EQ(r.layout, "class-folders");
  EXPECT_EQ(r.validation, "split 0.2 (seed 0)");
  EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"cats", "chiens à poil", "solo"}));
  ASSERT_EQ(r.classes.size(), 3u);
  // cats: 6 good (5 + nested); round(6 * 0.2) = 1 for validation.
  EXPECT_EQ(r.classes[0].images, 6);
  EXPECT_EQ(r.classes[0].train, 5);
  EXPECT_EQ(r.classes[0].validation, 1);
  EXPECT_EQ(r.classes[1].images, 7);
  EXPECT_EQ(r.classes[1].train, 6);
  EXPECT_EQ(r.classes[1].validation, 1);
  EXPECT_EQ(r.classes[2].images, 1);
  EXPECT_EQ(r.classes[2].train, 1);
  EXPECT_EQ(r.classes[2].validation, 0);
  EXPECT_EQ(r.total_images, 14);
  EXPECT_EQ(r.train_images, 12);
  EXPECT_EQ(r.validation_images, 2);
  EXPECT_EQ(ds.train_size(), 12);
  EXPECT_EQ(ds.validation_size(), 2);

  const Pairs expected = {
      {".git", "hidden folder"},
      {"cats/.hidden.png", "hidden file"},
      {"cats/Dancing.GIF", "a GIF, which is not read (convert it to PNG)"},
      {"cats/broken.png", "broken symbolic link"},
      {"cats/corrupt_crc.png", "corrupt PNG (CRC mismatch in chunk 'IDAT')"},
      {"cats/empty.jpg", "empty file (0 bytes)"},
      {"cats/garbage.png", "not an image (unknown format)"},
      {"cats/loop", "symbolic link loop"},
      {"cats/no_iend.png", "truncated PNG (no IEND chunk)"},
      {"cats/notes.jpg", "not an image (the file holds text)"},
      {"cats/pipe.jpg", "not a regular file"},
      {"cats/readme.txt", "not an image file"},
      {"cats/truncated.jpg", "truncated JPEG (no end-of-image marker)"},
      {"cats/truncated.png", "truncated PNG (chunk 'IDAT' cut short)"},
      {"only bad/zero.png", "empty file (0 bytes)"},
      {"stray.png", "not in a class folder"},
  };
  EXPECT_EQ(skipped_of(r), expected);
  EXPECT_EQ(r.empty_classes, (std::vector<std::string>{"empty class", "only bad"}));
  ASSERT_EQ(r.small_classes.size(), 1u);
  EXPECT_EQ(r.small_classes[0].name, "solo");
  EXPECT_EQ(r.small_classes[0].reason, "1 image: none left for validation");

  // Sizes: palette 6x4 is the smallest, c2 64x48 the widest, c3 50x50 the tallest.
  EXPECT_EQ(r.min_width, 6);
  EXPECT_EQ(r.max_width, 64);
  EXPECT_EQ(r.min_height, 4);
  EXPECT_EQ(r.max_height, 50);
  EXPECT_DOUBLE_EQ(r.imbalance, 7.0);
  EXPECT_EQ(r.largest_class, "chiens à poil");
  EXPECT_EQ(r.smallest_class, "solo");
  // The median shorter side of the training images, from the sizes the scan read.
  std::vector<int> shorter;
  const auto& data = *ds.data();
  for (const auto& s : data.train) shorter.push_back(std::min(data.width_of(s.item), data.height_of(s.item)));
  std::sort(shorter.begin(), shorter.end());
  EXPECT_EQ(ds.native_image_size(), shorter[shorter.size() / 2]);
  for (const auto& s : data.train)
    if (data.paths[static_cast<size_t>(s.item)].ends_with("cmyk.jpg")) {
      EXPECT_EQ(data.width_of(s.item), 16);
    }

  EXPECT_TRUE(r.trainable());
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["layout"], "class-folders");
  EXPECT_EQ(j["total_images"], 14);
  EXPECT_EQ(j["classes"][1]["name"], "chiens à poil");
  EXPECT_EQ(j["classes"][1]["images"], 7);
  EXPECT_EQ(j["skipped"].size(), expected.size());
  EXPECT_EQ(j["skipped"][4]["path"], "cats/corrupt_crc.png");
  EXPECT_EQ(j["empty_classes"][1], "only bad");
  const std::string text = r.to_text();
  EXPECT_NE(text.find("cats/truncated.jpg: truncated JPEG (no end-of-image marker)"), std::string::npos) << text;
  EXPECT_NE(text.find("empty classes (not used): 'empty class', 'only bad'"), std::string::npos) << text;
  EXPECT_NE(text.find("too small for the split: 'solo': 1 image: none left for validation"), std::string::npos) << text;
}

// Class names in Chinese take two columns a character: the counts after them stay in line with the header's.
TEST(DataScan, TheReportsClassTableLinesUpWideNames) {
  DatasetReport r;
  r.layout = "class-folders";
  r.classes = {{"猫", 12, 10, 2}, {"狗和狼", 8, 6, 2}, {"horses", 9, 7, 2}};
  const std::string text = r.to_text();
  std::istringstream lines(text.substr(text.find("\n  class ") + 1));
  std::vector<size_t> ends;  // the display column where each line of the table ends
  for (std::string line; std::getline(lines, line) && !line.empty();) ends.push_back(testing::cjk_columns(line));
  ASSERT_EQ(ends.size(), 4u) << text;
  for (size_t end : ends) EXPECT_EQ(end, ends[0]) << text;
}

// A decompression bomb: a PNG whose header claims 40000 x 40000 pixels over a few bytes of data.
std::vector<uint8_t> png_bomb() {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto chunk = [&png](const char* type, const std::vector<uint8_t>& data) {
    put_be32(png, static_cast<uint32_t>(data.size()));
    std::vector<uint8_t> typed(type, type + 4);
    typed.insert(typed.end(), data.begin(), data.end());
    png.insert(png.end(), typed.begin(), typed.end());
    put_be32(png, static_cast<uint32_t>(crc32(0, typed.data(), static_cast<uInt>(typed.size()))));
  };
  std::vector<uint8_t> header;
  put_be32(header, 40000);
  put_be32(header, 40000);
  header.insert(header.end(), {8, 2, 0, 0, 0});  // 8-bit RGB
  chunk("IHDR", header);
  std::vector<uint8_t> row(1 + 3 * 40000, 0), packed(compressBound(static_cast<uLong>(row.size())));
  uLongf packed_size = static_cast<uLongf>(packed.size());
  compress(packed.data(), &packed_size, row.data(), static_cast<uLong>(row.size()));
  packed.resize(packed_size);
  chunk("IDAT", packed);
  chunk("IEND", {});
  return png;
}

TEST(DataScan, DecompressionBombIsSkippedWithItsSizeInPixels) {
  TempDir dir("bomb");
  write_image(dir / "a" / "1.png", pattern_image(8, 8, 1));
  write_image(dir / "a" / "2.png", pattern_image(8, 8, 2));
  write_image(dir / "b" / "1.png", pattern_image(8, 8, 3));
  write_bytes(dir / "b" / "bomb.png", png_bomb());
  const Dataset ds = Dataset::open(dir.str(), no_disk_cache());
  const Pairs skipped = skipped_of(ds.report());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].first, "b/bomb.png");
  EXPECT_NE(skipped[0].second.find("40000 x 40000 = 1600000000 pixels, more than the 1,073,741,824 (2^30)"),
            std::string::npos)
      << skipped[0].second;
  EXPECT_EQ(skipped[0].second.find("CV_IO"), std::string::npos) << "OpenCV's source words are not for the user";
}

TEST(DataScan, UnreadableFileIsSkipped) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  TempDir dir("unreadable");
  write_image(dir / "a" / "1.png", pattern_image(8, 8, 1));
  write_image(dir / "a" / "2.png", pattern_image(8, 8, 2));
  write_image(dir / "b" / "1.png", pattern_image(8, 8, 3));
  fs::permissions(dir / "a" / "2.png", fs::perms::none);
  const Dataset ds = Dataset::open(dir.str(), no_disk_cache());
  EXPECT_EQ(skipped_of(ds.report()), (Pairs{{"a/2.png", "unreadable (Permission denied)"}}));
}

TEST(DataScan, SplitFoldersAreTheSplit) {
  TempDir dir("split");
  for (int i = 0; i < 4; ++i)
    write_image(dir / "train" / "ants" / (std::to_string(i) + ".png"), pattern_image(10, 10, i));
  for (int i = 0; i < 3; ++i)
    write_image(dir / "train" / "bees" / (std::to_string(i) + ".png"), pattern_image(10, 10, i));
  write_image(dir / "valid" / "ants" / "v.png", pattern_image(10, 10, 9));
  write_image(dir / "valid" / "wasps" / "w.png", pattern_image(10, 10, 9));  // no such training class
  write_image(dir / "test" / "ants" / "t.png", pattern_image(10, 10, 9));
  write_text(dir / "LICENSE", "free");
  fs::create_symlink("../train/bees", dir / "valid" / "bees");  // the same images must never validate too
  const Dataset ds = Dataset::open(dir.str(), no_disk_cache());
  const DatasetReport& r = ds.report();
  EXPECT_EQ(r.layout, "split-folders");
  EXPECT_EQ(r.validation, "valid/");
  EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"ants", "bees"}));
  EXPECT_EQ(ds.train_size(), 7);
  EXPECT_EQ(ds.validation_size(), 1);
  EXPECT_EQ(skipped_of(r), (Pairs{{"LICENSE", "outside train/ and valid/"},
                                  {"test", "outside train/ and valid/"},
                                  {"valid/bees", "folder already scanned through another path"},
                                  {"valid/wasps", "class not in train/"}}));
  ASSERT_EQ(r.small_classes.size(), 1u);
  EXPECT_EQ(r.small_classes[0].name, "bees");
  EXPECT_EQ(r.small_classes[0].reason, "no validation images in valid/");
  EXPECT_NE(std::find(r.notes.begin(), r.notes.end(), "test/ not used (valid/ is the validation split)"),
            r.notes.end());
}

// A class folder that links to another, or an image that links to another's file, would give the same images two
// labels (and put one class's validation images in the other's training): each is one class, one image.
TEST(DataScan, ALinkedClassFolderOrImageIsNotASecondOne) {
  TempDir dir("linked");
  for (const char* c : {"ants", "bees"})
    for (int i = 0; i < 3; ++i) write_image(dir.path() / c / (std::to_string(i) + ".png"), pattern_image(10, 10, i));
  fs::create_symlink("ants", dir.path() / "ants_too");
  fs::create_symlink("../ants/1.png", dir.path() / "bees" / "from_ants.png");
  const Dataset ds = Dataset::open(dir.str(), no_disk_cache());
  EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"ants", "bees"}));
  EXPECT_EQ(ds.report().total_images, 6);
  EXPECT_EQ(skipped_of(ds.report()),
            (Pairs{{"ants_too", "the same folder as class ants (a link): one class, not two"},
                   {"bees/from_ants.png", "the same file as ants/1.png (a link): one image, not two"}}));
}

// Datasets made on other systems spell their split folders "Train" and "VAL": the same layout, not two classes.
TEST(DataScan, SplitFoldersAreFoundWhateverTheirCase) {
  TempDir dir("splitcase");
  for (const char* c : {"cats", "dogs"}) {
    for (int i = 0; i < 3; ++i) write_image(dir / "Train" / c / (std::to_string(i) + ".png"), pattern_image(10, 10, i));
    write_image(dir / "VAL" / c / "v.png", pattern_image(10, 10, 7));
  }
  write_text(dir / "README.txt", "made elsewhere");
  const Dataset ds = Dataset::open(dir.str(), no_disk_cache());
  const DatasetReport& r = ds.report();
  EXPECT_EQ(r.layout, "split-folders");
  EXPECT_EQ(r.validation, "VAL/");
  EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"cats", "dogs"}));
  EXPECT_EQ(ds.train_size(), 6);
  EXPECT_EQ(ds.validation_size(), 2);
  EXPECT_EQ(skipped_of(r), (Pairs{{"README.txt", "outside Train/ and VAL/"}}));
}

TEST(DataScan, LoneTrainFolderIsSplitByFraction) {
  TempDir dir("lonetrain");
  for (int i = 0; i < 5; ++i) write_image(dir / "train" / "x" / (std::to_string(i) + ".png"), pattern_image(9, 9, i));
  for (int i = 0; i < 5; ++i) write_image(dir / "train" / "y" / (std::to_string(i) + ".png"), pattern_image(9, 9, i));
  write_image(dir / "test" / "unlabelled.png", pattern_image(9, 9));  // test/ without class folders
  const Dataset ds = Dataset::open(dir.str(), no_disk_cache());
  EXPECT_EQ(ds.report().layout, "class-folders");
  EXPECT_EQ(ds.train_size(), 8);
  EXPECT_EQ(ds.validation_size(), 2);
}

TEST(DataScan, ErrorsBeforeTraining) {
  TempDir dir("errors");
  // A folder that is not there points to the one that is, the built-in sample, where it is installed.
  std::string sample;
  try {
    sample = " (the built-in sample is " + builtin_sample_dataset() + ")";
  } catch (const Error&) {  // not installed: the message points nowhere
  }
  EXPECT_NE(error_of((dir / "nope").string())
                .find("dataset folder '" + (dir / "nope").string() + "' does not exist" + sample),
            std::string::npos);
  write_text(dir / "file.txt", "x");
  EXPECT_NE(error_of((dir / "file.txt").string()).find("is not a folder"), std::string::npos);

  fs::create_directories(dir / "flat");
  write_image(dir / "flat" / "a.png", pattern_image(8, 8));
  EXPECT_NE(error_of((dir / "flat").string()).find("holds no class folders"), std::string::npos)
      << error_of((dir / "flat").string());

  write_bytes(dir / "allbad" / "a" / "x.png", std::vector<uint8_t>{});
  write_text(dir / "allbad" / "b" / "y.jpg", "text");
  const std::string all_bad = error_of((dir / "allbad").string());
  EXPECT_NE(
      all_bad.find("none of the 2 classes in '" + (dir / "allbad").string() + "' has a usable image (2 files skipped"),
      std::string::npos)
      << all_bad;

  write_image(dir / "one" / "only" / "1.png", pattern_image(8, 8));
  write_image(dir / "one" / "only" / "2.png", pattern_image(8, 8));
  fs::create_directories(dir / "one" / "empty");
  EXPECT_NE(error_of((dir / "one").string()).find("has only one usable class ('only'); at least two are needed"),
            std::string::npos);

  // inspect() reports instead of throwing.
  const Dataset d = Dataset::inspect((dir / "one").string(), no_disk_cache());
  EXPECT_FALSE(d.report().trainable());
  EXPECT_EQ(d.report().empty_classes, std::vector<std::string>{"empty"});
}

TEST(DataScan, SplitIsStratifiedAndTheSameEveryTime) {
  TempDir dir("splitseed");
  for (const char* c : {"a", "b", "c"})
    for (int i = 0; i < 20; ++i) write_image(dir / c / (std::to_string(i) + ".png"), pattern_image(8, 8, i));
  auto validation_paths = [&](uint64_t seed, double fraction) {
    DatasetOptions o = no_disk_cache();
    o.seed = seed;
    o.validation_fraction = fraction;
    const Dataset ds = Dataset::open(dir.str(), o);
    std::vector<std::string> v;
    for (const auto& s : ds.data()->validation) v.push_back(ds.data()->paths[static_cast<size_t>(s.item)]);
    for (const auto& c : ds.report().classes) EXPECT_EQ(c.validation, static_cast<int64_t>(20 * fraction + 0.5));
    return v;
  };
  const auto a = validation_paths(1, 0.2), b = validation_paths(1, 0.2), c = validation_paths(2, 0.2);
  EXPECT_EQ(a.size(), 12u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(validation_paths(1, 0.5).size(), 30u);
  // Adding an image to class c changes nothing in classes a and b.
  write_image(dir / "c" / "extra.png", pattern_image(8, 8, 99));
  const auto d = validation_paths(1, 0.2);
  EXPECT_EQ(std::vector<std::string>(a.begin(), a.begin() + 8), std::vector<std::string>(d.begin(), d.begin() + 8));
}

TEST(DataScan, MaxTrainImagesTakesEveryClassInTurn) {
  TempDir dir("limit");
  for (const char* c : {"a", "b", "c"})
    for (int i = 0; i < 6; ++i) write_image(dir / c / (std::to_string(i) + ".png"), pattern_image(8, 8, i));
  DatasetOptions o = no_disk_cache();
  o.max_train_images = 7;
  const Dataset ds = Dataset::open(dir.str(), o);
  EXPECT_EQ(ds.train_size(), 7);
  EXPECT_EQ(ds.report().train_images_before_limit, 15);
  std::vector<int64_t> per_class(3);
  for (const auto& s : ds.data()->train) ++per_class[static_cast<size_t>(s.label)];
  EXPECT_EQ(per_class, (std::vector<int64_t>{3, 2, 2}));
}

TEST(DataScan, ChecksAreRememberedInTheCacheFolder) {
  TempDir data("cached_data"), cache("cache_dir");
  for (const char* c : {"a", "b"})
    for (int i = 0; i < 5; ++i) write_image(data / c / (std::to_string(i) + ".png"), pattern_image(8, 8, i));
  write_bytes(data / "a" / "bad.png", std::vector<uint8_t>{});
  DatasetOptions o;
  o.cache_dir = cache.str();
  const Dataset first = Dataset::open(data.str(), o);
  clear_file_check_memory();  // as a new process would start

  std::vector<FileToCheck> files;
  for (const auto& e : fs::recursive_directory_iterator(data.path())) {
    if (!e.is_regular_file()) continue;
    struct stat st {};
    ::stat(e.path().c_str(), &st);
    files.push_back({e.path().string(), fs::relative(e.path(), data.path()).string(), st.st_size,
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  FileCheckStats stats;
  const auto checks = check_files(data.str(), files, cache.str(), 2, &stats);
  EXPECT_EQ(stats.checked, 0);
  EXPECT_EQ(stats.reused, 11);
  // A changed file is checked again (and its new verdict is right).
  write_bytes(data / "a" / "0.png", std::vector<uint8_t>{1, 2, 3});
  const Dataset second = Dataset::open(data.str(), o);
  EXPECT_EQ(second.train_size() + second.validation_size(), 9);
  EXPECT_NE(first.fingerprint(), second.fingerprint());
  EXPECT_EQ(Dataset::open(data.str(), o).fingerprint(), second.fingerprint());
}

TEST(DataScan, IdxFolderPlainAndGzip) {
  TempDir dir("my-fashion-idx");  // "fashion" in the path: Fashion-MNIST's class names
  const uint32_t n_train = 30, n_test = 10, h = 6, w = 5;
  std::vector<uint8_t> train_px(n_train * h * w), test_px(n_test * h * w), train_labels, test_labels;
  for (size_t i = 0; i < train_px.size(); ++i) train_px[i] = static_cast<uint8_t>(i % 251);
  for (size_t i = 0; i < test_px.size(); ++i) test_px[i] = static_cast<uint8_t>(255 - i % 251);
  for (uint32_t i = 0; i < n_train; ++i) train_labels.push_back(static_cast<uint8_t>(i % 3));
  for (uint32_t i = 0; i < n_test; ++i) test_labels.push_back(static_cast<uint8_t>(i % 3));
  write_bytes(dir / "train-images-idx3-ubyte.gz", gzip(idx_images(train_px, n_train, h, w)));
  write_bytes(dir / "train-labels-idx1-ubyte", idx_labels(train_labels));
  write_bytes(dir / "t10k-images-idx3-ubyte", idx_images(test_px, n_test, h, w));
  write_bytes(dir / "t10k-labels-idx1-ubyte.gz", gzip(idx_labels(test_labels), 9));
  const Dataset ds = Dataset::open(dir.str(), no_disk_cache());
  const DatasetReport& r = ds.report();
  EXPECT_EQ(r.layout, "idx");
  EXPECT_EQ(ds.train_size(), 30);
  EXPECT_EQ(ds.validation_size(), 10);
  EXPECT_EQ(r.validation, "the t10k-images-idx3-ubyte file");
  // Labels 0-2 used of Fashion-MNIST's 10: the other 7 are empty classes.
  EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"T-shirt/top", "Trouser", "Pullover"}));
  EXPECT_EQ(r.empty_classes.size(), 7u);
  EXPECT_EQ(r.min_width, 5);
  EXPECT_EQ(r.max_height, 6);
  EXPECT_EQ(ds.native_image_size(), 5);
  EXPECT_EQ(ds.data()->pixels.size(), (n_train + n_test) * h * w);
  EXPECT_EQ(ds.data()->pixels[n_train * h * w], test_px[0]);

  // Damaged test files: the training files still train, the problem is reported.
  write_bytes(dir / "t10k-images-idx3-ubyte", std::vector<uint8_t>{0, 0, 8, 3, 0});
  const Dataset damaged = Dataset::open(dir.str(), no_disk_cache());
  ASSERT_EQ(damaged.report().skipped.size(), 1u);
  EXPECT_EQ(damaged.report().skipped[0].path, "t10k-images-idx3-ubyte");
  EXPECT_NE(damaged.report().skipped[0].reason.find("is not an IDX file"), std::string::npos);
  EXPECT_EQ(damaged.report().validation, "split 0.2 (seed 0)");
  EXPECT_EQ(damaged.validation_size(), 6);
}

TEST(DataScan, CifarFolder) {
  TempDir dir("cifar");
  const fs::path batches = dir / "cifar-10-batches-bin";
  write_bytes(batches / "data_batch_1.bin", cifar_batch({0, 1, 2, 0, 1}, 0));
  write_bytes(batches / "data_batch_2.bin", cifar_batch({2, 0, 1, 2}, 5));
  write_bytes(batches / "test_batch.bin", cifar_batch({1, 2, 0}, 9));
  write_text(batches / "batches.meta.txt", "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n");
  const Dataset ds = Dataset::open(dir.str(), no_disk_cache());
  EXPECT_EQ(ds.report().layout, "cifar10-binary");
  EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"airplane", "automobile", "bird"}));
  EXPECT_EQ(ds.train_size(), 9);
  EXPECT_EQ(ds.validation_size(), 3);
  EXPECT_EQ(ds.report().validation, "the test_batch.bin file");
  EXPECT_EQ(ds.native_image_size(), 32);
}

TEST(DataScan, BuiltinSampleIsFashionMnist) {
  std::string path;
  try {
    path = builtin_sample_dataset();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dataset-fashion-mnist"), std::string::npos) << e.what();
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const Dataset ds = Dataset::open(path, no_disk_cache());
  EXPECT_EQ(ds.report().layout, "idx");
  EXPECT_EQ(ds.class_names(), fashion_mnist_class_names());
  EXPECT_EQ(ds.train_size(), 60000);
  EXPECT_EQ(ds.validation_size(), 10000);
  EXPECT_EQ(ds.native_image_size(), 28);
  EXPECT_EQ(ds.data()->train.size(), 60000u);
  // The first training image of Fashion-MNIST is an ankle boot (label 9).
  const auto& first = *std::min_element(ds.data()->train.begin(), ds.data()->train.end(),
                                        [](const auto& a, const auto& b) { return a.item < b.item; });
  EXPECT_EQ(first.label, 9);
  for (const auto& c : ds.report().classes) EXPECT_EQ(c.images, 7000);
}

}  // namespace
}  // namespace ampwb
