// The ONNX file of a model (opset 17), written through ONNX's own protobuf definitions (libonnx's onnx-ml.pb.h).
//
// The graph is the network in inference form. Input "pixels": float32 (N, C, S, S), the image's own pixel values
// 0-255 in the run's channels and image size, N dynamic ("batch"). The first two nodes are the run's normalization,
// Sub(255 * mean) then Div(255 * std); then each convolution (no bias) and its BatchNormalization node, which keeps
// the trained weights as they are (the safetensors file's, one for one) and which ONNX Runtime folds into the
// convolution itself when it loads the graph; Relu, MaxPool (ImageNet stem), Add, GlobalAveragePool, Flatten and
// Gemm. Output "logits": float32 (N, classes).
//
// Weights in FP16 or BF16 are stored in that type, each followed by a Cast to float32: the file is half the size,
// while the input, the output and the arithmetic stay float32 (ONNX Runtime's CPU kernels have no BF16 convolution).
// Metadata: class_names (a JSON list), image_size, channels, mean and std (JSON lists of the pixel values over 255),
// depth, stem and weights_dtype.
#pragma once

#include <string>

#include "export/exported_model.h"

namespace ampwb {

// Whether this build writes ONNX (CMake found libonnx and protobuf); onnx_unavailable_reason() says why not.
bool onnx_export_available();
std::string onnx_unavailable_reason();

// The serialized ModelProto. Throws ampwb::Error where the build has no ONNX support (the reason above).
std::string onnx_bytes(const ExportedModel& model, DType dtype);

// Writes onnx_bytes to path, whole or not at all. Throws ampwb::Error naming the path and the cause.
void export_onnx(const ExportedModel& model, DType dtype, const std::string& path);

}  // namespace ampwb
