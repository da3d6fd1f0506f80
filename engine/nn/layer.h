// Layer: the unit of a model. forward() keeps what backward() needs in named members; backward() takes the
// gradient of the loss with respect to the output and returns it with respect to the input, filling the gradients
// of the layer's parameters. No autograd: each layer's backward sits beside its forward.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"

namespace ampwb {

struct Parameter {
  std::string name;  // torchvision-style, e.g. "layer1.0.conv1.weight"
  Tensor value;      // FP32: the master weights the optimizer updates
  Tensor grad;       // FP32, same shape; written by backward()
  // Defined when the last backward left the gradient in 16 bits for the update to widen as it reads it
  // (Layer::set_low_grads_for_update): then this is the gradient, and grad is released (undefined).
  Tensor low_grad;
  Tensor compute;  // the value in the low-precision compute type, when an op computes in one
  uint64_t version = 0, compute_version = ~uint64_t{0};  // value changes bump version; compute follows lazily

  Parameter() = default;
  Parameter(std::string param_name, Tensor initial)  // with a zero gradient of the same shape
      : name(std::move(param_name)), value(std::move(initial)), grad(Tensor::zeros(value.shape(), DType::F32)) {}
  Parameter(std::string param_name, Tensor initial, Tensor zero_grad)  // on any device
      : name(std::move(param_name)), value(std::move(initial)), grad(std::move(zero_grad)) {}

  void changed() { ++version; }
  // grad for backward to write in FP32: made again where a step with a 16-bit gradient released it.
  Tensor& fp32_grad() {
    low_grad = Tensor();
    if (!grad.defined()) grad = Tensor::empty(value.shape(), DType::F32, value.layout(), value.device());
    return grad;
  }
  // The compute copy for an update to write in its own pass (undefined when no op computes with one yet), and the
  // note that it did: the copy is current, so value_as converts nothing.
  Tensor& copy_to_update() { return compute; }
  void changed_with_copy() {
    changed();
    if (compute.defined()) compute_version = version;
  }
  // The value in dtype for an op to compute with: the FP32 value itself, or the copy refreshed from it.
  const Tensor& value_as(Backend& backend, DType dtype);
};

// State that is not trained by gradients but belongs in a checkpoint (batch-norm running statistics).
struct Buffer {
  std::string name;
  Tensor value;
};

enum class Mode { Train, Eval };

class PrecisionPolicy;
class GradientProbe;
struct Fp8LayerScaling;

// The policy every layer follows unless told otherwise: all FP32.
const PrecisionPolicy& fp32_policy();

// A tensor in dtype: t itself when it already is, else a converted copy (an autocast cast).
Tensor cast(Backend& backend, const Tensor& t, DType dtype);
// p's gradient in FP32, however backward left it (Parameter::low_grad widened, else grad).
Tensor fp32_gradient(Backend& backend, const Parameter& p);

class Layer {
 public:
  explicit Layer(Backend& backend) : backend_(backend) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  virtual Tensor forward(const Tensor& x, Mode mode) = 0;
  virtual Tensor backward(const Tensor& dy) = 0;
  virtual void collect_parameters(std::vector<Parameter*>& /*out*/) {}
  virtual void collect_buffers(std::vector<Buffer*>& /*out*/) {}
  // Calls fn on this layer and every layer inside it.
  virtual void visit(const std::function<void(Layer&)>& fn) { fn(*this); }

  void set_policy(const PrecisionPolicy& policy) { policy_ = &policy; }
  // The network's first or last layer: in amp-fp8 it stays in BF16 unless the FP8 settings include it.
  void set_network_edge(bool edge) { network_edge_ = edge; }
  // The FP8 scaling of a layer that computes in FP8 under the policy set (made on first asking, so that a
  // checkpoint can restore it before the first step); null for every other layer and policy.
  virtual Fp8LayerScaling* fp8_scaling() { return nullptr; }
  // Whether a 16-bit weight gradient stays 16-bit, in Parameter::low_grad, for an update that widens it as it
  // reads it (Capabilities::updates_read_16bit_gradients), instead of being widened into grad in a pass of its own.
  void set_low_grads_for_update(bool on) { low_grads_for_update_ = on; }
  void set_probe(GradientProbe* probe) {  // nullptr: no gradient statistics
    probe_ = probe;
    probe_casts_ = 0;
    probe_opened_ = false;
  }

 protected:
  const PrecisionPolicy& policy() const { return *policy_; }

  // The layer's dtype conversions, counted for its numerics record while a probe is set.
  Tensor cast_counted(const Tensor& t, DType dtype);      // an autocast cast
  const Tensor& weight_as(Parameter& p, DType dtype);     // a low-precision weight copy, counted when made here
  void widen_grad(const Tensor& low_grad, Parameter& p);  // a low-precision gradient into p.grad
  // A cast the backend made inside an op (e.g. a gradient rounded to 16 bits and written wide).
  void count_cast() {
    if (probe_) ++probe_casts_;
  }
  // A probed step's record of this layer: forward opens it (model order) with its output y, backward completes it
  // with the output gradient dy as it computes with it and the weight gradient. No-ops without a probe.
  // format: what the op computed in where it is no dtype ("e4m3" for FP8), else null.
  void probe_forward(const char* kind, const Parameter& weight, int64_t in_channels, int64_t out_channels, DType dtype,
                     const Tensor& y, const char* format = nullptr);
  void probe_backward(DType dtype, const Tensor& dy, const Tensor& weight_grad, const char* format = nullptr);
  // Whether the backend computes this 16-bit type by widening its values to FP32 (false for FP32 and for types it
  // runs natively); its capabilities are asked once.
  bool emulates(DType dtype);

  Backend& backend_;
  const PrecisionPolicy* policy_ = &fp32_policy();
  GradientProbe* probe_ = nullptr;
  bool network_edge_ = false;

 private:
  bool low_grads_for_update_ = false;
  std::optional<Capabilities> capabilities_;  // the backend's, asked by the first emulates()
  int64_t probe_casts_ = 0;                   // casts made since the probed step began
  size_t probe_record_ = 0;                   // the index of the record forward opened
  bool probe_opened_ = false;
};

// Layers applied one after another; backward runs them in reverse.
class Sequential : public Layer {
 public:
  using Layer::Layer;
  Layer& add(std::unique_ptr<Layer> layer) {
    layers_.push_back(std::move(layer));
    return *layers_.back();
  }
  Tensor forward(const Tensor& x, Mode mode) override;
  // The first `count` layers only (a residual block runs its last batch norm itself, fused with the block's end).
  Tensor forward_first(const Tensor& x, Mode mode, size_t count);
  Tensor backward(const Tensor& dy) override;
  // backward, telling `done` (when set) each layer it has left: that layer's parameter gradients are final.
  Tensor backward(const Tensor& dy, const std::function<void(Layer&)>& done);
  void collect_parameters(std::vector<Parameter*>& out) override;
  void collect_buffers(std::vector<Buffer*>& out) override;
  void visit(const std::function<void(Layer&)>& fn) override;
  size_t size() const { return layers_.size(); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

// A tensor shaped like `like` (same dtype, layout, device).
inline Tensor empty_like(const Tensor& like) {
  return Tensor::empty(like.shape(), like.dtype(), like.layout(), like.device());
}

}  // namespace ampwb
