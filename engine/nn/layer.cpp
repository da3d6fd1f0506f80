// Sequential composition of layers.
#include "nn/layer.h"

namespace ampwb {

Tensor Sequential::forward(const Tensor& x, Mode mode) {
  Tensor out = x;
  for (auto& layer : layers_) out = layer->forward(out, mode);
  return out;
}

Tensor Sequential::backward(const Tensor& dy) {
  Tensor grad = dy;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) grad = (*it)->backward(grad);
  return grad;
}

void Sequential::collect_parameters(std::vector<Parameter*>& out) {
  for (auto& layer : layers_) layer->collect_parameters(out);
}

void Sequential::collect_buffers(std::vector<Buffer*>& out) {
  for (auto& layer : layers_) layer->collect_buffers(out);
}

}  // namespace ampwb
