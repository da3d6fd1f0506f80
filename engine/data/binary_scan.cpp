// The in-memory layouts: MNIST-family IDX files and CIFAR-10 binary batches, decoded into pixels and pooled by
// class (the first n_train images train, the rest validate).
#include <algorithm>
#include <regex>

#include "core/error.h"
#include "core/hash.h"
#include "data/binary_formats.h"
#include "data/cache_store.h"
#include "data/dataset_scan.h"

namespace ampwb::detail {

namespace {
// MNIST-family IDX files in the folder: {stem: {role: {images, labels}}} with role "train" or "test".
struct IdxFiles {
  std::string images, labels;
};

// A decoded in-memory dataset (IDX, CIFAR-10) as the pools of indices into its pixels: the first n_train images
// train, the rest validate. pools.class_names must be set.
void adopt_in_memory(PixelImages&& images, int64_t n_train, DatasetData& data, Pools& pools) {
  const size_t n_classes = pools.class_names.size();
  pools.train.assign(n_classes, {});
  pools.validation.assign(n_classes, {});
  for (int64_t i = 0; i < images.count(); ++i)
    (i < n_train ? pools.train : pools.validation)[static_cast<size_t>(images.labels[static_cast<size_t>(i)])]
        .push_back(i);
  data.in_memory = true;
  data.pixel_height = images.height;
  data.pixel_width = images.width;
  data.pixel_channels = images.channels;
  data.planar = images.planar;
  data.pixels = std::move(images.pixels);
  pools.content_hash = images.content_hash;
}
}  // namespace

bool scan_idx(const std::string& root, DatasetData& data, Pools& pools) {
  std::vector<std::string> names;
  std::string reason;
  list_dir(root, names, reason);
  static const std::regex images_re(R"(^(.*)[-_.]images[-_.]idx3[-_.]ubyte(\.gz)?$)", std::regex::icase);
  static const std::regex labels_re(R"(^(.*)[-_.]labels[-_.]idx1[-_.]ubyte(\.gz)?$)", std::regex::icase);
  // prefix -> files; plain files win over .gz (sorted names put "x" before "x.gz").
  std::vector<std::pair<std::string, IdxFiles>> prefixes;
  auto entry = [&](const std::string& prefix) -> IdxFiles& {
    for (auto& p : prefixes)
      if (p.first == prefix) return p.second;
    prefixes.push_back({prefix, {}});
    return prefixes.back().second;
  };
  bool any = false;
  for (const std::string& name : names) {
    std::smatch m;
    if (name[0] == '.' || examine(root + "/" + name).kind != Kind::File) continue;
    if (std::regex_match(name, m, images_re)) {
      any = true;
      IdxFiles& f = entry(m[1].str());
      if (f.images.empty()) f.images = name;
    } else if (std::regex_match(name, m, labels_re)) {
      any = true;
      IdxFiles& f = entry(m[1].str());
      if (f.labels.empty()) f.labels = name;
    }
  }
  if (!any) return false;

  DatasetReport& rep = data.report;
  rep.layout = "idx";
  // Roles from the prefix: "...train" trains, "...t10k"/"...test" validates; the stem pairs them.
  struct Pair {
    std::string stem;
    const IdxFiles* train = nullptr;
    const IdxFiles* test = nullptr;
  };
  std::vector<Pair> pairs;
  for (const auto& [prefix, files] : prefixes) {
    if (files.images.empty() || files.labels.empty()) {
      const std::string& present = files.images.empty() ? files.labels : files.images;
      rep.skipped.push_back({present, files.images.empty() ? "IDX labels without their images file"
                                                           : "IDX images without their labels file"});
      continue;
    }
    const std::string p = lower(prefix);
    std::string stem;
    bool train = false;
    if (p.ends_with("train")) {
      stem = p.substr(0, p.size() - 5), train = true;
    } else if (p.ends_with("t10k") || p.ends_with("test")) {
      stem = p.substr(0, p.size() - 4);
    } else {
      stem = p, train = true;
    }
    auto it = std::find_if(pairs.begin(), pairs.end(), [&](const Pair& x) { return x.stem == stem; });
    if (it == pairs.end()) it = pairs.insert(pairs.end(), Pair{stem});
    (train ? it->train : it->test) = &files;
  }
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) { return a.stem < b.stem; });
  const Pair* chosen = nullptr;
  for (const Pair& p : pairs) {
    if (p.train && !chosen) {
      chosen = &p;
    } else {
      rep.notes.push_back("'" + (p.train ? p.train : p.test)->images + "' not used (one IDX dataset per folder)");
    }
  }
  if (!chosen) {
    rep.errors.push_back("'" + root +
                         "' holds IDX files but no training pair (*train-images-idx3-ubyte with "
                         "*train-labels-idx1-ubyte)");
    return true;
  }

  PixelImages images;
  try {
    images = read_idx_pair(root + "/" + chosen->train->images, root + "/" + chosen->train->labels);
  } catch (const Error& e) {
    rep.skipped.push_back({chosen->train->images, e.what()});
    rep.errors.push_back("the training IDX files in '" + root + "' cannot be read: " + e.what());
    return true;
  }
  const int64_t n_train = images.count();
  if (chosen->test) {
    try {
      PixelImages test = read_idx_pair(root + "/" + chosen->test->images, root + "/" + chosen->test->labels);
      if (test.height != images.height || test.width != images.width) {
        rep.skipped.push_back({chosen->test->images, "images of another size than the training images"});
      } else {
        images.pixels.insert(images.pixels.end(), test.pixels.begin(), test.pixels.end());
        images.labels.insert(images.labels.end(), test.labels.begin(), test.labels.end());
        Hasher h;
        h.add_u64(images.content_hash);
        h.add_u64(test.content_hash);
        images.content_hash = h.digest();
        pools.given_split = true;
        pools.validation_source = "the " + chosen->test->images + " file";
      }
    } catch (const Error& e) {
      rep.skipped.push_back({chosen->test->images, e.what()});
    }
  }

  int max_label = 0;
  for (int32_t l : images.labels) max_label = std::max<int>(max_label, l);
  const bool fashion = lower(root).find("fashion") != std::string::npos && max_label < 10;
  const int n_classes = fashion ? 10 : max_label + 1;
  for (int c = 0; c < n_classes; ++c)
    pools.class_names.push_back(fashion ? fashion_mnist_class_names()[static_cast<size_t>(c)] : std::to_string(c));
  if (fashion) rep.notes.push_back("class names: Fashion-MNIST's (the folder name says fashion)");
  adopt_in_memory(std::move(images), n_train, data, pools);
  return true;
}

bool scan_cifar(const std::string& root_in, DatasetData& data, Pools& pools) {
  std::string root = root_in;
  std::vector<std::string> names;
  std::string reason;
  auto is_batch = [](const std::string& n) {
    return (n.starts_with("data_batch_") && n.ends_with(".bin")) || n == "test_batch.bin";
  };
  list_dir(root, names, reason);
  if (std::none_of(names.begin(), names.end(), is_batch)) {
    if (examine(root + "/cifar-10-batches-bin").kind != Kind::Folder) return false;
    root += "/cifar-10-batches-bin";
    list_dir(root, names, reason);
    if (std::none_of(names.begin(), names.end(), is_batch)) return false;
  }
  DatasetReport& rep = data.report;
  rep.layout = "cifar10-binary";
  const std::string prefix = root == root_in ? "" : "cifar-10-batches-bin/";
  // data_batch_2 before data_batch_10: by number, not by name.
  std::vector<std::pair<long, std::string>> batches;
  for (const std::string& n : names)
    if (n.starts_with("data_batch_") && n.ends_with(".bin"))
      batches.push_back({std::strtol(n.c_str() + 11, nullptr, 10), n});
  std::sort(batches.begin(), batches.end());

  PixelImages images;
  for (const auto& b : batches) {
    try {
      read_cifar10_batch(root + "/" + b.second, images);
    } catch (const Error& e) {
      rep.skipped.push_back({prefix + b.second, e.what()});
    }
  }
  const int64_t n_train = images.count();
  if (std::count(names.begin(), names.end(), "test_batch.bin")) {
    try {
      read_cifar10_batch(root + "/test_batch.bin", images);
      pools.given_split = images.count() > n_train;
      pools.validation_source = "the test_batch.bin file";
    } catch (const Error& e) {
      rep.skipped.push_back({prefix + "test_batch.bin", e.what()});
    }
  }
  if (n_train == 0) {
    rep.errors.push_back("'" + root + "' holds no readable CIFAR-10 training batch (data_batch_*.bin)");
    return true;
  }

  int max_label = 0;
  for (int32_t l : images.labels) max_label = std::max<int>(max_label, l);
  std::vector<std::string> meta;
  {
    std::string text = read_text_file(root + "/batches.meta.txt"), line;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      line = text.substr(start, end - start);
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
      if (!line.empty()) meta.push_back(line);
      start = end + 1;
    }
  }
  if (meta.empty()) rep.notes.push_back("no batches.meta.txt: classes are named by their numbers");
  const int n_classes = std::max<int>(max_label + 1, static_cast<int>(meta.size()));
  for (int c = 0; c < n_classes; ++c)
    pools.class_names.push_back(c < static_cast<int>(meta.size()) ? meta[static_cast<size_t>(c)] : std::to_string(c));
  adopt_in_memory(std::move(images), n_train, data, pools);
  return true;
}

}  // namespace ampwb::detail
