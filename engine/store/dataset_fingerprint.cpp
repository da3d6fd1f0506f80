// Dataset folder fingerprints.
#include "store/dataset_fingerprint.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

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
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      hash ^= static_cast<const unsigned char*>(data)[i];
      hash *= 1099511628211ull;
    }
  };
  for (const auto& [path, size] : files) {
    mix(path.data(), path.size() + 1);  // with the terminating 0, so "ab"+"c" differs from "a"+"bc"
    const uint64_t s = size;
    mix(&s, sizeof s);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

}  // namespace ampwb
