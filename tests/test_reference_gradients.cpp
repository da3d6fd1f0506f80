// The reference's backward functions against central finite differences of its forward functions, in float64.
// With the backend-vs-reference tests this closes the loop: backend backward == true gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/rng.h"
#include "reference/reference_ops.h"

namespace ampwb {
namespace {

ref::Array random_array(Shape shape, Rng& rng) {
  ref::Array a(std::move(shape));
  for (double& v : a.v) v = rng.normal();
  return a;
}

double dot(const ref::Array& a, const ref::Array& b) {
  double s = 0;
  for (size_t i = 0; i < a.v.size(); ++i) s += a.v[i] * b.v[i];
  return s;
}

// Checks d/dx of L(x) = <r, f(x)> against `grad` at every coordinate of x.
void expect_gradient(ref::Array x, const std::function<ref::Array(const ref::Array&)>& f, const ref::Array& r,
                     const ref::Array& grad, const char* what) {
  const double h = 1e-6;
  double worst = 0, scale = 1e-12;
  for (size_t i = 0; i < x.v.size(); ++i) {
    const double saved = x.v[i];
    x.v[i] = saved + h;
    const double up = dot(r, f(x));
    x.v[i] = saved - h;
    const double down = dot(r, f(x));
    x.v[i] = saved;
    const double numeric = (up - down) / (2 * h);
    worst = std::max(worst, std::fabs(numeric - grad.v[i]));
    scale = std::max(scale, std::fabs(numeric));
  }
  EXPECT_LT(worst / scale, 1e-6) << what;
}

TEST(ReferenceGradients, Conv2d) {
  Rng rng(11);
  for (auto [stride, padding] : {std::pair{1, 1}, {2, 1}, {2, 0}}) {
    const ref::Array x = random_array({2, 3, 5, 6}, rng), w = random_array({4, 3, 3, 3}, rng);
    const ref::Array y = ref::conv2d_forward(x, w, stride, padding);
    const ref::Array r = random_array(y.shape, rng);
    expect_gradient(
        x, [&](const ref::Array& v) { return ref::conv2d_forward(v, w, stride, padding); }, r,
        ref::conv2d_backward_data(r, w, x.shape, stride, padding), "conv input");
    expect_gradient(
        w, [&](const ref::Array& v) { return ref::conv2d_forward(x, v, stride, padding); }, r,
        ref::conv2d_backward_weights(x, r, w.shape, stride, padding), "conv weights");
  }
}

TEST(ReferenceGradients, BatchNorm) {
  Rng rng(12);
  const ref::Array x = random_array({3, 4, 3, 2}, rng), gamma = random_array({4}, rng), beta = random_array({4}, rng);
  const ref::Array r = random_array(x.shape, rng);
  const ref::BatchNormGrads g = ref::batchnorm_backward(x, r, gamma, 1e-5);
  expect_gradient(
      x, [&](const ref::Array& v) { return ref::batchnorm_forward_training(v, gamma, beta, 1e-5).y; }, r, g.dx,
      "batch norm input");
  expect_gradient(
      gamma, [&](const ref::Array& v) { return ref::batchnorm_forward_training(x, v, beta, 1e-5).y; }, r, g.dgamma,
      "batch norm scale");
  expect_gradient(
      beta, [&](const ref::Array& v) { return ref::batchnorm_forward_training(x, gamma, v, 1e-5).y; }, r, g.dbeta,
      "batch norm shift");
}

TEST(ReferenceGradients, ReluPoolingLinearAndLoss) {
  Rng rng(13);
  const ref::Array x = random_array({2, 3, 5, 5}, rng);
  ref::Array r = random_array(x.shape, rng);
  expect_gradient(x, ref::relu_forward, r, ref::relu_backward(ref::relu_forward(x), r), "relu");

  const ref::Array pooled = ref::maxpool_forward(x, 3, 2, 1);
  r = random_array(pooled.shape, rng);
  expect_gradient(
      x, [](const ref::Array& v) { return ref::maxpool_forward(v, 3, 2, 1); }, r, ref::maxpool_backward(x, r, 3, 2, 1),
      "max pool");

  r = random_array({2, 3}, rng);
  expect_gradient(x, ref::global_avgpool_forward, r, ref::global_avgpool_backward(r, x.shape), "global avg pool");

  const ref::Array a = random_array({4, 6}, rng), w = random_array({3, 6}, rng), b = random_array({3}, rng);
  r = random_array({4, 3}, rng);
  const ref::LinearGrads g = ref::linear_backward(r, a, w);
  expect_gradient(
      a, [&](const ref::Array& v) { return ref::linear_forward(v, w, b); }, r, g.dx, "linear input");
  expect_gradient(
      w, [&](const ref::Array& v) { return ref::linear_forward(a, v, b); }, r, g.dw, "linear weights");
  expect_gradient(
      b, [&](const ref::Array& v) { return ref::linear_forward(a, w, v); }, r, g.db, "linear bias");

  const std::vector<int32_t> labels = {2, 0, 1, 2};
  const ref::Array logits = random_array({4, 3}, rng);
  ref::Array one({1});
  one.v[0] = 1.0;
  for (double smoothing : {0.0, 0.2}) {
    auto loss = [&](const ref::Array& v) {
      ref::Array out({1});
      out.v[0] = ref::softmax_cross_entropy(v, labels, smoothing).loss;
      return out;
    };
    expect_gradient(logits, loss, one, ref::softmax_cross_entropy(logits, labels, smoothing).dlogits, "cross-entropy");
  }
}

}  // namespace
}  // namespace ampwb
