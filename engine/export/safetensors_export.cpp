// The safetensors writer: the header built as JSON, the tensors laid out one after another in the header's order.
#include "export/safetensors_export.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/float_decimal.h"

namespace ampwb {
namespace {

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    default:
      throw Error(std::string("weights are stored as fp32, fp16 or bf16, not ") + dtype_name(dtype));
  }
}

std::string json_list(const float* values, int count) {
  nlohmann::json list = nlohmann::json::array();
  for (int i = 0; i < count; ++i) list.push_back(float_as_decimal(values[i]));  // 0.2860406, not 0.28604060411453247
  return list.dump();
}

}  // namespace

std::string safetensors_bytes(const ExportedModel& model, DType dtype) {
  check_exported_model(model);
  const char* type = safetensors_dtype(dtype);
  // The data in torchvision's state_dict order; the header (a JSON object) lists the same tensors by name, each with
  // its byte range, which is all a reader goes by.
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  auto add = [&](const std::string& name, const char* tensor_type, const Shape& shape, const std::string& bytes) {
    header[name] = {
        {"dtype", tensor_type}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  };
  const std::string statistics_end = ".running_var";
  for (const auto& [name, shape] : resnet_weight_shapes(model.config)) {
    add(name, type, shape, weight_bytes(name, model.weight(name), dtype));
    if (name.ends_with(statistics_end)) {
      const int64_t steps = model.batches_tracked;
      std::string bytes(sizeof steps, '\0');
      std::memcpy(bytes.data(), &steps, sizeof steps);  // little-endian: this host's order
      add(name.substr(0, name.size() - statistics_end.size()) + ".num_batches_tracked", "I64", Shape{}, bytes);
    }
  }
  const Normalization& n = model.normalization;
  const int channels = model.config.in_channels;
  header["__metadata__"] = {{"format", "pt"},
                            {"class_names", class_names_json(model.class_names)},
                            {"image_size", std::to_string(model.config.image_size)},
                            {"channels", std::to_string(channels)},
                            {"mean", json_list(n.mean, channels)},
                            {"std", json_list(n.stddev, channels)},
                            {"depth", std::to_string(model.config.depth)},
                            {"stem", stem_name(model.config.stem)}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the format recommends
  const uint64_t length = text.size();
  std::string out(sizeof length, '\0');
  std::memcpy(out.data(), &length, sizeof length);
  out += text;
  out += data;
  return out;
}

void export_safetensors(const ExportedModel& model, DType dtype, const std::string& path) {
  write_file_atomically(path, safetensors_bytes(model, dtype));
}

}  // namespace ampwb
