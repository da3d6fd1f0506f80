// Plain float64 implementations of every backend op: the oracle the fast paths are tested against.
// Arrays are logical row-major (NCHW for 4-D), whatever the layout of the tensor they came from.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ampwb::ref {

struct Array {
  Shape shape;
  std::vector<double> v;

  Array() = default;
  explicit Array(Shape s) : shape(std::move(s)), v(static_cast<size_t>(shape_numel(shape)), 0.0) {}
  int64_t dim(int i) const { return shape.at(i); }
  // (n, c, h, w) of a 4-D array
  double& at(int64_t n, int64_t c, int64_t h, int64_t w) {
    return v[((n * shape[1] + c) * shape[2] + h) * shape[3] + w];
  }
  double at(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return v[((n * shape[1] + c) * shape[2] + h) * shape[3] + w];
  }
};

Array from_tensor(const Tensor& t);  // any dtype and layout, CPU

// x (N,C,H,W), w (K,C,R,S) -> (N,K,P,Q)
Array conv2d_forward(const Array& x, const Array& w, int stride, int padding);
Array conv2d_backward_data(const Array& dy, const Array& w, const Shape& x_shape, int stride, int padding);
Array conv2d_backward_weights(const Array& x, const Array& dy, const Shape& w_shape, int stride, int padding);

struct BatchNormResult {
  Array y, mean, var;
};  // var is the biased batch variance
BatchNormResult batchnorm_forward_training(const Array& x, const Array& gamma, const Array& beta, double eps);
Array batchnorm_forward_inference(const Array& x, const Array& gamma, const Array& beta, const Array& mean,
                                  const Array& var, double eps);
struct BatchNormGrads {
  Array dx, dgamma, dbeta;
};
BatchNormGrads batchnorm_backward(const Array& x, const Array& dy, const Array& gamma, double eps);

Array relu_forward(const Array& x);
Array relu_backward(const Array& y, const Array& dy);

// Max pooling ignores padded positions (as if padded with -inf); the gradient goes to the first maximum.
Array maxpool_forward(const Array& x, int kernel, int stride, int padding);
Array maxpool_backward(const Array& x, const Array& dy, int kernel, int stride, int padding);

Array global_avgpool_forward(const Array& x);  // (N,C,H,W) -> (N,C)
Array global_avgpool_backward(const Array& dy, const Shape& x_shape);

// x (N,I), w (O,I), b (O) -> (N,O)
Array linear_forward(const Array& x, const Array& w, const Array& b);
struct LinearGrads {
  Array dx, dw, db;
};
LinearGrads linear_backward(const Array& dy, const Array& x, const Array& w);

Array add(const Array& a, const Array& b);

struct CrossEntropyResult {
  double loss;
  Array dlogits;
};
CrossEntropyResult softmax_cross_entropy(const Array& logits, const std::vector<int32_t>& labels,
                                         double label_smoothing);

}  // namespace ampwb::ref
