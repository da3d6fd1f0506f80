// The model an export writes: made from a ResNet in memory, checked against the architecture of its depth.
#include "export/exported_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/convert16.h"
#include "core/error.h"
#include "nn/layer.h"

namespace ampwb {

const Tensor& ExportedModel::weight(const std::string& name) const {
  for (const auto& [n, t] : weights)
    if (n == name) return t;
  throw Error("the model has no weight " + name);
}

namespace {

// t's values in logical (PyTorch's) order, as a row-major FP32 host tensor, whatever layout the engine kept it in.
Tensor logical_copy(Backend& backend, const Tensor& t) {
  const std::vector<float> values = to_float_vector(on_host(backend, t));
  Tensor out = Tensor::empty(t.shape(), DType::F32);
  std::memcpy(out.data(), values.data(), out.nbytes());
  return out;
}

}  // namespace

ExportedModel exported_model(const ModelWeights& weights) {
  ExportedModel out;
  out.config = weights.model;
  const Preprocessing& p = weights.preprocessing;
  AMPWB_CHECK(p.image_size == weights.model.image_size && p.channels == weights.model.in_channels,
              "the weights' preprocessing (" << p.channels << " channels of " << p.image_size
                                             << " px) does not fit their model");
  for (const auto& [name, t] : weights.tensors) {
    const size_t slash = name.find('/');
    AMPWB_CHECK(slash != std::string::npos, "weights tensor " << name << " is neither a parameter nor a buffer");
    const std::vector<float> values = to_float_vector(t);
    Tensor copy = Tensor::empty(t.shape(), DType::F32);
    std::memcpy(copy.data(), values.data(), copy.nbytes());
    out.weights.emplace_back(name.substr(slash + 1), copy);
  }
  for (int c = 0; c < 3; ++c) {
    out.normalization.mean[c] = p.mean[static_cast<size_t>(c)];
    out.normalization.stddev[c] = p.stddev[static_cast<size_t>(c)];
  }
  out.class_names = p.class_names;
  out.batches_tracked = weights.provenance.steps;
  check_exported_model(out);
  return out;
}

ExportedModel exported_model(Backend& backend, ResNet& model, const Normalization& normalization,
                             std::vector<std::string> class_names, int64_t batches_tracked) {
  ExportedModel out;
  out.config = model.config();
  out.config.stem = resolved_stem(model.config());
  for (Parameter* p : model.parameters()) out.weights.emplace_back(p->name, logical_copy(backend, p->value));
  std::vector<Buffer*> buffers;
  model.collect_buffers(buffers);
  for (Buffer* b : buffers) out.weights.emplace_back(b->name, logical_copy(backend, b->value));
  out.normalization = normalization;
  if (class_names.empty())
    for (int c = 0; c < out.config.num_classes; ++c) class_names.push_back(std::to_string(c));
  out.class_names = std::move(class_names);
  out.batches_tracked = batches_tracked;
  check_exported_model(out);
  return out;
}

namespace {

void add_batch_norm(std::vector<std::pair<std::string, Shape>>& out, const std::string& name, int64_t channels) {
  for (const char* part : {".weight", ".bias", ".running_mean", ".running_var"})
    out.emplace_back(name + part, Shape{channels});
}

void add_conv_bn(std::vector<std::pair<std::string, Shape>>& out, const std::string& conv, const std::string& bn,
                 int64_t in, int64_t channels, int64_t kernel) {
  out.emplace_back(conv + ".weight", Shape{channels, in, kernel, kernel});
  add_batch_norm(out, bn, channels);
}

}  // namespace

std::vector<std::pair<std::string, Shape>> resnet_weight_shapes(const ResNetConfig& config) {
  const ResNetArchitecture arch = resnet_architecture(config.depth);
  std::vector<std::pair<std::string, Shape>> out;
  const int64_t stem_width = arch.widths.front();
  add_conv_bn(out, "conv1", "bn1", config.in_channels, stem_width, resolved_stem(config) == Stem::ImageNet ? 7 : 3);
  int64_t channels = stem_width;
  for (size_t stage = 0; stage < arch.blocks.size(); ++stage) {
    const int64_t width = arch.widths[stage], block_out = width * arch.expansion;
    for (int b = 0; b < arch.blocks[stage]; ++b) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      if (arch.bottleneck) {
        add_conv_bn(out, name + ".conv1", name + ".bn1", channels, width, 1);
        add_conv_bn(out, name + ".conv2", name + ".bn2", width, width, 3);
        add_conv_bn(out, name + ".conv3", name + ".bn3", width, block_out, 1);
      } else {
        add_conv_bn(out, name + ".conv1", name + ".bn1", channels, width, 3);
        add_conv_bn(out, name + ".conv2", name + ".bn2", width, width, 3);
      }
      if (stride != 1 || channels != block_out)
        add_conv_bn(out, name + ".downsample.0", name + ".downsample.1", channels, block_out, 1);
      channels = block_out;
    }
  }
  out.emplace_back("fc.weight", Shape{config.num_classes, channels});
  out.emplace_back("fc.bias", Shape{config.num_classes});
  return out;
}

void check_exported_model(const ExportedModel& model) {
  AMPWB_CHECK(model.config.stem != Stem::Auto, "an exported model's stem is resolved, not auto");
  AMPWB_CHECK(model.config.in_channels == 1 || model.config.in_channels == 3,
              "a model takes 1 or 3 channels, not " << model.config.in_channels);
  AMPWB_CHECK(
      static_cast<int>(model.class_names.size()) == model.config.num_classes,
      "the model has " << model.config.num_classes << " classes but " << model.class_names.size() << " class names");
  for (const auto& [name, shape] : resnet_weight_shapes(model.config)) {
    const Tensor& t = model.weight(name);
    AMPWB_CHECK(t.shape() == shape && t.dtype() == DType::F32 && t.device().is_cpu(),
                "weight " << name << " is " << t.describe() << ", ResNet-" << model.config.depth << " needs f32"
                          << shape_str(shape) << " on the host");
    AMPWB_CHECK(t.rank() != 4 || t.layout() == Layout::NCHW,
                "weight " << name << " is " << t.describe() << ", not row-major (K,C,R,S)");
  }
}

std::optional<DType> parse_export_dtype(std::string_view name) {
  if (name == "fp32") return DType::F32;
  if (name == "fp16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  return std::nullopt;
}

std::string export_format_named_by(std::string_view path) {
  auto ends_with = [path](std::string_view suffix) {
    return path.size() >= suffix.size() &&
           std::ranges::equal(path.substr(path.size() - suffix.size()), suffix,
                              [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  };
  for (std::string_view suffix : {".onnx", ".safetensors"})
    if (ends_with(suffix)) return std::string(suffix.substr(1));
  return "";
}

const char* export_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "fp32";
    case DType::F16:
      return "fp16";
    case DType::BF16:
      return "bf16";
    default:
      return "?";
  }
}

std::string weight_bytes(const std::string& name, const Tensor& weight, DType dtype) {
  const float* values = weight.data_as<float>();
  const int64_t n = weight.numel();
  if (dtype == DType::F32) return std::string(static_cast<const char*>(weight.data()), weight.nbytes());
  AMPWB_CHECK(dtype == DType::F16 || dtype == DType::BF16,
              "weights are stored as fp32, fp16 or bf16, not " << dtype_name(dtype));
  if (dtype == DType::F16)
    for (int64_t i = 0; i < n; ++i)
      AMPWB_CHECK(!std::isfinite(values[i]) || std::fabs(values[i]) <= 65504.0f,
                  "weight " << name << " holds " << values[i] << ", beyond FP16's largest value 65504");
  std::vector<uint16_t> words(static_cast<size_t>(n));
  round_to_16bit(dtype, values, words.data(), n);
  std::string bytes(words.size() * 2, '\0');
  std::memcpy(bytes.data(), words.data(), bytes.size());  // little-endian: this host's order (x86-64, AArch64)
  return bytes;
}

std::string class_names_json(const std::vector<std::string>& class_names) { return nlohmann::json(class_names).dump(); }

}  // namespace ampwb
