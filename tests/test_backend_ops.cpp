// Every op of every backend against the float64 reference, in the spirit of ggml's test-backend-ops: one table of
// cases {op, shape, precision, layout, parameters}, one runner per op that makes the inputs on the host, runs them
// on the backend under test and compares each result with the reference rounded to the result's type, within the
// bound of the one tolerance table (op_tolerances.h). Every case runs on every backend of the build (cpu; cuda in
// a CUDA build); a case is skipped only when the backend itself says it cannot run it: not usable on this machine,
// capabilities() says the precision is unavailable, or supports(op, dtype) is false. The names read
// backend_op_precision_layout_shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <ostream>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/delayed_scaling.h"
#include "fp8_reference.h"
#include "op_cases.h"
#include "op_harness.h"
#include "gpu_required.h"

namespace ampwb::testing {
namespace {

// ---- Runners ----------------------------------------------------------------------------------------------------

// One case on one backend: its inputs, its outputs and its comparisons.
struct CaseRun {
  Backend& b;
  const OpCase& c;
  DType dtype;
  Layout layout;
  Rng rng;

  Tensor input(Shape shape, Layout l, double scale = 1.0) {
    return host_random(std::move(shape), rng, dtype, l, scale);
  }
  Tensor fp32_input(Shape shape, double scale = 1.0) {
    return host_random(std::move(shape), rng, DType::F32, Layout::NCHW, scale);
  }
  Tensor up(const Tensor& host) { return on_device(b, host); }
  Tensor out(Shape shape, Layout l) { return device_nan(b, std::move(shape), dtype, l); }
  Tensor out32(Shape shape) { return device_nan(b, std::move(shape), DType::F32); }
  void expect(const char* what, const Tensor& got, const ref::Array& want, Kernel k, Result r = Result::Same) {
    expect_matches(b, what, got, want, k, c.precision, r);
  }
};

ref::Array reference(const Tensor& host) { return ref::from_tensor(host); }

// amp-fp8's scaled cast of one tensor with the scale delayed scaling gives after a step that saw its amax (the FP8
// case of a conv or linear case): its FP8 values on the device, and their scale-inverse.
Tensor fp8_values(CaseRun& r, const Tensor& host, Fp8Format format, float& scale_inverse) {
  float amax = 0;
  for (float v : to_float_vector(host)) amax = std::max(amax, std::fabs(v));
  DelayedScaling scaling(format, {1, 0, AmaxRule::Max});
  scaling.record_amax(amax);
  scaling.update();
  scale_inverse = scaling.scale_inverse();
  // In FP8 storage where the backend computes in FP8 (its FP8 products run then), else held in FP32.
  Tensor none, q = r.b.capabilities().fp8.native
                       ? Tensor::empty(host.shape(), format == Fp8Format::E4M3 ? DType::F8E4M3 : DType::F8E5M2,
                                       host.layout(), r.b.device())
                       : device_nan(r.b, host.shape(), DType::F32, host.layout());
  r.b.scaled_cast(r.up(host), q, {scaling.scale(), true, format}, none);
  return q;
}
// An FP32 result times the scale-inverses of its two FP8 operands, in place.
void apply_inverses(CaseRun& r, Tensor& t, float a, float b) {
  Tensor none;
  r.b.scaled_cast(t, t, {a * b}, none);
}

void run_fp8(CaseRun& r, const ConvCase& c) {
  const ConvParams p{c.stride, c.padding};
  const int64_t P = (c.H + 2 * c.padding - c.R) / c.stride + 1, Q = (c.W + 2 * c.padding - c.R) / c.stride + 1;
  const Tensor x = r.input({c.N, c.C, c.H, c.W}, r.layout), w = r.input({c.K, c.C, c.R, c.R}, Layout::NCHW);
  const Tensor dy = r.input({c.N, c.K, P, Q}, r.layout);
  float ix = 1, iw = 1, idy = 1;
  const Tensor qx = fp8_values(r, x, Fp8Format::E4M3, ix), qw = fp8_values(r, w, Fp8Format::E4M3, iw);
  const Tensor qdy = fp8_values(r, dy, Fp8Format::E5M2, idy);
  Tensor y = r.out({c.N, c.K, P, Q}, r.layout), dx = r.out(x.shape(), r.layout), dw = r.out(w.shape(), Layout::NCHW);
  r.b.conv2d_forward_scaled(qx, qw, y, p, ix * iw);
  r.b.conv2d_backward_data_scaled(qdy, qw, dx, p, idy * iw);
  r.b.conv2d_backward_weights(qx, qdy, dw, p);
  apply_inverses(r, dw, ix, idy);
  // And into BF16, as the layers keep amp-fp8's activations and their gradients: one rounding more.
  Tensor y16 = device_nan(r.b, y.shape(), DType::BF16, r.layout),
         dx16 = device_nan(r.b, x.shape(), DType::BF16, r.layout);
  r.b.conv2d_forward_scaled(qx, qw, y16, p, ix * iw);
  r.b.conv2d_backward_data_scaled(qdy, qw, dx16, p, idy * iw);
  const ref::Array rx = reference(x), rw = reference(w), rdy = reference(dy);
  const ref::Array want_y = ref::conv2d_forward(rx, rw, c.stride, c.padding);
  const ref::Array want_dx = ref::conv2d_backward_data(rdy, rw, x.shape(), c.stride, c.padding);
  r.expect("y", y, want_y, Kernel::Conv2dForward);
  r.expect("dx", dx, want_dx, Kernel::Conv2dBackwardData);
  r.expect("y in bf16", y16, want_y, Kernel::Conv2dForward);
  r.expect("dx in bf16", dx16, want_dx, Kernel::Conv2dBackwardData);
  r.expect("dw", dw, ref::conv2d_backward_weights(rx, rdy, w.shape(), c.stride, c.padding),
           Kernel::Conv2dBackwardWeights);
}

void run_fp8(CaseRun& r, const LinearCase& c) {
  const Tensor x = r.input({c.N, c.I}, Layout::NCHW), w = r.input({c.O, c.I}, Layout::NCHW);
  const Tensor dy = r.input({c.N, c.O}, Layout::NCHW), zero = r.up(Tensor::zeros({c.O}, DType::F32));
  float ix = 1, iw = 1, idy = 1;
  const Tensor qx = fp8_values(r, x, Fp8Format::E4M3, ix), qw = fp8_values(r, w, Fp8Format::E4M3, iw);
  const Tensor qdy = fp8_values(r, dy, Fp8Format::E5M2, idy);
  Tensor y = r.out({c.N, c.O}, Layout::NCHW), dx = r.out(x.shape(), Layout::NCHW), dw = r.out(w.shape(), Layout::NCHW);
  Tensor db = r.out({c.O}, Layout::NCHW);
  r.b.linear_forward(qx, qw, zero, y);
  apply_inverses(r, y, ix, iw);
  r.b.linear_backward(qdy, qx, qw, dx, dw, db);
  apply_inverses(r, dx, idy, iw);
  apply_inverses(r, dw, ix, idy);
  apply_inverses(r, db, idy, 1.0f);
  const ref::Array rx = reference(x), rw = reference(w);
  r.expect("y", y, ref::linear_forward(rx, rw, reference(on_host(r.b, zero))), Kernel::LinearForward);
  const ref::LinearGrads g = ref::linear_backward(reference(dy), rx, rw);
  r.expect("dx", dx, g.dx, Kernel::LinearBackward);
  r.expect("dw", dw, g.dw, Kernel::LinearBackward);
  r.expect("db", db, g.db, Kernel::LinearBackward);
}

void run(CaseRun& r, const ConvCase& c) {
  if (r.c.precision == Precision::FP8) return run_fp8(r, c);
  const ConvParams p{c.stride, c.padding};
  const Layout wl = c.mixed_weights ? Layout::NCHW : c.weights;
  const int64_t P = (c.H + 2 * c.padding - c.R) / c.stride + 1, Q = (c.W + 2 * c.padding - c.R) / c.stride + 1;
  const Tensor x = r.input({c.N, c.C, c.H, c.W}, r.layout), w = r.input({c.K, c.C, c.R, c.R}, wl);
  const Tensor dy = r.input({c.N, c.K, P, Q}, r.layout);
  const Tensor gx = r.up(x), gw = r.up(w), gdy = r.up(dy);
  Tensor y = r.out({c.N, c.K, P, Q}, r.layout), dx = r.out(x.shape(), r.layout);
  Tensor dw = c.fp32_weight_grad ? device_nan(r.b, w.shape(), DType::F32, wl) : r.out(w.shape(), wl);
  r.b.conv2d_forward(gx, gw, y, p);
  r.b.conv2d_backward_data(gdy, gw, dx, p);
  r.b.conv2d_backward_weights(gx, gdy, dw, p);
  const ref::Array rx = reference(x), rw = reference(w), rdy = reference(dy);
  r.expect("y", y, ref::conv2d_forward(rx, rw, c.stride, c.padding), Kernel::Conv2dForward);
  r.expect("dx", dx, ref::conv2d_backward_data(rdy, rw, x.shape(), c.stride, c.padding), Kernel::Conv2dBackwardData);
  // An FP32 dw from 16-bit activations holds the 16-bit gradient's values on every backend: the CPU rounds its FP32
  // sums in place, cuDNN writes dw in the activations' type (as PyTorch's autocast does) and the backend widens it.
  r.expect("dw", dw, ref::conv2d_backward_weights(rx, rdy, w.shape(), c.stride, c.padding),
           Kernel::Conv2dBackwardWeights);
}

void run(CaseRun& r, const BatchNormCase& c) {
  const float eps = 1e-5f, momentum = 0.1f;
  const Tensor x = r.input({c.N, c.C, c.H, c.W}, r.layout, 2.0), dy = r.input(x.shape(), r.layout);
  const Tensor gamma = r.fp32_input({c.C}), beta = r.fp32_input({c.C}), old_mean = r.fp32_input({c.C});
  std::vector<float> variances(static_cast<size_t>(c.C));
  for (int64_t i = 0; i < c.C; ++i) variances[i] = 0.5f + static_cast<float>(i) / static_cast<float>(c.C);
  const Tensor old_var = tensor_from_floats(variances, {c.C});
  const Tensor gx = r.up(x), ggamma = r.up(gamma), gbeta = r.up(beta);
  Tensor running_mean = r.up(old_mean.clone()), running_var = r.up(old_var.clone());
  Tensor y = r.out(x.shape(), r.layout), mean = r.out32({c.C}), var = r.out32({c.C});
  r.b.batchnorm_forward_training(gx, ggamma, gbeta, y, mean, var, running_mean, running_var, momentum, eps);
  const ref::Array rx = reference(x), rg = reference(gamma), rb = reference(beta);
  const ref::BatchNormResult want = ref::batchnorm_forward_training(rx, rg, rb, eps);
  r.expect("y", y, want.y, Kernel::BatchNormTraining);
  r.expect("batch mean", mean, want.mean, Kernel::BatchNormTraining, Result::Fp32);
  r.expect("batch variance", var, want.var, Kernel::BatchNormTraining, Result::Fp32);
  // Running statistics as PyTorch keeps them: momentum 0.1, the unbiased batch variance.
  const double count = static_cast<double>(c.N * c.H * c.W), unbias = count > 1 ? count / (count - 1) : 1.0;
  ref::Array want_mean = reference(old_mean), want_var = reference(old_var);
  for (int64_t i = 0; i < c.C; ++i) {
    want_mean.v[i] = (1 - momentum) * want_mean.v[i] + momentum * want.mean.v[i];
    want_var.v[i] = (1 - momentum) * want_var.v[i] + momentum * want.var.v[i] * unbias;
  }
  r.expect("running mean", running_mean, want_mean, Kernel::BatchNormTraining, Result::Fp32);
  r.expect("running variance", running_var, want_var, Kernel::BatchNormTraining, Result::Fp32);

  Tensor dx = r.out(x.shape(), r.layout), dgamma = r.out32({c.C}), dbeta = r.out32({c.C});
  r.b.batchnorm_backward(gx, r.up(dy), ggamma, mean, var, dx, dgamma, dbeta, eps);
  const ref::BatchNormGrads grads = ref::batchnorm_backward(rx, reference(dy), rg, eps);
  r.expect("dx", dx, grads.dx, Kernel::BatchNormBackward);
  r.expect("dgamma", dgamma, grads.dgamma, Kernel::BatchNormBackward, Result::Fp32);
  r.expect("dbeta", dbeta, grads.dbeta, Kernel::BatchNormBackward, Result::Fp32);

  Tensor y_eval = r.out(x.shape(), r.layout);
  r.b.batchnorm_forward_inference(gx, ggamma, gbeta, y_eval, r.up(old_mean), r.up(old_var), eps);
  r.expect("y (inference)", y_eval,
           ref::batchnorm_forward_inference(rx, rg, rb, reference(old_mean), reference(old_var), eps),
           Kernel::BatchNormInference);

  // A fused forward's statistics, from the same running statistics, are the separate op's bit for bit.
  struct Statistics {
    Tensor mean, var, running_mean, running_var;
  };
  auto fresh_statistics = [&] {
    return Statistics{r.out32({c.C}), r.out32({c.C}), r.up(old_mean.clone()), r.up(old_var.clone())};
  };
  auto expect_separate_ops_statistics = [&](const Statistics& fused, const char* what) {
    for (const auto& [got, want] : {std::pair{&fused.mean, &mean},
                                    {&fused.var, &var},
                                    {&fused.running_mean, &running_mean},
                                    {&fused.running_var, &running_var}})
      EXPECT_EQ(bytes_of(r.b, *got), bytes_of(r.b, *want)) << what;
  };

  // A conv-bn-relu's end in one op each way: the reference's, and bit for bit the separate ops.
  Tensor fused_y = r.out(x.shape(), r.layout);
  Statistics fused = fresh_statistics();
  r.b.batchnorm_relu_forward_training(gx, ggamma, gbeta, fused_y, fused.mean, fused.var, fused.running_mean,
                                      fused.running_var, momentum, eps);
  r.expect("relu(y)", fused_y, ref::relu_forward(want.y), Kernel::BatchNormTraining);
  Tensor relu_y = r.out(x.shape(), r.layout);
  r.b.relu_forward(y, relu_y);
  EXPECT_EQ(bytes_of(r.b, fused_y), bytes_of(r.b, relu_y)) << "batchnorm_relu forward against batch norm then relu";
  expect_separate_ops_statistics(fused, "batchnorm_relu statistics");

  Tensor fused_dx = r.out(x.shape(), r.layout), fused_dgamma = r.out32({c.C}), fused_dbeta = r.out32({c.C});
  r.b.batchnorm_relu_backward(gx, fused_y, r.up(dy), ggamma, gbeta, mean, var, fused_dx, fused_dgamma, fused_dbeta,
                              eps);
  // The reference takes the ReLU's mask from the backend's own output: a value rounding to 0 blocks the gradient.
  const ref::BatchNormGrads relu_grads =
      ref::batchnorm_backward(rx, ref::relu_backward(reference(on_host(r.b, fused_y)), reference(dy)), rg, eps);
  r.expect("dx through relu", fused_dx, relu_grads.dx, Kernel::BatchNormBackward);
  r.expect("dgamma through relu", fused_dgamma, relu_grads.dgamma, Kernel::BatchNormBackward, Result::Fp32);
  r.expect("dbeta through relu", fused_dbeta, relu_grads.dbeta, Kernel::BatchNormBackward, Result::Fp32);
  Tensor masked_dy = r.out(x.shape(), r.layout), separate_dx = r.out(x.shape(), r.layout);
  Tensor separate_dgamma = r.out32({c.C}), separate_dbeta = r.out32({c.C});
  r.b.relu_backward(relu_y, r.up(dy), masked_dy);
  r.b.batchnorm_backward(gx, masked_dy, ggamma, mean, var, separate_dx, separate_dgamma, separate_dbeta, eps);
  EXPECT_EQ(bytes_of(r.b, fused_dx), bytes_of(r.b, separate_dx)) << "batchnorm_relu backward: dx";
  EXPECT_EQ(bytes_of(r.b, fused_dgamma), bytes_of(r.b, separate_dgamma)) << "batchnorm_relu backward: dgamma";
  EXPECT_EQ(bytes_of(r.b, fused_dbeta), bytes_of(r.b, separate_dbeta)) << "batchnorm_relu backward: dbeta";

  // A residual block's end in one op: the reference's, and bit for bit batch norm then add_relu.
  const Tensor residual = r.input(x.shape(), r.layout, 2.0), gresidual = r.up(residual);
  Tensor end_y = r.out(x.shape(), r.layout);
  Statistics end = fresh_statistics();
  r.b.batchnorm_add_relu_forward_training(gx, ggamma, gbeta, gresidual, end_y, end.mean, end.var, end.running_mean,
                                          end.running_var, momentum, eps);
  r.expect("relu(y + residual)", end_y, ref::relu_forward(ref::add(want.y, reference(residual))),
           Kernel::BatchNormTraining);
  Tensor separate_end = r.out(x.shape(), r.layout);
  r.b.add_relu(y, gresidual, separate_end);
  EXPECT_EQ(bytes_of(r.b, end_y), bytes_of(r.b, separate_end)) << "batchnorm_add_relu against batch norm, add_relu";
  expect_separate_ops_statistics(end, "batchnorm_add_relu statistics");
}

void run(CaseRun& r, const ReluCase& c) {
  std::vector<float> a = to_float_vector(r.input({c.N, c.C, c.H, c.W}, Layout::NCHW, 3.0));
  a[0] = -0.0f;
  a[1] = 0.0f;
  const Tensor x = tensor_from_floats(a, {c.N, c.C, c.H, c.W}, r.dtype, r.layout);
  const Tensor dy = r.input(x.shape(), r.layout);
  const ref::Array ry = ref::relu_forward(reference(x));
  // relu_backward reads the output: give it the reference's, so that each kernel is judged alone.
  std::vector<float> y_values(ry.v.begin(), ry.v.end());
  const Tensor y_ref = tensor_from_floats(y_values, x.shape(), r.dtype, r.layout);
  Tensor y = r.out(x.shape(), r.layout), dx = r.out(x.shape(), r.layout);
  r.b.relu_forward(r.up(x), y);
  r.b.relu_backward(r.up(y_ref), r.up(dy), dx);
  r.expect("y", y, ry, Kernel::ReluForward);
  r.expect("dx", dx, ref::relu_backward(ry, reference(dy)), Kernel::ReluBackward);
}

void run(CaseRun& r, const MaxPoolCase& c) {
  const PoolParams p{c.kernel, c.stride, c.padding};
  const int64_t P = (c.H + 2 * c.padding - c.kernel) / c.stride + 1;
  const int64_t Q = (c.W + 2 * c.padding - c.kernel) / c.stride + 1;
  const Layout other = r.layout == Layout::NCHW ? Layout::NHWC : Layout::NCHW;
  const Layout gradient_layout = c.gradient_other_layout ? other : r.layout;
  const Tensor x = r.input({c.N, c.C, c.H, c.W}, r.layout), dy = r.input({c.N, c.C, P, Q}, gradient_layout);
  Tensor y = r.out({c.N, c.C, P, Q}, r.layout), dx = r.out(x.shape(), gradient_layout), workspace;
  r.b.maxpool_forward(r.up(x), y, workspace, p);
  r.b.maxpool_backward(r.up(dy), workspace, dx, p);
  const ref::Array rx = reference(x);
  r.expect("y", y, ref::maxpool_forward(rx, c.kernel, c.stride, c.padding), Kernel::MaxPoolForward);
  r.expect("dx", dx, ref::maxpool_backward(rx, reference(dy), c.kernel, c.stride, c.padding), Kernel::MaxPoolBackward);
}

void run(CaseRun& r, const GlobalAvgPoolCase& c) {
  const Tensor x = r.input({c.N, c.C, c.H, c.W}, r.layout), dy = r.input({c.N, c.C}, Layout::NCHW);
  Tensor y = r.out({c.N, c.C}, Layout::NCHW), dx = r.out(x.shape(), r.layout);
  r.b.global_avgpool_forward(r.up(x), y);
  r.b.global_avgpool_backward(r.up(dy), dx);
  r.expect("y", y, ref::global_avgpool_forward(reference(x)), Kernel::GlobalAvgPoolForward);
  r.expect("dx", dx, ref::global_avgpool_backward(reference(dy), x.shape()), Kernel::GlobalAvgPoolBackward);
}

void run(CaseRun& r, const LinearCase& c) {
  if (r.c.precision == Precision::FP8) return run_fp8(r, c);
  const Tensor x = r.input({c.N, c.I}, Layout::NCHW), w = r.input({c.O, c.I}, Layout::NCHW);
  const Tensor bias = r.input({c.O}, Layout::NCHW), dy = r.input({c.N, c.O}, Layout::NCHW);
  const Tensor gx = r.up(x), gw = r.up(w);
  Tensor y = r.out({c.N, c.O}, Layout::NCHW);
  r.b.linear_forward(gx, gw, r.up(bias), y);
  const ref::Array rx = reference(x), rw = reference(w);
  r.expect("y", y, ref::linear_forward(rx, rw, reference(bias)), Kernel::LinearForward);
  const ref::LinearGrads g = ref::linear_backward(reference(dy), rx, rw);
  if (c.fp32_weight_grad) {
    Tensor none, dw = r.out32({c.O, c.I}), db = r.out32({c.O});
    r.b.linear_backward(r.up(dy), gx, gw, none, dw, db);
    r.expect("dw", dw, g.dw, Kernel::LinearBackward, Result::Fp32);
    r.expect("db", db, g.db, Kernel::LinearBackward, Result::Fp32);
    return;
  }
  Tensor dx = r.out({c.N, c.I}, Layout::NCHW), dw = r.out({c.O, c.I}, Layout::NCHW), db = r.out({c.O}, Layout::NCHW);
  r.b.linear_backward(r.up(dy), gx, gw, dx, dw, db);
  r.expect("dx", dx, g.dx, Kernel::LinearBackward);
  r.expect("dw", dw, g.dw, Kernel::LinearBackward);
  r.expect("db", db, g.db, Kernel::LinearBackward);
}

void run(CaseRun& r, const AddCase& c) {
  const Layout other = c.mixed_layouts ? (r.layout == Layout::NHWC ? Layout::NCHW : Layout::NHWC) : r.layout;
  const Tensor a = r.input({c.N, c.C, c.H, c.W}, r.layout, 3.0);
  Tensor b = r.input(a.shape(), other, 3.0);
  if (!c.mixed_layouts) {  // sums of exactly 0 (+0 in IEEE 754's rounding), where ReLU's comparison matters
    std::vector<float> values = to_float_vector(b);
    const std::vector<float> a_values = to_float_vector(a);
    for (size_t i = 0; i < values.size(); i += 7) values[i] = -a_values[i];
    b = tensor_from_floats(values, a.shape(), r.dtype, other);
  }
  const Tensor ga = r.up(a), gb = r.up(b);
  Tensor y = r.out(a.shape(), r.layout);
  r.b.add(ga, gb, y);
  const ref::Array sum = ref::add(reference(a), reference(b));
  r.expect("y", y, sum, Kernel::Add);
  // The residual block's relu(a + b) in one op: the reference's, and bit for bit add then relu_forward.
  Tensor fused = r.out(a.shape(), r.layout), unfused = r.out(a.shape(), r.layout);
  r.b.add_relu(ga, gb, fused);
  r.b.relu_forward(y, unfused);
  r.expect("relu(a + b)", fused, ref::relu_forward(sum), Kernel::Add);
  EXPECT_EQ(bytes_of(r.b, fused), bytes_of(r.b, unfused)) << "add_relu against add then relu_forward";

  // A residual block's input gradient in one op, through the mask of the ReLU output y (with zeros of both signs):
  // the reference's, and bit for bit add then relu_backward.
  std::vector<float> y_values = to_float_vector(r.input(a.shape(), Layout::NCHW, 3.0));
  for (size_t i = 0; i < y_values.size(); i += 5) y_values[i] = i % 10 ? -0.0f : 0.0f;
  const Tensor relu_y = tensor_from_floats(y_values, a.shape(), r.dtype, r.layout);
  Tensor dx = r.out(a.shape(), r.layout), separate_dx = r.out(a.shape(), r.layout);
  r.b.relu_backward_of_sum(r.up(relu_y), ga, gb, dx);
  r.expect("relu_backward(y, a + b)", dx, ref::relu_backward(reference(relu_y), sum), Kernel::Add);
  r.b.relu_backward(r.up(relu_y), y, separate_dx);
  EXPECT_EQ(bytes_of(r.b, dx), bytes_of(r.b, separate_dx)) << "relu_backward_of_sum against add then relu_backward";
}

void run(CaseRun& r, const ConvertCase& c) {
  // FP16's edges (overflow to inf at 65520, the largest finite, a subnormal, under half the smallest subnormal),
  // an FP32 subnormal (BF16 keeps it), -0, then ordinary values, all first rounded to the source type.
  std::vector<float> v = {65520.0f, 65504.0f, -1e6f, 3e-6f, 1e-8f, 1e-40f, -0.0f};
  for (int64_t i = static_cast<int64_t>(v.size()); i < c.N * c.C * c.H * c.W; ++i)
    v.push_back(static_cast<float>(r.rng.normal() * 100));
  for (float& value : v) value = round_to(r.dtype, value);
  const Shape shape{c.N, c.C, c.H, c.W};
  const Tensor src = tensor_from_floats(v, shape, r.dtype, r.layout);
  const DType to = storage_dtype(c.to);
  Tensor converted = device_nan(r.b, shape, to, c.to_layout), from_host = device_nan(r.b, shape, to, c.to_layout);
  r.b.convert(r.up(src), converted);  // on the device
  r.b.convert(src, from_host);        // from the host (the same thing on the CPU)
  Tensor back = Tensor::empty(shape, DType::F32, c.to_layout == Layout::NHWC ? Layout::NCHW : Layout::NHWC);
  r.b.convert(converted, back);  // to the host, as FP32 in the other layout
  ref::Array want = reference(src);
  r.expect("on the device", converted, want, Kernel::Convert);
  r.expect("from the host", from_host, want, Kernel::Convert);
  for (double& value : want.v) value = round_to(to, value);
  r.expect("back to FP32", back, want, Kernel::Convert);
}

void run(CaseRun& r, const CrossEntropyCase& c) {
  Tensor logits = r.input({c.N, c.K}, Layout::NCHW, c.large_logits ? 1000.0 : 3.0);
  std::vector<float> z = to_float_vector(logits);
  if (c.integer_logits) {
    for (float& v : z) v = std::round(v / 2);
    logits = tensor_from_floats(z, {c.N, c.K}, r.dtype);
  }
  std::vector<float> label_values;
  std::vector<int32_t> labels;
  for (int64_t n = 0; n < c.N; ++n) {
    labels.push_back(static_cast<int32_t>(r.rng.below(static_cast<uint64_t>(c.K))));
    label_values.push_back(static_cast<float>(labels.back()));
  }
  Tensor dlogits = r.out({c.N, c.K}, Layout::NCHW);
  r.b.softmax_cross_entropy(r.up(logits), r.up(tensor_from_floats(label_values, {c.N}, DType::I32)), c.smoothing,
                            c.grad_scale, dlogits);
  const StepScalars got = r.b.read_scalars();
  ref::CrossEntropyResult want = ref::softmax_cross_entropy(reference(logits), labels, c.smoothing);
  for (double& d : want.dlogits.v) d *= c.grad_scale;
  expect_scalar("loss", got.loss, want.loss, Kernel::SoftmaxCrossEntropy, r.c.precision);
  r.expect("dlogits", dlogits, want.dlogits, Kernel::SoftmaxCrossEntropy);
  int64_t correct = 0;  // the label's logit above every other: a tie counts against the sample
  for (int64_t n = 0; n < c.N; ++n) {
    bool top = true;
    for (int64_t k = 0; k < c.K; ++k) top = top && (k == labels[n] || z[n * c.K + k] < z[n * c.K + labels[n]]);
    correct += top;
  }
  EXPECT_EQ(got.correct, correct) << "the top-1 count of the same pass";
}

constexpr int64_t kOptimizerElements = 10007;  // not a multiple of any vector width or block

// The same update also run with a 16-bit compute copy written in its pass, one per 16-bit type.
struct CopiedUpdate {
  Tensor w, state1, state2, copy;  // the master, the optimizer's state, the FP16/BF16 copy
};
std::vector<CopiedUpdate> copied_updates(CaseRun& r, const Tensor& w0) {
  std::vector<CopiedUpdate> out;
  for (DType copy : {DType::BF16, DType::F16})
    out.push_back({r.up(w0.clone()), r.up(Tensor::zeros(w0.shape(), r.dtype)), r.up(Tensor::zeros(w0.shape(), r.dtype)),
                   device_nan(r.b, w0.shape(), copy)});
  return out;
}
// The update's call holds every parameter: the master without a copy, and one master per 16-bit copy type.
std::vector<ParamUpdate> every_update(const Tensor& w, const Tensor& state1, const Tensor& state2, const Tensor& g,
                                      const std::vector<CopiedUpdate>& copied) {
  std::vector<ParamUpdate> updates{{w, {}, g, state1, state2}};
  for (const CopiedUpdate& u : copied) updates.push_back({u.w, u.copy, g, u.state1, u.state2});
  return updates;
}
// With a copy, the master is bit for bit the master updated without one, and the copy bit for bit its convert();
// a master updated alone (a call of one parameter) is bit for bit one updated in a call with others.
void expect_copies_exact(CaseRun& r, const Tensor& w, const std::vector<CopiedUpdate>& copied, const Tensor& alone) {
  auto bytes = [&](const Tensor& t) { return bytes_of(r.b, t); };
  EXPECT_EQ(bytes(alone), bytes(w)) << "a master updated alone as in a call with others";
  for (const CopiedUpdate& u : copied) {
    SCOPED_TRACE(std::string("with a copy in ") + dtype_name(u.copy.dtype()));
    EXPECT_EQ(bytes(u.w), bytes(w)) << "the master as updated without a copy";
    Tensor converted = device_nan(r.b, w.shape(), u.copy.dtype());
    r.b.convert(w, converted);
    EXPECT_EQ(bytes(u.copy), bytes(converted)) << "the copy as convert() writes it";
  }
}

void run(CaseRun& r, const SgdCase& c) {
  const Tensor w0 = r.input({kOptimizerElements}, Layout::NCHW);
  Tensor w = r.up(w0.clone()), buf = r.up(Tensor::zeros(w0.shape(), r.dtype));
  std::vector<CopiedUpdate> copied = copied_updates(r, w0);
  const Tensor alone = r.up(w0.clone()), alone_buf = r.up(Tensor::zeros(w0.shape(), r.dtype));
  ref::Array want_w = reference(w0), want_buf(w0.shape());
  for (int step = 0; step < 3; ++step) {
    const Tensor g = r.up(r.input(w0.shape(), Layout::NCHW));
    const SgdParams p{0.1f, c.momentum, 0.05f, c.nesterov, step == 0};  // every term moves w by 1e-3 or more
    r.b.sgd_update(every_update(w, buf, {}, g, copied), p);
    r.b.sgd_update({{alone, {}, g, alone_buf, {}}}, p);
    const ref::Array rg = reference(on_host(r.b, g));
    for (size_t i = 0; i < rg.v.size(); ++i) {  // PyTorch's SGD: no dampening, the buffer starts at the gradient
      double d = rg.v[i] + double{p.weight_decay} * want_w.v[i];
      if (c.momentum != 0) {
        want_buf.v[i] = p.first_step ? d : double{p.momentum} * want_buf.v[i] + d;
        d = p.nesterov ? d + double{p.momentum} * want_buf.v[i] : want_buf.v[i];
      }
      want_w.v[i] -= double{p.lr} * d;
    }
  }
  r.expect("weights", w, want_w, Kernel::SgdUpdate);
  if (c.momentum != 0) r.expect("momentum buffer", buf, want_buf, Kernel::SgdUpdate);
  expect_copies_exact(r, w, copied, alone);
}

void run(CaseRun& r, const AdamCase& c) {
  const Tensor w0 = r.input({kOptimizerElements}, Layout::NCHW);
  Tensor w = r.up(w0.clone()), m = r.up(Tensor::zeros(w0.shape(), r.dtype)),
         v = r.up(Tensor::zeros(w0.shape(), r.dtype));
  std::vector<CopiedUpdate> copied = copied_updates(r, w0);
  const Tensor alone = r.up(w0.clone()), alone_m = r.up(Tensor::zeros(w0.shape(), r.dtype)),
               alone_v = r.up(Tensor::zeros(w0.shape(), r.dtype));
  ref::Array want_w = reference(w0), want_m(w0.shape()), want_v(w0.shape());
  for (int64_t step = 1; step <= 3; ++step) {
    const Tensor g = r.up(r.input(w0.shape(), Layout::NCHW));
    // Steps of about 0.1 and an eps near 1% of sqrt(v): every term moves w by 1e-4 or more, far above the bound.
    const AdamParams p{0.1f, 0.9f, 0.999f, 1e-2f, 0.01f, c.decoupled, step};
    r.b.adam_update(every_update(w, m, v, g, copied), p);
    r.b.adam_update({{alone, {}, g, alone_m, alone_v}}, p);
    const ref::Array rg = reference(on_host(r.b, g));
    const double lr = p.lr, b1 = p.beta1, b2 = p.beta2, wd = p.weight_decay, t = static_cast<double>(step);
    for (size_t i = 0; i < rg.v.size(); ++i) {
      const double gi = rg.v[i] + (c.decoupled ? 0 : wd * want_w.v[i]);
      want_m.v[i] = b1 * want_m.v[i] + (1 - b1) * gi;
      want_v.v[i] = b2 * want_v.v[i] + (1 - b2) * gi * gi;
      const double update = lr / (1 - std::pow(b1, t)) * want_m.v[i] /
                            (std::sqrt(want_v.v[i]) / std::sqrt(1 - std::pow(b2, t)) + double{p.eps});
      want_w.v[i] = want_w.v[i] * (c.decoupled ? 1 - lr * wd : 1.0) - update;
    }
  }
  r.expect("weights", w, want_w, Kernel::AdamUpdate);
  r.expect("first moment", m, want_m, Kernel::AdamUpdate);
  r.expect("second moment", v, want_v, Kernel::AdamUpdate);
  expect_copies_exact(r, w, copied, alone);
}

void run(CaseRun& r, const ScaleCheckCase& c) {
  const float factor = c.inject == 3e38f ? 2.0f : static_cast<float>(1.0 / 65536.0);
  std::vector<Tensor> host, dev;
  for (int64_t n : {int64_t{1}, int64_t{4095}, int64_t{4096}, int64_t{4097}, int64_t{0}, int64_t{3}, int64_t{1} << 20,
                    int64_t{12345}}) {
    host.push_back(r.input({n}, Layout::NCHW, 100.0));
    dev.push_back(r.up(host.back().clone()));
  }
  std::vector<Tensor*> tensors;
  for (Tensor& t : dev) tensors.push_back(&t);
  Tensor bad;
  if (c.inject != 0) {
    std::vector<float> values(5000, 1.0f);
    values[4321] = c.inject;
    bad = r.up(tensor_from_floats(values, {5000}, r.dtype));
    tensors.push_back(&bad);
  }
  r.b.scale_and_check(tensors, factor);
  const StepScalars got = r.b.read_scalars();
  // As PyTorch's unscale_: an inf or NaN among the inputs; a finite one that the factor overflows is not flagged.
  EXPECT_EQ(got.nonfinite, c.inject != 0 && !std::isfinite(c.inject)) << "an inf or NaN among the inputs";
  if (c.inject != 0) {  // each call reports its own tensors
    tensors.pop_back();
    r.b.scale_and_check(tensors, 1.0f);
    EXPECT_FALSE(r.b.read_scalars().nonfinite) << "a call without the bad tensor reports none";
    return;
  }
  // Again with a factor of 1 (no scale): the sum of the same values, and the tensors left as they were.
  r.b.scale_and_check(tensors, 1.0f);
  EXPECT_EQ(r.b.read_scalars().sum_of_squares, got.sum_of_squares) << "the same sum again: a fixed summation order";
  double sum = 0;
  for (size_t k = 0; k < host.size(); ++k) {
    ref::Array want = reference(host[k]);
    for (double& v : want.v) {
      v = static_cast<float>(v * factor);
      sum += v * v;
    }
    r.expect(("tensor " + std::to_string(k)).c_str(), dev[k], want, Kernel::ScaleAndCheck);
  }
  expect_scalar("sum of squares", got.sum_of_squares, sum, Kernel::ScaleAndCheck, r.c.precision);
}

// x's values spread over 2^-32 .. 2^17 in magnitude (where the case's scales saturate some and underflow others),
// with +-0 and +-inf, each as x's type holds it; the reference is the FP32 product rounded by the FP8 formats'
// definition (fp8_reference.h), and the statistics are counted here from the same values.
void run(CaseRun& r, const ScaledCastCase& c) {
  std::vector<float> values(static_cast<size_t>(c.n));
  for (float& v : values)
    v = round_to(r.dtype, std::ldexp(r.rng.normal(), static_cast<int>(r.rng.uniform(-32.0f, 17.0f))));
  const float inf = std::numeric_limits<float>::infinity();
  for (auto [i, v] : {std::pair{0, 0.0f}, {1, -0.0f}, {2, inf}, {3, -inf}}) values[static_cast<size_t>(i)] = v;
  const Tensor x = tensor_from_floats(values, {c.n}, r.dtype);
  const DType to = storage_dtype(c.to);
  Tensor y = device_nan(r.b, {c.n}, to), stats = r.up(Tensor::zeros({kFp8CastStatsBytes}, DType::U8));
  const ScaledCast cast{c.scale, c.to_fp8, c.format};
  const Tensor gx = r.up(x);
  r.b.scaled_cast(gx, y, cast, stats);

  ref::Array want({c.n});
  Fp8CastStats expected;
  expected.count = c.n;
  for (size_t i = 0; i < values.size(); ++i) {
    const float product = values[i] * c.scale;
    double v = product;
    if (c.to_fp8) {
      v = test::fp8_defined_value(c.format, test::fp8_reference_code(c.format, product, Fp8Overflow::Saturate));
      // Clipped: what rounding without saturation would make infinite or NaN.
      expected.saturated +=
          !std::isnan(product) && !std::isfinite(test::fp8_defined_value(
                                      c.format, test::fp8_reference_code(c.format, product, Fp8Overflow::NonFinite)));
      expected.underflowed += values[i] != 0 && v == 0;
    }
    want.v[i] = v;
    expected.amax = std::max(expected.amax, std::fabs(values[i]));
  }
  r.expect("y", y, want, Kernel::ScaledCast);
  Fp8CastStats got;
  std::memcpy(&got, on_host(r.b, stats).data(), sizeof got);
  EXPECT_EQ(got.amax, expected.amax) << "the amax of x before scaling";
  EXPECT_EQ(got.count, expected.count);
  EXPECT_EQ(got.saturated, expected.saturated) << "elements rounding past the format's max";
  EXPECT_EQ(got.underflowed, expected.underflowed) << "nonzero elements the cast made zero";
  if (c.to_fp8) {
    EXPECT_GT(expected.saturated * expected.underflowed, 0) << "the case's scale reaches both ends";
  }

  if (r.dtype == to) {  // in place, y being x, without statistics: the same bits
    Tensor in_place = r.up(x.clone()), none;
    r.b.scaled_cast(in_place, in_place, cast, none);
    EXPECT_EQ(bytes_of(r.b, in_place), bytes_of(r.b, y)) << "in place as out of place";
  }
}

// ---- The test ---------------------------------------------------------------------------------------------------

uint64_t seed_of(const std::string& name) {  // FNV-1a: each case's inputs independent of the others
  uint64_t h = 1469598103934665603ull;
  for (char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h;
}

class BackendOp : public ::testing::TestWithParam<std::tuple<std::string, OpCase>> {};

TEST_P(BackendOp, MatchesFloat64Reference) {
  const auto& [name, c] = GetParam();
  std::string why;
  Backend* backend = backend_for(name, why);
  if (!backend) GTEST_SKIP() << name << " cannot run here: " << why;
  const Capabilities caps = backend->capabilities();
  if (const ComputeSupport* s = compute_support(caps, c.precision); s && !s->available)
    GTEST_SKIP() << test::kDoesNotApply << name << " has no " << precision_name(c.precision) << ": " << s->how;
  const DType dtype = storage_dtype(c.precision);
  const Op op = std::visit([](const auto& p) { return std::decay_t<decltype(p)>::kOp; }, c.params);
  if (!backend->supports(op, dtype))
    GTEST_SKIP() << test::kDoesNotApply << name << " says supports(" << op_name(op) << ", " << dtype_name(dtype)
                 << ") is false";
  if (const auto* convert = std::get_if<ConvertCase>(&c.params);
      convert && !backend->supports(op, storage_dtype(convert->to)))
    GTEST_SKIP() << test::kDoesNotApply << name << " says supports(convert, " << dtype_name(storage_dtype(convert->to))
                 << ") is false";
  if (print_errors()) std::printf("%s %s\n", name.c_str(), case_name(c).c_str());
  SCOPED_TRACE(case_name(c) + (*c.why ? std::string(": ") + c.why : std::string()));
  Tf32Scope tf32(*backend, c.precision == Precision::TF32);
  CaseRun run_case{*backend, c, dtype, c.layout, Rng(seed_of(case_name(c)))};
  std::visit([&](const auto& params) { run(run_case, params); }, c.params);
}

INSTANTIATE_TEST_SUITE_P(Cases, BackendOp,
                         ::testing::Combine(::testing::ValuesIn(backend_names()), ::testing::ValuesIn(cases())),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, OpCase>>& info) {
                           std::string name = std::get<0>(info.param) + "_" + case_name(std::get<1>(info.param));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// ---- The loss scaler's state on the device ---------------------------------------------------------------------

class DeviceLossScale : public ::testing::TestWithParam<std::string> {};

Tensor loss_scale_state(Backend& b, const LossScaleState& s) {
  Tensor host = Tensor::empty({kLossScaleStateBytes}, DType::U8);
  std::memcpy(host.data(), &s, sizeof s);
  return on_device(b, host);
}
LossScaleState read_state(Backend& b, const Tensor& state) {
  LossScaleState s;
  std::memcpy(&s, on_host(b, state).data(), sizeof s);
  return s;
}

// PyTorch's GradScaler recorded step by step (tests/golden/gradscaler_trace.json, scripts/gradscaler_trace.py),
// replayed through the backend's own ops: unscale_and_check with the state, an SGD step told to skip on found-inf,
// update_loss_scale. The scale used, the skip, the scale and growth tracker after every step must be PyTorch's.
TEST_P(DeviceLossScale, FollowsTheRecordedPyTorchGradScalerStepForStep) {
  std::string why;
  Backend* b = backend_for(GetParam(), why);
  if (!b) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
  const char* moved = std::getenv("AMPWB_GRADSCALER_TRACE");  // the GPU bundle's copy of the checkout
  const std::string path = moved ? moved : AMPWB_GRADSCALER_TRACE;
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path << " (scripts/gradscaler_trace.py writes it)";
  const nlohmann::json trace = nlohmann::json::parse(in);
  for (const nlohmann::json& config : trace.at("configs")) {
    const nlohmann::json& settings = config.at("scaler");
    const LossScaleGrowth growth{settings.at("growth_factor"), settings.at("backoff_factor"),
                                 settings.at("growth_interval")};
    Tensor state = loss_scale_state(*b, {static_cast<float>(settings.at("init_scale").get<double>())});
    Tensor w = on_device(*b, Tensor::zeros({1}, DType::F32)), none;
    const SgdParams sgd{1e-3f, 0.0f, 0.0f, false, false, &state};
    const nlohmann::json& steps = config.at("steps");
    int32_t skipped_so_far = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const nlohmann::json& step = steps[i];  // gradient, scale used, skipped, scale after, growth tracker after
      const std::string where = config.at("name").get<std::string>() + ", step " + std::to_string(i);
      const float scale = read_state(*b, state).scale;
      ASSERT_EQ(scale, step[1].get<double>()) << where;
      const nlohmann::json& g = trace.at("gradients").at(step[0].get<std::string>());
      const float value = g.is_string() ? std::strtof(g.get<std::string>().c_str(), nullptr) : g.get<float>();
      Tensor grad = on_device(*b, tensor_from_floats({scale * value}, {1}));  // autograd's FP32 product
      w = on_device(*b, Tensor::zeros({1}, DType::F32));
      b->unscale_and_check({&grad}, state);
      b->sgd_update({{w, none, grad, none, none}}, sgd);
      const bool skipped = to_float_vector(on_host(*b, w))[0] == 0.0f;
      b->update_loss_scale(state, growth);
      const LossScaleState after = read_state(*b, state);
      ASSERT_EQ(skipped, step[2].get<bool>()) << where << " (" << step[0] << ")";
      ASSERT_EQ(after.scale, step[3].get<double>()) << where;
      ASSERT_EQ(after.growth_tracker, step[4].get<int>()) << where;
      ASSERT_EQ(after.found_inf, 0.0f) << where << ": the update clears found-inf";
      skipped_so_far += step[2].get<bool>();
      ASSERT_EQ(after.skipped_steps, skipped_so_far) << where << ": the update counts the skips";
    }
  }
}

// Found-inf set, an SGD update leaves the weights, their 16-bit copy and the momentum untouched; clear, it updates
// all three.
TEST_P(DeviceLossScale, SgdSkipsOnFoundInfAndOnlyThen) {
  std::string why;
  Backend* b = backend_for(GetParam(), why);
  if (!b) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
  const std::vector<float> w0 = {0.5f, -1.0f, 2.0f}, g0 = {0.25f, 0.5f, -1.0f}, zeros(3, 0.0f);
  for (const float flag : {1.0f, 0.0f}) {
    LossScaleState s;
    s.found_inf = flag;
    const Tensor state = loss_scale_state(*b, s);
    Tensor w = on_device(*b, tensor_from_floats(w0, {3})), g = on_device(*b, tensor_from_floats(g0, {3}));
    Tensor copy = on_device(*b, tensor_from_floats(w0, {3}, DType::BF16));
    Tensor buffer = on_device(*b, Tensor::zeros({3}, DType::F32));
    b->sgd_update({{w, copy, g, buffer, {}}}, {0.5f, 0.9f, 0.0f, false, true, &state});
    const std::vector<float> w1 = to_float_vector(on_host(*b, w));
    EXPECT_EQ(w1 == w0, flag != 0.0f) << "weights, found_inf " << flag;
    EXPECT_EQ(to_float_vector(on_host(*b, copy)) == w0, flag != 0.0f) << "16-bit copy, found_inf " << flag;
    EXPECT_EQ(to_float_vector(on_host(*b, buffer)) == zeros, flag != 0.0f) << "momentum, found_inf " << flag;
  }
}

// Adam given a state: untouched where found_inf is set; else the update of the step count less the state's skips,
// as the host's Adam would make it with that count (PyTorch's Adam counts only the steps taken).
TEST_P(DeviceLossScale, AdamSkipsOnFoundInfAndCountsOnlyTheStepsTaken) {
  std::string why;
  Backend* b = backend_for(GetParam(), why);
  if (!b) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
  const std::vector<float> w0 = {0.5f, -1.0f, 2.0f}, g0 = {0.25f, 0.5f, -1.0f}, m0 = {0.1f, -0.2f, 0.3f},
                           v0 = {0.01f, 0.04f, 0.09f};
  struct Updated {
    std::vector<float> w, copy, m, v;
  };
  auto update = [&](const AdamParams& p) {
    Tensor w = on_device(*b, tensor_from_floats(w0, {3})), g = on_device(*b, tensor_from_floats(g0, {3}));
    Tensor copy = on_device(*b, tensor_from_floats(w0, {3}, DType::F16));
    Tensor m = on_device(*b, tensor_from_floats(m0, {3})), v = on_device(*b, tensor_from_floats(v0, {3}));
    b->adam_update({{w, copy, g, m, v}}, p);
    return Updated{to_float_vector(on_host(*b, w)), to_float_vector(on_host(*b, copy)), to_float_vector(on_host(*b, m)),
                   to_float_vector(on_host(*b, v))};
  };
  LossScaleState s;
  s.skipped_steps = 3;
  s.found_inf = 1.0f;
  const Tensor skipping = loss_scale_state(*b, s);
  const Updated skipped = update({1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 7, &skipping});
  EXPECT_EQ(skipped.w, w0);
  EXPECT_EQ(skipped.copy, w0);
  EXPECT_EQ(skipped.m, m0);
  EXPECT_EQ(skipped.v, v0);
  s.found_inf = 0.0f;
  const Tensor clean = loss_scale_state(*b, s);
  const Updated counted = update({1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 7, &clean});
  const Updated host_count = update({1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 4, nullptr});
  EXPECT_NE(counted.w, w0);
  for (size_t i = 0; i < w0.size(); ++i) {  // the device computes the bias corrections itself (pow in double)
    EXPECT_NEAR(counted.w[i], host_count.w[i], 1e-6f * std::fabs(host_count.w[i])) << i;
  }
  if (GetParam() == "cpu") {
    EXPECT_EQ(counted.w, host_count.w);
  }
  EXPECT_EQ(counted.m, host_count.m);
  EXPECT_EQ(counted.v, host_count.v);
  EXPECT_NE(update({1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 7, nullptr}).w, host_count.w)
      << "the count matters: 7 steps correct the bias less than 4";
}

// Given step values (what a captured step replays with), SGD and Adam read lr and the step there and ignore their
// own: bit for bit the update given those by value, with or without a loss-scale state.
TEST_P(DeviceLossScale, UpdatesReadLrAndStepFromStepValues) {
  std::string why;
  Backend* b = backend_for(GetParam(), why);
  if (!b) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
  const std::vector<float> w0 = {0.5f, -1.0f, 2.0f}, g0 = {0.25f, 0.5f, -1.0f}, m0 = {0.1f, -0.2f, 0.3f},
                           v0 = {0.01f, 0.04f, 0.09f};
  const auto values = [&](float lr, int64_t step) {
    Tensor host = Tensor::empty({kOptimizerStepBytes}, DType::U8);
    const OptimizerStep s{lr, 0, step};
    std::memcpy(host.data(), &s, sizeof s);
    return on_device(*b, host);
  };
  LossScaleState clean;
  clean.skipped_steps = 2;
  const Tensor state = loss_scale_state(*b, clean);
  for (const Tensor* with_state : {static_cast<const Tensor*>(nullptr), &state}) {
    auto sgd = [&](float lr, const Tensor* step_values) {
      Tensor w = on_device(*b, tensor_from_floats(w0, {3})), g = on_device(*b, tensor_from_floats(g0, {3}));
      Tensor copy = on_device(*b, tensor_from_floats(w0, {3}, DType::BF16));
      Tensor buffer = on_device(*b, tensor_from_floats(m0, {3}));
      b->sgd_update({{w, copy, g, buffer, {}}}, {lr, 0.9f, 1e-4f, true, false, with_state, step_values});
      return std::vector{to_float_vector(on_host(*b, w)), to_float_vector(on_host(*b, copy)),
                         to_float_vector(on_host(*b, buffer))};
    };
    auto adam = [&](float lr, int64_t step, bool decoupled, const Tensor* step_values) {
      Tensor w = on_device(*b, tensor_from_floats(w0, {3})), g = on_device(*b, tensor_from_floats(g0, {3}));
      Tensor copy = on_device(*b, tensor_from_floats(w0, {3}, DType::F16));
      Tensor m = on_device(*b, tensor_from_floats(m0, {3})), v = on_device(*b, tensor_from_floats(v0, {3}));
      b->adam_update({{w, copy, g, m, v}}, {lr, 0.9f, 0.999f, 1e-8f, 0.01f, decoupled, step, with_state, step_values});
      return std::vector{to_float_vector(on_host(*b, w)), to_float_vector(on_host(*b, copy)),
                         to_float_vector(on_host(*b, m)), to_float_vector(on_host(*b, v))};
    };
    const std::string where = with_state ? "with a loss-scale state" : "without one";
    const Tensor at_3e_2_step_9 = values(3e-2f, 9);
    EXPECT_EQ(sgd(0.5f, &at_3e_2_step_9), sgd(3e-2f, nullptr)) << where;
    EXPECT_NE(sgd(0.5f, nullptr), sgd(3e-2f, nullptr)) << "the rate matters";
    for (const bool decoupled : {false, true}) {
      EXPECT_EQ(adam(0.5f, 1, decoupled, &at_3e_2_step_9), adam(3e-2f, 9, decoupled, nullptr)) << where;
      EXPECT_NE(adam(3e-2f, 1, decoupled, nullptr), adam(3e-2f, 9, decoupled, nullptr)) << "the step matters";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceLossScale, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

class DeviceFp8Scaling : public ::testing::TestWithParam<std::string> {};

// amp-fp8's delayed scaling where the backend computes (update_fp8_scalings, on core/delayed_scaling.h's device
// layout with its ring of past amaxes) against DelayedScaling on the host, which rolls its history: step for step
// and bit for bit, with amaxes across FP32's range, zeros, infinities and NaNs, both formats, both rules, margins,
// histories of one step, a few and Transformer Engine's 1024, several tensors in one call.
TEST_P(DeviceFp8Scaling, FollowsDelayedScalingStepForStep) {
  std::string why;
  Backend* b = backend_for(GetParam(), why);
  if (!b) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
  struct Setup {
    Fp8Format format;
    DelayedScalingSettings settings;
  };
  const std::vector<Setup> setups = {{Fp8Format::E4M3, {1024, 0, AmaxRule::Max}},
                                     {Fp8Format::E5M2, {1, 0, AmaxRule::Max}},
                                     {Fp8Format::E4M3, {5, 2, AmaxRule::MostRecent}},
                                     {Fp8Format::E5M2, {3, -1, AmaxRule::Max}},
                                     {Fp8Format::E4M3, {7, 0, AmaxRule::Max}}};
  std::vector<DelayedScaling> host;
  std::vector<Tensor> states, stats;
  for (const Setup& setup : setups) {
    host.emplace_back(setup.format, setup.settings);
    const std::vector<float> start = device_state(host.back().state(), 1.0f);
    states.push_back(on_device(*b, tensor_from_floats(start, {static_cast<int64_t>(start.size())})));
    stats.push_back(on_device(*b, Tensor::zeros({kFp8CastStatsBytes}, DType::U8)));
  }
  Rng rng(71);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int step = 0; step < 40; ++step) {
    std::vector<Fp8ScalingUpdate> updates;
    std::vector<float> scale_before;
    for (size_t i = 0; i < setups.size(); ++i) {
      float amax = std::ldexp(rng.uniform(0.5f, 1.0f), static_cast<int>(rng.uniform(-140.0f, 127.0f)));
      if (step % 9 == 4) amax = 0.0f;            // a tensor of zeros: the scale stays
      if (step == 13 && i % 2 == 0) amax = inf;  // an overflow upstream: held for the history's length
      if (step % 7 == 5) amax = nan;             // passed over
      Fp8CastStats cast;
      cast.amax = amax;
      Tensor bytes = Tensor::empty({kFp8CastStatsBytes}, DType::U8);
      std::memcpy(bytes.data(), &cast, sizeof cast);
      b->convert(bytes, stats[i]);
      scale_before.push_back(host[i].scale());
      host[i].record_amax(amax);
      host[i].update();
      const Setup& setup = setups[i];
      updates.push_back(
          {&states[i], &stats[i], std::ldexp(fp8_max(setup.format), -setup.settings.margin), setup.settings.rule});
    }
    b->update_fp8_scalings(updates);
    for (size_t i = 0; i < setups.size(); ++i) {
      const std::string where = "tensor " + std::to_string(i) + ", step " + std::to_string(step);
      const std::vector<float> state = to_float_vector(on_host(*b, states[i]));
      float scale_used = 0;
      const DelayedScalingState got = from_device_state(state.data(), static_cast<int64_t>(state.size()), &scale_used);
      ASSERT_EQ(got.amax_history, host[i].amax_history()) << where;
      ASSERT_EQ(got.scale, host[i].scale()) << where;
      ASSERT_EQ(state[kFp8StateScaleInverse], host[i].scale_inverse()) << where;
      ASSERT_EQ(scale_used, scale_before[i]) << where << ": the scale the step's cast used";
    }
  }
  for (size_t i = 0; i < setups.size(); i += 2)
    EXPECT_NE(host[i].scale(), 1.0f) << "tensor " << i << ": the amaxes moved the scale";
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceFp8Scaling, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---- What every backend refuses, and says ----------------------------------------------------------------------

class BackendContract : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendContract, RefusesMisfittingShapesAndLabelsByName) {
  std::string why;
  Backend* b = backend_for(GetParam(), why);
  if (!b) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
  Tensor x = device_nan(*b, {1, 3, 5, 5}, DType::F32), w = device_nan(*b, {4, 2, 3, 3}, DType::F32);
  Tensor y = device_nan(*b, {1, 4, 5, 5}, DType::F32);
  EXPECT_THROW(b->conv2d_forward(x, w, y, {1, 1}), Error) << "3 input channels against filters of 2";
  const Tensor logits = on_device(*b, tensor_from_floats({1, 2, 3, 4, 5, 6}, {2, 3}));
  const Tensor labels = on_device(*b, tensor_from_floats({0.0f, 3.0f}, {2}, DType::I32));
  Tensor dlogits = device_nan(*b, {2, 3}, DType::F32);
  try {
    b->softmax_cross_entropy(logits, labels, 0.0f, 1.0f, dlogits);
    b->read_scalars();  // a GPU finds it in its kernel and reports it here
    FAIL() << "label 3 of 3 classes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 3 outside [0, 3)"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(b->supports(Op::Conv2d, DType::F16)) << "every backend computes FP16 convolutions, natively or not";
  EXPECT_FALSE(b->supports(Op::SgdUpdate, DType::F16)) << "optimizers update FP32 master weights";
  EXPECT_FALSE(b->description().empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendContract, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace ampwb::testing
