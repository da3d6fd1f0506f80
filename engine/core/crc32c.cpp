// CRC-32C: SSE4.2's crc32 instruction, 8 bytes at a time, or a byte table (reflected polynomial 0x82F63B78).
#include "core/crc32c.h"

#include <array>
#include <cstring>

#include "core/simd.h"

namespace ampwb {
namespace {

uint32_t crc32c_table(const uint8_t* p, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = __builtin_ia32_crc32qi(c32, *p);
  return c32;
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  // SSE4.2 is older than AVX2: the scalar level (tests force it) is the only one without it.
  crc = simd_level() >= SimdLevel::Avx2 && __builtin_cpu_supports("sse4.2") ? crc32c_sse42(p, bytes, crc)
                                                                            : crc32c_table(p, bytes, crc);
  return ~crc;
}

}  // namespace ampwb
