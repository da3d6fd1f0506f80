// Benchmark images, decoding timings and resident-memory readings for the data pipeline.
#include "data/data_benchmark.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#ifdef AMPWB_HAVE_IMAGE_CODECS
#include <opencv2/imgcodecs.hpp>
#endif
#include <opencv2/imgproc.hpp>
#include <thread>

#include "core/error.h"
#include "core/rng.h"
#include "data/binary_formats.h"
#include "data/dataset.h"
#include "data/file_checks.h"
#include "data/image_file.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

#ifdef AMPWB_HAVE_IMAGE_CODECS  // the images written to time decoding with
cv::Mat photo_like(int width, int height, Rng& rng) {
  cv::Mat small(height / 16 + 1, width / 16 + 1, CV_8UC3);
  for (int y = 0; y < small.rows; ++y)
    for (int x = 0; x < small.cols; ++x)
      for (int c = 0; c < 3; ++c) small.at<cv::Vec3b>(y, x)[c] = static_cast<uint8_t>(rng.below(256));
  cv::Mat img;
  cv::resize(small, img, cv::Size(width, height), 0, 0, cv::INTER_CUBIC);
  for (int k = 0; k < 6; ++k) {
    const cv::Point center(static_cast<int>(rng.below(static_cast<uint64_t>(width))),
                           static_cast<int>(rng.below(static_cast<uint64_t>(height))));
    const cv::Scalar colour(static_cast<double>(rng.below(256)), static_cast<double>(rng.below(256)),
                            static_cast<double>(rng.below(256)));
    cv::circle(img, center, 5 + static_cast<int>(rng.below(60)), colour, -1, cv::LINE_AA);
  }
  cv::Mat noise(height, width, CV_8UC3);
  cv::randn(noise, cv::Scalar::all(0), cv::Scalar::all(6));
  cv::add(img, noise, img);
  return img;
}
#endif

std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

size_t status_field_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(field)) return static_cast<size_t>(std::stoull(line.substr(std::string(field).size()))) * 1024;
  return 0;
}

}  // namespace

void write_benchmark_images(const std::string& dir_name, int count) {
#ifndef AMPWB_HAVE_IMAGE_CODECS
  (void)dir_name, (void)count;
  throw Error("this build writes and decodes no image files (AMPWB_IMAGE_CODECS=OFF)");
#else
  const fs::path dir(dir_name);
  Rng rng(7);
  std::vector<cv::Mat> fashion;
  try {
    const std::string sample = builtin_sample_dataset();
    const PixelImages px = read_idx_pair(sample + "/t10k-images-idx3-ubyte.gz", sample + "/t10k-labels-idx1-ubyte.gz");
    for (int i = 0; i < count && i < px.count(); ++i)
      fashion.push_back(cv::Mat(28, 28, CV_8UC1, const_cast<uint8_t*>(px.pixels.data()) + i * 784).clone());
  } catch (const Error&) {
    // no package: generated 28x28 images instead
  }
  for (int i = 0; i < count; ++i) {
    const std::string cls = i % 2 ? "b" : "a";
    fs::create_directories(dir / "png28" / cls);
    fs::create_directories(dir / "jpeg500" / cls);
    const cv::Mat png =
        i < static_cast<int>(fashion.size()) ? fashion[static_cast<size_t>(i)] : photo_like(28, 28, rng);
    cv::imwrite((dir / "png28" / cls / (std::to_string(i) + ".png")).string(), png);
    cv::imwrite((dir / "jpeg500" / cls / (std::to_string(i) + ".jpg")).string(), photo_like(500, 375, rng),
                {cv::IMWRITE_JPEG_QUALITY, 90});
  }
#endif
}

std::vector<DecodeTiming> time_decoding(const std::string& dir_name, int repeats) {
  const fs::path dir(dir_name);
  std::vector<DecodeTiming> timings;
  std::vector<uint8_t> bytes;
  std::string reason;
  for (const std::string kind : {"png28", "jpeg500"}) {
    const std::vector<std::string> files = files_under(dir / kind);
    AMPWB_CHECK(!files.empty(), "no benchmark images under '" << (dir / kind).string() << "'");
    for (const auto& f : files) read_file(f, bytes, reason);  // the page cache: time decoding, not the disk
    struct Step {
      std::string name;
      int reduce, size;  // size 0: the scan's check; -1: decode only
    };
    std::vector<Step> steps = {{"scan check (structure + verification decode)", 0, 0}, {"full decode to BGR", 1, -1}};
    if (kind == "jpeg500") {
      steps.push_back({"loader: decode + resize to 224x224", 1, 224});
      steps.push_back({"loader: decode at 1/4 + resize to 64x64", 4, 64});
    } else {
      steps.push_back({"loader: decode + 28x28 crop", 1, 28});
    }
    for (const Step& step : steps) {
      double best = 1e30;
      for (int r = 0; r < std::max(1, repeats); ++r) {
        const auto t0 = Clock::now();
        for (const auto& f : files) {
          read_file(f, bytes, reason);
          if (step.size == 0) {
            AMPWB_CHECK(check_image(bytes.data(), bytes.size()).ok, "benchmark image '" << f << "' failed its check");
            continue;
          }
          const cv::Mat m = decode_bgr8(bytes.data(), bytes.size(), step.reduce);
          AMPWB_CHECK(!m.empty(), "benchmark image '" << f << "' did not decode");
          if (step.size > 0) {
            const int side = std::min(m.cols, m.rows);
            cv::Mat out;
            cv::resize(m(cv::Rect((m.cols - side) / 2, (m.rows - side) / 2, side, side)), out,
                       cv::Size(step.size, step.size), 0, 0, side > step.size ? cv::INTER_AREA : cv::INTER_LINEAR);
          }
        }
        best = std::min(best, seconds_since(t0));
      }
      timings.push_back({kind, step.name, static_cast<int>(files.size()), best});
    }
  }
  for (const std::string kind : {"png28", "jpeg500"}) {
    DatasetOptions options;
    options.cache_dir = std::string("-");
    double best = 1e30;
    int64_t images = 0;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      clear_file_check_memory();  // check every file again
      const auto t0 = Clock::now();
      const Dataset ds = Dataset::open((dir / kind).string(), options);
      best = std::min(best, seconds_since(t0));
      images = ds.report().total_images;
    }
    timings.push_back({kind,
                       "Dataset::open, " + std::to_string(std::thread::hardware_concurrency()) + " threads, uncached",
                       static_cast<int>(images), best});
  }
  return timings;
}

void simulated_compute(double ms) {
  if (ms <= 0) return;
  const auto end = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
#pragma omp parallel
  {
    volatile double x = 1.0;
    while (Clock::now() < end)
      for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  }
}

size_t resident_bytes() { return status_field_bytes("VmRSS:"); }
size_t peak_resident_bytes() { return status_field_bytes("VmHWM:"); }

}  // namespace ampwb
