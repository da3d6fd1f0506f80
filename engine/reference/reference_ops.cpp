// The float64 reference ops: direct loops, written for clarity, never for speed.
#include "reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace ampwb::ref {

Array from_tensor(const Tensor& t) {
  Array a(t.shape());
  const std::vector<float> values = to_float_vector(t);
  std::copy(values.begin(), values.end(), a.v.begin());
  return a;
}

namespace {
int64_t out_size(int64_t in, int64_t kernel, int stride, int padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}
}  // namespace

Array conv2d_forward(const Array& x, const Array& w, int stride, int padding) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t K = w.dim(0), R = w.dim(2), S = w.dim(3);
  AMPWB_CHECK(w.dim(1) == C, "reference conv: channel mismatch");
  const int64_t P = out_size(H, R, stride, padding), Q = out_size(W, S, stride, padding);
  Array y({N, K, P, Q});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          double sum = 0.0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t h = p * stride - padding + r, ww = q * stride - padding + s;
                if (h >= 0 && h < H && ww >= 0 && ww < W) sum += x.at(n, c, h, ww) * w.at(k, c, r, s);
              }
          y.at(n, k, p, q) = sum;
        }
  return y;
}

Array conv2d_backward_data(const Array& dy, const Array& w, const Shape& x_shape, int stride, int padding) {
  Array dx(x_shape);
  const int64_t N = dy.dim(0), K = dy.dim(1), P = dy.dim(2), Q = dy.dim(3);
  const int64_t C = w.dim(1), R = w.dim(2), S = w.dim(3), H = x_shape[2], W = x_shape[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t h = p * stride - padding + r, ww = q * stride - padding + s;
                if (h >= 0 && h < H && ww >= 0 && ww < W) dx.at(n, c, h, ww) += dy.at(n, k, p, q) * w.at(k, c, r, s);
              }
  return dx;
}

Array conv2d_backward_weights(const Array& x, const Array& dy, const Shape& w_shape, int stride, int padding) {
  Array dw(w_shape);
  const int64_t N = dy.dim(0), K = dy.dim(1), P = dy.dim(2), Q = dy.dim(3);
  const int64_t C = w_shape[1], R = w_shape[2], S = w_shape[3], H = x.dim(2), W = x.dim(3);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t h = p * stride - padding + r, ww = q * stride - padding + s;
                if (h >= 0 && h < H && ww >= 0 && ww < W) dw.at(k, c, r, s) += x.at(n, c, h, ww) * dy.at(n, k, p, q);
              }
  return dw;
}

BatchNormResult batchnorm_forward_training(const Array& x, const Array& gamma, const Array& beta, double eps) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const double count = static_cast<double>(N * H * W);
  BatchNormResult r{Array(x.shape), Array({C}), Array({C})};
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0.0, sq = 0.0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) sum += x.at(n, c, h, w);
    const double mean = sum / count;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) sq += (x.at(n, c, h, w) - mean) * (x.at(n, c, h, w) - mean);
    const double var = sq / count, inv_std = 1.0 / std::sqrt(var + eps);
    r.mean.v[c] = mean;
    r.var.v[c] = var;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          r.y.at(n, c, h, w) = gamma.v[c] * (x.at(n, c, h, w) - mean) * inv_std + beta.v[c];
  }
  return r;
}

Array batchnorm_forward_inference(const Array& x, const Array& gamma, const Array& beta, const Array& mean,
                                  const Array& var, double eps) {
  Array y(x.shape);
  for (int64_t n = 0; n < x.dim(0); ++n)
    for (int64_t c = 0; c < x.dim(1); ++c)
      for (int64_t h = 0; h < x.dim(2); ++h)
        for (int64_t w = 0; w < x.dim(3); ++w)
          y.at(n, c, h, w) = gamma.v[c] * (x.at(n, c, h, w) - mean.v[c]) / std::sqrt(var.v[c] + eps) + beta.v[c];
  return y;
}

BatchNormGrads batchnorm_backward(const Array& x, const Array& dy, const Array& gamma, double eps) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const double count = static_cast<double>(N * H * W);
  const BatchNormResult fwd = batchnorm_forward_training(x, gamma, Array({C}), eps);
  BatchNormGrads g{Array(x.shape), Array({C}), Array({C})};
  for (int64_t c = 0; c < C; ++c) {
    const double inv_std = 1.0 / std::sqrt(fwd.var.v[c] + eps);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const double xhat = (x.at(n, c, h, w) - fwd.mean.v[c]) * inv_std;
          sum_dy += dy.at(n, c, h, w);
          sum_dy_xhat += dy.at(n, c, h, w) * xhat;
        }
    g.dbeta.v[c] = sum_dy;
    g.dgamma.v[c] = sum_dy_xhat;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const double xhat = (x.at(n, c, h, w) - fwd.mean.v[c]) * inv_std;
          g.dx.at(n, c, h, w) =
              gamma.v[c] * inv_std * (dy.at(n, c, h, w) - sum_dy / count - xhat * sum_dy_xhat / count);
        }
  }
  return g;
}

Array relu_forward(const Array& x) {
  Array y(x.shape);
  for (size_t i = 0; i < x.v.size(); ++i) y.v[i] = x.v[i] > 0 ? x.v[i] : 0.0;
  return y;
}

Array relu_backward(const Array& y, const Array& dy) {
  Array dx(y.shape);
  for (size_t i = 0; i < y.v.size(); ++i) dx.v[i] = y.v[i] > 0 ? dy.v[i] : 0.0;
  return dx;
}

namespace {
// Position (h, w) of the first maximum of a pooling window, or (-1, -1) if the window holds no input.
std::pair<int64_t, int64_t> argmax_window(const Array& x, int64_t n, int64_t c, int64_t p, int64_t q, int kernel,
                                          int stride, int padding) {
  double best = -std::numeric_limits<double>::infinity();
  std::pair<int64_t, int64_t> at{-1, -1};
  for (int r = 0; r < kernel; ++r)
    for (int s = 0; s < kernel; ++s) {
      const int64_t h = p * stride - padding + r, w = q * stride - padding + s;
      if (h < 0 || h >= x.dim(2) || w < 0 || w >= x.dim(3)) continue;
      if (x.at(n, c, h, w) > best) {
        best = x.at(n, c, h, w);
        at = {h, w};
      }
    }
  return at;
}
}  // namespace

Array maxpool_forward(const Array& x, int kernel, int stride, int padding) {
  const int64_t P = out_size(x.dim(2), kernel, stride, padding), Q = out_size(x.dim(3), kernel, stride, padding);
  Array y({x.dim(0), x.dim(1), P, Q});
  for (int64_t n = 0; n < x.dim(0); ++n)
    for (int64_t c = 0; c < x.dim(1); ++c)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          const auto [h, w] = argmax_window(x, n, c, p, q, kernel, stride, padding);
          y.at(n, c, p, q) = x.at(n, c, h, w);
        }
  return y;
}

Array maxpool_backward(const Array& x, const Array& dy, int kernel, int stride, int padding) {
  Array dx(x.shape);
  for (int64_t n = 0; n < dy.dim(0); ++n)
    for (int64_t c = 0; c < dy.dim(1); ++c)
      for (int64_t p = 0; p < dy.dim(2); ++p)
        for (int64_t q = 0; q < dy.dim(3); ++q) {
          const auto [h, w] = argmax_window(x, n, c, p, q, kernel, stride, padding);
          dx.at(n, c, h, w) += dy.at(n, c, p, q);
        }
  return dx;
}

Array global_avgpool_forward(const Array& x) {
  const int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3);
  Array y({N, C});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      double sum = 0.0;
      for (int64_t i = 0; i < HW; ++i) sum += x.v[(n * C + c) * HW + i];
      y.v[n * C + c] = sum / HW;
    }
  return y;
}

Array global_avgpool_backward(const Array& dy, const Shape& x_shape) {
  Array dx(x_shape);
  const int64_t C = x_shape[1], HW = x_shape[2] * x_shape[3];
  for (int64_t i = 0; i < dx.dim(0) * C * HW; ++i) dx.v[i] = dy.v[i / HW] / HW;
  return dx;
}

Array linear_forward(const Array& x, const Array& w, const Array& b) {
  const int64_t N = x.dim(0), I = x.dim(1), O = w.dim(0);
  Array y({N, O});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double sum = b.v[o];
      for (int64_t i = 0; i < I; ++i) sum += x.v[n * I + i] * w.v[o * I + i];
      y.v[n * O + o] = sum;
    }
  return y;
}

LinearGrads linear_backward(const Array& dy, const Array& x, const Array& w) {
  const int64_t N = x.dim(0), I = x.dim(1), O = w.dim(0);
  LinearGrads g{Array(x.shape), Array(w.shape), Array({O})};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const double d = dy.v[n * O + o];
      g.db.v[o] += d;
      for (int64_t i = 0; i < I; ++i) {
        g.dx.v[n * I + i] += d * w.v[o * I + i];
        g.dw.v[o * I + i] += d * x.v[n * I + i];
      }
    }
  return g;
}

Array add(const Array& a, const Array& b) {
  Array y(a.shape);
  for (size_t i = 0; i < a.v.size(); ++i) y.v[i] = a.v[i] + b.v[i];
  return y;
}

CrossEntropyResult softmax_cross_entropy(const Array& logits, const std::vector<int32_t>& labels,
                                         double label_smoothing) {
  const int64_t N = logits.dim(0), K = logits.dim(1);
  CrossEntropyResult r{0.0, Array(logits.shape)};
  for (int64_t n = 0; n < N; ++n) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t k = 0; k < K; ++k) max = std::max(max, logits.v[n * K + k]);
    double sum = 0.0;
    for (int64_t k = 0; k < K; ++k) sum += std::exp(logits.v[n * K + k] - max);
    for (int64_t k = 0; k < K; ++k) {
      const double log_p = logits.v[n * K + k] - max - std::log(sum);
      const double target = (k == labels[n] ? 1.0 - label_smoothing : 0.0) + label_smoothing / K;
      r.loss -= target * log_p / N;
      r.dlogits.v[n * K + k] = (std::exp(log_p) - target) / N;
    }
  }
  return r;
}

}  // namespace ampwb::ref
