// The engine's hash (multiply-rotate with murmur3's finalizer) and the FNV-1a 64 of stored dataset fingerprints.
#include "core/hash.h"

#include <cstdio>
#include <cstring>

namespace ampwb {
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

inline void store_le64(uint64_t v, uint8_t* bytes) {
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(v >> (8 * i));
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
  store_le64(v, bytes);
  add(bytes, 8);
}

uint64_t Hasher::digest() const { return fmix(h_ ^ length_); }

std::string Hasher::hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void Fnv1a64::add(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) {
    h_ ^= p[i];
    h_ *= 1099511628211ull;
  }
}

void Fnv1a64::add_u64(uint64_t v) {
  uint8_t bytes[8];
  store_le64(v, bytes);
  add(bytes, 8);
}

}  // namespace ampwb
