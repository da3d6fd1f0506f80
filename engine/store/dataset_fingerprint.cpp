// Dataset folder fingerprints.
#include "store/dataset_fingerprint.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <utility>
#include <vector>

#include "core/hash.h"

namespace ampwb {

std::string dataset_fingerprint(const std::string& folder) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, uintmax_t>> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec);
  if (ec) return "";
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return "";
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    const uintmax_t size = it->file_size(file_ec);
    files.emplace_back(fs::relative(it->path(), folder, file_ec).generic_string(), file_ec ? 0 : size);
  }
  std::sort(files.begin(), files.end());
  Fnv1a64 hash;  // the stored format (core/hash.h): not the engine's Hasher, or older runs would look different
  for (const auto& [path, size] : files) {
    hash.add(path.c_str(), path.size() + 1);  // with the terminating 0, so "ab"+"c" differs from "a"+"bc"
    hash.add_u64(size);
  }
  return hash.hex();
}

}  // namespace ampwb
