// Image-folder scanning, decoding and batching.
#include "data/image_folder.h"

#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/error.h"

namespace ampwb {
namespace fs = std::filesystem;

namespace {

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  static const char* kExtensions[] = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".pgm", ".ppm"};
  return std::any_of(std::begin(kExtensions), std::end(kExtensions), [&](const char* e) { return ext == e; });
}

std::vector<std::string> sorted_subdirectories(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && entry.path().filename().string()[0] != '.')
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Image files of each class folder, sorted by path so every machine sees the same order.
std::vector<std::vector<std::string>> files_per_class(const fs::path& dir, const std::vector<std::string>& classes) {
  std::vector<std::vector<std::string>> files(classes.size());
  for (size_t c = 0; c < classes.size(); ++c) {
    const fs::path class_dir = dir / classes[c];
    if (!fs::is_directory(class_dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(class_dir, fs::directory_options::skip_permission_denied))
      if (entry.is_regular_file() && is_image_file(entry.path()) && entry.path().filename().string()[0] != '.')
        files[c].push_back(entry.path().string());
    std::sort(files[c].begin(), files[c].end());
  }
  return files;
}

std::vector<ImageSample> flatten(const std::vector<std::vector<std::string>>& files) {
  std::vector<ImageSample> samples;
  for (size_t c = 0; c < files.size(); ++c)
    for (const auto& f : files[c]) samples.push_back({f, static_cast<int32_t>(c)});
  return samples;
}

}  // namespace

ImageDataset scan_image_folder(const std::string& root, const ScanOptions& options) {
  AMPWB_CHECK(fs::is_directory(root), "dataset folder '" << root << "' does not exist or is not a folder");
  ImageDataset ds;
  ds.root = root;
  const fs::path base(root);
  std::string val_name;
  for (const char* candidate : {"val", "valid", "validation", "test"})
    if (fs::is_directory(base / candidate)) {
      val_name = candidate;
      break;
    }
  if (fs::is_directory(base / "train") && !val_name.empty()) {
    ds.layout = "split-folders";
    ds.class_names = sorted_subdirectories(base / "train");
    ds.train = flatten(files_per_class(base / "train", ds.class_names));
    ds.validation = flatten(files_per_class(base / val_name, ds.class_names));
  } else {
    ds.layout = "class-folders";
    ds.class_names = sorted_subdirectories(base);
    Rng rng(options.seed);
    const auto per_class = files_per_class(base, ds.class_names);
    for (size_t c = 0; c < per_class.size(); ++c) {  // stratified: every class split alike
      std::vector<std::string> shuffled = per_class[c];
      rng.shuffle(shuffled.begin(), shuffled.end());
      const size_t n_val = static_cast<size_t>(shuffled.size() * options.validation_fraction + 0.5);
      for (size_t i = 0; i < shuffled.size(); ++i)
        (i < n_val ? ds.validation : ds.train).push_back({shuffled[i], static_cast<int32_t>(c)});
    }
  }
  AMPWB_CHECK(ds.class_names.size() >= 2,
              "dataset folder '" << root << "' holds " << ds.class_names.size()
                                 << " class folder(s); at least two are needed");
  if (options.max_train_images > 0 && static_cast<int64_t>(ds.train.size()) > options.max_train_images) {
    std::sort(ds.train.begin(), ds.train.end(), [](const ImageSample& a, const ImageSample& b) {
      return fs::path(a.path).filename().string() < fs::path(b.path).filename().string();
    });
    ds.train.resize(static_cast<size_t>(options.max_train_images));
  }
  AMPWB_CHECK(!ds.train.empty(), "dataset folder '" << root << "' has no training images");
  return ds;
}

std::vector<uint8_t> decode_square_rgb(const std::string& path, int size) {
  cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);
  AMPWB_CHECK(!bgr.empty(), "cannot decode image '" << path << "'");
  const double scale = static_cast<double>(size) / std::min(bgr.rows, bgr.cols);
  cv::Mat resized;
  if (bgr.rows != size || bgr.cols != size) {
    const int rows = std::max(size, static_cast<int>(std::lround(bgr.rows * scale)));
    const int cols = std::max(size, static_cast<int>(std::lround(bgr.cols * scale)));
    cv::resize(bgr, resized, cv::Size(cols, rows), 0, 0, scale < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
  } else {
    resized = bgr;
  }
  const cv::Rect crop((resized.cols - size) / 2, (resized.rows - size) / 2, size, size);
  cv::Mat rgb;
  cv::cvtColor(resized(crop), rgb, cv::COLOR_BGR2RGB);
  return std::vector<uint8_t>(rgb.data, rgb.data + static_cast<size_t>(size) * size * 3);
}

int probe_image_size(const ImageDataset& dataset) {
  for (const auto& s : dataset.train) {
    cv::Mat img = cv::imread(s.path, cv::IMREAD_UNCHANGED);
    if (!img.empty()) return std::min(img.rows, img.cols);
  }
  throw Error("no decodable training image in '" + dataset.root + "'");
}

ImageBatcher::ImageBatcher(std::vector<ImageSample> samples, int image_size, Normalization norm, int threads,
                           size_t cache_budget_bytes)
    : samples_(std::move(samples)), image_size_(image_size), norm_(norm), threads_(std::max(1, threads)) {
  AMPWB_CHECK(image_size >= 8, "image size " << image_size << " is too small (at least 8 pixels)");
  unshuffle();
  const size_t per_image = static_cast<size_t>(image_size) * image_size * 3;
  cache_enabled_ = per_image * samples_.size() <= cache_budget_bytes;
  cache_.resize(samples_.size());
}

void ImageBatcher::shuffle(Rng& rng) {
  unshuffle();
  rng.shuffle(order_.begin(), order_.end());
}

void ImageBatcher::unshuffle() {
  order_.resize(samples_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
}

void ImageBatcher::batch(int64_t index, int batch_size, Tensor& images, Tensor& labels) {
  const int64_t begin = index * batch_size;
  const int64_t n = std::min<int64_t>(batch_size, size() - begin);
  AMPWB_CHECK(n > 0, "batch " << index << " is past the end of the data");
  const int64_t S = image_size_, pixels_per_image = S * S * 3;
  images = Tensor::empty({n, 3, S, S}, DType::F32, Layout::NHWC);
  labels = Tensor::empty({n}, DType::I32);
  float* out = images.data_as<float>();
  int32_t* lab = labels.data_as<int32_t>();
  float scale[3], shift[3];  // (v/255 - mean) / std  =  v * scale + shift
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * norm_.stddev[c]);
    shift[c] = -norm_.mean[c] / norm_.stddev[c];
  }
  std::string error;
#pragma omp parallel for num_threads(threads_) schedule(dynamic)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t sample = order_[begin + i];
    lab[i] = samples_[sample].label;
    try {
      std::vector<uint8_t> scratch;
      const uint8_t* px;
      if (cache_enabled_) {
        if (cache_[sample].empty()) cache_[sample] = decode_square_rgb(samples_[sample].path, image_size_);
        px = cache_[sample].data();
      } else {
        scratch = decode_square_rgb(samples_[sample].path, image_size_);
        px = scratch.data();
      }
      float* dst = out + i * pixels_per_image;
      for (int64_t j = 0; j < pixels_per_image; ++j) dst[j] = px[j] * scale[j % 3] + shift[j % 3];
    } catch (const std::exception& e) {
#pragma omp critical
      error = e.what();
    }
  }
  if (!error.empty()) throw Error(error);
}

Normalization ImageBatcher::compute_statistics(int64_t max_images) {
  double sum[3] = {0, 0, 0}, sq[3] = {0, 0, 0};
  const int64_t count = std::min(max_images, size());
  AMPWB_CHECK(count > 0, "no images to compute statistics from");
  for (int64_t i = 0; i < count; ++i) {
    const int64_t sample = i * size() / count;  // spread over all classes
    const std::vector<uint8_t> px = decode_square_rgb(samples_[sample].path, image_size_);
    for (size_t j = 0; j < px.size(); ++j) {
      const double v = px[j] / 255.0;
      sum[j % 3] += v;
      sq[j % 3] += v * v;
    }
  }
  Normalization n;
  const double per_channel = static_cast<double>(count) * image_size_ * image_size_;
  for (int c = 0; c < 3; ++c) {
    const double mean = sum[c] / per_channel;
    n.mean[c] = static_cast<float>(mean);
    n.stddev[c] = static_cast<float>(std::sqrt(std::max(1e-6, sq[c] / per_channel - mean * mean)));
  }
  return n;
}

}  // namespace ampwb
