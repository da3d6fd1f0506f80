// Device names (see the header).
#include "core/device_choice.h"

#include <charconv>

#include "core/error.h"

namespace ampwb {

std::optional<DeviceChoice> DeviceChoice::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "auto") return automatic();
  if (text == "cuda") return cuda(0);
  constexpr std::string_view kCuda = "cuda:";
  if (!text.starts_with(kCuda) || text.size() == kCuda.size()) return std::nullopt;
  int index = -1;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data() + kCuda.size(), end, index);
  if (error != std::errc() || stop != end || index < 0) return std::nullopt;
  return cuda(index);
}

DeviceChoice parse_device(std::string_view text) {
  if (const std::optional<DeviceChoice> device = DeviceChoice::parse(text)) return *device;
  throw Error("unknown device '" + std::string(text) + "' (expected " + DeviceChoice::names + ")");
}

std::string DeviceChoice::name() const {
  switch (kind) {
    case Kind::Cpu:
      return "cpu";
    case Kind::Cuda:
      return "cuda:" + std::to_string(index);
    case Kind::Auto:
      break;
  }
  return "auto";
}

}  // namespace ampwb
