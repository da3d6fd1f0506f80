// The ResNet family. ImageNet structure as torchvision: ResNet-18/34 (BasicBlock), ResNet-50/101/152 (Bottleneck
// v1.5: the stride on the 3x3 convolution). CIFAR structure as He et al. 2016: ResNet-20/32/44/56/110, a 3x3 stem
// and stages of 16/32/64 channels, with 1x1 projection shortcuts where the shape changes (option B).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/layer.h"

namespace ampwb {

enum class Stem {
  Auto,      // Small below 64 px, ImageNet otherwise
  ImageNet,  // 7x7 stride-2 convolution and 3x3 stride-2 max pool
  Small      // 3x3 stride-1 convolution, no max pool
};
const char* stem_name(Stem stem);

struct ResNetConfig {
  int depth = 18;
  int num_classes = 10;
  int in_channels = 3;
  int image_size = 224;  // decides the stem when stem is Auto
  Stem stem = Stem::Auto;
};

std::vector<int> supported_depths();  // 18, 34, 50, 101, 152, 20, 32, 44, 56, 110
bool is_cifar_depth(int depth);
Stem resolved_stem(const ResNetConfig& config);  // never Auto

// A depth's blocks and widths, as the model builds them: what a memory estimate walks without building the model.
struct ResNetArchitecture {
  bool bottleneck = false;  // Bottleneck blocks (1x1, 3x3, 1x1) instead of BasicBlocks (3x3, 3x3)
  int expansion = 1;        // a block's output channels over its width (4 for Bottleneck)
  std::vector<int> blocks;  // per stage
  std::vector<int> widths;  // per stage
};
ResNetArchitecture resnet_architecture(int depth);  // throws ampwb::Error for an unsupported depth

class ResNet : public Layer {
 public:
  ResNet(Backend& backend, const ResNetConfig& config, Rng& rng);
  Tensor forward(const Tensor& x, Mode mode) override;  // (N,C,S,S) -> logits (N,classes)
  Tensor backward(const Tensor& dlogits) override;
  void collect_parameters(std::vector<Parameter*>& out) override { body_.collect_parameters(out); }
  void collect_buffers(std::vector<Buffer*>& out) override { body_.collect_buffers(out); }
  void visit(const std::function<void(Layer&)>& fn) override {
    fn(*this);
    body_.visit(fn);
  }

  // Told, during backward, each of the model's top-level layers (the stem, each residual block, the head) as
  // backward leaves it, its parameters' gradients final (a data-parallel step starts their all-reduce there);
  // nullptr: nobody.
  void set_gradients_final(std::function<void(Layer&)> done) { gradients_final_ = std::move(done); }

  const ResNetConfig& config() const { return config_; }
  std::vector<Parameter*> parameters();
  int64_t parameter_count();
  std::string summary() const;  // e.g. "ResNet-18 (small stem), 11.2 M parameters"

 private:
  ResNetConfig config_;
  Sequential body_;
  std::function<void(Layer&)> gradients_final_;
  int64_t parameter_count_ = 0;
};

}  // namespace ampwb
