// IDX and CIFAR-10 binary readers.
#include "data/binary_formats.h"

#include <sstream>

#include "core/error.h"
#include "core/hash.h"
#include "data/gzip.h"
#include "data/image_file.h"

namespace ampwb {
namespace {

// Plain messages (no source location): they reach the user in the dataset report.
#define REQUIRE(cond, msg)             \
  do {                                 \
    if (!(cond)) {                     \
      std::ostringstream require_msg_; \
      require_msg_ << msg;             \
      throw Error(require_msg_.str()); \
    }                                  \
  } while (0)

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// The file's bytes (decompressed when gzip), hashing what was stored.
std::vector<uint8_t> read_maybe_gzip(const std::string& path, Hasher& hash) {
  std::vector<uint8_t> bytes;
  std::string reason;
  REQUIRE(read_file(path, bytes, reason), "cannot read '" << path << "': " << reason);
  hash.add(bytes.data(), bytes.size());
  if (is_gzip(bytes.data(), bytes.size())) return gunzip(bytes.data(), bytes.size(), path);
  return bytes;
}

// Checks the IDX header (unsigned bytes, `dims` dimensions) and returns the dimensions.
std::vector<uint32_t> idx_dims(const std::vector<uint8_t>& b, int dims, const std::string& path) {
  REQUIRE(b.size() >= 4u + 4u * dims && b[0] == 0 && b[1] == 0 && b[2] == 0x08 && b[3] == dims,
          "'" << path << "' is not an IDX file of unsigned bytes with " << dims << " dimension(s) (bad header)");
  std::vector<uint32_t> d(dims);
  uint64_t total = 1;
  for (int i = 0; i < dims; ++i) total *= d[i] = be32(b.data() + 4 + 4 * i);
  const uint64_t expected = 4u + 4u * dims + total;
  REQUIRE(b.size() >= expected,
          "'" << path << "' is truncated (" << b.size() << " bytes; its header says " << expected << ")");
  return d;
}

}  // namespace

PixelImages read_idx_pair(const std::string& images_path, const std::string& labels_path) {
  Hasher hash;
  const std::vector<uint8_t> images = read_maybe_gzip(images_path, hash);
  const std::vector<uint8_t> labels = read_maybe_gzip(labels_path, hash);
  const auto di = idx_dims(images, 3, images_path);
  const auto dl = idx_dims(labels, 1, labels_path);
  REQUIRE(di[0] == dl[0], "'" << images_path << "' holds " << di[0] << " images but '" << labels_path << "' holds "
                              << dl[0] << " labels");
  REQUIRE(di[1] > 0 && di[2] > 0, "'" << images_path << "' holds images of " << di[2] << "x" << di[1] << " pixels");
  PixelImages out;
  out.height = static_cast<int>(di[1]);
  out.width = static_cast<int>(di[2]);
  out.channels = 1;
  out.pixels.assign(images.begin() + 16, images.begin() + 16 + static_cast<size_t>(di[0]) * di[1] * di[2]);
  out.labels.assign(labels.begin() + 8, labels.begin() + 8 + di[0]);
  out.content_hash = hash.digest();
  return out;
}

void read_cifar10_batch(const std::string& path, PixelImages& images) {
  constexpr size_t kRecord = 1 + 3 * 32 * 32;
  std::vector<uint8_t> bytes;
  std::string reason;
  REQUIRE(read_file(path, bytes, reason), "cannot read '" << path << "': " << reason);
  REQUIRE(!bytes.empty() && bytes.size() % kRecord == 0, "'" << path << "' is not a CIFAR-10 binary batch ("
                                                             << bytes.size() << " bytes is not a whole number of "
                                                             << kRecord << "-byte records)");
  Hasher hash;
  hash.add_u64(images.content_hash);
  hash.add(bytes.data(), bytes.size());
  images.content_hash = hash.digest();
  images.height = images.width = 32;
  images.channels = 3;
  images.planar = true;
  const size_t n = bytes.size() / kRecord;
  images.pixels.reserve(images.pixels.size() + n * (kRecord - 1));
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* r = bytes.data() + i * kRecord;
    images.labels.push_back(r[0]);
    images.pixels.insert(images.pixels.end(), r + 1, r + kRecord);
  }
}

}  // namespace ampwb
