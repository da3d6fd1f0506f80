// Layer: the unit of a model. forward() keeps what backward() needs in named members; backward() takes the
// gradient of the loss with respect to the output and returns it with respect to the input, filling the gradients
// of the layer's parameters. No autograd: each layer's backward sits beside its forward.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"

namespace ampwb {

struct Parameter {
  std::string name;  // torchvision-style, e.g. "layer1.0.conv1.weight"
  Tensor value;      // FP32
  Tensor grad;       // FP32, same shape; written by backward()
};

// State that is not trained by gradients but belongs in a checkpoint (batch-norm running statistics).
struct Buffer {
  std::string name;
  Tensor value;
};

enum class Mode { Train, Eval };

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

 protected:
  Backend& backend_;
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
  Tensor backward(const Tensor& dy) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  void collect_buffers(std::vector<Buffer*>& out) override;
  size_t size() const { return layers_.size(); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

// A tensor shaped like `like` (same dtype, layout, device).
inline Tensor empty_like(const Tensor& like) {
  return Tensor::empty(like.shape(), like.dtype(), like.layout(), like.device());
}

}  // namespace ampwb
