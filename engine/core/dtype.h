// Element types, memory layouts and devices of tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ampwb {

// F8E4M3 and F8E5M2 hold FP8 values (core/fp8.h) for backends that compute in FP8 (Capabilities::fp8.native): a
// scaled cast writes them, convolutions and matrix products read them; no other op takes them.
enum class DType : uint8_t { F32, F16, BF16, I32, U8, F8E4M3, F8E5M2 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::I32:
      return 4;
    case DType::U8:
    case DType::F8E4M3:
    case DType::F8E5M2:
      return 1;
  }
  return 0;
}
const char* dtype_name(DType t);  // "f32", "f16", "bf16", "i32", "u8", "f8e4m3", "f8e5m2"
std::optional<DType> parse_dtype(std::string_view name);
constexpr bool is_16bit(DType t) { return t == DType::F16 || t == DType::BF16; }
constexpr bool is_floating(DType t) { return t == DType::F32 || is_16bit(t); }
constexpr bool is_fp8(DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; }

// Memory order of 4-D tensors. Shapes are always logical (N, C, H, W); the layout says how they are stored.
// Tensors of other ranks are row-major and ignore it.
enum class Layout : uint8_t { NCHW, NHWC };
const char* layout_name(Layout l);

struct Device {
  enum class Kind : uint8_t { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {Kind::CUDA, index}; }
  bool is_cpu() const { return kind == Kind::CPU; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};

}  // namespace ampwb
