// A JPEG's entropy-coded data decoded in full, at 1/8 scale, by libjpeg itself: OpenCV's decoder decodes damaged
// data with only libjpeg's warning on stderr ("Corrupt JPEG data: bad Huffman code", naming no file) and grey or
// smeared pixels, so image_file.cpp's check asks libjpeg here instead and refuses the file, saying why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ampwb {

// Empty when the data decodes without a warning that damages pixels; else the reason, in libjpeg's words:
// "corrupt JPEG data (bad Huffman code)", "cannot be decoded as JPEG (Unsupported JPEG process: SOF type 0xc3)".
// Warnings that leave the pixels whole (extra bytes between segments, an unknown JFIF revision) pass. Thread-safe.
std::string jpeg_data_damage(const uint8_t* data, size_t size);

}  // namespace ampwb
