// The memory estimate: a walk over the ResNet's layers that replays, in bytes only, what the layers' forward and
// backward passes allocate, keep and release (nn/, models/resnet.cpp), and the host's and device's limits.
#include "train/memory_estimate.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/op_params.h"
#include "core/delayed_scaling.h"
#include "core/error.h"
#include "core/tensor.h"
#include "data/loader.h"
#include "train/config.h"

namespace ampwb {
namespace {

enum class Kind { Activation, Workspace };

// Live tensor bytes as the step's tensors come and go, with the activations' and the workspace's share at the peak.
// Tensors are reference counted as the engine's are: a saved activation is released when its last holder lets go.
class LiveBytes {
 public:
  int make(size_t bytes, Kind kind) {
    tensors_.push_back({bytes, 1, kind});
    add(kind, static_cast<int64_t>(bytes));
    return static_cast<int>(tensors_.size() - 1);
  }
  void hold(int id) { ++tensors_[id].refs; }
  void drop(int id) {
    Tensor& t = tensors_[id];
    if (--t.refs == 0) add(t.kind, -static_cast<int64_t>(t.bytes));
  }
  // An op's own scratch, alive for the op only.
  void scratch(size_t bytes) { drop(make(bytes, Kind::Workspace)); }
  size_t peak_activations() const { return peak_activations_; }
  size_t peak_workspace() const { return peak_workspace_; }

 private:
  struct Tensor {
    size_t bytes;
    int refs;
    Kind kind;
  };
  void add(Kind kind, int64_t bytes) {
    (kind == Kind::Activation ? activations_ : workspace_) += bytes;
    if (static_cast<size_t>(activations_ + workspace_) > peak_activations_ + peak_workspace_) {
      peak_activations_ = static_cast<size_t>(activations_);
      peak_workspace_ = static_cast<size_t>(workspace_);
    }
  }
  std::vector<Tensor> tensors_;
  int64_t activations_ = 0, workspace_ = 0;
  size_t peak_activations_ = 0, peak_workspace_ = 0;
};

// An activation: its tensor in LiveBytes, and its channels and side (the batch is the walk's).
struct Act {
  int id;
  int64_t channels, side;
};

// A layer's backward: takes the output gradient's tensor (one reference, which it releases) and returns the input
// gradient's.
using Backward = std::function<int(int)>;

// Replays one training step of a ResNet (MixedPrecisionStep::run): forward, loss, backward. The parameters,
// gradients, copies and optimizer state are counted apart (estimate_training_memory).
class StepWalk {
 public:
  explicit StepWalk(const MemoryEstimateInput& in)
      : batch_(in.batch_size),
        low_(mode_info(in.precision.mode).low != DType::F32),
        element_(low_ ? 2 : 4),
        emulated_(low_ && in.emulates_low_precision),
        fp8_(mode_info(in.precision.mode).format == NumberFormat::Fp8),
        fp8_edges_(in.precision.fp8.first_and_last),
        fp8_element_(in.fp8_storage_bytes) {}

  LiveBytes live;
  int fp8_layers() const { return fp8_layers_; }

  // Whether a convolution or linear layer computes in FP8: all but the stem and the classifier, unless the
  // precision puts those in FP8 too (PrecisionPolicy::fp8_layer).
  bool fp8_layer(bool edge) const { return fp8_ && (!edge || fp8_edges_); }

  size_t bytes(int64_t channels, int64_t side, size_t element) const {
    return static_cast<size_t>(batch_ * channels * side * side) * element;
  }

  // Conv2d: keeps its input (cast to the compute type: a copy only for the FP32 images into the stem); the output
  // goes on to the batch norm, which keeps it.
  std::pair<Act, Backward> conv(const Act& x, int64_t out_channels, int kernel, int stride, bool input_needs_grad,
                                bool input_is_fp32, bool edge = false) {
    const int64_t side = (x.side + 2 * (kernel / 2) - kernel) / stride + 1;
    if (fp8_layer(edge)) return fp8_conv(x, out_channels, kernel, side, input_needs_grad);
    int input = x.id;
    if (low_ && input_is_fp32)
      input = live.make(bytes(x.channels, x.side, element_), Kind::Activation);
    else
      live.hold(input);
    const Act y{live.make(bytes(out_channels, side, element_), Kind::Activation), out_channels, side};
    // The weights reordered into the primitive's layout for the op's duration; where the type is emulated, widened
    // to FP32 first (two FP32 copies), and the input and output in FP32 besides (CpuBackend::widen, wide_output).
    const size_t weight_values = static_cast<size_t>(out_channels * x.channels * kernel * kernel);
    const size_t weight_scratch = emulated_ ? 2 * weight_values * 4 : weight_values * element_;
    live.scratch(weight_scratch + (emulated_ ? bytes(x.channels, x.side, 4) + bytes(out_channels, side, 4) : 0));
    const Act in_shape = x;
    Backward backward = [this, input, in_shape, input_needs_grad, weight_scratch](int dy) {
      // The weight gradient in the primitive's layout; emulated, the input widened besides. The data gradient is
      // computed wide and rounded where the type is emulated.
      live.scratch(weight_scratch + (emulated_ ? bytes(in_shape.channels, in_shape.side, 4) : 0));
      int dx = -1;
      if (input_needs_grad) {
        dx = live.make(bytes(in_shape.channels, in_shape.side, element_), Kind::Workspace);
        live.scratch(weight_scratch + (emulated_ ? bytes(in_shape.channels, in_shape.side, 4) : 0));
      }
      live.drop(dy);
      live.drop(input);
      return dx;
    };
    return {y, backward};
  }

  // An FP8 convolution (Conv2d::forward_fp8): keeps FP8 copies of its input and weight (FP8 values held in FP32
  // where the device emulates FP8), not the input itself; computes its output wide and rounds it to the 16-bit type.
  std::pair<Act, Backward> fp8_conv(const Act& x, int64_t out_channels, int kernel, int64_t side,
                                    bool input_needs_grad) {
    ++fp8_layers_;
    const size_t weight_values = static_cast<size_t>(out_channels * x.channels * kernel * kernel);
    const int input = live.make(bytes(x.channels, x.side, fp8_element_), Kind::Activation);
    const int weight = live.make(weight_values * fp8_element_, Kind::Activation);
    const Act y{live.make(bytes(out_channels, side, element_), Kind::Activation), out_channels, side};
    live.scratch(bytes(out_channels, side, 4) + weight_values * 4);  // the FP32 output, the weight reordered
    const Act in_shape = x;
    Backward backward = [this, input, weight, in_shape, out_channels, side, input_needs_grad, weight_values](int dy) {
      const int dy8 = live.make(bytes(out_channels, side, fp8_element_), Kind::Workspace);  // dy cast to FP8
      live.scratch(weight_values * 4);                                                      // the weight gradient
      int dx = -1;
      if (input_needs_grad) {
        dx = live.make(bytes(in_shape.channels, in_shape.side, element_), Kind::Workspace);
        live.scratch(bytes(in_shape.channels, in_shape.side, 4) + weight_values * 4);  // computed wide, then rounded
      }
      live.drop(dy8);
      live.drop(dy);
      live.drop(input);
      live.drop(weight);
      return dx;
    };
    return {y, backward};
  }

  // BatchNorm2d (with its ReLU, or without): keeps its input, and with the ReLU its output. Its input gradient goes
  // back wide (FP32) where the type is emulated (pass_gradient_wide in models/resnet.cpp).
  std::pair<Act, Backward> batch_norm(const Act& x, bool relu) {
    live.hold(x.id);
    const Act y{live.make(bytes(x.channels, x.side, element_), Kind::Activation), x.channels, x.side};
    if (relu) {
      live.hold(y.id);
      if (!emulated_) live.scratch(bytes(x.channels, x.side, 1));  // oneDNN's ReLU mask
    }
    Backward backward = [this, x, y, relu](int dy) {
      const int dx = live.make(bytes(x.channels, x.side, emulated_ ? 4 : element_), Kind::Workspace);
      live.drop(dy);
      live.drop(x.id);
      if (relu) live.drop(y.id);
      return dx;
    };
    return {y, backward};
  }

  // A convolution and its batch norm; the convolution's output is the batch norm's to keep.
  std::pair<Act, Backward> conv_bn(const Act& x, int64_t out_channels, int kernel, int stride, bool relu,
                                   bool input_needs_grad = true, bool input_is_fp32 = false, bool edge = false) {
    auto [c, conv_backward] = conv(x, out_channels, kernel, stride, input_needs_grad, input_is_fp32, edge);
    auto [y, bn_backward] = batch_norm(c, relu);
    live.drop(c.id);
    // Init-captures: clang before 16 cannot capture structured bindings by name.
    return {y, [conv_back = conv_backward, bn_back = bn_backward](int dy) { return conv_back(bn_back(dy)); }};
  }

  // ResidualBlock: main branch, shortcut, and the last batch norm fused with the add and the ReLU. `chained`: the
  // block after another keeps its input for the ReLU mask; `last`: the block's add keeps its output.
  std::pair<Act, Backward> block(const Act& x, int64_t width, int64_t out_channels, int stride, bool bottleneck,
                                 bool chained, bool last) {
    if (chained) live.hold(x.id);
    // The shortcut first, as the block runs it; its batch norm's output lives until the add.
    Act shortcut = x;
    Backward shortcut_backward;
    const bool projection = stride != 1 || x.channels != out_channels;
    if (projection) {
      std::tie(shortcut, shortcut_backward) = conv_bn(x, out_channels, 1, stride, false);
    } else {
      live.hold(x.id);
    }
    std::vector<Backward> main;
    Act h = x;
    live.hold(h.id);
    auto step = [&](int64_t channels, int kernel, int s, bool relu) {
      auto [next, backward] = relu ? conv_bn(h, channels, kernel, s, true) : conv(h, channels, kernel, s, true, false);
      live.drop(h.id);
      h = next;
      main.push_back(backward);
    };
    if (bottleneck) {
      step(width, 1, 1, true);
      step(width, 3, stride, true);  // v1.5: the stride on the 3x3 convolution
      step(out_channels, 1, 1, false);
    } else {
      step(width, 3, stride, true);
      step(out_channels, 3, 1, false);
    }
    // The last convolution's output is kept by the fused batch norm, which writes the block's output.
    live.hold(h.id);
    const Act y{live.make(bytes(out_channels, h.side, element_), Kind::Activation), out_channels, h.side};
    live.drop(shortcut.id);
    live.drop(h.id);
    if (last) live.hold(y.id);
    const Act last_conv = h;
    Backward backward = [this, x, y, main, shortcut_backward, last_conv, chained, last](int dy) {
      int d = dy;
      if (last) {  // the add's own ReLU mask, applied to a copy
        d = live.make(bytes(y.channels, y.side, element_), Kind::Workspace);
        live.drop(dy);
        live.drop(y.id);
      }
      live.hold(d);  // both branches take it
      // The fused batch norm's backward, then the main branch's convolutions and batch norms in reverse.
      int g = live.make(bytes(last_conv.channels, last_conv.side, emulated_ ? 4 : element_), Kind::Workspace);
      live.drop(d);
      live.drop(last_conv.id);
      for (auto it = main.rbegin(); it != main.rend(); ++it) g = (*it)(g);
      const int d_short = shortcut_backward ? shortcut_backward(d) : d;
      const int dx = live.make(bytes(x.channels, x.side, element_), Kind::Workspace);
      live.drop(g);
      live.drop(d_short);
      if (chained) live.drop(x.id);
      return dx;
    };
    return {y, backward};
  }

  // The whole step: the model's forward, the loss, the backward. Returns nothing: LiveBytes holds the peak.
  void run(const MemoryEstimateInput& in, const ResNetArchitecture& arch) {
    const Act images{live.make(bytes(in.in_channels, in.image_size, 4), Kind::Activation), in.in_channels,
                     in.image_size};
    const bool imagenet_stem =
        resolved_stem({in.depth, in.num_classes, in.in_channels, in.image_size, in.stem}) == Stem::ImageNet;
    std::vector<Backward> layers;
    const int64_t stem_width = arch.widths.front();
    auto [stem, stem_backward] = imagenet_stem ? conv_bn(images, stem_width, 7, 2, true, /*input_needs_grad=*/false,
                                                         /*input_is_fp32=*/true, /*edge=*/true)
                                               : conv_bn(images, stem_width, 3, 1, true, false, true, true);
    layers.push_back(stem_backward);
    Act x = stem;
    if (imagenet_stem) {  // max pool 3x3 stride 2: keeps its input and oneDNN's workspace (a byte per output)
      const int64_t side = (x.side + 2 - 3) / 2 + 1;
      const Act y{live.make(bytes(x.channels, side, element_), Kind::Activation), x.channels, side};
      const int workspace = live.make(bytes(x.channels, side, 1), Kind::Activation);
      const Act input = x;
      layers.push_back([this, input, workspace](int dy) {
        const int dx = live.make(bytes(input.channels, input.side, element_), Kind::Workspace);
        live.drop(dy);
        live.drop(workspace);
        live.drop(input.id);
        return dx;
      });
      x = y;
    }
    int64_t channels = stem_width;
    const size_t stages = arch.blocks.size();
    bool first_block = true;
    for (size_t stage = 0; stage < stages; ++stage) {
      for (int b = 0; b < arch.blocks[stage]; ++b) {
        const int stride = stage > 0 && b == 0 ? 2 : 1;
        const int64_t out_channels = arch.widths[stage] * arch.expansion;
        const bool last = stage + 1 == stages && b + 1 == arch.blocks[stage];
        auto [y, backward] = block(x, arch.widths[stage], out_channels, stride, arch.bottleneck, !first_block, last);
        live.drop(x.id);
        layers.push_back(backward);
        x = y;
        channels = out_channels;
        first_block = false;
      }
    }
    // Global average pool (keeps nothing), the linear layer (keeps its small input; in FP8, FP8 copies of it and of
    // its weight), the logits, and the loss's FP32 gradient, which the loss keeps until the next step.
    const bool fp8_classifier = fp8_layer(true);
    const int pooled = live.make(static_cast<size_t>(batch_ * channels) * (fp8_classifier ? fp8_element_ : element_),
                                 Kind::Activation);
    int classifier_weight = -1;
    if (fp8_classifier) {
      ++fp8_layers_;
      classifier_weight = live.make(static_cast<size_t>(channels * in.num_classes) * fp8_element_, Kind::Activation);
    }
    const Act last = x;
    live.drop(x.id);  // still kept by the last block's add
    const size_t logits_bytes = static_cast<size_t>(batch_ * in.num_classes) * element_;
    const int logits = live.make(logits_bytes, Kind::Activation);
    const size_t loss_bytes = static_cast<size_t>(batch_ * in.num_classes) * 4;
    if (low_) live.scratch(loss_bytes);  // the logits widened to FP32 for the loss
    const int dlogits = live.make(loss_bytes, Kind::Workspace);
    live.hold(dlogits);
    // Backward: the linear layer (its gradient cast to the compute type), the pool, then the blocks and the stem.
    int g = live.make(static_cast<size_t>(batch_ * channels) * element_, Kind::Workspace);
    if (low_) live.scratch(logits_bytes);
    if (classifier_weight >= 0) live.drop(classifier_weight);
    live.drop(dlogits);
    live.drop(pooled);
    const int dpool = live.make(bytes(last.channels, last.side, element_), Kind::Workspace);
    live.drop(g);
    g = dpool;
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      const int dx = (*it)(g);
      g = dx;
    }
    live.drop(logits);
    live.drop(images.id);
  }

 private:
  int64_t batch_;
  bool low_;
  size_t element_;
  bool emulated_;
  bool fp8_, fp8_edges_;
  size_t fp8_element_;
  int fp8_layers_ = 0;
};

// The parameters of the model, counted from the same structure: convolution and linear weights (which have 16-bit
// copies in the low-precision modes) and batch norms' (scale, shift; running mean and variance besides).
struct ParameterCounts {
  int64_t copied = 0;      // convolution and linear weights, and the linear bias
  int64_t edges = 0;       // of those, the stem's and the classifier's (16-bit in amp-fp8, whose others are FP8)
  int64_t batch_norm = 0;  // batch norms' scale and shift
  int64_t buffers = 0;     // batch norms' running statistics and batch statistics
};

ParameterCounts count_parameters(const MemoryEstimateInput& in, const ResNetArchitecture& arch) {
  ParameterCounts p;
  auto conv_bn = [&](int64_t in_channels, int64_t out_channels, int kernel) {
    p.copied += out_channels * in_channels * kernel * kernel;
    p.batch_norm += 2 * out_channels;
    p.buffers += 4 * out_channels;
  };
  const bool imagenet_stem =
      resolved_stem({in.depth, in.num_classes, in.in_channels, in.image_size, in.stem}) == Stem::ImageNet;
  int64_t channels = arch.widths.front();
  conv_bn(in.in_channels, channels, imagenet_stem ? 7 : 3);
  p.edges = p.copied;
  for (size_t stage = 0; stage < arch.blocks.size(); ++stage) {
    for (int b = 0; b < arch.blocks[stage]; ++b) {
      const int stride = stage > 0 && b == 0 ? 2 : 1;
      const int64_t width = arch.widths[stage], out = width * arch.expansion;
      if (arch.bottleneck) {
        conv_bn(channels, width, 1);
        conv_bn(width, width, 3);
        conv_bn(width, out, 1);
      } else {
        conv_bn(channels, width, 3);
        conv_bn(width, out, 3);
      }
      if (stride != 1 || channels != out) conv_bn(channels, out, 1);
      channels = out;
    }
  }
  p.copied += channels * in.num_classes + in.num_classes;
  p.edges += channels * in.num_classes + in.num_classes;
  return p;
}

std::string gib_or_mib(double bytes) {
  char text[32];
  if (bytes >= 1024.0 * 1024 * 1024)
    std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  else
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024));
  return text;
}

// A number from a one-line file (cgroup limits); nullopt when absent, "max" or unreadable.
std::optional<size_t> read_bytes(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    return static_cast<size_t>(std::stoull(word));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A field of /proc/meminfo or /proc/self/status, in bytes ("MemAvailable:", "VmSize:"); nullopt when absent.
std::optional<size_t> kib_field(const std::string& path, const std::string& field) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) != 0) continue;
    std::istringstream values(line.substr(field.size()));
    size_t kib = 0;
    if (values >> kib) return kib * 1024;
  }
  return std::nullopt;
}

// The cgroup's memory limit less its usage: this process's own cgroup where it is visible, else the root of the
// cgroup file system (a container sees its own limits there). v1 reports "no limit" as a huge number.
std::optional<size_t> cgroup_headroom() {
  std::vector<std::string> v2_dirs = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
  std::vector<std::string> v1_dirs = {"/sys/fs/cgroup/memory"};
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (path == "/") continue;
    if (controllers.empty()) v2_dirs.insert(v2_dirs.begin(), "/sys/fs/cgroup" + path);
    if (controllers == "memory") v1_dirs.insert(v1_dirs.begin(), "/sys/fs/cgroup/memory" + path);
  }
  std::optional<size_t> headroom;
  auto consider = [&](std::optional<size_t> limit, std::optional<size_t> usage) {
    if (!limit || !usage || *limit >= (size_t{1} << 60)) return;
    const size_t left = *limit > *usage ? *limit - *usage : 0;
    headroom = headroom ? std::min(*headroom, left) : left;
  };
  for (const std::string& dir : v2_dirs) consider(read_bytes(dir + "/memory.max"), read_bytes(dir + "/memory.current"));
  for (const std::string& dir : v1_dirs)
    consider(read_bytes(dir + "/memory.limit_in_bytes"), read_bytes(dir + "/memory.usage_in_bytes"));
  return headroom;
}

}  // namespace

MemoryEstimate estimate_training_memory(const MemoryEstimateInput& in) {
  const ResNetArchitecture arch = resnet_architecture(in.depth);
  const ParameterCounts params = count_parameters(in, arch);
  const bool low = mode_info(in.precision.mode).low != DType::F32;
  MemoryEstimate e;
  const int64_t all = params.copied + params.batch_norm;
  // FP32 values and gradients (16-bit ones where backward leaves them so), and the batch norms' statistics.
  const int64_t copied_gradient_bytes = in.gradients_stay_16bit ? 2 : 4;
  e.weights =
      static_cast<size_t>(all * 4 + params.copied * copied_gradient_bytes + params.batch_norm * 4 + params.buffers * 4);
  // amp-fp8 copies its FP8 layers' weights anew each step (the walk has them): 16-bit copies for the others only.
  const bool fp8 = mode_info(in.precision.mode).format == NumberFormat::Fp8;
  const int64_t copied_16bit = !fp8 ? params.copied : in.precision.fp8.first_and_last ? 0 : params.edges;
  if (low) e.low_precision_copies = static_cast<size_t>(copied_16bit * 2);
  const OptimizerConfig& o = in.optimizer;
  const int moments = o.kind == OptimizerKind::Sgd ? (o.momentum != 0.0f ? 1 : 0) : 2;
  e.optimizer_state = static_cast<size_t>(all * 4 * moments);

  StepWalk walk(in);
  walk.run(in, arch);
  // Each FP8 layer's three delayed scalings (input, weight, output gradient): amax history and cast statistics.
  const int64_t scaling_bytes = (kFp8StateHistory + in.precision.fp8.scaling.history_length) * 4 + kFp8CastStatsBytes;
  e.weights += static_cast<size_t>(walk.fp8_layers() * 3 * scaling_bytes);
  // The step's images are in the walk; its labels, and any other batches held, besides.
  const size_t labels_bytes = static_cast<size_t>(in.batch_size) * 4;
  const size_t batch_bytes =
      static_cast<size_t>(in.batch_size) * in.in_channels * in.image_size * in.image_size * 4 + labels_bytes;
  e.activations =
      walk.live.peak_activations() + labels_bytes + static_cast<size_t>(in.extra_input_batches) * batch_bytes;
  e.workspace = walk.live.peak_workspace();
  return e;
}

MemoryEstimateInput memory_estimate_input(const TrainConfig& config, int image_size, int num_classes,
                                          const Capabilities& device) {
  MemoryEstimateInput in;
  in.depth = config.depth;
  in.image_size = image_size;
  in.batch_size = config.batch_size;
  in.num_classes = num_classes;
  in.stem = config.stem;
  in.precision = config.precision;
  in.optimizer = config.optimizer;
  // amp-fp8's layers other than FP8 ones compute in its 16-bit type (BF16).
  const DType low = mode_info(config.precision.mode).low;
  in.emulates_low_precision = (low == DType::F16 && !device.fp16.native) || (low == DType::BF16 && !device.bf16.native);
  const bool fp8 = mode_info(config.precision.mode).format == NumberFormat::Fp8;
  in.fp8_storage_bytes = device.fp8.native ? 1 : 4;
  // As MixedPrecisionStep::run decides (check_in_update): no dynamic scale to check, no clipping. On a GPU the steps
  // are deferred, whose backward writes FP32 gradients.
  const LossScaleConfig& scale = config.precision.loss_scale;
  const bool checked_in_update =
      (scale.kind == LossScaleKind::Off || (scale.kind == LossScaleKind::Static && scale.init_scale == 1.0)) &&
      config.grad_clip_norm <= 0;
  in.gradients_stay_16bit = mode_info(config.precision.mode).low != DType::F32 && !fp8 && !in.emulates_low_precision &&
                            device.updates_read_16bit_gradients && checked_in_update && device.device.is_cpu();
  // The trainer's loader threads (Trainer::train): its ring holds (prefetch + threads + 1) batches, prefetch being
  // threads + 1, and the next batch is taken out before the step.
  const int threads = config.threads > 0 ? config.threads : static_cast<int>(std::thread::hardware_concurrency());
  const int loader_threads =
      config.data.loader_threads > 0 ? config.data.loader_threads : std::min(std::max(threads, 1), kMaxLoaderThreads);
  in.extra_input_batches = 1 + 2 * loader_threads + 2;
  return in;
}

size_t available_host_memory() {
  std::optional<size_t> available = kib_field("/proc/meminfo", "MemAvailable:");
  auto take_smaller = [&](std::optional<size_t> other) {
    if (other) available = available ? std::min(*available, *other) : *other;
  };
  take_smaller(cgroup_headroom());
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const size_t in_use = kib_field("/proc/self/status", "VmSize:").value_or(0);
    take_smaller(limit.rlim_cur > in_use ? static_cast<size_t>(limit.rlim_cur) - in_use : 0);
  }
  return available.value_or(0);
}

size_t available_memory(const Backend& backend) {
  const Device device = backend.device();
  if (device.is_cpu()) return available_host_memory();
  const size_t free_bytes = backend.free_memory_bytes();
  return free_bytes == 0 ? 0 : free_bytes + allocator_for(device).stats().cached_bytes;
}

int largest_batch_that_fits(MemoryEstimateInput input, size_t available) {
  auto fits = [&](int batch) {
    input.batch_size = batch;
    return estimate_training_memory(input).total() <= available;
  };
  if (!fits(2)) return 0;
  // The estimate grows with the batch: double to a batch that does not fit, then bisect.
  int low = 2, high = 4;
  while (high < (1 << 24) && fits(high)) {
    low = high;
    high *= 2;
  }
  if (high >= (1 << 24) && fits(high)) return high;
  while (high - low > 1) {
    const int middle = low + (high - low) / 2;
    (fits(middle) ? low : high) = middle;
  }
  return low;
}

std::string memory_text(size_t bytes) { return gib_or_mib(static_cast<double>(bytes)); }

std::string memory_summary(const MemoryEstimate& e, size_t available) {
  std::string text = "\u2248 " + memory_text(e.total()) + " estimated (weights and gradients " + memory_text(e.weights);
  if (e.low_precision_copies) text += ", 16-bit copies " + memory_text(e.low_precision_copies);
  if (e.optimizer_state) text += ", optimizer " + memory_text(e.optimizer_state);
  text += ", activations " + memory_text(e.activations) + ", workspace " + memory_text(e.workspace) + ")";
  if (available) text += " of " + memory_text(available) + " available";
  return text;
}

std::string memory_advice(const MemoryEstimateInput& input, const MemoryEstimate& estimate, size_t available) {
  std::string text = "needs \u2248 " + memory_text(estimate.total()) + " (activations " +
                     memory_text(estimate.activations) + " at batch " + std::to_string(input.batch_size) + ", " +
                     std::to_string(input.image_size) + " px)";
  if (available == 0) return text + ", more than this machine could give";
  text += ", " + memory_text(available) + " available";
  const int fits = largest_batch_that_fits(input, available);
  if (fits >= 2)
    text += ": a batch size of " + std::to_string(fits) + " or less fits";
  else
    text += ": not even a batch size of 2 fits; choose a smaller image size or depth";
  return text;
}

void refuse_what_cannot_fit(const MemoryEstimateInput& input, const MemoryEstimate& estimate, size_t available,
                            const std::string& what) {
  if (available > 0 && estimate.total() > available)
    throw Error("not enough memory: this " + what + " " + memory_advice(input, estimate, available));
}

}  // namespace ampwb
