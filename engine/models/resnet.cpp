// ResNet blocks and the model builder.
#include "models/resnet.h"

#include <sstream>

#include "core/error.h"
#include "nn/activation.h"
#include "nn/batchnorm2d.h"
#include "nn/conv2d.h"
#include "nn/linear.h"

namespace ampwb {

const char* stem_name(Stem stem) {
  switch (stem) {
    case Stem::Auto:
      return "auto";
    case Stem::ImageNet:
      return "imagenet";
    case Stem::Small:
      return "small";
  }
  return "?";
}

namespace {

// A convolution and the batch norm after it: where the backend emulates the 16-bit type, the gradient between them
// goes back wide (FP32 holding the 16-bit values), as the emulated convolution reads it.
void pass_gradient_wide(Conv2d& conv, BatchNorm2d& bn) {
  conv.set_output_grad_wide(true);
  bn.set_input_grad_wide(true);
}

// The shortcut of a residual block: identity, or a 1x1 projection with batch norm where the shape changes.
struct Shortcut {
  std::unique_ptr<Conv2d> conv;
  std::unique_ptr<BatchNorm2d> bn;

  Shortcut(Backend& backend, const std::string& name, int in, int out, int stride, Rng& rng) {
    if (stride == 1 && in == out) return;
    conv = std::make_unique<Conv2d>(backend, name + ".downsample.0", in, out, 1, stride, 0, rng);
    bn = std::make_unique<BatchNorm2d>(backend, name + ".downsample.1", out);
    pass_gradient_wide(*conv, *bn);
  }
  Tensor forward(const Tensor& x, Mode mode) { return conv ? bn->forward(conv->forward(x, mode), mode) : x; }
  Tensor backward(const Tensor& dy) { return conv ? conv->backward(bn->backward(dy)) : dy; }
  void collect(std::vector<Parameter*>& p, std::vector<Buffer*>* b) {
    if (!conv) return;
    conv->collect_parameters(p);
    bn->collect_parameters(p);
    if (b) bn->collect_buffers(*b);
  }
};

// out = relu(main(x) + shortcut(x)); main is conv-bn-relu repeated (the ReLU inside the batch norm layer), the last
// batch norm without its ReLU: in training its normalisation, the add and the ReLU run as one op where they can
// (BatchNorm2d::forward_add_relu).
class ResidualBlock : public Layer {
 public:
  ResidualBlock(Backend& backend, const std::string& name, int in, int out, int stride, Rng& rng)
      : Layer(backend), main_(backend), shortcut_(backend, name, in, out, stride, rng), add_relu_(backend) {}

  // `after` takes the input `before` gives it: after's backward applies before's ReLU mask as it sums its two
  // branches' gradients (Backend::relu_backward_of_sum), one pass instead of an add and a relu_backward, and
  // before's end passes its gradient on as it arrives. The same bits.
  static void chain(ResidualBlock& before, ResidualBlock& after) {
    before.add_relu_.set_gradient_arrives_masked();
    after.input_from_relu_ = true;
  }

  Tensor forward(const Tensor& x, Mode mode) override {
    input_ = input_from_relu_ && mode == Mode::Train ? x : Tensor();
    // The shortcut first, as GCC ran it when both branches were arguments of one call: the same peak memory, and
    // a probed step's records in the same order.
    const Tensor shortcut = shortcut_.forward(x, mode);
    const Tensor h = main_.forward_first(x, mode, main_.size() - 1);
    if (last_bn_->fuses_residual_end(h, shortcut, mode))
      return add_relu_.adopt(last_bn_->forward_add_relu(h, shortcut), h.dtype(), shortcut.dtype(), mode);
    return add_relu_.forward(last_bn_->forward(h, mode), shortcut, mode);
  }
  Tensor backward(const Tensor& dy) override {
    const auto [d_main, d_short] = add_relu_.backward(dy);
    Tensor dx_main = main_.backward(d_main);
    const Tensor dx_short = cast(backend_, shortcut_.backward(d_short), dx_main.dtype());
    if (!input_.defined()) {
      Tensor dx = empty_like(dx_main);
      backend_.add(dx_main, dx_short, dx);
      return dx;
    }
    // Through the ReLU that made the input, in its type (as the block before's end would take it).
    Tensor dx = empty_like(input_);
    if (dx_main.dtype() == input_.dtype()) {
      backend_.relu_backward_of_sum(input_, dx_main, dx_short, dx);
    } else {
      Tensor sum = empty_like(dx_main);
      backend_.add(dx_main, dx_short, sum);
      backend_.relu_backward(input_, cast(backend_, sum, input_.dtype()), dx);
    }
    input_ = Tensor();
    return dx;
  }
  void visit(const std::function<void(Layer&)>& fn) override {
    fn(*this);
    main_.visit(fn);
    if (shortcut_.conv) {
      shortcut_.conv->visit(fn);
      shortcut_.bn->visit(fn);
    }
  }
  void collect_parameters(std::vector<Parameter*>& out) override {
    main_.collect_parameters(out);
    shortcut_.collect(out, nullptr);
  }
  void collect_buffers(std::vector<Buffer*>& out) override {
    main_.collect_buffers(out);
    std::vector<Parameter*> unused;
    shortcut_.collect(unused, &out);
  }

 protected:
  // A convolution and its batch norm; the last (without its ReLU) ends the main branch.
  void add_conv_bn(Backend& backend, const std::string& name, int index, int in, int out, int kernel, int stride,
                   Rng& rng, bool relu) {
    const std::string n = std::to_string(index);
    auto& conv = static_cast<Conv2d&>(
        main_.add(std::make_unique<Conv2d>(backend, name + ".conv" + n, in, out, kernel, stride, kernel / 2, rng)));
    auto& bn =
        static_cast<BatchNorm2d&>(main_.add(std::make_unique<BatchNorm2d>(backend, name + ".bn" + n, out, relu)));
    pass_gradient_wide(conv, bn);
    if (!relu) last_bn_ = &bn;
  }

 private:
  Sequential main_;
  BatchNorm2d* last_bn_ = nullptr;  // main's last layer, which the block's forward runs itself
  Shortcut shortcut_;
  ResidualAddReLU add_relu_;
  bool input_from_relu_ = false;  // chained after another block
  Tensor input_;                  // (N,C,H,W) when chained: the ReLU output whose mask backward applies
};

class BasicBlock : public ResidualBlock {
 public:
  BasicBlock(Backend& backend, const std::string& name, int in, int planes, int stride, Rng& rng)
      : ResidualBlock(backend, name, in, planes, stride, rng) {
    add_conv_bn(backend, name, 1, in, planes, 3, stride, rng, true);
    add_conv_bn(backend, name, 2, planes, planes, 3, 1, rng, false);
  }
  static constexpr int kExpansion = 1;
};

class Bottleneck : public ResidualBlock {
 public:
  Bottleneck(Backend& backend, const std::string& name, int in, int planes, int stride, Rng& rng)
      : ResidualBlock(backend, name, in, planes * kExpansion, stride, rng) {
    add_conv_bn(backend, name, 1, in, planes, 1, 1, rng, true);
    add_conv_bn(backend, name, 2, planes, planes, 3, stride, rng, true);  // v1.5: stride here
    add_conv_bn(backend, name, 3, planes, planes * kExpansion, 1, 1, rng, false);
  }
  static constexpr int kExpansion = 4;
};

}  // namespace

ResNetArchitecture resnet_architecture(int depth) {
  switch (depth) {
    case 18:
      return {false, 1, {2, 2, 2, 2}, {64, 128, 256, 512}};
    case 34:
      return {false, 1, {3, 4, 6, 3}, {64, 128, 256, 512}};
    case 50:
      return {true, 4, {3, 4, 6, 3}, {64, 128, 256, 512}};
    case 101:
      return {true, 4, {3, 4, 23, 3}, {64, 128, 256, 512}};
    case 152:
      return {true, 4, {3, 8, 36, 3}, {64, 128, 256, 512}};
    default:
      break;
  }
  AMPWB_CHECK(is_cifar_depth(depth), "unsupported ResNet depth "
                                         << depth
                                         << " (expected 18, 34, 50, 101, 152 or the CIFAR 20, 32, 44, 56, 110)");
  const int n = (depth - 2) / 6;
  return {false, 1, {n, n, n}, {16, 32, 64}};
}

std::vector<int> supported_depths() { return {18, 34, 50, 101, 152, 20, 32, 44, 56, 110}; }

bool is_cifar_depth(int depth) { return depth == 20 || depth == 32 || depth == 44 || depth == 56 || depth == 110; }

Stem resolved_stem(const ResNetConfig& config) {
  if (is_cifar_depth(config.depth)) return Stem::Small;
  if (config.stem != Stem::Auto) return config.stem;
  return config.image_size < 64 ? Stem::Small : Stem::ImageNet;
}

ResNet::ResNet(Backend& backend, const ResNetConfig& config, Rng& rng)
    : Layer(backend), config_(config), body_(backend) {
  AMPWB_CHECK(config.num_classes >= 1, "a model needs at least one class");
  const ResNetArchitecture arch = resnet_architecture(config.depth);
  const int stem_width = arch.widths.front();
  auto& stem_conv = static_cast<Conv2d&>(
      resolved_stem(config) == Stem::ImageNet
          ? body_.add(std::make_unique<Conv2d>(backend, "conv1", config.in_channels, stem_width, 7, 2, 3, rng))
          : body_.add(std::make_unique<Conv2d>(backend, "conv1", config.in_channels, stem_width, 3, 1, 1, rng)));
  stem_conv.set_input_needs_grad(false);
  stem_conv.set_network_edge(true);
  pass_gradient_wide(stem_conv,
                     static_cast<BatchNorm2d&>(body_.add(std::make_unique<BatchNorm2d>(backend, "bn1", stem_width,
                                                                                       /*relu=*/true))));
  if (resolved_stem(config) == Stem::ImageNet && !is_cifar_depth(config.depth))
    body_.add(std::make_unique<MaxPool2d>(backend, PoolParams{3, 2, 1}));

  int channels = stem_width;
  ResidualBlock* previous = nullptr;
  for (size_t stage = 0; stage < arch.blocks.size(); ++stage) {
    for (int b = 0; b < arch.blocks[stage]; ++b) {
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      std::unique_ptr<ResidualBlock> block;
      if (arch.bottleneck) {
        block = std::make_unique<Bottleneck>(backend, name, channels, arch.widths[stage], stride, rng);
        channels = arch.widths[stage] * Bottleneck::kExpansion;
      } else {
        block = std::make_unique<BasicBlock>(backend, name, channels, arch.widths[stage], stride, rng);
        channels = arch.widths[stage] * BasicBlock::kExpansion;
      }
      if (previous) ResidualBlock::chain(*previous, *block);
      previous = block.get();
      body_.add(std::move(block));
    }
  }
  body_.add(std::make_unique<GlobalAvgPool>(backend));
  body_.add(std::make_unique<Linear>(backend, "fc", channels, config.num_classes, rng)).set_network_edge(true);
  for (Parameter* p : parameters()) parameter_count_ += p->value.numel();
}

Tensor ResNet::forward(const Tensor& x, Mode mode) { return body_.forward(x, mode); }
Tensor ResNet::backward(const Tensor& dlogits) { return body_.backward(dlogits, gradients_final_); }

std::vector<Parameter*> ResNet::parameters() {
  std::vector<Parameter*> out;
  collect_parameters(out);
  return out;
}

int64_t ResNet::parameter_count() { return parameter_count_; }

std::string ResNet::summary() const {
  std::ostringstream out;
  out.precision(3);
  out << "ResNet-" << config_.depth << " (" << stem_name(resolved_stem(config_)) << " stem, " << config_.num_classes
      << " classes), " << parameter_count_ / 1e6 << " M parameters";
  return out.str();
}

}  // namespace ampwb
