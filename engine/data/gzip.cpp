// CRC-32 and a table-driven inflate (RFC 1951) inside a gzip reader (RFC 1952).
#include "data/gzip.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/error.h"

namespace ampwb {
namespace {

// Slicing-by-4 tables: four bytes per step keeps checking a 50 MB file around 0.05 s.
struct Crc32Tables {
  uint32_t t[4][256];
  Crc32Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 4; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};
const Crc32Tables& crc_tables() {
  static const Crc32Tables tables;
  return tables;
}

class InflateError {};  // internal: turned into ampwb::Error with the file name by gunzip()

// Reads bits least-significant first. Reading past the end yields zero bytes and is counted, so a truncated
// stream is detected when the decoder finishes (or early, when it keeps reading far past the end).
class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

  void refill() {
    while (count_ <= 56) {
      uint64_t byte = 0;
      if (p_ < end_) {
        byte = *p_++;
      } else if (++padding_ > 16) {
        throw InflateError();
      }
      bits_ |= byte << count_;
      count_ += 8;
    }
  }
  uint32_t peek(int n) {
    if (count_ < n) refill();
    return static_cast<uint32_t>(bits_ & ((uint64_t{1} << n) - 1));
  }
  void drop(int n) {
    bits_ >>= n;
    count_ -= n;
  }
  uint32_t take(int n) {
    const uint32_t v = peek(n);
    drop(n);
    return v;
  }
  void align_to_byte() { drop(count_ % 8); }
  // Bytes fully consumed so far (after align_to_byte()); throws when bits past the real end were used.
  const uint8_t* position() const {
    const int64_t unread_real = static_cast<int64_t>(count_ / 8) - padding_;
    if (unread_real < 0) throw InflateError();
    return p_ - unread_real;
  }
  void seek(const uint8_t* p) {
    p_ = p;
    bits_ = 0;
    count_ = 0;
    padding_ = 0;
  }
  const uint8_t* end() const { return end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  uint64_t bits_ = 0;
  int count_ = 0;
  int padding_ = 0;
};

uint32_t reverse_bits(uint32_t v, int n) {
  uint32_t r = 0;
  for (int i = 0; i < n; ++i) r |= ((v >> i) & 1u) << (n - 1 - i);
  return r;
}

// A canonical Huffman code: a 2^kFastBits lookup for short codes, a per-length walk for the rest.
class Huffman {
 public:
  static constexpr int kFastBits = 10;

  void build(const uint8_t* lengths, int count) {
    int sizes[17] = {0};
    for (int i = 0; i < count; ++i) ++sizes[lengths[i]];
    sizes[0] = 0;
    fast_.fill(0);
    int next_code[16];
    int code = 0, k = 0;
    for (int len = 1; len < 16; ++len) {
      next_code[len] = code;
      first_code_[len] = static_cast<uint16_t>(code);
      first_symbol_[len] = static_cast<uint16_t>(k);
      code += sizes[len];
      if (sizes[len] && code - 1 >= (1 << len)) throw InflateError();  // over-subscribed
      max_code_[len] = code << (16 - len);
      code <<= 1;
      k += sizes[len];
    }
    max_code_[16] = 0x10000;
    for (int symbol = 0; symbol < count; ++symbol) {
      const int len = lengths[symbol];
      if (!len) continue;
      const int slot = next_code[len] - first_code_[len] + first_symbol_[len];
      symbols_[slot] = static_cast<uint16_t>(symbol);
      if (len <= kFastBits) {
        const uint16_t entry = static_cast<uint16_t>((symbol << 4) | len);
        for (uint32_t j = reverse_bits(static_cast<uint32_t>(next_code[len]), len); j < (1u << kFastBits);
             j += 1u << len)
          fast_[j] = entry;
      }
      ++next_code[len];
    }
  }

  int decode(BitReader& in) const {
    const uint16_t entry = fast_[in.peek(kFastBits)];
    if (entry) {
      in.drop(entry & 15);
      return entry >> 4;
    }
    const uint32_t k = reverse_bits(in.peek(16), 16);
    int len = kFastBits + 1;
    while (len < 16 && static_cast<int>(k) >= max_code_[len]) ++len;
    if (len >= 16) throw InflateError();  // no code of this bit pattern
    const int slot = static_cast<int>(k >> (16 - len)) - first_code_[len] + first_symbol_[len];
    if (slot < 0 || slot >= 288) throw InflateError();
    in.drop(len);
    return symbols_[slot];
  }

 private:
  std::array<uint16_t, 1 << kFastBits> fast_{};
  uint16_t first_code_[17] = {0};
  uint16_t first_symbol_[17] = {0};
  int max_code_[17] = {0};
  uint16_t symbols_[288] = {0};
};

constexpr uint16_t kLengthBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr uint8_t kLengthExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr uint16_t kDistBase[30] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                    33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                    1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr uint8_t kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                    6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

void inflate_block(BitReader& in, const Huffman& lit, const Huffman& dist, std::vector<uint8_t>& out,
                   size_t member_start) {
  for (;;) {
    const int symbol = lit.decode(in);
    if (symbol < 256) {
      out.push_back(static_cast<uint8_t>(symbol));
      continue;
    }
    if (symbol == 256) return;
    const int li = symbol - 257;
    if (li >= 29) throw InflateError();
    const size_t length = kLengthBase[li] + in.take(kLengthExtra[li]);
    const int di = dist.decode(in);
    if (di >= 30) throw InflateError();
    const size_t distance = kDistBase[di] + in.take(kDistExtra[di]);
    if (distance > out.size() - member_start) throw InflateError();
    const size_t from = out.size() - distance;
    out.resize(out.size() + length);
    uint8_t* o = out.data();
    const size_t to = out.size() - length;
    if (distance >= length) {
      std::memcpy(o + to, o + from, length);
    } else {
      for (size_t i = 0; i < length; ++i) o[to + i] = o[from + i];  // overlapping: a repeating pattern
    }
  }
}

void read_dynamic_tables(BitReader& in, Huffman& lit, Huffman& dist) {
  static constexpr uint8_t kOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
  const int hlit = static_cast<int>(in.take(5)) + 257;
  const int hdist = static_cast<int>(in.take(5)) + 1;
  const int hclen = static_cast<int>(in.take(4)) + 4;
  // RFC 1951 allows at most 286 literal/length codes; 5 bits can claim 288, which would overrun `lengths` below
  // (found by scripts/fuzz.sh: fuzz/corpus/gzip/regress-hlit-288).
  if (hlit > 286) throw InflateError();
  uint8_t code_lengths[19] = {0};
  for (int i = 0; i < hclen; ++i) code_lengths[kOrder[i]] = static_cast<uint8_t>(in.take(3));
  Huffman lengths_code;
  lengths_code.build(code_lengths, 19);
  uint8_t lengths[286 + 32] = {0};
  int n = 0;
  while (n < hlit + hdist) {
    const int symbol = lengths_code.decode(in);
    if (symbol < 16) {
      lengths[n++] = static_cast<uint8_t>(symbol);
      continue;
    }
    int repeat = 0;
    uint8_t value = 0;
    if (symbol == 16) {
      if (n == 0) throw InflateError();
      value = lengths[n - 1];
      repeat = 3 + static_cast<int>(in.take(2));
    } else if (symbol == 17) {
      repeat = 3 + static_cast<int>(in.take(3));
    } else if (symbol == 18) {
      repeat = 11 + static_cast<int>(in.take(7));
    } else {
      throw InflateError();
    }
    if (n + repeat > hlit + hdist) throw InflateError();
    while (repeat--) lengths[n++] = value;
  }
  if (lengths[256] == 0) throw InflateError();  // no end-of-block code
  lit.build(lengths, hlit);
  dist.build(lengths + hlit, hdist);
}

// Inflates one raw deflate stream; returns the first byte after it.
const uint8_t* inflate(const uint8_t* data, size_t size, std::vector<uint8_t>& out) {
  BitReader in(data, size);
  const size_t member_start = out.size();
  Huffman lit, dist;
  bool last = false;
  while (!last) {
    last = in.take(1);
    const uint32_t type = in.take(2);
    if (type == 0) {  // stored
      in.align_to_byte();
      const uint8_t* p = in.position();
      if (in.end() - p < 4) throw InflateError();
      const uint32_t len = p[0] | (p[1] << 8), nlen = p[2] | (p[3] << 8);
      if ((len ^ 0xffffu) != nlen || static_cast<size_t>(in.end() - p - 4) < len) throw InflateError();
      out.insert(out.end(), p + 4, p + 4 + len);
      in.seek(p + 4 + len);
    } else if (type == 1) {  // fixed codes
      static const auto fixed = [] {
        std::array<Huffman, 2> codes;
        uint8_t lengths[288];
        for (int i = 0; i < 288; ++i) lengths[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
        codes[0].build(lengths, 288);
        uint8_t dist_lengths[30];
        std::memset(dist_lengths, 5, sizeof dist_lengths);
        codes[1].build(dist_lengths, 30);
        return codes;
      }();
      inflate_block(in, fixed[0], fixed[1], out, member_start);
    } else if (type == 2) {
      read_dynamic_tables(in, lit, dist);
      inflate_block(in, lit, dist, out, member_start);
    } else {
      throw InflateError();
    }
  }
  in.align_to_byte();
  return in.position();
}

}  // namespace

uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc) {
  const auto& t = crc_tables().t;
  crc = ~crc;
  while (size >= 4) {
    crc ^= static_cast<uint32_t>(data[0]) | (static_cast<uint32_t>(data[1]) << 8) |
           (static_cast<uint32_t>(data[2]) << 16) | (static_cast<uint32_t>(data[3]) << 24);
    crc = t[3][crc & 0xff] ^ t[2][(crc >> 8) & 0xff] ^ t[1][(crc >> 16) & 0xff] ^ t[0][crc >> 24];
    data += 4;
    size -= 4;
  }
  while (size--) crc = t[0][(crc ^ *data++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

bool is_gzip(const uint8_t* data, size_t size) { return size >= 2 && data[0] == 0x1f && data[1] == 0x8b; }

std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, const std::string& what) {
  std::vector<uint8_t> out;
  if (!is_gzip(data, size)) throw Error("'" + what + "' is not a gzip file");
  // The last member's trailer holds its length mod 2^32: a good first guess at the output size, but only a
  // claim: deflate expands at most 1032-fold, so a 38-byte file claiming 4 GiB gets no 4 GiB reservation (the
  // fuzzer's first find: scripts/fuzz.sh, test DataFormats.GzipTrailerCannotReserveMoreThanDeflateCanHold).
  if (size >= 18) {
    const size_t claimed =
        data[size - 4] | (data[size - 3] << 8) | (data[size - 2] << 16) | (size_t{data[size - 1]} << 24);
    out.reserve(std::min(claimed, size * 1032));
  }
  const uint8_t* p = data;
  const uint8_t* end = data + size;
  try {
    while (p < end) {
      if (end - p < 18 || !is_gzip(p, static_cast<size_t>(end - p)) || p[2] != 8) throw InflateError();
      const uint8_t flags = p[3];
      p += 10;
      if (flags & 4) {  // FEXTRA
        if (end - p < 2) throw InflateError();
        const size_t xlen = p[0] | (p[1] << 8);
        if (static_cast<size_t>(end - p) < 2 + xlen) throw InflateError();
        p += 2 + xlen;
      }
      for (int field : {8, 16}) {  // FNAME, FCOMMENT: zero-terminated
        if (!(flags & field)) continue;
        while (p < end && *p) ++p;
        if (p == end) throw InflateError();
        ++p;
      }
      if (flags & 2) p += 2;  // FHCRC
      if (p >= end) throw InflateError();
      const size_t start = out.size();
      p = inflate(p, static_cast<size_t>(end - p), out);
      if (end - p < 8) throw InflateError();
      const uint32_t crc = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
      const uint32_t isize = p[4] | (p[5] << 8) | (p[6] << 16) | (static_cast<uint32_t>(p[7]) << 24);
      p += 8;
      if (crc32(out.data() + start, out.size() - start) != crc || static_cast<uint32_t>(out.size() - start) != isize)
        throw Error("'" + what + "' is corrupt (gzip checksum mismatch)");
      while (p < end && *p == 0) ++p;  // some tools pad members with zeros
    }
  } catch (const InflateError&) {
    throw Error("'" + what + "' is truncated or corrupt (invalid gzip data)");
  }
  return out;
}

}  // namespace ampwb
