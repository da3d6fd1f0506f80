// gzip decompression and CRC-32, self-contained (RFC 1951/1952), for the IDX files of the MNIST family (shipped as
// .gz) and for checking PNG chunk checksums. The engine links no zlib of its own, so this small inflate keeps the
// dependency list to the Debian packages the project already names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ampwb {

// CRC-32 (ISO-HDLC, as gzip and PNG use it). Pass the previous result to continue a running checksum.
uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

// True when the bytes start with the gzip magic number (1f 8b).
bool is_gzip(const uint8_t* data, size_t size);

// Decompresses a whole gzip file (one or more members), checking each member's CRC-32 and length. Throws
// ampwb::Error naming `what` (a file path) when the data is truncated or corrupt.
std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, const std::string& what);

}  // namespace ampwb
