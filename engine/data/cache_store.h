// Small helpers shared by the dataset caches: where cache files live, reading and writing them, and a fast stable hash
// for fingerprints (the same value on every machine and compiler: explicit little-endian reads, no std::hash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ampwb {

// The cache folder for an option value: "" = $XDG_CACHE_HOME/ampwb, else $HOME/.cache/ampwb; "-" = none ("").
std::string resolve_cache_dir(const std::string& option);

// Replaces the cache file whole (core/atomic_file.h), creating its folder. Returns false (and leaves the old file, if
// any) on any error: a cache that cannot be written is not a reason to stop.
bool write_cache_file(const std::string& path, const std::string& content);

// The whole file, or "" when it cannot be read.
std::string read_text_file(const std::string& path);

// A streaming 64-bit hash (word-wise multiply-rotate, murmur's finalizer). Not cryptographic.
class Hasher {
 public:
  void add(const void* data, size_t size);
  void add(const std::string& s) {
    add_u64(s.size());
    add(s.data(), s.size());
  }
  void add_u64(uint64_t v);
  uint64_t digest() const;
  std::string hex() const;  // 16 lowercase hex digits

 private:
  uint64_t h_ = 0x9e3779b97f4a7c15ull;
  uint64_t length_ = 0;
};

}  // namespace ampwb
