// jpeg_data_damage: libjpeg's decoder with an error manager that stops at the first warning that damages pixels.
#include "data/jpeg_data_check.h"

#include <cctype>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE

#include <jerror.h>
#include <jpeglib.h>

namespace ampwb {
namespace {

// Plain data only: the decoder leaves by longjmp, which runs no destructors.
struct ErrorManager {
  jpeg_error_mgr base;  // first: libjpeg's pointer to it is a pointer to this
  std::jmp_buf escape;
  bool damaged = false;  // a warning that damages pixels, not an error
  char message[JMSG_LENGTH_MAX];
};

// The warnings of damaged entropy-coded data or a stream cut short: the pixels after them are guesses. Bytes left
// over before a restart marker say the same (the blocks of its interval ended before their data did); bytes left
// before the end of the image are left alone, as PIL and OpenCV leave them: many whole photographs (ImageNet's
// among them) carry a few there.
bool damages_pixels(const jpeg_error_mgr& err) {
  const int marker = err.msg_parm.i[1];
  switch (err.msg_code) {
    case JWRN_EXTRANEOUS_DATA:
      return marker >= 0xd0 && marker <= 0xd7;
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_JPEG_EOF:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
      return true;
    default:
      return false;
  }
}

[[noreturn]] void stop(j_common_ptr info) {
  auto* errors = reinterpret_cast<ErrorManager*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->escape, 1);
}

void on_message(j_common_ptr info, int level) {
  if (level < 0 && damages_pixels(*info->err)) {  // level -1: a warning; others are trace messages
    reinterpret_cast<ErrorManager*>(info->err)->damaged = true;
    stop(info);
  }
}

void say_nothing(j_common_ptr) {}  // never stderr: the reason goes to the caller

}  // namespace

std::string jpeg_data_damage(const uint8_t* data, size_t size) {
  jpeg_decompress_struct info;
  ErrorManager errors;
  info.err = jpeg_std_error(&errors.base);
  errors.base.error_exit = stop;
  errors.base.emit_message = on_message;
  errors.base.output_message = say_nothing;
  if (setjmp(errors.escape)) {
    jpeg_destroy_decompress(&info);
    std::string said = errors.message;
    if (!errors.damaged) return "cannot be decoded as JPEG (" + said + ")";
    if (errors.base.msg_code == JWRN_EXTRANEOUS_DATA)
      return "corrupt JPEG data (" + std::to_string(errors.base.msg_parm.i[0]) +
             " bytes of image data left over before a restart marker)";
    // "Corrupt JPEG data: bad Huffman code" -> "corrupt JPEG data (bad Huffman code)"
    const std::string prefix = "Corrupt JPEG data: ";
    if (said.rfind(prefix, 0) == 0) said.erase(0, prefix.size());
    if (!said.empty()) said[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(said[0])));
    return "corrupt JPEG data (" + said + ")";
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  info.scale_num = 1;
  info.scale_denom = 8;  // the whole entropy-coded stream is still decoded; the IDCT and colour work mostly not
  if (info.jpeg_color_space == JCS_YCbCr || info.jpeg_color_space == JCS_GRAYSCALE)
    info.out_color_space = JCS_GRAYSCALE;  // no colour conversion (CMYK has none to grey: it keeps its own)
  jpeg_start_decompress(&info);
  // Freed with the decompressor, on every way out.
  JSAMPARRAY row = (*info.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&info), JPOOL_IMAGE,
                                             info.output_width * static_cast<JDIMENSION>(info.output_components), 1);
  while (info.output_scanline < info.output_height) jpeg_read_scanlines(&info, row, 1);
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return {};
}

}  // namespace ampwb
