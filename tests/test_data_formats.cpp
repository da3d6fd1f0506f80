// Image files, gzip and the IDX/CIFAR readers, on real encoded bytes: every accepted format decodes to the expected
// 8-bit BGR, every kind of damage is refused with its reason, and the gzip reader agrees with zlib's writer.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "data/binary_formats.h"
#include "data/gzip.h"
#include "data/image_file.h"
#include "data_test_util.h"

namespace ampwb {
namespace {
using namespace ampwb::testing;

constexpr uint8_t kStartOfScan[] = {0xff, 0xda};
ImageCheck check(const std::vector<uint8_t>& b) { return check_image(b.data(), b.size()); }
cv::Mat decode(const std::vector<uint8_t>& b) { return decode_bgr8(b.data(), b.size()); }

// --- gzip ------------------------------------------------------------------------------------------------------------

std::vector<uint8_t> sample_data(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)  // runs, repeats and noise: exercises literals, short and long matches
    v[i] = i % 1000 < 300 ? static_cast<uint8_t>(rng.below(256)) : i % 1000 < 700 ? static_cast<uint8_t>(i % 7) : 0;
  return v;
}

TEST(DataGzip, AgreesWithZlibForEveryBlockType) {
  const std::vector<uint8_t> data = sample_data(300000, 1);
  struct Case {
    int level, strategy;
    const char* what;
  } cases[] = {{0, Z_DEFAULT_STRATEGY, "stored blocks"},   {1, Z_DEFAULT_STRATEGY, "fast"},
               {9, Z_DEFAULT_STRATEGY, "dynamic Huffman"}, {6, Z_FIXED, "fixed Huffman"},
               {6, Z_HUFFMAN_ONLY, "literals only"},       {6, Z_RLE, "run lengths"}};
  for (const Case& c : cases) {
    const std::vector<uint8_t> gz = gzip(data, c.level, c.strategy);
    EXPECT_EQ(gunzip(gz.data(), gz.size(), "test.gz"), data) << c.what;
  }
  const std::vector<uint8_t> empty;
  const std::vector<uint8_t> gz_empty = gzip(empty);
  EXPECT_TRUE(gunzip(gz_empty.data(), gz_empty.size(), "empty.gz").empty());
}

TEST(DataGzip, ConcatenatedMembersAndCrc) {
  const std::vector<uint8_t> a = sample_data(5000, 2), b = sample_data(7000, 3);
  std::vector<uint8_t> both = gzip(a);
  const std::vector<uint8_t> gb = gzip(b);
  both.insert(both.end(), gb.begin(), gb.end());
  std::vector<uint8_t> expected = a;
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(gunzip(both.data(), both.size(), "two.gz"), expected);

  const uint8_t check[] = "123456789";  // the CRC-32 check value of the standard
  EXPECT_EQ(crc32(check, 9), 0xcbf43926u);
}

TEST(DataGzip, TruncatedOrCorruptIsAnErrorNamingTheFileAndTheProblem) {
  const std::vector<uint8_t> gz = gzip(sample_data(50000, 4), 9);
  auto error_of = [](const std::vector<uint8_t>& bytes, const std::string& what, size_t limit = kGunzipMaxBytes) {
    try {
      gunzip(bytes.data(), bytes.size(), what, limit);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  auto expect_error = [&](const std::vector<uint8_t>& bytes, const std::string& what, const std::string& expected) {
    const std::string message = error_of(bytes, what);
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  expect_error({gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)}, "/data/cut.gz",
               "'/data/cut.gz' is truncated");
  expect_error({gz.begin(), gz.end() - 3}, "short-trailer.gz", "'short-trailer.gz' is truncated");
  expect_error({gz.begin(), gz.begin() + 6}, "short-header.gz", "'short-header.gz' is truncated");
  expect_error({0x1f, 0x8b}, "magic-only.gz", "'magic-only.gz' is truncated");
  expect_error({0x50, 0x4b, 0x03, 0x04}, "a.zip", "'a.zip' is not a gzip file");
  std::vector<uint8_t> method = gz;
  method[2] = 7;  // compression method 7: only 8 (deflate) exists
  expect_error(method, "method.gz", "'method.gz' is corrupt (bad gzip header");
  std::vector<uint8_t> bad_crc = gz;
  bad_crc[bad_crc.size() - 6] ^= 1;
  expect_error(bad_crc, "crc.gz", "'crc.gz' is corrupt (gzip checksum mismatch)");
  std::vector<uint8_t> bad_length = gz;
  bad_length[bad_length.size() - 1] ^= 1;
  expect_error(bad_length, "length.gz", "'length.gz' is corrupt (gzip length mismatch)");
  std::vector<uint8_t> flipped = gz;
  flipped[gz.size() / 3] ^= 0xff;
  expect_error(flipped, "flipped.gz", "'flipped.gz' is corrupt");
  std::vector<uint8_t> garbage_after = gz;
  garbage_after.insert(garbage_after.end(), {0, 0, 'x', 'y', 'z'});
  expect_error(garbage_after, "tail.gz", "'tail.gz' is corrupt (bad gzip header");
}

TEST(DataGzip, OutputPastTheLimitIsRefusedAsTooLarge) {
  // A small decompression bomb: 4 MiB of zeros compress to about 4 KiB.
  const std::vector<uint8_t> zeros(size_t{4} << 20, 0);
  const std::vector<uint8_t> bomb = gzip(zeros, 9);
  ASSERT_LT(bomb.size(), 8192u);
  EXPECT_EQ(gunzip(bomb.data(), bomb.size(), "bomb.gz", zeros.size()).size(), zeros.size()) << "exactly the limit";
  try {
    gunzip(bomb.data(), bomb.size(), "bomb.gz", zeros.size() - 1);
    FAIL() << "output past the limit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bomb.gz' is too large"), std::string::npos) << e.what();
  }
  // Two members, the limit passed only by their sum.
  std::vector<uint8_t> two = gzip(std::vector<uint8_t>(1000, 1));
  const std::vector<uint8_t> second = gzip(std::vector<uint8_t>(1000, 2));
  two.insert(two.end(), second.begin(), second.end());
  EXPECT_EQ(gunzip(two.data(), two.size(), "two.gz", 2000).size(), 2000u);
  EXPECT_THROW(gunzip(two.data(), two.size(), "two.gz", 1999), Error);
}

// --- image files -----------------------------------------------------------------------------------------------------

TEST(DataGzip, TrailerCannotReserveMoreThanDeflateCanHold) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: an address-space limit cannot apply";
#else
  // Found by scripts/fuzz.sh (fuzz_idx) as an out-of-memory: 37 bytes whose trailer claims 4 GiB of output,
  // which the reader used to reserve up front. Under a 1 GiB address-space limit it must fail as corrupt data.
  const std::vector<uint8_t> input = {0x1f, 0x8b, 0x2f, 0x00, 0x00, 0x1f, 0x8b, 0x04, 0x6b, 0x02, 0x00, 0xff, 0x60,
                                      0x60, 0x66, 0x60, 0x60, 0x60, 0x82, 0x61, 0x46, 0x26, 0x66, 0x16, 0x56, 0x36,
                                      0x76, 0x0e, 0x00, 0x65, 0x34, 0x8b, 0x04, 0x6b, 0x02, 0x00, 0xff};
  const pid_t child = ::fork();
  if (child == 0) {
    rlimit limit{};
    ::getrlimit(RLIMIT_AS, &limit);
    limit.rlim_cur = rlim_t{1} << 30;
    ::setrlimit(RLIMIT_AS, &limit);
    try {
      gunzip(input.data(), input.size(), "claims 4 GiB");
      ::_exit(2);
    } catch (const Error&) {
      ::_exit(0);  // refused as corrupt: the answer wanted
    } catch (...) {
      ::_exit(1);  // std::bad_alloc: it tried to reserve what the trailer claims
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit status " << status;
#endif
}

TEST(DataGzip, EveryInputTheFuzzerCrashedOnIsRefusedAsCorrupt) {
  // fuzz/corpus/gzip/regress-*: saved by scripts/fuzz.sh from crashes, kept in the seed corpus as well.
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(AMPWB_FUZZ_CORPUS) / "gzip")) {
    if (!entry.path().filename().string().starts_with("regress-")) continue;
    const std::vector<uint8_t> bytes = read_bytes(entry.path());
    EXPECT_THROW(gunzip(bytes.data(), bytes.size(), entry.path().string()), Error) << entry.path();
    ++seen;
  }
  EXPECT_GE(seen, 1);
}

TEST(DataImageFile, AcceptedFormatsDecodeToTheSameBgr) {
  const cv::Mat img = pattern_image(21, 13, 3);
  // Lossless formats round-trip exactly.
  for (const char* ext : {".png", ".bmp", ".tiff", ".ppm", ".webp"}) {
    const std::vector<int> params =
        std::string(ext) == ".webp" ? std::vector<int>{cv::IMWRITE_WEBP_QUALITY, 101} : std::vector<int>{};
    const std::vector<uint8_t> bytes = encode(ext, img, params);
    const ImageCheck c = check(bytes);
    ASSERT_TRUE(c.ok) << ext << ": " << c.reason;
    EXPECT_EQ(c.width, 21) << ext;
    EXPECT_EQ(c.height, 13) << ext;
    const cv::Mat d = decode(bytes);
    ASSERT_EQ(d.type(), CV_8UC3) << ext;
    EXPECT_EQ(cv::norm(d, img, cv::NORM_INF), 0) << ext;
  }
  // JPEG, baseline and progressive, of a smooth image: close, with the size read from the frame header.
  cv::Mat smooth(13, 21, CV_8UC3);
  smooth.forEach<cv::Vec3b>([](cv::Vec3b& p, const int* yx) {
    p = cv::Vec3b(static_cast<uint8_t>(40 + yx[1] * 4), static_cast<uint8_t>(60 + yx[0] * 5), 120);
  });
  for (bool progressive : {false, true}) {
    const std::vector<uint8_t> bytes =
        encode(".jpg", smooth, {cv::IMWRITE_JPEG_QUALITY, 100, cv::IMWRITE_JPEG_PROGRESSIVE, progressive ? 1 : 0});
    const ImageCheck c = check(bytes);
    ASSERT_TRUE(c.ok) << c.reason;
    EXPECT_EQ(c.format, ImageFormat::Jpeg);
    EXPECT_EQ(c.width, 21);
    EXPECT_EQ(c.height, 13);
    EXPECT_LE(cv::norm(decode(bytes), smooth, cv::NORM_INF), 6.0) << "progressive " << progressive;  // 4:2:0 chroma
  }
}

TEST(DataImageFile, GrayAlphaSixteenBitPaletteAndCmykBecomeThreeChannels) {
  // Grayscale: replicated.
  const cv::Mat gray = pattern_image(9, 7, 1, CV_8UC1);
  cv::Mat d = decode(encode(".png", gray));
  ASSERT_EQ(d.type(), CV_8UC3);
  cv::Mat gray3;
  cv::cvtColor(gray, gray3, cv::COLOR_GRAY2BGR);
  EXPECT_EQ(cv::norm(d, gray3, cv::NORM_INF), 0);

  // Alpha: dropped (the colour under a transparent pixel stays), as PIL's convert('RGB').
  cv::Mat bgra = pattern_image(9, 7, 2, CV_8UC4);
  bgra.forEach<cv::Vec4b>([](cv::Vec4b& p, const int*) { p[3] = 0; });
  d = decode(encode(".png", bgra));
  cv::Mat bgr;
  cv::cvtColor(bgra, bgr, cv::COLOR_BGRA2BGR);
  EXPECT_EQ(cv::norm(d, bgr, cv::NORM_INF), 0);

  // 16-bit: the high byte.
  cv::Mat wide(3, 4, CV_16UC3, cv::Scalar(0x1234, 0x80ff, 0xffff));
  const std::vector<uint8_t> png16 = encode(".png", wide);
  ASSERT_EQ(png16[24], 16) << "not a 16-bit PNG";  // IHDR bit depth
  ASSERT_TRUE(check(png16).ok);
  d = decode(png16);
  ASSERT_EQ(d.type(), CV_8UC3);
  EXPECT_EQ(d.at<cv::Vec3b>(2, 3), cv::Vec3b(0x12, 0x80, 0xff));

  // Palette: expanded through the palette (red, green, blue pairs; white below).
  const std::vector<uint8_t> pal(kPalettePng, kPalettePng + sizeof kPalettePng);
  ImageCheck c = check(pal);
  ASSERT_TRUE(c.ok) << c.reason;
  EXPECT_EQ(c.width, 6);
  EXPECT_EQ(c.height, 4);
  d = decode(pal);
  EXPECT_EQ(d.at<cv::Vec3b>(0, 0), cv::Vec3b(0, 0, 255));
  EXPECT_EQ(d.at<cv::Vec3b>(1, 2), cv::Vec3b(0, 255, 0));
  EXPECT_EQ(d.at<cv::Vec3b>(0, 5), cv::Vec3b(255, 0, 0));
  EXPECT_EQ(d.at<cv::Vec3b>(3, 1), cv::Vec3b(255, 255, 255));

  // CMYK JPEG: converted (Adobe's inverted CMYK): red on the left, blue on the right.
  const std::vector<uint8_t> cmyk(kCmykJpeg, kCmykJpeg + sizeof kCmykJpeg);
  c = check(cmyk);
  ASSERT_TRUE(c.ok) << c.reason;
  EXPECT_EQ(c.width, 16);
  d = decode(cmyk);
  ASSERT_EQ(d.type(), CV_8UC3);
  const cv::Vec3b left = d.at<cv::Vec3b>(8, 2), right = d.at<cv::Vec3b>(8, 13);
  EXPECT_GT(left[2], 200);
  EXPECT_LT(left[0], 40);
  EXPECT_GT(right[0], 200);
  EXPECT_LT(right[2], 40);
}

TEST(DataImageFile, DamageIsRefusedWithItsReason) {
  const cv::Mat img = pattern_image(40, 30, 5);
  const std::vector<uint8_t> jpg = encode(".jpg", img, {cv::IMWRITE_JPEG_QUALITY, 90});
  const std::vector<uint8_t> png = encode(".png", img);
  auto cut = [](const std::vector<uint8_t>& v, size_t n) {
    return std::vector<uint8_t>(v.begin(), v.begin() + static_cast<long>(n));
  };

  // OpenCV decodes a half JPEG without complaint: the check must not.
  ASSERT_FALSE(decode(cut(jpg, jpg.size() / 2)).empty()) << "OpenCV changed: truncated JPEGs no longer decode";
  EXPECT_EQ(check(cut(jpg, jpg.size() / 2)).reason, "truncated JPEG (no end-of-image marker)");
  EXPECT_EQ(check(cut(jpg, jpg.size() - 2)).reason, "truncated JPEG (no end-of-image marker)");
  EXPECT_EQ(check(cut(jpg, 40)).reason, "truncated JPEG (no end-of-image marker)");
  const std::vector<uint8_t> prog = encode(".jpg", img, {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  EXPECT_EQ(check(cut(prog, prog.size() * 2 / 3)).reason, "truncated JPEG (no end-of-image marker)");
  // Damaged entropy-coded data: OpenCV decodes it, saying so only on stderr and naming no file; the check names the
  // damage. All one bits (FF 00 stuffed) are no code of the standard tables.
  const auto scan = std::search(jpg.begin(), jpg.end(), kStartOfScan, kStartOfScan + 2) - jpg.begin();
  std::vector<uint8_t> ones = jpg;
  for (long k = 0; k < 40; k += 2) ones[scan + 40 + k] = 0xff, ones[scan + 41 + k] = 0x00;
  ASSERT_FALSE(decode(ones).empty()) << "OpenCV changed: damaged JPEG data no longer decodes";
  EXPECT_TRUE(check_image_structure(ones.data(), ones.size()).ok);
  EXPECT_EQ(check(ones).reason, "corrupt JPEG data (bad Huffman code)");
  // A few bytes left before the end-of-image marker, as many whole photographs have: libjpeg warns, PIL and OpenCV
  // decode them, and so they pass.
  std::vector<uint8_t> trailing = jpg;
  trailing.insert(trailing.end() - 2, {0x00, 0x12, 0x34});
  EXPECT_TRUE(check(trailing).ok) << check(trailing).reason;
  // Bytes between segments are not the image's data: libjpeg warns of them, and the pixels are whole.
  std::vector<uint8_t> spaced = jpg;
  spaced.insert(spaced.begin() + scan, {0x00, 0x00, 0x00});
  EXPECT_TRUE(check(spaced).ok) << check(spaced).reason;
  // Padding or appended bytes after EOI are fine.
  std::vector<uint8_t> padded = jpg;
  padded.insert(padded.end(), {0x00, 0x00, 0xff, 0xff, 0x00});
  EXPECT_TRUE(check(padded).ok);

  EXPECT_EQ(check(cut(png, png.size() - 12)).reason, "truncated PNG (no IEND chunk)");
  EXPECT_EQ(check(cut(png, png.size() / 2)).reason, "truncated PNG (chunk 'IDAT' cut short)");
  EXPECT_EQ(check(png_with_bad_crc(png)).reason, "corrupt PNG (CRC mismatch in chunk 'IDAT')");

  EXPECT_EQ(check({}).reason, "empty file (0 bytes)");
  const std::string text = "This is not a picture.\nJust text.\n";
  EXPECT_EQ(check(std::vector<uint8_t>(text.begin(), text.end())).reason, "not an image (the file holds text)");
  EXPECT_EQ(check({0x00, 0x01, 0x02, 0xfe, 0x80, 0x90}).reason, "not an image (unknown format)");
  EXPECT_EQ(check({'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0}).reason, "a GIF, which is not read (convert it to PNG)");
  const std::vector<uint8_t> bmp = encode(".bmp", img);
  EXPECT_EQ(check(cut(bmp, bmp.size() / 2)).reason, "truncated BMP (shorter than its header says)");
  // Binary PNM: the pixels the header's size needs (OpenCV's decoder would print its own complaint to stderr).
  const std::vector<uint8_t> ppm = encode(".ppm", img);  // 40 x 30, 3 bytes a pixel
  EXPECT_EQ(check(cut(ppm, ppm.size() - 1)).reason, "truncated PNM (3599 bytes of pixels, 40 x 30 need 3600)");
  const std::string commented = "P5\n# made by hand\n3 2\n# 16-bit samples\n65535\n" + std::string(12, '\x10');
  const ImageCheck grey = check(std::vector<uint8_t>(commented.begin(), commented.end()));
  EXPECT_TRUE(grey.ok) << grey.reason;
  EXPECT_EQ(grey.width, 3);
  const std::string headless = "P6\n21 ";
  EXPECT_EQ(check(std::vector<uint8_t>(headless.begin(), headless.end())).reason,
            "corrupt PNM (its header is incomplete)");
  // A JPEG header on garbage: structure fine, decoding is not.
  std::vector<uint8_t> garbage = cut(jpg, 20);
  garbage.resize(400, 0x37);
  garbage.push_back(0xff);
  garbage.push_back(0xd9);
  EXPECT_FALSE(check(garbage).ok);
}

TEST(DataImageFile, ExtensionsInAnyCase) {
  EXPECT_TRUE(has_image_extension("a.JPG"));
  EXPECT_TRUE(has_image_extension("a.Jpeg"));
  EXPECT_TRUE(has_image_extension("x.y.TIFF"));
  EXPECT_TRUE(has_image_extension("photo.webp"));
  EXPECT_FALSE(has_image_extension("notes.txt"));
  EXPECT_FALSE(has_image_extension("png"));
  EXPECT_FALSE(has_image_extension("archive.png.gz"));
}

TEST(DataImageFile, ReadFileSaysWhy) {
  TempDir dir("readfile");
  std::vector<uint8_t> bytes;
  std::string reason;
  EXPECT_FALSE(read_file((dir / "missing.png").string(), bytes, reason));
  EXPECT_EQ(reason, "unreadable (No such file or directory)");
  ASSERT_EQ(::mkfifo((dir / "pipe.png").c_str(), 0600), 0);
  EXPECT_FALSE(read_file((dir / "pipe.png").string(), bytes, reason));  // must not hang
  EXPECT_EQ(reason, "not a regular file");
}

// --- IDX and CIFAR ---------------------------------------------------------------------------------------------------

TEST(DataBinaryFormats, IdxPlainAndGzipAndTheirErrors) {
  TempDir dir("idx");
  std::vector<uint8_t> pixels(3 * 4 * 5);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 3);
  write_bytes(dir / "a-images-idx3-ubyte", idx_images(pixels, 3, 4, 5));
  write_bytes(dir / "a-labels-idx1-ubyte.gz", gzip(idx_labels({2, 0, 1})));
  const PixelImages px =
      read_idx_pair((dir / "a-images-idx3-ubyte").string(), (dir / "a-labels-idx1-ubyte.gz").string());
  EXPECT_EQ(px.count(), 3);
  EXPECT_EQ(px.height, 4);
  EXPECT_EQ(px.width, 5);
  EXPECT_EQ(px.pixels, pixels);
  EXPECT_EQ(px.labels, (std::vector<int32_t>{2, 0, 1}));

  write_bytes(dir / "b-labels-idx1-ubyte", idx_labels({1, 1}));
  try {
    read_idx_pair((dir / "a-images-idx3-ubyte").string(), (dir / "b-labels-idx1-ubyte").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 3 images but"), std::string::npos) << e.what();
  }
  std::vector<uint8_t> short_file = idx_images(pixels, 3, 4, 5);
  short_file.resize(short_file.size() - 7);
  write_bytes(dir / "c-images-idx3-ubyte", short_file);
  try {
    read_idx_pair((dir / "c-images-idx3-ubyte").string(), (dir / "a-labels-idx1-ubyte.gz").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is truncated (69 bytes; its header says 76)"), std::string::npos) << e.what();
  }
}

TEST(DataBinaryFormats, CifarBatches) {
  TempDir dir("cifar_reader");
  write_bytes(dir / "data_batch_1.bin", cifar_batch({3, 7}, 0));
  PixelImages px;
  read_cifar10_batch((dir / "data_batch_1.bin").string(), px);
  ASSERT_EQ(px.count(), 2);
  EXPECT_EQ(px.labels[1], 7);
  EXPECT_TRUE(px.planar);
  // Image 1, plane G (1), row 2, column 5.
  EXPECT_EQ(px.pixels[3072 + 1024 + 2 * 32 + 5], cifar_value(1, 2, 5, 7, 1));
  std::vector<uint8_t> bad = cifar_batch({1}, 0);
  bad.pop_back();
  write_bytes(dir / "bad.bin", bad);
  EXPECT_THROW(read_cifar10_batch((dir / "bad.bin").string(), px), Error);
}

}  // namespace
}  // namespace ampwb
