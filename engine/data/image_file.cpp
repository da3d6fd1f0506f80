// Image-file sniffing, structural checks (JPEG marker walk, PNG chunk walk with CRCs) and decoding to BGR.
#include "data/image_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#ifdef AMPWB_HAVE_IMAGE_CODECS
#include <opencv2/imgcodecs.hpp>
#else
#include <opencv2/core.hpp>
#endif

#include "data/gzip.h"
#ifdef AMPWB_HAVE_IMAGE_CODECS
#include "data/jpeg_data_check.h"
#endif

namespace ampwb {
namespace {

[[maybe_unused]] constexpr const char* kNoCodecs =
    "this build decodes no image files (AMPWB_IMAGE_CODECS=OFF); IDX and CIFAR-10 data still load";

uint32_t be16(const uint8_t* p) { return (uint32_t{p[0]} << 8) | p[1]; }
uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint32_t le32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

bool starts_with(const uint8_t* data, size_t size, const char* magic, size_t n) {
  return size >= n && std::memcmp(data, magic, n) == 0;
}

ImageCheck fail(ImageFormat format, std::string reason) {
  ImageCheck c;
  c.format = format;
  c.reason = std::move(reason);
  return c;
}

// Walks the marker segments up to EOI; entropy-coded data after each SOS is skipped by looking for the next real
// marker (FF not followed by 00 stuffing or a restart marker). Bytes after EOI (padding, appended data) are allowed.
ImageCheck check_jpeg(const uint8_t* d, size_t n) {
  ImageCheck c;
  c.format = ImageFormat::Jpeg;
  size_t pos = 2;
  bool have_frame = false;
  for (;;) {
    while (pos < n && d[pos] != 0xff) ++pos;  // libjpeg tolerates stray bytes before a marker; so do we
    while (pos < n && d[pos] == 0xff) ++pos;  // fill bytes
    if (pos >= n) return fail(c.format, "truncated JPEG (no end-of-image marker)");
    const uint8_t marker = d[pos++];
    if (marker == 0xd9) break;                                           // EOI
    if (marker == 0x01 || (marker >= 0xd0 && marker <= 0xd8)) continue;  // no length field
    if (pos + 2 > n) return fail(c.format, "truncated JPEG (no end-of-image marker)");
    const size_t length = be16(d + pos);
    if (length < 2) return fail(c.format, "corrupt JPEG (bad segment length)");
    if (pos + length > n) return fail(c.format, "truncated JPEG (no end-of-image marker)");
    const bool sof = marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc;
    if (sof && !have_frame) {
      if (length < 8) return fail(c.format, "corrupt JPEG (bad frame header)");
      c.height = static_cast<int>(be16(d + pos + 3));
      c.width = static_cast<int>(be16(d + pos + 5));
      have_frame = true;
    }
    pos += length;
    if (marker == 0xda) {  // start of scan: skip the entropy-coded data
      for (;;) {
        const void* ff = pos < n ? std::memchr(d + pos, 0xff, n - pos) : nullptr;
        if (!ff) return fail(c.format, "truncated JPEG (no end-of-image marker)");
        pos = static_cast<size_t>(static_cast<const uint8_t*>(ff) - d);
        if (pos + 1 >= n) return fail(c.format, "truncated JPEG (no end-of-image marker)");
        const uint8_t next = d[pos + 1];
        if (next == 0x00 || next == 0xff || (next >= 0xd0 && next <= 0xd7)) {
          pos += next == 0xff ? 1 : 2;
          continue;
        }
        break;
      }
    }
  }
  if (!have_frame) return fail(c.format, "corrupt JPEG (no frame header)");
  c.ok = true;
  return c;
}

ImageCheck check_png(const uint8_t* d, size_t n) {
  ImageCheck c;
  c.format = ImageFormat::Png;
  size_t pos = 8;
  bool have_data = false;
  for (int index = 0;; ++index) {
    if (pos + 8 > n) return fail(c.format, "truncated PNG (no IEND chunk)");
    const uint32_t length = be32(d + pos);
    const std::string type(reinterpret_cast<const char*>(d + pos + 4), 4);
    if (length > 0x7fffffffu) return fail(c.format, "corrupt PNG (bad length of chunk '" + type + "')");
    if (pos + 12 + length > n) return fail(c.format, "truncated PNG (chunk '" + type + "' cut short)");
    if (crc32(d + pos + 4, length + 4) != be32(d + pos + 8 + length))
      return fail(c.format, "corrupt PNG (CRC mismatch in chunk '" + type + "')");
    if (index == 0) {
      if (type != "IHDR" || length != 13) return fail(c.format, "corrupt PNG (no IHDR chunk first)");
      c.width = static_cast<int>(be32(d + pos + 8));
      c.height = static_cast<int>(be32(d + pos + 12));
    }
    if (type == "IDAT") have_data = true;
    pos += 12 + length;
    if (type == "IEND") break;
  }
  if (!have_data) return fail(c.format, "corrupt PNG (no IDAT chunk)");
  c.ok = true;
  return c;
}

// Binary PNM (P4 bitmap, P5 grey, P6 colour): the header's numbers, then at least the bytes they need. OpenCV's
// decoder prints to stderr when its data ends early, so a truncated file is refused here, before it runs.
ImageCheck check_pnm(const uint8_t* d, size_t n) {
  const char kind = static_cast<char>(d[1]);
  ImageCheck c;
  c.ok = true;
  c.format = ImageFormat::Pnm;
  if (kind != '4' && kind != '5' && kind != '6') return c;  // ASCII: any length
  size_t pos = 2;
  uint64_t numbers[3] = {0, 0, 0};  // width, height, the largest sample value (P4: none)
  for (int i = 0; i < (kind == '4' ? 2 : 3); ++i) {
    while (pos < n && (std::isspace(d[pos]) || d[pos] == '#'))  // blanks and comments to the line's end
      if (d[pos++] == '#')
        while (pos < n && d[pos] != '\n') ++pos;
    if (pos >= n || !std::isdigit(d[pos])) return fail(ImageFormat::Pnm, "corrupt PNM (its header is incomplete)");
    while (pos < n && std::isdigit(d[pos])) {
      numbers[i] = numbers[i] * 10 + (d[pos++] - '0');
      if (numbers[i] > (uint64_t{1} << 30)) return fail(ImageFormat::Pnm, "corrupt PNM (a size beyond 2^30)");
    }
  }
  ++pos;  // the one blank before the data
  const uint64_t width = numbers[0], height = numbers[1], sample_bytes = numbers[2] > 255 ? 2 : 1;
  const uint64_t needed =
      kind == '4' ? (width + 7) / 8 * height : width * height * sample_bytes * (kind == '6' ? 3 : 1);
  if (pos > n || n - pos < needed)
    return fail(ImageFormat::Pnm, "truncated PNM (" + std::to_string(n - std::min(pos, n)) + " bytes of pixels, " +
                                      std::to_string(width) + " x " + std::to_string(height) + " need " +
                                      std::to_string(needed) + ")");
  c.width = static_cast<int>(width);
  c.height = static_cast<int>(height);
  return c;
}

// Anything printable (ASCII or UTF-8) with line breaks: the usual "text file renamed .jpg".
bool looks_like_text(const uint8_t* d, size_t n) {
  const size_t m = std::min<size_t>(n, 512);
  for (size_t i = 0; i < m; ++i)
    if (d[i] < 0x20 && d[i] != '\n' && d[i] != '\r' && d[i] != '\t' && d[i] != '\f') return false;
  return m > 0;
}

}  // namespace

const char* image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::Unknown:
      return "unknown";
    case ImageFormat::Png:
      return "PNG";
    case ImageFormat::Jpeg:
      return "JPEG";
    case ImageFormat::Bmp:
      return "BMP";
    case ImageFormat::Tiff:
      return "TIFF";
    case ImageFormat::Webp:
      return "WebP";
    case ImageFormat::Pnm:
      return "PNM";
    case ImageFormat::Jpeg2000:
      return "JPEG 2000";
    case ImageFormat::Exr:
      return "OpenEXR";
    case ImageFormat::Hdr:
      return "Radiance HDR";
    case ImageFormat::SunRaster:
      return "Sun raster";
    case ImageFormat::Pfm:
      return "PFM";
  }
  return "unknown";
}

bool is_gif_name(const std::string& filename) {
  if (filename.size() < 4) return false;
  std::string ext = filename.substr(filename.size() - 4);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".gif";
}

bool has_image_extension(const std::string& filename) {
  const size_t dot = filename.rfind('.');
  if (dot == std::string::npos || dot == 0) return false;
  std::string ext = filename.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  static const char* kExtensions[] = {"png", "jpg", "jpeg", "jpe", "jfif", "bmp", "dib", "tif", "tiff", "webp", "pbm",
                                      "pgm", "ppm", "pnm",  "pxm", "pfm",  "jp2", "exr", "hdr", "pic",  "sr",   "ras"};
  return std::any_of(std::begin(kExtensions), std::end(kExtensions), [&](const char* e) { return ext == e; });
}

ImageFormat sniff_image_format(const uint8_t* d, size_t n) {
  if (starts_with(d, n, "\x89PNG\r\n\x1a\n", 8)) return ImageFormat::Png;
  if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff) return ImageFormat::Jpeg;
  if (starts_with(d, n, "BM", 2) && n >= 26) return ImageFormat::Bmp;
  if (starts_with(d, n, "II*\0", 4) || starts_with(d, n, "MM\0*", 4)) return ImageFormat::Tiff;
  if (n >= 12 && starts_with(d, n, "RIFF", 4) && std::memcmp(d + 8, "WEBP", 4) == 0) return ImageFormat::Webp;
  if (n >= 3 && d[0] == 'P' && (d[2] == ' ' || d[2] == '\n' || d[2] == '\r' || d[2] == '\t')) {
    if (d[1] >= '1' && d[1] <= '7') return ImageFormat::Pnm;
    if (d[1] == 'F' || d[1] == 'f') return ImageFormat::Pfm;
  }
  if (starts_with(d, n, "\0\0\0\x0cjP  \r\n\x87\n", 12) || starts_with(d, n, "\xff\x4f\xff\x51", 4))
    return ImageFormat::Jpeg2000;
  if (starts_with(d, n, "\x76\x2f\x31\x01", 4)) return ImageFormat::Exr;
  if (starts_with(d, n, "#?RADIANCE", 10) || starts_with(d, n, "#?RGBE", 6)) return ImageFormat::Hdr;
  if (starts_with(d, n, "\x59\xa6\x6a\x95", 4)) return ImageFormat::SunRaster;
  return ImageFormat::Unknown;
}

ImageCheck check_image_structure(const uint8_t* d, size_t n) {
  if (n == 0) return fail(ImageFormat::Unknown, "empty file (0 bytes)");
  const ImageFormat format = sniff_image_format(d, n);
  switch (format) {
    case ImageFormat::Unknown:
      if (starts_with(d, n, "GIF8", 4)) return fail(format, kGifNotRead);  // a named reason, not "unknown"
      return fail(format,
                  looks_like_text(d, n) ? "not an image (the file holds text)" : "not an image (unknown format)");
    case ImageFormat::Jpeg:
      return check_jpeg(d, n);
    case ImageFormat::Png:
      return check_png(d, n);
    case ImageFormat::Bmp: {
      const uint32_t declared = le32(d + 2), pixels_at = le32(d + 10);
      if ((declared != 0 && declared > n) || pixels_at >= n)
        return fail(format, "truncated BMP (shorter than its header says)");
      break;
    }
    case ImageFormat::Webp:
      if (le32(d + 4) + 8ull > n) return fail(format, "truncated WebP (shorter than its header says)");
      break;
    case ImageFormat::Pnm:
      return check_pnm(d, n);
    default:
      break;
  }
  ImageCheck c;
  c.ok = true;
  c.format = format;
  return c;
}

ImageCheck check_image(const uint8_t* d, size_t n) {
  ImageCheck c = check_image_structure(d, n);
  if (!c.ok) return c;
  const auto too_many_pixels = [&c] {  // OpenCV's limit (CV_IO_MAX_IMAGE_PIXELS), in words
    return (c.width > 0 && c.height > 0 ? std::to_string(c.width) + " x " + std::to_string(c.height) + " = " +
                                              std::to_string(int64_t{c.width} * c.height) + " pixels, "
                                        : std::string()) +
           "more than the 1,073,741,824 (2^30) pixels an image may have here";
  };
#ifdef AMPWB_HAVE_IMAGE_CODECS
  if (c.format == ImageFormat::Jpeg) {  // libjpeg itself, which says where OpenCV's decoder stays silent
    c.reason = int64_t{c.width} * c.height > (int64_t{1} << 30)
                   ? "cannot be decoded as JPEG (" + too_many_pixels() + ")"
                   : jpeg_data_damage(d, n);
    c.ok = c.reason.empty();
    return c;
  }
#endif
  cv::Mat decoded;
  std::string error;
  try {
#ifdef AMPWB_HAVE_IMAGE_CODECS
    const cv::Mat buffer(1, static_cast<int>(std::min<size_t>(n, 0x7fffffff)), CV_8UC1, const_cast<uint8_t*>(d));
    decoded = cv::imdecode(buffer, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
#else
    error = kNoCodecs;
#endif
  } catch (const cv::Exception& e) {
    error = e.err;
    if (error.find("CV_IO_MAX_IMAGE_PIXELS") != std::string::npos) error = too_many_pixels();
  }
  if (decoded.empty()) {
    c.ok = false;
    c.reason =
        std::string("cannot be decoded as ") + image_format_name(c.format) + (error.empty() ? "" : " (" + error + ")");
    return c;
  }
  c.width = decoded.cols;
  c.height = decoded.rows;
  return c;
}

bool read_file(const std::string& path, std::vector<uint8_t>& bytes, std::string& reason) {
  bytes.clear();
  // O_NONBLOCK: opening a FIFO that slipped in must not hang the scan.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    reason = std::string("unreadable (") + std::strerror(errno) + ")";
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    reason = "not a regular file";
    return false;
  }
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      reason = std::string("unreadable (") + std::strerror(errno) + ")";
      ::close(fd);
      return false;
    }
    if (got == 0) break;  // shrank while reading
    done += static_cast<size_t>(got);
  }
  ::close(fd);
  bytes.resize(done);
  return true;
}

cv::Mat decode_bgr8(const uint8_t* data, size_t size, int reduce) {
#ifdef AMPWB_HAVE_IMAGE_CODECS
  int flags = cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION;
  if (reduce == 2) flags |= cv::IMREAD_REDUCED_COLOR_2;
  if (reduce == 4) flags |= cv::IMREAD_REDUCED_COLOR_4;
  if (reduce == 8) flags |= cv::IMREAD_REDUCED_COLOR_8;
  try {
    const cv::Mat buffer(1, static_cast<int>(std::min<size_t>(size, 0x7fffffff)), CV_8UC1, const_cast<uint8_t*>(data));
    cv::Mat m = cv::imdecode(buffer, flags);
    if (!m.empty() && m.type() != CV_8UC3) return cv::Mat();
    return m;
  } catch (const cv::Exception&) {
    return cv::Mat();
  }
#else
  (void)data, (void)size, (void)reduce;
  return cv::Mat();  // check_image has already refused every image file, saying why
#endif
}

}  // namespace ampwb
