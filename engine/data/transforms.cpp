// Decoding a sample, crops, resizes and the normalized write into a batch.
#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>

#include "core/half.h"
#include "data/image_file.h"

namespace ampwb::detail {
namespace {

cv::Mat resized(const cv::Mat& src, int width, int height) {
  if (src.cols == width && src.rows == height) return src.clone();
  cv::Mat out;
  // Area averaging when shrinking (no aliasing), bilinear when enlarging.
  const int interpolation = width < src.cols && height < src.rows ? cv::INTER_AREA : cv::INTER_LINEAR;
  cv::resize(src, out, cv::Size(width, height), 0, 0, interpolation);
  return out;
}

template <class Store>
void write_pixels(const cv::Mat& bgr, int size, int dx, int dy, bool flip, const NormalizeTable& t, Store store) {
  const int64_t row_values = static_cast<int64_t>(size) * 3;
  for (int y = 0; y < size; ++y) {
    const int sy = y + dy;
    const bool row_inside = sy >= 0 && sy < bgr.rows;
    const uint8_t* row = row_inside ? bgr.ptr<uint8_t>(sy) : nullptr;
    for (int x = 0; x < size; ++x) {
      const int sx = (flip ? size - 1 - x : x) + dx;
      const int64_t o = y * row_values + static_cast<int64_t>(x) * 3;
      if (row_inside && sx >= 0 && sx < bgr.cols) {
        const uint8_t* p = row + 3 * sx;
        store(o + 0, t.lut[0][p[2]]);
        store(o + 1, t.lut[1][p[1]]);
        store(o + 2, t.lut[2][p[0]]);
      } else {  // padding: black
        store(o + 0, t.lut[0][0]);
        store(o + 1, t.lut[1][0]);
        store(o + 2, t.lut[2][0]);
      }
    }
  }
}

}  // namespace

cv::Mat load_bgr(const DatasetData& data, int64_t item, int min_shorter_side, std::string* why) {
  if (data.in_memory) {
    const int h = data.pixel_height, w = data.pixel_width, c = data.pixel_channels;
    const size_t plane = static_cast<size_t>(h) * w;
    const uint8_t* src = data.pixels.data() + static_cast<size_t>(item) * plane * c;
    cv::Mat out(h, w, CV_8UC3);
    uint8_t* dst = out.ptr<uint8_t>(0);  // freshly allocated: continuous
    for (size_t i = 0; i < plane; ++i) {
      if (c == 1) {
        dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = src[i];
      } else if (data.planar) {  // R, G, B planes
        dst[3 * i] = src[2 * plane + i];
        dst[3 * i + 1] = src[plane + i];
        dst[3 * i + 2] = src[i];
      } else {  // interleaved RGB
        dst[3 * i] = src[3 * i + 2];
        dst[3 * i + 1] = src[3 * i + 1];
        dst[3 * i + 2] = src[3 * i];
      }
    }
    return out;
  }
  thread_local std::vector<uint8_t> bytes;  // reused: no allocation per image
  std::string reason;
  const auto fail = [&](const std::string& what) {
    if (why) *why = what;
    return cv::Mat();
  };
  if (!read_file(data.paths[static_cast<size_t>(item)], bytes, reason)) return fail(reason);
  const DatasetData::Size& s = data.sizes[static_cast<size_t>(item)];
  const ImageCheck check = check_image_structure(bytes.data(), bytes.size());
  if (!check.ok) return fail(check.reason);
  if (check.width > 0 && (check.width != s.width || check.height != s.height))  // formats whose header says it
    return fail("now " + std::to_string(check.width) + "x" + std::to_string(check.height) + " px, read as " +
                std::to_string(s.width) + "x" + std::to_string(s.height));
  int reduce = 1;
  if (s.format == ImageFormat::Jpeg) {
    const int shorter = std::min(s.width, s.height);
    for (int r : {8, 4, 2})
      if ((shorter + r - 1) / r >= min_shorter_side) {
        reduce = r;
        break;
      }
  }
  cv::Mat decoded = decode_bgr8(bytes.data(), bytes.size(), reduce);
  if (decoded.empty()) return fail("no longer decodes");
  return decoded;
}

cv::Mat center_square(const cv::Mat& bgr, int size) {
  const int side = std::min(bgr.cols, bgr.rows);
  return resized(bgr(cv::Rect((bgr.cols - side) / 2, (bgr.rows - side) / 2, side, side)), size, size);
}

cv::Mat resize_shorter_side(const cv::Mat& bgr, int side) {
  const int shorter = std::min(bgr.cols, bgr.rows);
  if (shorter <= side) return bgr;
  const double scale = static_cast<double>(side) / shorter;
  const int w = bgr.cols == shorter ? side : std::max(side, static_cast<int>(std::lround(bgr.cols * scale)));
  const int h = bgr.rows == shorter ? side : std::max(side, static_cast<int>(std::lround(bgr.rows * scale)));
  return resized(bgr, w, h);
}

cv::Mat random_resized_crop(const cv::Mat& bgr, int size, Rng& rng) {
  const int W = bgr.cols, H = bgr.rows;
  const double area = static_cast<double>(W) * H;
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.08 + 0.92 * rng.uniform());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= W && h <= H) {
      const int y = static_cast<int>(rng.below(static_cast<uint64_t>(H - h + 1)));
      const int x = static_cast<int>(rng.below(static_cast<uint64_t>(W - w + 1)));
      return resized(bgr(cv::Rect(x, y, w, h)), size, size);
    }
  }
  // Fallback, as torchvision: the center crop of the whole image, aspect clamped to [3/4, 4/3].
  int w = W, h = H;
  if (static_cast<double>(W) / H < 3.0 / 4.0) {
    h = std::min(H, static_cast<int>(std::lround(W / (3.0 / 4.0))));
  } else if (static_cast<double>(W) / H > 4.0 / 3.0) {
    w = std::min(W, static_cast<int>(std::lround(H * (4.0 / 3.0))));
  }
  return resized(bgr(cv::Rect((W - w) / 2, (H - h) / 2, w, h)), size, size);
}

NormalizeTable::NormalizeTable(const Normalization& n) {
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) lut[c][v] = (static_cast<float>(v) / 255.0f - n.mean[c]) / n.stddev[c];
}

void write_normalized(const cv::Mat& bgr, int size, int dx, int dy, bool flip, const NormalizeTable& table, DType dtype,
                      void* out) {
  switch (dtype) {
    case DType::F32: {
      float* o = static_cast<float*>(out);
      write_pixels(bgr, size, dx, dy, flip, table, [o](int64_t i, float v) { o[i] = v; });
      break;
    }
    case DType::F16: {
      uint16_t* o = static_cast<uint16_t*>(out);
      write_pixels(bgr, size, dx, dy, flip, table, [o](int64_t i, float v) { o[i] = float_to_half_bits(v); });
      break;
    }
    case DType::BF16: {
      uint16_t* o = static_cast<uint16_t*>(out);
      write_pixels(bgr, size, dx, dy, flip, table, [o](int64_t i, float v) { o[i] = float_to_bfloat16_bits(v); });
      break;
    }
    default:
      break;  // refused by the loader's constructor
  }
}

}  // namespace ampwb::detail
