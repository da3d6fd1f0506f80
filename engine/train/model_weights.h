// A trained network as inference needs it, in one file: its settings (depth, classes, channels, image size, stem),
// the preprocessing its inputs must get (the validation loader's: train/predictor.h applies it to image files),
// and its FP32 master weights with the batch-norm running statistics. No optimizer, scaler or progress: what a
// checkpoint (train/checkpoint.h) holds beyond that is only needed to go on training.
//
// File format: the checkpoint's ("AMPWBCK2": the JSON header and every tensor carry a CRC-32C, written to a temporary
// file, read back and checked, then moved into place), its header {"kind": "model_weights", "model": {...},
// "preprocessing": {...}, "provenance": {...}} and its tensors "param/NAME" and "buffer/NAME" in model order.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "models/resnet.h"

namespace ampwb {

// What an image goes through before the network sees it, as the run's validation did: decoded to 8-bit RGB (grey
// replicated, alpha dropped; JPEGs decoded at the largest 1/2, 1/4, 1/8 reduction that keeps the shorter side at
// least image_size), the center square resized to image_size x image_size (area averaging when shrinking, bilinear
// when enlarging), then each channel c's value v in 0-255 mapped to (v / 255 - mean[c]) / stddev[c].
struct Preprocessing {
  int image_size = 0;                            // S
  int channels = 3;                              // RGB, in that order
  std::string normalization;                     // where mean and stddev came from: "dataset", "imagenet" or "none"
  std::array<float, 3> mean{}, stddev{1, 1, 1};  // per channel (R, G, B), on values in [0, 1]
  std::vector<std::string> class_names;          // logit i is class_names[i]
};

// Where the weights came from, for messages and exports' metadata.
struct WeightsProvenance {
  int64_t run = 0;  // the stored run (0: none)
  std::string run_name;
  std::string precision;  // the mode it trained in, e.g. "amp-bf16" (the weights are its FP32 master weights)
  int epochs = 0;         // completed
  int64_t steps = 0;
};

struct ModelWeights {
  ResNetConfig model;  // the stem resolved (never Auto); image_size == preprocessing.image_size
  Preprocessing preprocessing;
  WeightsProvenance provenance;
  // Host FP32 tensors in model order: "param/" + Parameter::name (torchvision-style: "conv1.weight",
  // "layer1.0.bn1.bias", "fc.weight") and "buffer/" + Buffer::name ("layer1.0.bn1.running_mean", "...running_var").
  // Shapes are logical (a convolution's weight reads (O, I, H, W)) whatever the layout() the engine keeps it in;
  // to_float_vector (core/tensor.h) gives the values in that logical, PyTorch's, order.
  std::vector<std::pair<std::string, Tensor>> tensors;

  const Tensor& tensor(const std::string& name) const;  // throws naming a missing tensor
};

// The model's weights and statistics, copied to the host.
ModelWeights model_weights_of(Backend& backend, ResNet& model, const Preprocessing& preprocessing,
                              const WeightsProvenance& provenance);

// Throws ampwb::Error naming the path and the cause; an existing file at path is replaced only by a whole one.
void save_model_weights(const std::string& path, const ModelWeights& weights);
// Throws ampwb::Error when the file is missing, truncated, damaged (a checksum fails) or holds no model weights.
ModelWeights read_model_weights(const std::string& path);

// The network of `weights` on `backend`, holding them (FP32 compute: the policy every layer starts with); run it
// with Mode::Eval for the running statistics. Throws ampwb::Error when a tensor is missing or of another shape.
std::unique_ptr<ResNet> build_model(Backend& backend, const ModelWeights& weights);

}  // namespace ampwb
