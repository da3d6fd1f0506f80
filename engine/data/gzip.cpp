// gzip through zlib (inflate with gzip framing, member after member), with the engine's size limit and errors.
#include "data/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>

#include "core/error.h"

namespace ampwb {
namespace {

// Deflate expands at most 1032-fold: a first guess at the output size never trusts a trailer beyond that.
constexpr size_t kMaxDeflateRatio = 1032;
constexpr size_t kMinChunk = size_t{1} << 16;

// One zlib inflate stream in gzip mode, ended however gunzip() leaves.
class Inflater {
 public:
  explicit Inflater(const std::string& what) {
    const int rc = inflateInit2(&z_, 16 + MAX_WBITS);  // 16: gzip header and trailer, no zlib or raw streams
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    if (rc != Z_OK) throw Error("cannot read '" + what + "': zlib would not start (" + zError(rc) + ")");
    watch_header();
  }
  ~Inflater() { inflateEnd(&z_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Ready for the next member: its header is read afresh.
  void next_member() {
    inflateReset(&z_);
    watch_header();
  }
  bool header_done() const { return header_.done == 1; }
  z_stream& stream() { return z_; }

 private:
  void watch_header() {
    header_ = gz_header{};  // no buffers: the name, comment and extra field are skipped
    inflateGetHeader(&z_, &header_);
  }

  z_stream z_{};
  gz_header header_{};
};

// The last member's trailer holds its length mod 2^32: a good first guess at the output size, but only a claim
// (the fuzzer's first find was a 37-byte file claiming 4 GiB: test
// DataGzip.TrailerCannotReserveMoreThanDeflateCanHold).
size_t first_guess(const uint8_t* data, size_t size, size_t max_size) {
  if (size < 18) return kMinChunk;
  const size_t claimed =
      data[size - 4] | (data[size - 3] << 8) | (data[size - 2] << 16) | (size_t{data[size - 1]} << 24);
  return std::max(kMinChunk, std::min({claimed, size * kMaxDeflateRatio, max_size}));
}

}  // namespace

uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc) {
  return static_cast<uint32_t>(crc32_z(crc, data, size));
}

bool is_gzip(const uint8_t* data, size_t size) { return size >= 2 && data[0] == 0x1f && data[1] == 0x8b; }

std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, const std::string& what, size_t max_size) {
  if (!is_gzip(data, size)) throw Error("'" + what + "' is not a gzip file");
  const std::string prefix = "'" + what + "' ";
  Inflater inflater(what);
  z_stream& z = inflater.stream();
  std::vector<uint8_t> out(std::min(first_guess(data, size, max_size), max_size + 1));
  size_t in = 0, produced = 0;  // bytes of `data` given to zlib, bytes of `out` filled
  for (;;) {
    if (produced == out.size()) {  // full: grow geometrically, up to one byte past the limit to see it passed
      if (out.size() > max_size)
        throw Error(prefix + "is too large (it inflates to more than " + std::to_string(max_size) + " bytes)");
      out.resize(std::min(std::max(out.size() * 2, kMinChunk), max_size + 1));
    }
    // zlib counts in 32 bits: longer input and output go through in slices.
    const size_t in_slice = std::min<size_t>(size - in, UINT_MAX),
                 out_slice = std::min<size_t>(out.size() - produced, UINT_MAX);
    z.next_in = const_cast<Bytef*>(data + in);
    z.avail_in = static_cast<uInt>(in_slice);
    z.next_out = out.data() + produced;
    z.avail_out = static_cast<uInt>(out_slice);
    const int rc = inflate(&z, Z_NO_FLUSH);
    in += in_slice - z.avail_in;
    produced += out_slice - z.avail_out;
    if (produced > max_size)
      throw Error(prefix + "is too large (it inflates to more than " + std::to_string(max_size) + " bytes)");

    if (rc == Z_STREAM_END) {
      while (in < size && data[in] == 0) ++in;  // some tools pad members with zeros
      if (in == size) break;
      inflater.next_member();
      continue;
    }
    if (rc == Z_OK || rc == Z_BUF_ERROR) {  // stopped for want of output space or of input
      if (z.avail_out > 0 && in == size)
        throw Error(prefix + (inflater.header_done() ? "is truncated (the gzip data ends before its end marker)"
                                                     : "is truncated (the gzip header is incomplete)"));
      continue;
    }
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    const char* msg = z.msg ? z.msg : zError(rc);
    if (!inflater.header_done()) throw Error(prefix + "is corrupt (bad gzip header: " + msg + ")");
    if (std::strcmp(msg, "incorrect data check") == 0) throw Error(prefix + "is corrupt (gzip checksum mismatch)");
    if (std::strcmp(msg, "incorrect length check") == 0) throw Error(prefix + "is corrupt (gzip length mismatch)");
    throw Error(prefix + "is corrupt (invalid gzip data: " + msg + ")");
  }
  out.resize(produced);
  return out;
}

}  // namespace ampwb
