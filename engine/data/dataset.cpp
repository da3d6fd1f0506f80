// Dataset scanning: layout detection, the folder walk, IDX/CIFAR loading, the stratified split and the report.
#include "data/dataset.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/hash.h"
#include "core/rng.h"
#include "data/binary_formats.h"
#include "data/cache_store.h"
#include "data/dataset_data.h"
#include "data/file_checks.h"

namespace ampwb {
using detail::DatasetData;
using detail::Sample;

namespace {

constexpr int kMaxDepth = 64;  // nesting deeper than this is not a dataset

std::string join(const std::string& rel, const std::string& name) { return rel.empty() ? name : rel + "/" + name; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Sorted entry names (bytewise, so every machine agrees), without "." and "..".
bool list_dir(const std::string& path, std::vector<std::string>& names, std::string& reason) {
  names.clear();
  DIR* dir = ::opendir(path.c_str());
  if (!dir) {
    reason = std::strerror(errno);
    return false;
  }
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return true;
}

enum class Kind { File, Folder, Other, Bad };
struct Entry {
  Kind kind = Kind::Bad;
  struct stat st {};
  std::string reason;  // for Bad
};

// What a path is, following symbolic links; a link that cannot be followed says why.
Entry examine(const std::string& path) {
  Entry e;
  if (::stat(path.c_str(), &e.st) == 0) {
    e.kind = S_ISDIR(e.st.st_mode) ? Kind::Folder : S_ISREG(e.st.st_mode) ? Kind::File : Kind::Other;
    return e;
  }
  const int err = errno;
  struct stat link {};
  const bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  if (err == ELOOP) {
    e.reason = "symbolic link loop";
  } else if (is_link && err == ENOENT) {
    e.reason = "broken symbolic link";
  } else {
    e.reason = std::string("unreadable (") + std::strerror(err) + ")";
  }
  return e;
}

using FolderId = std::pair<uint64_t, uint64_t>;  // device, inode
FolderId folder_id(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

// Candidate classes and their images before the split; items index DatasetData::paths or its pixels.
struct Pools {
  std::vector<std::string> class_names;
  std::vector<std::vector<int64_t>> train, validation;  // per class, in a stable (path or file) order
  bool given_split = false;
  std::string validation_source;
  // Folder layouts: per item (index into DatasetData::paths), the file's size and modification time.
  std::vector<std::pair<int64_t, int64_t>> stamps;
  uint64_t content_hash = 0;  // pixel layouts: of the files' bytes
};

// The folder walk of the folder layouts: every file under the class folders, to be checked together.
class FolderWalk {
 public:
  FolderWalk(std::string root, DatasetReport& report) : root_(std::move(root)), report_(report) {}

  struct Found {
    int cls = 0;
    int part = 0;  // 0: training pool, 1: validation pool
  };
  std::vector<FileToCheck> files;
  std::vector<Found> found;

  void skip(const std::string& rel, const std::string& reason) { report_.skipped.push_back({rel, reason}); }

  // Registers the class folders first, so a link from one class into another is seen as a duplicate.
  void reserve_folder(const struct stat& st) { visited_.insert(folder_id(st)); }
  void add_root_ancestor(const struct stat& st) { ancestors_.push_back(folder_id(st)); }
  bool seen(const struct stat& st) const { return visited_.count(folder_id(st)) > 0; }

  void walk_class(const std::string& rel, const struct stat& st, int cls, int part) {
    ancestors_.push_back(folder_id(st));
    walk(rel, cls, part, 1);
    ancestors_.pop_back();
  }

 private:
  void walk(const std::string& rel, int cls, int part, int depth) {
    std::vector<std::string> names;
    std::string reason;
    if (!list_dir(root_ + "/" + rel, names, reason)) {
      skip(rel, "unreadable folder (" + reason + ")");
      return;
    }
    for (const std::string& name : names) {
      const std::string r = join(rel, name);
      const Entry e = examine(root_ + "/" + r);
      if (name[0] == '.') {
        skip(r, e.kind == Kind::Folder ? "hidden folder" : "hidden file");
      } else if (e.kind == Kind::Bad) {
        skip(r, e.reason);
      } else if (e.kind == Kind::Other) {
        skip(r, "not a regular file");
      } else if (e.kind == Kind::Folder) {
        const FolderId id = folder_id(e.st);
        if (std::find(ancestors_.begin(), ancestors_.end(), id) != ancestors_.end()) {
          skip(r, "symbolic link loop");
        } else if (visited_.count(id)) {
          skip(r, "folder already scanned through another path");
        } else if (depth >= kMaxDepth) {
          skip(r, "folders nested too deep");
        } else {
          visited_.insert(id);
          ancestors_.push_back(id);
          walk(r, cls, part, depth + 1);
          ancestors_.pop_back();
        }
      } else if (!has_image_extension(name)) {
        skip(r, "not an image file");
      } else {
        files.push_back({root_ + "/" + r, r, static_cast<int64_t>(e.st.st_size),
                         static_cast<int64_t>(e.st.st_mtim.tv_sec) * 1000000000 + e.st.st_mtim.tv_nsec});
        found.push_back({cls, part});
      }
    }
  }

  std::string root_;
  DatasetReport& report_;
  std::set<FolderId> visited_;
  std::vector<FolderId> ancestors_;
};

const char* kValidationFolders[] = {"val", "valid", "validation", "test"};

// A folder holding at least one non-hidden sub-folder (a folder of class folders).
bool has_subfolder(const std::string& path) {
  std::vector<std::string> names;
  std::string reason;
  if (!list_dir(path, names, reason)) return false;
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return n[0] != '.' && examine(path + "/" + n).kind == Kind::Folder; });
}

// Folder layouts: class folders under `classes_rel` ("" = the root), and optionally a validation folder of class
// folders. Every file is checked here; the usable ones become DatasetData::paths.
void scan_folders(const std::string& root, const std::string& classes_rel, const std::string& validation_rel,
                  DatasetData& data, Pools& pools, int threads) {
  DatasetReport& rep = data.report;
  FolderWalk walk(root, rep);
  struct stat root_st {};
  ::stat(root.c_str(), &root_st);
  walk.add_root_ancestor(root_st);
  walk.reserve_folder(root_st);

  // Top level: the class folders (and, for split layouts, what lies outside train/ and val/).
  std::vector<std::string> names;
  std::string reason;
  const std::string classes_path = classes_rel.empty() ? root : root + "/" + classes_rel;
  list_dir(classes_path, names, reason);
  struct ClassFolder {
    std::string name;
    struct stat st;
  };
  std::vector<ClassFolder> class_folders;
  for (const std::string& name : names) {
    const std::string r = join(classes_rel, name);
    const Entry e = examine(root + "/" + r);
    if (name[0] == '.') {
      walk.skip(r, e.kind == Kind::Folder ? "hidden folder" : "hidden file");
    } else if (e.kind == Kind::Bad) {
      walk.skip(r, e.reason);
    } else if (e.kind != Kind::Folder) {
      walk.skip(r, "not in a class folder");
    } else if (folder_id(e.st) == folder_id(root_st)) {
      walk.skip(r, "symbolic link loop");
    } else {
      class_folders.push_back({name, e.st});
      walk.reserve_folder(e.st);
    }
  }
  if (!classes_rel.empty()) {  // the rest of the root is not part of the dataset
    const std::string outside =
        validation_rel.empty() ? "outside train/" : "outside train/ and " + validation_rel + "/";
    list_dir(root, names, reason);
    for (const std::string& name : names) {
      if (name == classes_rel || name == validation_rel) continue;
      if (name[0] != '.') {
        walk.skip(name, outside);
      } else {
        walk.skip(name, examine(root + "/" + name).kind == Kind::Folder ? "hidden folder" : "hidden file");
      }
    }
  }

  for (const ClassFolder& cf : class_folders) pools.class_names.push_back(cf.name);
  const size_t n_classes = class_folders.size();
  pools.train.assign(n_classes, {});
  pools.validation.assign(n_classes, {});
  for (size_t c = 0; c < n_classes; ++c)
    walk.walk_class(join(classes_rel, class_folders[c].name), class_folders[c].st, static_cast<int>(c), 0);

  if (!validation_rel.empty()) {
    list_dir(root + "/" + validation_rel, names, reason);
    for (const std::string& name : names) {
      const std::string r = validation_rel + "/" + name;
      const Entry e = examine(root + "/" + r);
      const auto it = std::find(pools.class_names.begin(), pools.class_names.end(), name);
      if (name[0] == '.') {
        walk.skip(r, e.kind == Kind::Folder ? "hidden folder" : "hidden file");
      } else if (e.kind == Kind::Bad) {
        walk.skip(r, e.reason);
      } else if (e.kind != Kind::Folder) {
        walk.skip(r, "not in a class folder");
      } else if (it == pools.class_names.end()) {
        walk.skip(r, "class not in " + classes_rel + "/");
      } else if (walk.seen(e.st)) {  // e.g. a link back into train/: never the same images in both splits
        walk.skip(r, "folder already scanned through another path");
      } else {
        walk.walk_class(r, e.st, static_cast<int>(it - pools.class_names.begin()), 1);
      }
    }
  }

  // Check every file, then keep the good ones in path order per class.
  const std::vector<ImageCheck> checks = check_files(root, walk.files, data.cache_dir, threads);
  std::vector<size_t> order(walk.files.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return walk.files[a].relative < walk.files[b].relative; });
  for (size_t i : order) {
    if (!checks[i].ok) {
      walk.skip(walk.files[i].relative, checks[i].reason);
      continue;
    }
    const int64_t item = static_cast<int64_t>(data.paths.size());
    data.paths.push_back(walk.files[i].path);
    data.sizes.push_back({checks[i].width, checks[i].height, checks[i].format});
    pools.stamps.push_back({walk.files[i].size, walk.files[i].mtime_ns});
    auto& pool = walk.found[i].part == 0 ? pools.train : pools.validation;
    pool[static_cast<size_t>(walk.found[i].cls)].push_back(item);
  }
}

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

  // The limit: round-robin over the classes in path order, so the first N cover every class.
  const int64_t train_total = [&] {
    int64_t t = 0;
    for (const auto& v : train) t += static_cast<int64_t>(v.size());
    return t;
  }();
  rep.train_images_before_limit = train_total;
  if (options.max_train_images > 0 && train_total > options.max_train_images) {
    std::vector<std::vector<int64_t>> kept(train.size());
    int64_t taken = 0;
    for (size_t round = 0; taken < options.max_train_images; ++round)
      for (size_t c = 0; c < train.size() && taken < options.max_train_images; ++c)
        if (round < train[c].size()) kept[c].push_back(train[c][round]), ++taken;
    train = std::move(kept);
    rep.notes.push_back("training split limited to the first " + std::to_string(options.max_train_images) + " of " +
                        std::to_string(train_total) + " images");
  }

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
    rep.errors.push_back("dataset folder '" + root_in + "' does not exist");
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
  } else if (examine(root + "/train").kind == Kind::Folder && has_subfolder(root + "/train")) {
    std::string validation_rel;
    for (const char* v : kValidationFolders) {
      if (examine(root + "/" + v).kind != Kind::Folder || !has_subfolder(root + "/" + v)) continue;
      if (validation_rel.empty()) {
        validation_rel = v;
      } else {
        rep.notes.push_back(std::string(v) + "/ not used (" + validation_rel + "/ is the validation split)");
      }
    }
    rep.layout = validation_rel.empty() ? "class-folders" : "split-folders";
    if (validation_rel.empty())
      rep.notes.push_back("classes from train/ (no val/, valid/, validation/ or test/ folder of class folders)");
    scan_folders(root, "train", validation_rel, *data, pools, threads);
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
