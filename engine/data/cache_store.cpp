// Cache folders, cache files read whole and replaced whole, and the fingerprint hash.
#include "data/cache_store.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace ampwb {
namespace fs = std::filesystem;

std::string resolve_cache_dir(const std::string& option) {
  if (option == "-") return "";
  if (!option.empty()) return option;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "ampwb").string();
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "ampwb").string();
  return "";
}

bool write_cache_file(const std::string& path, const std::string& content) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return false;
  try {
    write_file_atomically(path, content);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {
inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}
inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

void Hasher::add(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  length_ += size;
  while (size >= 8) {
    h_ = rotl(h_ ^ (load_le64(p) * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full + 0x52dce729;
    p += 8;
    size -= 8;
  }
  if (size) {
    uint8_t tail[8] = {0};
    std::memcpy(tail, p, size);
    h_ = rotl(h_ ^ (load_le64(tail) * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full + 0x38495ab5;
  }
}

void Hasher::add_u64(uint64_t v) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(v >> (8 * i));
  add(bytes, 8);
}

uint64_t Hasher::digest() const { return fmix(h_ ^ length_); }

std::string Hasher::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest()));
  return buf;
}

}  // namespace ampwb
