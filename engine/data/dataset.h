// A dataset on disk, opened once: its layout detected, every file checked, a stratified split made, and a report
// of what was found. The loader (data/loader.h) turns it into batches.
//
// Layouts, tried in this order:
//   idx            MNIST-family IDX files (*-images-idx3-ubyte, *-labels-idx1-ubyte, plain or .gz) in the folder;
//                  train-* is the training split, t10k-*/test-* the validation split.
//   cifar10-binary CIFAR-10 binary batches (data_batch_*.bin training, test_batch.bin validation,
//                  batches.meta.txt class names), in the folder or in its cifar-10-batches-bin/.
//   split-folders  train/ and val/ (or valid/, validation/, test/), each holding class folders, used as the split.
//   class-folders  one folder per class, split by DatasetOptions::validation_fraction (also used for a lone train/).
//
// Files: every file under a class folder, at any depth (symbolic links followed, loops detected), whose extension
// (any case) names a format OpenCV reads. Each is read once and checked when the dataset is opened: zero bytes,
// non-images, truncated or corrupt JPEG/PNG (see data/image_file.h) and anything OpenCV cannot decode are skipped
// and reported with the reason, so they are never trained on. The check decodes every image (JPEGs at 1/8 scale);
// its results are kept in memory and, unless DatasetOptions::cache_dir is "-", in a cache folder, keyed by path,
// size and modification time, so opening the same folder again reads only new or changed files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ampwb {

enum class Split { Train, Validation };
const char* split_name(Split s);  // "train", "validation"

struct DatasetOptions {
  double validation_fraction = 0.2;  // class-folder layouts and IDX/CIFAR without test files: per class, rounded
  uint64_t seed = 0;                 // of the split (the loader has its own for shuffling)
  int64_t max_train_images = 0;      // 0 = all; else the first N of the training split, taken round-robin over
                                     // the classes in path order (so a small N still covers every class)
  // Where checked-file results and normalization statistics are kept between runs: "" = $XDG_CACHE_HOME/ampwb
  // (or ~/.cache/ampwb), "-" = nowhere (in memory only, for this process).
  std::string cache_dir;
  // 0 = all; else the first N of the validation split, taken round-robin over the classes as for training: the
  // same images every epoch and every run of the split.
  int64_t max_validation_images = 0;
};

struct DatasetReport {
  struct ClassCount {
    std::string name;
    int64_t images = 0;  // usable images: train + validation
    int64_t train = 0, validation = 0;
  };
  struct Skipped {
    std::string path;    // relative to the root, '/'-separated
    std::string reason;  // "truncated JPEG (no end-of-image marker)", "hidden file", ...
  };
  struct SmallClass {
    std::string name;
    int64_t images = 0;
    std::string reason;  // "1 image: none left for validation"
  };

  std::string root;
  std::string layout;               // "class-folders", "split-folders", "idx", "cifar10-binary"; "" when not found
  std::string validation;           // where the validation split came from: "val/", "split 0.2 (seed 0)", "t10k files"
  bool own_split = false;           // the data's own validation split (val/, test files), not validation_fraction's
  std::vector<ClassCount> classes;  // the usable classes, in label order
  std::vector<Skipped> skipped;     // every file or folder passed over, sorted by path
  std::vector<std::string> empty_classes;  // class folders without a usable image (not among `classes`)
  std::vector<SmallClass> small_classes;   // classes with too few images for the split
  int64_t total_images = 0, train_images = 0, validation_images = 0;
  int64_t train_images_before_limit = 0;  // when max_train_images cut the training split
  int64_t validation_images_before_limit = 0;  // likewise for max_validation_images
  // Stored sizes of the usable images (pixels).
  int min_width = 0, max_width = 0, min_height = 0, max_height = 0;
  int median_shorter_side = 0;
  // Largest class over smallest class (usable images); 1 when balanced.
  double imbalance = 1.0;
  std::string largest_class, smallest_class;
  std::vector<std::string> notes;   // other observations, in words
  std::vector<std::string> errors;  // why it cannot be trained on; empty when it can
  std::string fingerprint;

  bool trainable() const { return errors.empty(); }
  std::string to_text() const;
  nlohmann::json to_json() const;
};

namespace detail {
struct DatasetData;  // the samples; data/dataset_data.h
}

class Dataset {
 public:
  // Scans and checks the folder. Throws ampwb::Error with every reason when it cannot be trained on (no such
  // folder, no usable class, fewer than two classes, no training image).
  static Dataset open(const std::string& root, const DatasetOptions& options = {});
  // The same scan, never throwing for an untrainable folder: report().errors says why (for `ampwb dataset inspect`).
  static Dataset inspect(const std::string& root, const DatasetOptions& options = {});

  const DatasetReport& report() const;
  const std::vector<std::string>& class_names() const;
  int64_t train_size() const;
  int64_t validation_size() const;
  int64_t size(Split split) const;
  // The median shorter side of the training images: a natural default image size.
  int native_image_size() const;
  // A stable hash of the samples (relative paths, sizes and modification times; file contents for IDX/CIFAR).
  std::string fingerprint() const;

  const std::shared_ptr<const detail::DatasetData>& data() const { return data_; }  // for the loader

 private:
  explicit Dataset(std::shared_ptr<const detail::DatasetData> data) : data_(std::move(data)) {}
  std::shared_ptr<const detail::DatasetData> data_;
};

// The built-in sample: Fashion-MNIST as the Debian package dataset-fashion-mnist installs it
// (/usr/share/datasets/fashion-mnist). Throws ampwb::Error naming the package when it is not installed.
std::string builtin_sample_dataset();

// The class names of Fashion-MNIST, in label order.
const std::vector<std::string>& fashion_mnist_class_names();

}  // namespace ampwb
