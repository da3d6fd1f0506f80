// Checking many image files at once: in parallel, and only once per file version. A file's result is reused while
// its size and modification time are unchanged: from this process's memory, then from the cache folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image_file.h"

namespace ampwb {

struct FileToCheck {
  std::string path;      // as opened
  std::string relative;  // to the dataset root: the cache key
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

struct FileCheckStats {
  int64_t checked = 0;  // files read and decoded now
  int64_t reused = 0;   // results found in memory or in the cache folder
};

// One ImageCheck per file, in order. `cache_dir` "" keeps results in memory only.
std::vector<ImageCheck> check_files(const std::string& root, const std::vector<FileToCheck>& files,
                                    const std::string& cache_dir, int threads, FileCheckStats* stats = nullptr);

// Forgets the in-memory results (tests use it to see the cache folder at work).
void clear_file_check_memory();

}  // namespace ampwb
