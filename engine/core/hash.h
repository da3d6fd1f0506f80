// The engine's one hash: a streaming 64-bit hash with the same value on every machine and compiler (explicit
// little-endian reads, no std::hash), for cache keys, dataset fingerprints and the seeds derived from them. Not
// cryptographic, and not a checksum: checkpoints carry CRC-32C (core/crc32c.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ampwb {

// Word-wise multiply-rotate over the bytes, murmur3's finalizer over the result and the length. Each add() pads its
// last partial word, so the value depends on how the bytes are split into calls: hash the same pieces the same way.
//
// Frozen: its values reach disk and the training itself. Dataset::fingerprint() (shown by `ampwb dataset inspect`),
// the cache file names and, above all, the seeds of the validation split and of augmentation come from it, so a
// changed value would give a resumed run another split. Tests pin values for fixed inputs (test_core).
class Hasher {
 public:
  void add(const void* data, size_t size);
  // A length, then the bytes: ("ab", "c") and ("a", "bc") differ.
  void add(const std::string& s) {
    add_u64(s.size());
    add(s.data(), s.size());
  }
  void add_u64(uint64_t v);  // as 8 little-endian bytes
  uint64_t digest() const;
  std::string hex() const { return hex64(digest()); }  // 16 lowercase hex digits

  static std::string hex64(uint64_t v);

 private:
  uint64_t h_ = 0x9e3779b97f4a7c15ull;
  uint64_t length_ = 0;
};

// FNV-1a 64 (Fowler, Noll, Vo), kept for one stored format only: the run store's runs.dataset_fingerprint
// (store/dataset_fingerprint.h) has been FNV-1a since the column exists, and `ampwb compare` sets runs' fingerprints
// side by side, so a run recorded today must get the value an older run on the same folder got. Use Hasher for
// anything new.
class Fnv1a64 {
 public:
  void add(const void* data, size_t size);
  void add_u64(uint64_t v);  // as 8 little-endian bytes
  uint64_t digest() const { return h_; }
  std::string hex() const { return Hasher::hex64(h_); }

 private:
  uint64_t h_ = 14695981039346656037ull;
};

}  // namespace ampwb
