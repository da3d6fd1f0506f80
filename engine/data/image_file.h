// One image file: is it an image, is it whole, how big is it, and its pixels as 8-bit BGR.
//
// OpenCV decodes some truncated JPEGs with only a warning on stderr, and reports nothing useful about why a file
// failed, so the checks here come first: the format from the magic bytes (never the extension), a JPEG must end
// with its end-of-image marker (FF D9, trailing zero/FF padding allowed), a PNG's chunks must all be present with
// good CRCs up to IEND. A file that passes is then decoded once to catch what the structure does not show: a JPEG by
// libjpeg itself at 1/8 scale (data/jpeg_data_check.h: the entropy-coded data is still read in full, and damage
// OpenCV passes over is named). The result says why a file was refused, in words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cv {
class Mat;
}

namespace ampwb {

enum class ImageFormat : uint8_t { Unknown, Png, Jpeg, Bmp, Tiff, Webp, Pnm, Jpeg2000, Exr, Hdr, SunRaster, Pfm };
const char* image_format_name(ImageFormat f);  // "PNG", "JPEG", ...

// True for the extensions OpenCV's codecs read (any case): png jpg jpeg jpe jfif bmp dib tif tiff webp pbm pgm ppm
// pnm pxm pfm jp2 exr hdr pic sr ras.
bool has_image_extension(const std::string& filename);
// A GIF, named as one: a common format OpenCV does not read, said so rather than "not an image".
bool is_gif_name(const std::string& filename);  // *.gif, any case
inline constexpr const char* kGifNotRead = "a GIF, which is not read (convert it to PNG)";

// The format from the first bytes, or Unknown.
ImageFormat sniff_image_format(const uint8_t* data, size_t size);

struct ImageCheck {
  bool ok = false;
  std::string reason;  // why not, when !ok: "empty file (0 bytes)", "truncated JPEG (no end-of-image marker)", ...
  ImageFormat format = ImageFormat::Unknown;
  int width = 0, height = 0;  // as stored (EXIF orientation is not applied, as in torchvision)
};

// The structural checks only (no decode): cheap, and enough for truncation, zero bytes and non-images.
ImageCheck check_image_structure(const uint8_t* data, size_t size);

// The structural checks, then a decode (JPEG at 1/8 scale, by libjpeg) that must succeed cleanly. Thread-safe.
ImageCheck check_image(const uint8_t* data, size_t size);

// Reads a whole file. Returns false with the reason ("unreadable (Permission denied)") instead of throwing.
bool read_file(const std::string& path, std::vector<uint8_t>& bytes, std::string& reason);

// Decodes to 8-bit 3-channel BGR whatever the source: grayscale is replicated, alpha dropped (as PIL's
// convert('RGB') does), 16-bit reduced to its high byte, palettes expanded, CMYK converted. EXIF orientation is
// ignored. `reduce` 1, 2, 4 or 8 decodes JPEGs at that fraction of their size (others ignore it). Returns an empty
// Mat when the bytes do not decode.
cv::Mat decode_bgr8(const uint8_t* data, size_t size, int reduce = 1);

}  // namespace ampwb
