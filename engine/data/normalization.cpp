// Normalization statistics: ImageNet's, or the dataset's computed once and remembered.
#include "data/normalization.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/parallel_for.h"
#include "data/cache_store.h"
#include "data/dataset_data.h"
#include "data/transforms.h"

namespace ampwb {
namespace {

constexpr int64_t kMaxStatisticsImages = 2048;   // for image folders; enough for 3 digits of the mean
constexpr const char* kStatisticsVersion = "1";  // bump when the computation changes

std::mutex memory_mutex;
std::map<std::string, Normalization> memory;  // split key -> statistics

std::string cache_file(const std::string& cache_dir, const std::string& key) {
  return (std::filesystem::path(cache_dir) / "statistics" / (key + ".json")).string();
}

bool load(const std::string& path, Normalization& n) {
  const std::string text = read_text_file(path);
  if (text.empty()) return false;
  try {
    const auto j = nlohmann::json::parse(text);
    if (j.at("version").get<std::string>() != kStatisticsVersion) return false;
    for (int c = 0; c < 3; ++c) {
      n.mean[c] = j.at("mean").at(c).get<float>();
      n.stddev[c] = j.at("stddev").at(c).get<float>();
      if (!(n.stddev[c] > 0)) return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;  // damaged: computed again
  }
}

}  // namespace

Normalization imagenet_normalization() { return Normalization{}; }

Normalization identity_normalization() {
  Normalization n;
  for (int c = 0; c < 3; ++c) n.mean[c] = 0.0f, n.stddev[c] = 1.0f;
  return n;
}

Normalization dataset_normalization(const Dataset& dataset, int threads) {
  const detail::DatasetData& data = *dataset.data();
  const std::string& key = data.split_key;
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    if (auto it = memory.find(key); it != memory.end()) return it->second;
  }
  Normalization result;
  if (!data.cache_dir.empty() && load(cache_file(data.cache_dir, key), result)) {
    std::lock_guard<std::mutex> lock(memory_mutex);
    memory[key] = result;
    return result;
  }

  const auto& samples = data.train;
  AMPWB_CHECK(!samples.empty(), "no training images in '" << data.report.root << "' to compute statistics from");
  const int64_t n = data.in_memory ? static_cast<int64_t>(samples.size())
                                   : std::min<int64_t>(kMaxStatisticsImages, static_cast<int64_t>(samples.size()));
  // Sums in integers per worker: exact, and the same whatever the thread count.
  struct Sums {
    uint64_t sum[3] = {0, 0, 0}, squares[3] = {0, 0, 0}, pixels = 0;
  };
  std::vector<Sums> partial(static_cast<size_t>(std::max(1, threads)));
  parallel_for(static_cast<size_t>(n), threads, [&](size_t k, int worker) {
    const int64_t index =
        static_cast<int64_t>(k) * static_cast<int64_t>(samples.size()) / n;  // evenly spaced: every class
    const int64_t item = samples[static_cast<size_t>(index)].item;
    const cv::Mat bgr = detail::load_bgr(data, item, 32);
    if (bgr.empty()) return;  // vanished or changed since the scan: the loader skips and reports it
    Sums& s = partial[static_cast<size_t>(worker)];
    for (int y = 0; y < bgr.rows; ++y) {
      const uint8_t* p = bgr.ptr<uint8_t>(y);
      for (int x = 0; x < bgr.cols; ++x, p += 3)
        for (int c = 0; c < 3; ++c) {  // BGR in, RGB statistics out
          s.sum[2 - c] += p[c];
          s.squares[2 - c] += static_cast<uint64_t>(p[c]) * p[c];
        }
    }
    s.pixels += static_cast<uint64_t>(bgr.rows) * bgr.cols;
  });

  Sums total;
  for (const Sums& s : partial) {
    for (int c = 0; c < 3; ++c) total.sum[c] += s.sum[c], total.squares[c] += s.squares[c];
    total.pixels += s.pixels;
  }
  AMPWB_CHECK(total.pixels > 0, "none of the training images in '" << data.report.root << "' can be read any more");
  for (int c = 0; c < 3; ++c) {
    const double mean = static_cast<double>(total.sum[c]) / total.pixels / 255.0;
    const double mean_sq = static_cast<double>(total.squares[c]) / total.pixels / (255.0 * 255.0);
    result.mean[c] = static_cast<float>(mean);
    // A constant channel would divide by zero: floor the deviation at one grey level.
    result.stddev[c] = static_cast<float>(std::max(1.0 / 255.0, std::sqrt(std::max(0.0, mean_sq - mean * mean))));
  }
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    memory[key] = result;
  }
  if (!data.cache_dir.empty()) {
    nlohmann::json j = {{"version", kStatisticsVersion},
                        {"root", data.report.root},
                        {"images", n},
                        {"mean", {result.mean[0], result.mean[1], result.mean[2]}},
                        {"stddev", {result.stddev[0], result.stddev[1], result.stddev[2]}}};
    write_cache_file(cache_file(data.cache_dir, key), j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return result;
}

Normalization normalization_by_name(const std::string& name, const Dataset& dataset, int threads) {
  if (name == "dataset") return dataset_normalization(dataset, threads);
  if (name == "imagenet") return imagenet_normalization();
  if (name == "none") return identity_normalization();
  throw Error("unknown normalization '" + name + "' (choose dataset, imagenet or none)");
}

}  // namespace ampwb
