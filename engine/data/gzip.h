// gzip decompression and CRC-32, through zlib, for the IDX files of the MNIST family (shipped as .gz) and for
// checking PNG chunk checksums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ampwb {

// The most gunzip() inflates by default: 4 GiB, seven times the largest IDX file in common use (EMNIST ByClass's
// training images, 0.55 GB). A decompression bomb stops there; below it, memory grows with what really inflates,
// never with what a file's trailer claims.
constexpr size_t kGunzipMaxBytes = size_t{4} << 30;

// CRC-32 (ISO-HDLC, as gzip and PNG use it). Pass the previous result to continue a running checksum.
uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

// True when the bytes start with the gzip magic number (1f 8b).
bool is_gzip(const uint8_t* data, size_t size);

// Decompresses a whole gzip file (one or more members, zero padding between them allowed), checking each member's
// CRC-32 and length. Throws ampwb::Error naming `what` (a file path) and the problem: not gzip, a bad header,
// truncated, corrupt deflate data, a checksum or length mismatch, or more than `max_size` bytes of output.
std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, const std::string& what,
                            size_t max_size = kGunzipMaxBytes);

}  // namespace ampwb
