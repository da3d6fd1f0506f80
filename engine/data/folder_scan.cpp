// The folder walk of the folder layouts (class folders, train/ and val/): every file under the class folders found,
// followed through symbolic links with loops detected, and checked together (data/file_checks.h).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "data/cache_store.h"
#include "data/dataset_scan.h"
#include "data/file_checks.h"

namespace ampwb::detail {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

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

namespace {

constexpr int kMaxDepth = 64;  // nesting deeper than this is not a dataset

std::string join(const std::string& rel, const std::string& name) { return rel.empty() ? name : rel + "/" + name; }

using FolderId = std::pair<uint64_t, uint64_t>;  // device, inode
FolderId folder_id(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

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
        skip(r, is_gif_name(name) ? kGifNotRead : "not an image file");
      } else if (const auto [first, added] = files_seen_.emplace(folder_id(e.st), r); !added) {
        skip(r, "the same file as " + first->second + " (a link): one image, not two");  // under two labels, maybe
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
  std::map<FolderId, std::string> files_seen_;  // every image file by its device and inode: its first path
};

}  // namespace

bool has_subfolder(const std::string& path) {
  std::vector<std::string> names;
  std::string reason;
  if (!list_dir(path, names, reason)) return false;
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return n[0] != '.' && examine(path + "/" + n).kind == Kind::Folder; });
}

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
    } else if (const auto same = std::find_if(class_folders.begin(), class_folders.end(),
                                              [&](const ClassFolder& c) { return folder_id(c.st) == folder_id(e.st); });
               same != class_folders.end()) {  // a link to another class folder: its images under two labels
      walk.skip(r, "the same folder as class " + same->name + " (a link): one class, not two");
    } else {
      class_folders.push_back({name, e.st});
      walk.reserve_folder(e.st);
    }
  }
  if (!classes_rel.empty()) {  // the rest of the root is not part of the dataset
    const std::string outside = validation_rel.empty() ? "outside " + classes_rel + "/"
                                                       : "outside " + classes_rel + "/ and " + validation_rel + "/";
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

}  // namespace ampwb::detail
