// The device a run asks for, as one value rather than text: the CPU, one CUDA GPU, or Auto (a usable GPU, else the
// CPU). Settings, flags, JSON and the run store all write it by name(): "cpu", "cuda:N" or "auto".
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ampwb {

struct DeviceChoice {
  enum class Kind : uint8_t { Cpu, Cuda, Auto };
  static constexpr const char* what = "device";
  static constexpr const char* names = "cpu, cuda, cuda:N or auto";

  Kind kind = Kind::Cpu;
  int index = 0;  // the GPU's, as CUDA counts them (CUDA_VISIBLE_DEVICES applied)

  static DeviceChoice cpu() { return {}; }
  static DeviceChoice cuda(int index = 0) { return {Kind::Cuda, index}; }
  static DeviceChoice automatic() { return {Kind::Auto, 0}; }
  // "cpu", "auto", "cuda" (the first GPU) or "cuda:N"; nullopt for anything else.
  static std::optional<DeviceChoice> parse(std::string_view text);

  std::string name() const;  // "cpu", "cuda:0", "auto"
  bool is_cpu() const { return kind == Kind::Cpu; }
  bool operator==(const DeviceChoice&) const = default;
};

// DeviceChoice::parse, or ampwb::Error naming the text ("unknown device 'tpu' (expected cpu, cuda, cuda:N or auto)").
DeviceChoice parse_device(std::string_view text);

// A value written as one word wherever it is stored or shown, with the words it takes for messages: the record
// fields' JSON, columns and text read and write such a value by name() and T::parse.
template <class T>
concept NamedValue = requires(const T& value, std::string_view text) {
  { value.name() } -> std::convertible_to<std::string>;
  { T::parse(text) } -> std::same_as<std::optional<T>>;
  T::what;
  T::names;
};

}  // namespace ampwb
