// The dataset scanners, shared inside engine/data (not a public header): the folder walk of the folder layouts
// (folder_scan.cpp), the IDX and CIFAR-10 readers (binary_scan.cpp), and what they hand to the split in
// dataset.cpp (Pools).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset_data.h"

namespace ampwb::detail {

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

enum class Kind { File, Folder, Other, Bad };
struct Entry {
  Kind kind = Kind::Bad;
  struct stat st {};
  std::string reason;  // for Bad
};
// What a path is, following symbolic links; a link that cannot be followed says why.
Entry examine(const std::string& path);
// Sorted entry names (bytewise, so every machine agrees), without "." and "..".
bool list_dir(const std::string& path, std::vector<std::string>& names, std::string& reason);
// A folder holding at least one non-hidden sub-folder (a folder of class folders).
bool has_subfolder(const std::string& path);
std::string lower(std::string s);
std::string plural(int64_t n, const char* one, const char* many);  // "1 file", "3 files"

// The folders that hold a validation split beside train/, in order of preference.
inline constexpr const char* kValidationFolders[] = {"val", "valid", "validation", "test"};

// Folder layouts: class folders under `classes_rel` ("" = the root), and optionally a validation folder of class
// folders. Every file is checked here; the usable ones become DatasetData::paths.
void scan_folders(const std::string& root, const std::string& classes_rel, const std::string& validation_rel,
                  DatasetData& data, Pools& pools, int threads);
// MNIST-family IDX files and CIFAR-10 binary batches: false when the folder holds none.
bool scan_idx(const std::string& root, DatasetData& data, Pools& pools);
bool scan_cifar(const std::string& root, DatasetData& data, Pools& pools);

}  // namespace ampwb::detail
