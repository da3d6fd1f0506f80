// A dataset opened: the scanners chosen by layout (dataset_scan.h), then the usable classes, the stratified split,
// the limit and the report's statistics; the built-in sample.
#include "data/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/hash.h"
#include "core/rng.h"
#include "data/cache_store.h"
#include "data/dataset_data.h"
#include "data/dataset_scan.h"

namespace ampwb {
using namespace detail;

namespace {

// The root's entry that is the split folder `name` (a folder of class folders), as the dataset spells it: datasets
// made on other systems name theirs "Train" or "VAL". Empty when there is none.
std::string split_folder(const std::string& root, const std::vector<std::string>& names, const std::string& name) {
  const auto usable = [&](const std::string& entry) {
    return examine(root + "/" + entry).kind == Kind::Folder && has_subfolder(root + "/" + entry);
  };
  if (std::find(names.begin(), names.end(), name) != names.end()) return usable(name) ? name : std::string();
  for (const std::string& entry : names)
    if (lower(entry) == name && usable(entry)) return entry;
  return {};
}

// Usable classes, the split, the limit, the statistics of the report and its errors.
void finish(DatasetData& data, Pools& pools, const DatasetOptions& options) {
  DatasetReport& rep = data.report;
  const bool folders = !data.in_memory;
  std::sort(rep.skipped.begin(), rep.skipped.end(),
            [](const DatasetReport::Skipped& a, const DatasetReport::Skipped& b) { return a.path < b.path; });

  const std::string where = rep.root;
  const size_t n_candidates = pools.class_names.size();
  for (size_t c = 0; c < n_candidates; ++c) {
    const std::string& name = pools.class_names[c];
    if (!pools.train[c].empty()) {
      data.class_names.push_back(name);
      continue;
    }
    if (!pools.validation[c].empty())
      rep.notes.push_back("class '" + name + "' has validation images but no training image: not used");
    rep.empty_classes.push_back(name);
  }

  // Errors that stop training, each with what to do about it.
  if (n_candidates == 0) {
    rep.errors.push_back("'" + where +
                         "' holds no class folders: put each class's images in a folder of its own "
                         "(or use train/ and val/ folders of class folders)");
  } else if (data.class_names.empty()) {
    rep.errors.push_back(
        "none of the " + plural(static_cast<int64_t>(n_candidates), "class", "classes") + " in '" + where +
        "' has a usable " + (pools.given_split ? "training " : "") + "image" +
        (rep.skipped.empty()
             ? ""
             : " (" + plural(static_cast<int64_t>(rep.skipped.size()), "file", "files") + " skipped: see the report)"));
  } else if (data.class_names.size() == 1) {
    rep.errors.push_back("'" + where + "' has only one usable class ('" + data.class_names[0] +
                         "'); at least two are needed");
  }

  // The split: per class, from a generator seeded by (seed, class name), so adding a class or an image to another
  // class changes nothing here.
  const double f = options.validation_fraction;
  rep.own_split = pools.given_split;
  if (pools.given_split) {
    rep.validation = pools.validation_source;
  } else {
    char text[64];
    std::snprintf(text, sizeof text, "split %g (seed %llu)", f, static_cast<unsigned long long>(options.seed));
    rep.validation = text;
  }
  std::vector<std::vector<int64_t>> train(data.class_names.size()), validation(data.class_names.size());
  for (size_t c = 0, label = 0; c < n_candidates; ++c) {
    if (pools.train[c].empty()) continue;
    const std::string& name = pools.class_names[c];
    auto& tr = train[label];
    auto& va = validation[label];
    if (pools.given_split) {
      tr = pools.train[c];
      va = pools.validation[c];
      if (va.empty())
        rep.small_classes.push_back(
            {name, static_cast<int64_t>(tr.size()), "no validation images in " + rep.validation});
    } else {
      std::vector<int64_t> items = pools.train[c];
      const int64_t n = static_cast<int64_t>(items.size());
      const int64_t n_val = f > 0 ? std::min<int64_t>(n - 1, static_cast<int64_t>(std::floor(n * f + 0.5))) : 0;
      Hasher h;
      h.add_u64(options.seed);
      h.add(name);
      Rng rng(h.digest());
      rng.shuffle(items.begin(), items.end());
      va.assign(items.begin(), items.begin() + n_val);
      tr.assign(items.begin() + n_val, items.end());
      std::sort(va.begin(), va.end());
      std::sort(tr.begin(), tr.end());
      if (f > 0 && n_val == 0)
        rep.small_classes.push_back({name, n, plural(n, "image", "images") + ": none left for validation"});
    }
    ++label;
  }

  // The limits: round-robin over the classes in path order, so the first N cover every class.
  const auto limit = [](std::vector<std::vector<int64_t>>& split, int64_t most) {
    int64_t total = 0;
    for (const auto& v : split) total += static_cast<int64_t>(v.size());
    if (most <= 0 || total <= most) return total;
    std::vector<std::vector<int64_t>> kept(split.size());
    int64_t taken = 0;
    for (size_t round = 0; taken < most; ++round)
      for (size_t c = 0; c < split.size() && taken < most; ++c)
        if (round < split[c].size()) kept[c].push_back(split[c][round]), ++taken;
    split = std::move(kept);
    return total;
  };
  rep.train_images_before_limit = limit(train, options.max_train_images);
  if (options.max_train_images > 0 && rep.train_images_before_limit > options.max_train_images)
    rep.notes.push_back("training split limited to the first " + std::to_string(options.max_train_images) + " of " +
                        std::to_string(rep.train_images_before_limit) + " images");
  rep.validation_images_before_limit = limit(validation, options.max_validation_images);
  if (options.max_validation_images > 0 && rep.validation_images_before_limit > options.max_validation_images)
    rep.notes.push_back("validation split limited to the first " + std::to_string(options.max_validation_images) +
                        " of " + std::to_string(rep.validation_images_before_limit) + " images");

  // Samples and counts.
  std::vector<int> shorter;
  auto add_size = [&](int64_t item) {
    const int w = data.width_of(item), h = data.height_of(item);
    if (rep.total_images == 0 && shorter.empty()) {
      rep.min_width = rep.max_width = w;
      rep.min_height = rep.max_height = h;
    }
    rep.min_width = std::min(rep.min_width, w);
    rep.max_width = std::max(rep.max_width, w);
    rep.min_height = std::min(rep.min_height, h);
    rep.max_height = std::max(rep.max_height, h);
  };
  size_t label = 0;
  for (size_t c = 0; c < n_candidates; ++c) {
    if (pools.train[c].empty()) continue;
    DatasetReport::ClassCount count;
    count.name = pools.class_names[c];
    count.train = static_cast<int64_t>(train[label].size());
    count.validation = static_cast<int64_t>(validation[label].size());
    count.images = static_cast<int64_t>(pools.train[c].size() + (pools.given_split ? pools.validation[c].size() : 0));
    for (int64_t item : train[label]) {
      data.train.push_back({item, static_cast<int32_t>(label)});
      add_size(item);
      shorter.push_back(std::min(data.width_of(item), data.height_of(item)));
    }
    for (int64_t item : validation[label]) {
      data.validation.push_back({item, static_cast<int32_t>(label)});
      add_size(item);
    }
    rep.classes.push_back(count);
    rep.total_images += count.images;
    rep.train_images += count.train;
    rep.validation_images += count.validation;
    ++label;
  }
  if (!shorter.empty()) {
    std::nth_element(shorter.begin(), shorter.begin() + static_cast<long>(shorter.size() / 2), shorter.end());
    rep.median_shorter_side = data.native_size = shorter[shorter.size() / 2];
  }
  if (!rep.classes.empty()) {
    auto [small, large] = std::minmax_element(rep.classes.begin(), rep.classes.end(),
                                              [](const auto& a, const auto& b) { return a.images < b.images; });
    rep.imbalance = small->images > 0 ? static_cast<double>(large->images) / small->images : 0.0;
    rep.largest_class = large->name;
    rep.smallest_class = small->name;
  }
  if (rep.errors.empty() && data.validation.empty()) rep.notes.push_back("the validation split is empty");

  // The fingerprint: what the samples are, not how they were split.
  Hasher h;
  h.add(rep.layout);
  if (folders) {
    // Every usable file (before the split and the limit), in path order: scan_folders numbered them so.
    std::vector<std::pair<int64_t, size_t>> all;
    for (size_t c = 0; c < n_candidates; ++c)
      for (const auto* pool : {&pools.train[c], &pools.validation[c]})
        for (int64_t item : *pool) all.push_back({item, c});
    std::sort(all.begin(), all.end());
    for (const auto& [item, c] : all) {
      const size_t i = static_cast<size_t>(item);
      h.add(data.paths[i].substr(rep.root.size() + 1));
      h.add(pools.class_names[c]);
      h.add_u64(static_cast<uint64_t>(pools.stamps[i].first));
      h.add_u64(static_cast<uint64_t>(pools.stamps[i].second));
    }
  } else {
    h.add_u64(pools.content_hash);
    for (const auto& n : pools.class_names) h.add(n);
  }
  rep.fingerprint = h.hex();
  char key[160];
  std::snprintf(key, sizeof key, "%s-f%g-s%llu-m%lld", rep.fingerprint.c_str(), f,
                static_cast<unsigned long long>(options.seed), static_cast<long long>(options.max_train_images));
  data.split_key = key;
}

}  // namespace

const char* split_name(Split s) { return s == Split::Train ? "train" : "validation"; }

Dataset Dataset::inspect(const std::string& root_in, const DatasetOptions& options) {
  auto data = std::make_shared<DatasetData>();
  DatasetReport& rep = data->report;
  // Absolute: the check cache and the fingerprint must not depend on the working directory.
  std::error_code ec;
  std::string root = root_in.empty() ? "" : std::filesystem::absolute(root_in, ec).lexically_normal().string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  rep.root = root;
  data->cache_dir = resolve_cache_dir(options.cache_dir);

  if (!(options.validation_fraction >= 0 && options.validation_fraction < 1)) {
    rep.errors.push_back("the validation fraction must be at least 0 and below 1 (got " +
                         std::to_string(options.validation_fraction) + ")");
    return Dataset(data);
  }
  struct stat st {};
  if (root.empty() || ::stat(root.c_str(), &st) != 0) {
    std::string missing = "dataset folder '" + root_in + "' does not exist";
    try {  // a path mistyped from the sample's, or a first try: where the sample is
      missing += " (the built-in sample is " + builtin_sample_dataset() + ")";
    } catch (const Error&) {  // not installed: nothing to point to
    }
    rep.errors.push_back(missing);
    return Dataset(data);
  }
  if (!S_ISDIR(st.st_mode)) {
    rep.errors.push_back("'" + root +
                         "' is not a folder (a dataset is a folder of class folders or of IDX/CIFAR files)");
    return Dataset(data);
  }
  std::vector<std::string> names;
  std::string reason;
  if (!list_dir(root, names, reason)) {
    rep.errors.push_back("cannot read dataset folder '" + root + "' (" + reason + ")");
    return Dataset(data);
  }

  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  Pools pools;
  if (scan_idx(root, *data, pools) || scan_cifar(root, *data, pools)) {
    // pixel datasets
  } else if (const std::string train_rel = split_folder(root, names, "train"); !train_rel.empty()) {
    std::string validation_rel;
    for (const char* v : kValidationFolders) {
      const std::string folder = split_folder(root, names, v);
      if (folder.empty()) continue;
      if (validation_rel.empty()) {
        validation_rel = folder;
      } else {
        rep.notes.push_back(folder + "/ not used (" + validation_rel + "/ is the validation split)");
      }
    }
    rep.layout = validation_rel.empty() ? "class-folders" : "split-folders";
    if (validation_rel.empty())
      rep.notes.push_back("classes from " + train_rel +
                          "/ (no val/, valid/, validation/ or test/ folder of class folders)");
    scan_folders(root, train_rel, validation_rel, *data, pools, threads);
    if (!validation_rel.empty()) {
      pools.given_split = true;
      pools.validation_source = validation_rel + "/";
    }
  } else {
    rep.layout = "class-folders";
    scan_folders(root, "", "", *data, pools, threads);
  }
  finish(*data, pools, options);
  return Dataset(data);
}

Dataset Dataset::open(const std::string& root, const DatasetOptions& options) {
  Dataset d = inspect(root, options);
  const DatasetReport& rep = d.report();
  if (!rep.trainable()) {
    std::string message = "cannot train on '" + rep.root + "': ";
    for (size_t i = 0; i < rep.errors.size(); ++i) message += (i ? "; " : "") + rep.errors[i];
    throw Error(message);
  }
  return d;
}

const DatasetReport& Dataset::report() const { return data_->report; }
const std::vector<std::string>& Dataset::class_names() const { return data_->class_names; }
int64_t Dataset::train_size() const { return static_cast<int64_t>(data_->train.size()); }
int64_t Dataset::validation_size() const { return static_cast<int64_t>(data_->validation.size()); }
int64_t Dataset::size(Split split) const { return static_cast<int64_t>(data_->samples(split).size()); }
int Dataset::native_image_size() const { return data_->native_size; }
std::string Dataset::fingerprint() const { return data_->report.fingerprint; }

std::string builtin_sample_dataset() {
  const std::string path = "/usr/share/datasets/fashion-mnist";
  struct stat st {};
  if (::stat((path + "/train-images-idx3-ubyte.gz").c_str(), &st) != 0 &&
      ::stat((path + "/train-images-idx3-ubyte").c_str(), &st) != 0)
    throw Error("the built-in sample needs the Debian package dataset-fashion-mnist (" + path +
                " is missing): sudo apt-get install dataset-fashion-mnist");
  return path;
}

const std::vector<std::string>& fashion_mnist_class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

}  // namespace ampwb
