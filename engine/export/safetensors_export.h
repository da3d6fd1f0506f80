// The safetensors file of a model: an 8-byte little-endian header length, the header (JSON: per tensor its dtype,
// shape and byte range; "__metadata__" with the preprocessing), then the raw little-endian tensors. The names are
// torchvision's, so that torchvision.models.resnetNN(num_classes=K) loads an ImageNet-stem ResNet strictly; the
// CIFAR family's names follow the same scheme (docs/export.md has a PyTorch module that loads them).
#pragma once

#include <string>

#include "export/exported_model.h"

namespace ampwb {

// The file's bytes. Weights in dtype (F32, F16 or BF16); each batch norm's num_batches_tracked as an I64 scalar.
// Metadata: format "pt", class_names (a JSON list), image_size, channels, mean and std (JSON lists, of the pixel
// values over 255), stem and depth.
std::string safetensors_bytes(const ExportedModel& model, DType dtype);

// Writes safetensors_bytes to path, whole or not at all. Throws ampwb::Error naming the path and the cause.
void export_safetensors(const ExportedModel& model, DType dtype, const std::string& path);

}  // namespace ampwb
