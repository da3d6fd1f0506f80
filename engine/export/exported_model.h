// A trained ResNet as the exports write it: its shape, its weights under torchvision's names, and the preprocessing
// its input expects. Made from a model in memory or from a run's kept weights; the ONNX and safetensors writers
// (export/onnx_export.h, export/safetensors_export.h) read only this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "data/normalization.h"
#include "models/resnet.h"
#include "train/model_weights.h"

namespace ampwb {

// Every batch norm of the ResNets normalises with this epsilon (BatchNorm2d's default, as torchvision's).
inline constexpr float kExportBatchNormEpsilon = 1e-5f;

struct ExportedModel {
  ResNetConfig config;  // depth, classes, channels, image size; stem resolved (never Auto)
  // FP32 host tensors: every parameter and batch-norm statistic, named as torchvision names them
  // ("conv1.weight", "layer1.0.bn2.running_var", "fc.bias"); convolution weights (K,C,R,S) row-major.
  std::vector<std::pair<std::string, Tensor>> weights;
  Normalization normalization;           // of the pixel values over 255, per channel (one value for one channel)
  std::vector<std::string> class_names;  // config.num_classes of them, in label order
  int64_t batches_tracked = 0;           // training steps the batch-norm statistics saw (num_batches_tracked)

  const Tensor& weight(const std::string& name) const;  // throws ampwb::Error naming a missing weight
};

// The model's weights copied to the host. class_names: as many as the model has classes (empty: "0", "1", ...).
ExportedModel exported_model(Backend& backend, ResNet& model, const Normalization& normalization,
                             std::vector<std::string> class_names, int64_t batches_tracked);

// A run's kept weights (store/final_weights.h's load_final_weights, train/model_weights.h) as an export writes them.
ExportedModel exported_model(const ModelWeights& weights);

// Checks that `model` is whole: its stem resolved, one class name per class, every weight the architecture needs
// present with its shape, FP32 and on the host. Throws ampwb::Error naming the first fault.
void check_exported_model(const ExportedModel& model);

// The names of the weights a ResNet of `config` has, in the order the model holds them, with their shapes.
std::vector<std::pair<std::string, Shape>> resnet_weight_shapes(const ResNetConfig& config);

// The dtypes an export may store its weights in: FP32, FP16 or BF16, named "fp32", "fp16", "bf16".
std::optional<DType> parse_export_dtype(std::string_view name);
const char* export_dtype_name(DType dtype);

// The file format a path's extension names, whatever its case: "onnx", "safetensors", or "" for neither.
std::string export_format_named_by(std::string_view path);

// The weight's FP32 values rounded to dtype (FP16 or BF16) as little-endian 16-bit words, or its FP32 bytes.
// Throws ampwb::Error naming the weight where a finite value overflows FP16.
std::string weight_bytes(const std::string& name, const Tensor& weight, DType dtype);

// The class names as a JSON list, as both exports keep them in their metadata.
std::string class_names_json(const std::vector<std::string>& class_names);

}  // namespace ampwb
