// CRC-32C (Castagnoli), the checksum of checkpoints: the SSE4.2 instruction where the CPU has it (every x86-64 CPU
// this project runs on), a table otherwise; both give the same value (tested).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ampwb {

// The CRC of `bytes` bytes at `data`, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

}  // namespace ampwb
