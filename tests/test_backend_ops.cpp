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
#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/batchnorm_chunked.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/direct_weight_gradient.h"
#include "backend/cpu/stem_convolution.h"
#include "backend/cpu/weight_layouts.h"
#include "core/allocator.h"
#include "core/convert16.h"
#include "core/simd.h"
#include "op_cases.h"
#include "op_harness.h"

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

void run(CaseRun& r, const ConvCase& c) {
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

std::vector<unsigned char> bytes_of(Backend& b, const Tensor& t) {
  const Tensor host = on_host(b, t);
  const auto* p = static_cast<const unsigned char*>(host.data());
  return std::vector<unsigned char>(p, p + host.nbytes());
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
    GTEST_SKIP() << name << " has no " << precision_name(c.precision) << ": " << s->how;
  const DType dtype = storage_dtype(c.precision);
  const Op op = std::visit([](const auto& p) { return std::decay_t<decltype(p)>::kOp; }, c.params);
  if (!backend->supports(op, dtype))
    GTEST_SKIP() << name << " says supports(" << op_name(op) << ", " << dtype_name(dtype) << ") is false";
  if (const auto* convert = std::get_if<ConvertCase>(&c.params);
      convert && !backend->supports(op, storage_dtype(convert->to)))
    GTEST_SKIP() << name << " says supports(convert, " << dtype_name(storage_dtype(convert->to)) << ") is false";
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

TEST(CpuBackend, DescribesItsOneDnnAndIsa) {
  std::string why;
  Backend* b = backend_for("cpu", why);
  ASSERT_NE(b, nullptr) << why;
  EXPECT_NE(b->description().find("oneDNN 2."), std::string::npos) << b->description();
  EXPECT_EQ(b->capabilities().isa,
            b->description().substr(b->description().find(", ") + 2, b->capabilities().isa.size()));
  EXPECT_FALSE(b->capabilities().tf32.available) << "TF32 is a GPU format: the tf32 op cases skip on the CPU";
}

// The CPU's Winograd path (backend/cpu/winograd.h) against oneDNN's direct convolution from the same inputs: within
// the FP32 bound of each other, and the same bits whatever the thread count and with or without AVX2. (The op cases
// above check it against the float64 reference.)
TEST(CpuBackend, WinogradAgreesWithTheDirectConvolutionWhateverItsThreadsOrSimd) {
  Rng rng(17);
  const Tensor x = host_random({3, 64, 13, 12}, rng, DType::F32, Layout::NHWC);
  const Tensor w = host_random({72, 64, 3, 3}, rng, DType::F32, Layout::NHWC);
  const Tensor dy = host_random({3, 72, 13, 12}, rng, DType::F32, Layout::NHWC);
  struct Results {
    std::vector<float> y, dx, dw;
  };
  auto convolve = [&](int threads, bool winograd) {
    CpuBackend b({threads, CpuBf16::Auto, false, winograd ? ConvAlgorithm::Winograd : ConvAlgorithm::Direct});
    Tensor y = Tensor::empty(dy.shape(), DType::F32, Layout::NHWC);
    Tensor dx = Tensor::empty(x.shape(), DType::F32, Layout::NHWC);
    Tensor dw = Tensor::empty(w.shape(), DType::F32, Layout::NHWC);
    b.conv2d_forward(x, w, y, {1, 1});
    b.conv2d_backward_data(dy, w, dx, {1, 1});
    b.conv2d_backward_weights(x, dy, dw, {1, 1});
    return Results{to_float_vector(y), to_float_vector(dx), to_float_vector(dw)};
  };
  const Results direct = convolve(2, false), two = convolve(2, true), one = convolve(1, true);
  const SimdLevel before = set_simd_limit(SimdLevel::Scalar);
  const Results scalar = convolve(2, true);
  set_simd_limit(before);

  EXPECT_LE(compare(two.y, direct.y, false).error, 1e-5);
  EXPECT_LE(compare(two.dx, direct.dx, false).error, 1e-5);
  EXPECT_LE(compare(two.dw, direct.dw, false).error, 1e-5);
  EXPECT_NE(two.y, direct.y) << "the same bits as the direct convolution: was the Winograd path taken?";
  EXPECT_NE(two.dw, direct.dw);
  EXPECT_EQ(two.y, one.y);
  EXPECT_EQ(two.dx, one.dx);
  EXPECT_EQ(two.dw, one.dw);
  EXPECT_EQ(two.y, scalar.y);
  EXPECT_EQ(two.dx, scalar.dx);
  EXPECT_EQ(two.dw, scalar.dw);
}

// Measured: each pass of each shape runs by the algorithm its first call timed faster, every call alike: its bits are
// the direct convolution's or Winograd's, and the same on the second call as on the first (the first call's output
// is the chosen algorithm's, not the last one timed). FP32 and emulated FP16; a shape Winograd does not fit is the
// direct convolution's.
TEST(CpuBackend, MeasuredConvAlgorithmKeepsOneChoicePerPassAndShape) {
  for (DType dtype : {DType::F32, DType::F16}) {
    for (int64_t channels : {64, 32}) {  // 32: below Winograd's range
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", " + std::to_string(channels) + " channels");
      Rng rng(23);
      const Tensor x = host_random({2, channels, 14, 14}, rng, dtype, Layout::NHWC);
      const Tensor w = host_random({channels, channels, 3, 3}, rng, dtype, Layout::NHWC);
      const Tensor dy = host_random({2, channels, 14, 14}, rng, dtype, Layout::NHWC);
      using Passes = std::array<std::vector<uint8_t>, 3>;  // y, dx, dw
      auto convolve = [&](CpuBackend& b) {
        Tensor y = Tensor::empty(dy.shape(), dtype, Layout::NHWC), dx = Tensor::empty(x.shape(), dtype, Layout::NHWC);
        Tensor dw = Tensor::empty(w.shape(), dtype, Layout::NHWC);
        b.conv2d_forward(x, w, y, {1, 1});
        b.conv2d_backward_data(dy, w, dx, {1, 1});
        b.conv2d_backward_weights(x, dy, dw, {1, 1});
        return Passes{bytes_of(b, y), bytes_of(b, dx), bytes_of(b, dw)};
      };
      CpuBackend direct_backend({2, CpuBf16::Emulated, false, ConvAlgorithm::Direct});
      CpuBackend winograd_backend({2, CpuBf16::Emulated, false, ConvAlgorithm::Winograd});
      CpuBackend measured({2, CpuBf16::Emulated, false, ConvAlgorithm::Measured});
      const Passes direct = convolve(direct_backend), winograd = convolve(winograd_backend);
      const Passes first = convolve(measured), second = convolve(measured);
      for (size_t pass = 0; pass < 3; ++pass) {
        EXPECT_TRUE(first[pass] == direct[pass] || first[pass] == winograd[pass]) << "pass " << pass;
        EXPECT_EQ(first[pass], second[pass]) << "pass " << pass << ": one algorithm per pass and shape";
        if (channels == 32) {
          EXPECT_EQ(first[pass], direct[pass]) << "pass " << pass;
        }
      }
      if (channels == 64) {
        EXPECT_NE(direct[0], winograd[0]) << "the two algorithms' bits differ here";
      }
    }
  }
  EXPECT_NE(CpuBackend({1, CpuBf16::Auto, false, ConvAlgorithm::Measured}).description().find("measured per shape"),
            std::string::npos);
}

// Convolutions as matrix products (im2col, oneDNN's matmul, col2im for the input's gradient) against the float64
// reference, on the shapes ResNets have: 3x3 of stride 1 and 2, 1x1 of stride 1 (its input is the product's own
// matrix) and 2 (downsampling), and the 7x7 stem with 3 channels. FP32 within 1e-5 of the largest value;
// 16-bit results within one rounding of it (FP32 accumulation, rounded once), in weights of both layouts. BF16 runs on
// oneDNN's BF16 matmul where the CPU has one, else in the engine's emulation, as FP16 does everywhere.
TEST(CpuBackend, ConvolutionsAsMatrixProductsMatchTheReference) {
  struct Shape4 {
    int64_t n, c, h, w, k, kernel;
    int stride, padding;
  };
  const Shape4 shapes[] = {{2, 24, 7, 6, 40, 3, 1, 1},
                           {2, 16, 9, 9, 24, 3, 2, 1},
                           {3, 32, 5, 5, 48, 1, 1, 0},
                           {2, 32, 6, 6, 64, 1, 2, 0},
                           {2, 3, 15, 15, 16, 7, 2, 3}};
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (Layout weights_layout : {Layout::NCHW, Layout::NHWC})
      for (const Shape4& s : shapes) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + (weights_layout == Layout::NCHW ? " OIHW" : " OHWI") + ", " +
                     std::to_string(s.c) + "->" + std::to_string(s.k) + " channels, " + std::to_string(s.kernel) + "x" +
                     std::to_string(s.kernel) + " stride " + std::to_string(s.stride));
        Rng rng(31);
        const ConvParams p{s.stride, s.padding};
        const int64_t P = (s.h + 2 * s.padding - s.kernel) / s.stride + 1,
                      Q = (s.w + 2 * s.padding - s.kernel) / s.stride + 1;
        const Tensor x = host_random({s.n, s.c, s.h, s.w}, rng, dtype, Layout::NHWC);
        const Tensor w = host_random({s.k, s.c, s.kernel, s.kernel}, rng, dtype, weights_layout);
        const Tensor dy = host_random({s.n, s.k, P, Q}, rng, dtype, Layout::NHWC);
        CpuBackend gemm({2, CpuBf16::Native, false, ConvAlgorithm::Gemm});
        CpuBackend direct({2, CpuBf16::Native, false, ConvAlgorithm::Direct});
        auto passes = [&](CpuBackend& b) {
          Tensor y = device_nan(b, dy.shape(), dtype, Layout::NHWC), dx = device_nan(b, x.shape(), dtype, Layout::NHWC);
          Tensor dw = device_nan(b, w.shape(), dtype, weights_layout);
          b.conv2d_forward(x, w, y, p);
          b.conv2d_backward_data(dy, w, dx, p);
          b.conv2d_backward_weights(x, dy, dw, p);
          return std::array{to_float_vector(y), to_float_vector(dx), to_float_vector(dw)};
        };
        const auto got = passes(gemm), theirs = passes(direct);
        const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w), rdy = ref::from_tensor(dy);
        const ref::Array want[] = {ref::conv2d_forward(rx, rw, p.stride, p.padding),
                                   ref::conv2d_backward_data(rdy, rw, x.shape(), p.stride, p.padding),
                                   ref::conv2d_backward_weights(rx, rdy, w.shape(), p.stride, p.padding)};
        const double bound = dtype == DType::F32 ? 1e-5 : dtype == DType::BF16 ? 0x1p-8 + 1e-5 : 0x1p-11 + 1e-5;
        bool any_bits_differ = false;
        for (size_t pass = 0; pass < 3; ++pass) {
          std::vector<float> rounded(want[pass].v.size());
          for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = round_to(dtype, want[pass].v[i]);
          EXPECT_LE(compare(got[pass], rounded, false).error, bound) << "pass " << pass;
          any_bits_differ = any_bits_differ || got[pass] != theirs[pass];
        }
        if (dtype == DType::F32 && s.c * s.kernel * s.kernel >= 200) {
          EXPECT_TRUE(any_bits_differ) << "the bits of oneDNN's convolutions: was the product taken?";
        }
      }
  EXPECT_NE(CpuBackend({1, CpuBf16::Auto, false, ConvAlgorithm::Gemm}).description().find("matrix products"),
            std::string::npos);
}

// Each pass of a convolution (forward, backward data, weight gradient) as `automatic` runs it gives the bits of the
// path as_product names for it: the products of `gemm` (or another algorithm's, as the caller names it) or oneDNN's
// convolutions of `direct`. A pass whose two paths give the same bits tells nothing; at least one must differ.
// dy_arrives_wide: auto's backward passes get dy widened to FP32, as Conv2d hands an emulated dtype's gradient over.
// Which path a pass's bits must come from: the product over im2col, oneDNN's convolution, or (weight gradients) the
// direct kernel.
enum class Path { Product, OneDnn, Direct };

void expect_passes_follow_the_rule(CpuBackend& automatic, CpuBackend& gemm, CpuBackend& direct, const Tensor& x,
                                   const Tensor& w, const Tensor& dy, ConvParams p, std::array<Path, 3> expected,
                                   bool dy_arrives_wide = false) {
  auto passes = [&](CpuBackend& b, const Tensor& dy_given) {
    Tensor y = Tensor::empty(dy.shape(), x.dtype(), Layout::NHWC),
           dx = Tensor::empty(x.shape(), x.dtype(), Layout::NHWC);
    Tensor dw = Tensor::empty(w.shape(), w.dtype());
    b.conv2d_forward(x, w, y, p);
    b.conv2d_backward_data(dy_given, w, dx, p);
    b.conv2d_backward_weights(x, dy_given, dw, p);
    return std::array{to_float_vector(y), to_float_vector(dx), to_float_vector(dw)};
  };
  Tensor wide_dy = Tensor::empty(dy.shape(), DType::F32, Layout::NHWC);
  automatic.convert(dy, wide_dy);
  const auto got = passes(automatic, dy_arrives_wide ? wide_dy : dy), products = passes(gemm, dy),
             onednn = passes(direct, dy);
  std::vector<float> kernel;  // the direct weight gradient's bits, where the rule names it
  if (expected[2] == Path::Direct) {
    Tensor dw = Tensor::empty(w.shape(), w.dtype());
    cpu_detail::direct_weight_gradient(x, dy, dw, p, 2);
    kernel = to_float_vector(dw);
  }
  int told_apart = 0;
  for (size_t pass = 0; pass < 3; ++pass) {
    const bool by_kernel = expected[pass] == Path::Direct;
    // The same sums either way (e.g. oneDNN's sgemm, 1x1 kernels) tell nothing.
    if (products[pass] == onednn[pass] && (!by_kernel || kernel == products[pass])) continue;
    ++told_apart;
    EXPECT_EQ(got[pass], by_kernel                         ? kernel
                         : expected[pass] == Path::Product ? products[pass]
                                                           : onednn[pass])
        << "pass " << pass;
  }
  EXPECT_GE(told_apart, 1) << "the paths gave the same bits: nothing checked";
}

void expect_passes_follow_the_rule(CpuBackend& automatic, CpuBackend& gemm, CpuBackend& direct, const Tensor& x,
                                   const Tensor& w, const Tensor& dy, ConvParams p, std::array<bool, 3> as_product,
                                   bool dy_arrives_wide = false) {
  auto path = [](bool product) { return product ? Path::Product : Path::OneDnn; };
  expect_passes_follow_the_rule(automatic, gemm, direct, x, w, dy, p,
                                {path(as_product[0]), path(as_product[1]), path(as_product[2])}, dy_arrives_wide);
}

// auto's rule on AVX-512: FP32 and emulated FP16 convolutions whose output is 4x4 pixels or fewer run their
// forward and weight gradient as products, and their input's gradient too where strided; larger outputs stay
// oneDNN's; FP32's stride-1 weight gradient there is the direct kernel's. Each pass's bits are those of the path the
// rule names, also where FP16's output gradient arrives widened to FP32 (as in training: the rule once missed it
// there).
TEST(CpuBackend, AutoTakesProductsForConvolutionsOfSmallImagesOnAvx512) {
  CpuBackend automatic({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  if (automatic.description().find("convolutions of small images as matrix products") == std::string::npos)
    GTEST_SKIP() << "no AVX-512 for oneDNN here (" << automatic.description() << "): the rule does not apply";
  CpuBackend gemm({2, CpuBf16::Auto, false, ConvAlgorithm::Gemm});
  CpuBackend direct({2, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  struct Case {
    int64_t side;  // input side; 3x3 kernel, padding 1
    int stride;
    bool forward, backward_data, weight_gradient;  // which passes are products
  };
  for (DType dtype : {DType::F32, DType::F16})
    for (const Case c :
         {Case{4, 1, true, false, true}, Case{8, 2, true, true, true}, Case{8, 1, false, false, false}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", " + std::to_string(c.side) + "x" + std::to_string(c.side) +
                   " stride " + std::to_string(c.stride));
      Rng rng(41);
      const ConvParams p{c.stride, 1};
      const int64_t out = (c.side + 2 - 3) / c.stride + 1;
      const Tensor x = host_random({4, 64, c.side, c.side}, rng, dtype, Layout::NHWC);
      const Tensor w = host_random({64, 64, 3, 3}, rng, dtype);
      const Tensor dy = host_random({4, 64, out, out}, rng, dtype, Layout::NHWC);
      auto path = [](bool product) { return product ? Path::Product : Path::OneDnn; };
      const bool kernel = dtype == DType::F32 && c.stride == 1 && out <= 4;
      for (const bool dy_arrives_wide : {false, true}) {
        if (dy_arrives_wide && dtype == DType::F32) continue;
        SCOPED_TRACE(dy_arrives_wide ? "dy widened to FP32" : "dy as computed");
        expect_passes_follow_the_rule(
            automatic, gemm, direct, x, w, dy, p,
            {path(c.forward), path(c.backward_data), kernel ? Path::Direct : path(c.weight_gradient)}, dy_arrives_wide);
      }
    }
}

// auto's rule on AVX-512 for 3x3 convolutions of stride 1: Winograd, its transforms folding the conversions, for an
// emulated 16-bit type over 128 channels or more and 14x14 outputs or more; oneDNN's FP32 convolutions for smaller
// ones and for FP32. Each pass's bits are those of the path the rule names, dy as computed and widened.
TEST(CpuBackend, AutoTakesWinogradForEmulatedConvolutionsWhereItPaysOnAvx512) {
  // BF16 emulated on every CPU, as FP16 is.
  CpuBackend automatic({2, CpuBf16::Emulated, false, ConvAlgorithm::Auto});
  if (automatic.description().find("emulated 16-bit 3x3") == std::string::npos)
    GTEST_SKIP() << "no AVX-512 here: auto takes Winograd for every 3x3 convolution it fits";
  CpuBackend winograd({2, CpuBf16::Emulated, false, ConvAlgorithm::Winograd});
  CpuBackend direct({2, CpuBf16::Emulated, false, ConvAlgorithm::Direct});
  struct Case {
    DType dtype;
    int64_t channels, side;  // 3x3 kernel, stride 1, padding 1
    bool winograd;
  };
  for (const Case c :
       {Case{DType::F16, 128, 14, true}, Case{DType::BF16, 128, 14, true}, Case{DType::F16, 64, 14, false},
        Case{DType::F16, 128, 13, false}, Case{DType::F32, 128, 14, false}}) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + ", " + std::to_string(c.channels) + " channels, " +
                 std::to_string(c.side) + "x" + std::to_string(c.side));
    Rng rng(53);
    const Tensor x = host_random({2, c.channels, c.side, c.side}, rng, c.dtype, Layout::NHWC);
    const Tensor w = host_random({c.channels, c.channels, 3, 3}, rng, c.dtype);
    const Tensor dy = host_random({2, c.channels, c.side, c.side}, rng, c.dtype, Layout::NHWC);
    for (const bool dy_arrives_wide : {false, true}) {
      if (dy_arrives_wide && c.dtype == DType::F32) continue;
      SCOPED_TRACE(dy_arrives_wide ? "dy widened to FP32" : "dy as computed");
      expect_passes_follow_the_rule(automatic, winograd, direct, x, w, dy, {1, 1}, {c.winograd, c.winograd, c.winograd},
                                    dy_arrives_wide);
    }
  }
}

// Where the CPU emulates a 16-bit type, a weight gradient asked for in FP32 holds the 16-bit gradient's values: the
// bits of the 16-bit dw widened, whichever path computes it (the products, Winograd, oneDNN's FP32 convolution),
// with dy as computed or widened to FP32 (Conv2d hands the gradient of the master weights over this way).
TEST(CpuBackend, AWideWeightGradientOfAnEmulatedTypeHoldsTheSixteenBitValues) {
  struct Case {
    int64_t side;  // input side; 3x3 kernel, padding 1
    int stride;
  };
  for (const ConvAlgorithm algorithm :
       {ConvAlgorithm::Auto, ConvAlgorithm::Direct, ConvAlgorithm::Winograd, ConvAlgorithm::Gemm})
    for (const DType dtype : {DType::F16, DType::BF16}) {
      CpuBackend b({2, CpuBf16::Emulated, false, algorithm});
      for (const Case c : {Case{4, 1}, Case{8, 2}, Case{16, 1}}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + ", algorithm " + std::to_string(static_cast<int>(algorithm)) +
                     ", " + std::to_string(c.side) + "x" + std::to_string(c.side) + " stride " +
                     std::to_string(c.stride));
        Rng rng(47);
        const ConvParams p{c.stride, 1};
        const int64_t out = (c.side + 2 - 3) / c.stride + 1;
        const Tensor x = host_random({4, 64, c.side, c.side}, rng, dtype, Layout::NHWC);
        const Tensor dy = host_random({4, 64, out, out}, rng, dtype, Layout::NHWC);
        Tensor wide_dy = Tensor::empty(dy.shape(), DType::F32, Layout::NHWC);
        b.convert(dy, wide_dy);
        Tensor dw = Tensor::empty({64, 64, 3, 3}, dtype), want = Tensor::empty(dw.shape(), DType::F32);
        b.conv2d_backward_weights(x, dy, dw, p);
        b.convert(dw, want);
        for (const Tensor* given : {&dy, static_cast<const Tensor*>(&wide_dy)}) {
          Tensor wide_dw = Tensor::empty(dw.shape(), DType::F32);
          b.conv2d_backward_weights(x, *given, wide_dw, p);
          EXPECT_EQ(to_float_vector(wide_dw), to_float_vector(want)) << "dy " << given->describe();
        }
      }
    }
}

// auto's rule for native BF16 on AMX: every pass of outputs of 4x4 pixels or fewer; for strided convolutions the
// weight gradient up to 14x14 outputs and the other passes up to 7x7 (the forward one not for 1x1 kernels); for
// stride 1 the weight gradient up to 8x8 outputs, while its patches hold at most 4 Mi elements. Each pass's bits are
// those of the path the rule names.
TEST(CpuBackend, AutoTakesProductsForStridedBf16ConvolutionsOnAmx) {
  CpuBackend automatic({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  if (automatic.description().find("avx512_core_amx") == std::string::npos || !automatic.capabilities().bf16.native)
    GTEST_SKIP() << "no native BF16 on AMX here (" << automatic.description() << "): the rule does not apply";
  CpuBackend gemm({2, CpuBf16::Auto, false, ConvAlgorithm::Gemm});
  CpuBackend direct({2, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  struct Case {
    int64_t images, side, kernel;  // padding kernel / 2; 128 input channels
    int stride;
    bool forward, backward_data, weight_gradient;  // which passes are products
  };
  // (1x1 kernels: oneDNN's and the product's sums gave the same bits in every pass, so no case tells them apart.)
  // Stride 1 over 8x8: patches of 512, 2048 and 4096 rows of 1152 columns; the last 4.5 Mi elements.
  for (const Case c :
       {Case{8, 14, 3, 2, true, true, true}, Case{8, 28, 3, 2, false, false, true},
        Case{8, 16, 3, 2, false, false, true}, Case{8, 32, 3, 2, false, false, false},
        Case{8, 4, 3, 1, true, true, true}, Case{8, 8, 3, 1, false, false, true}, Case{32, 8, 3, 1, false, false, true},
        Case{64, 8, 3, 1, false, false, false}, Case{8, 9, 3, 1, false, false, false}}) {
    SCOPED_TRACE(std::to_string(c.images) + " images " + std::to_string(c.side) + "x" + std::to_string(c.side) + ", " +
                 std::to_string(c.kernel) + "x" + std::to_string(c.kernel) + " stride " + std::to_string(c.stride));
    Rng rng(43);
    const ConvParams p{c.stride, static_cast<int>(c.kernel / 2)};
    const int64_t out = (c.side + 2 * p.padding - c.kernel) / c.stride + 1;
    // Long enough sums (128 channels, 8 images or more) that the two paths' orders of addition show in BF16's bits.
    const Tensor x = host_random({c.images, 128, c.side, c.side}, rng, DType::BF16, Layout::NHWC);
    const Tensor w = host_random({64, 128, c.kernel, c.kernel}, rng, DType::BF16);
    const Tensor dy = host_random({c.images, 64, out, out}, rng, DType::BF16, Layout::NHWC);
    expect_passes_follow_the_rule(automatic, gemm, direct, x, w, dy, p,
                                  {c.forward, c.backward_data, c.weight_gradient});
  }
}

// auto's rule for native BF16 on AVX512-BF16 without AMX: the weight gradient of stride-1 convolutions by the
// direct kernel over 8x8 outputs or fewer, and over 16x16 or fewer with 64 channels or fewer in and out, while its
// scratch stays under 1 Mi values (one case each side); of strided ones up to 14x14 outputs as products; the forward
// pass over 4x4 outputs or fewer as a product; never backward data. Each pass's bits are those of the path the rule
// names.
TEST(CpuBackend, AutoTakesProductsForSmallBf16ConvolutionsOnAvx512Bf16WithoutAmx) {
  CpuBackend automatic({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  if (automatic.description().find("avx512_core_amx") != std::string::npos || !automatic.capabilities().bf16.native)
    GTEST_SKIP() << "no native BF16 without AMX here (" << automatic.description() << "): the rule does not apply";
  CpuBackend gemm({2, CpuBf16::Auto, false, ConvAlgorithm::Gemm});
  CpuBackend direct({2, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  struct Case {
    int64_t images, side, channels;  // input side and channels; 3x3 kernel, padding 1; 64 channels out
    int stride;
    bool forward;  // as a product
    Path weight_gradient;
  };
  for (const Case c : {Case{8, 2, 128, 1, true, Path::Direct}, Case{32, 4, 128, 2, true, Path::Product},
                       Case{8, 4, 128, 1, true, Path::Direct}, Case{8, 8, 128, 1, false, Path::Direct},
                       Case{8, 16, 128, 1, false, Path::OneDnn}, Case{32, 16, 64, 1, false, Path::Direct},
                       Case{8, 32, 64, 1, false, Path::OneDnn}, Case{36, 7, 512, 1, false, Path::Direct},
                       Case{38, 7, 512, 1, false, Path::OneDnn}, Case{8, 16, 128, 2, false, Path::Product},
                       Case{8, 28, 128, 2, false, Path::Product}, Case{8, 32, 128, 2, false, Path::OneDnn}}) {
    SCOPED_TRACE(std::to_string(c.images) + " images " + std::to_string(c.side) + "x" + std::to_string(c.side) + "x" +
                 std::to_string(c.channels) + " stride " + std::to_string(c.stride));
    Rng rng(59);
    const ConvParams p{c.stride, 1};
    const int64_t out = (c.side + 2 - 3) / c.stride + 1;
    const Tensor x = host_random({c.images, c.channels, c.side, c.side}, rng, DType::BF16, Layout::NHWC);
    const Tensor w = host_random({64, c.channels, 3, 3}, rng, DType::BF16);
    const Tensor dy = host_random({c.images, 64, out, out}, rng, DType::BF16, Layout::NHWC);
    expect_passes_follow_the_rule(automatic, gemm, direct, x, w, dy, p,
                                  {c.forward ? Path::Product : Path::OneDnn, Path::OneDnn, c.weight_gradient});
  }
}

// The direct weight gradient against the float64 reference, FP32 and native BF16 (where the CPU has them): every
// window the kernel knows when compiled (3x3, padding 1: inside, edges, corners) and others it reads at run time
// (no padding, padding 2, stride 2), an odd batch (BF16 pairs the last image with zeros), 16 channels and more,
// images not square, and batches BF16 pairs a part at a time (the last part shorter, and odd); within the op tests'
// bound for the weight gradient.
TEST(CpuBackend, DirectWeightGradientMatchesTheFloat64Reference) {
  struct Case {
    int64_t images, channels, height, width, outputs;
    int stride, padding;
  };
  CpuBackend host({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  int checked = 0;
  for (const DType dtype : {DType::F32, DType::BF16})
    for (const Case c : {Case{3, 32, 2, 2, 16, 1, 1}, Case{4, 16, 4, 4, 32, 1, 1}, Case{5, 16, 8, 6, 16, 1, 1},
                         Case{2, 32, 7, 7, 48, 1, 1}, Case{1, 16, 5, 5, 16, 1, 0}, Case{2, 16, 3, 3, 16, 1, 2},
                         Case{3, 16, 9, 8, 32, 2, 1}, Case{21, 32, 16, 16, 32, 1, 1}, Case{24, 32, 16, 16, 32, 1, 1}}) {
      const int64_t P = (c.height + 2 * c.padding - 3) / c.stride + 1, Q = (c.width + 2 * c.padding - 3) / c.stride + 1;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(c.images) + " images " +
                   std::to_string(c.height) + "x" + std::to_string(c.width) + " stride " + std::to_string(c.stride) +
                   " padding " + std::to_string(c.padding));
      Rng rng(61);
      const Tensor x = host_random({c.images, c.channels, c.height, c.width}, rng, dtype, Layout::NHWC);
      const Tensor dy = host_random({c.images, c.outputs, P, Q}, rng, dtype, Layout::NHWC);
      Tensor dw = Tensor::empty({c.outputs, c.channels, 3, 3}, dtype);
      if (!cpu_detail::direct_weight_gradient_fits(x, dy, dw)) continue;  // no AVX-512 (BF16: AVX512-BF16) here
      cpu_detail::direct_weight_gradient(x, dy, dw, {c.stride, c.padding}, 2);
      const ref::Array want =
          ref::conv2d_backward_weights(ref::from_tensor(x), ref::from_tensor(dy), dw.shape(), c.stride, c.padding);
      const Precision precision = dtype == DType::F32 ? Precision::FP32 : Precision::BF16;
      expect_matches(host, "dw", dw, want, Kernel::Conv2dBackwardWeights, precision, Result::Same);
      ++checked;
    }
  if (checked == 0) GTEST_SKIP() << "no AVX-512 here: the direct weight gradient does not run";
}

// The stem kernel against the float64 reference, native BF16 (where the CPU has it): ResNet-18's 7x7 stride-2 stem
// and ResNet-20's 3x3 one, 1 to 4 channels in, 16 to 64 out, rows whose pixels do not fill the kernel's blocks of 4,
// images not square, no padding; within the op tests' bound for the forward pass.
TEST(CpuBackend, StemForwardMatchesTheFloat64Reference) {
  struct Case {
    int64_t images, channels, height, width, outputs, kernel;
    int stride, padding;
  };
  CpuBackend host({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  int checked = 0;
  for (const Case c : {Case{2, 3, 20, 18, 64, 7, 2, 3}, Case{3, 3, 9, 11, 16, 3, 1, 1}, Case{1, 1, 13, 13, 32, 3, 1, 1},
                       Case{2, 4, 10, 7, 48, 5, 2, 2}, Case{2, 2, 8, 8, 16, 3, 1, 0}}) {
    const int64_t P = (c.height + 2 * c.padding - c.kernel) / c.stride + 1,
                  Q = (c.width + 2 * c.padding - c.kernel) / c.stride + 1;
    SCOPED_TRACE(std::to_string(c.images) + " images " + std::to_string(c.height) + "x" + std::to_string(c.width) +
                 "x" + std::to_string(c.channels) + " kernel " + std::to_string(c.kernel) + " stride " +
                 std::to_string(c.stride) + " padding " + std::to_string(c.padding));
    Rng rng(67);
    const Tensor x = host_random({c.images, c.channels, c.height, c.width}, rng, DType::BF16, Layout::NHWC);
    const Tensor w = host_random({c.outputs, c.channels, c.kernel, c.kernel}, rng, DType::BF16);
    Tensor y = Tensor::empty({c.images, c.outputs, P, Q}, DType::BF16, Layout::NHWC);
    if (!cpu_detail::stem_forward_fits(x, w, y)) continue;  // no AVX512-BF16 here
    cpu_detail::stem_forward(x, w, y, {c.stride, c.padding}, 2);
    const ref::Array want = ref::conv2d_forward(ref::from_tensor(x), ref::from_tensor(w), c.stride, c.padding);
    expect_matches(host, "y", y, want, Kernel::Conv2dForward, Precision::BF16, Result::Same);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no AVX512-BF16 here: the stem kernel does not run";
}

// auto's rule for the stem kernel: native BF16 on AVX512-BF16 without AMX takes it for the forward pass over images
// of 4 channels or fewer (its bits, which oneDNN's differ from), and oneDNN's convolution for more channels.
TEST(CpuBackend, AutoTakesTheStemKernelForFewChannelsOnAvx512Bf16WithoutAmx) {
  CpuBackend automatic({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  if (automatic.description().find("avx512_core_amx") != std::string::npos || !automatic.capabilities().bf16.native)
    GTEST_SKIP() << "no native BF16 without AMX here (" << automatic.description() << "): the rule does not apply";
  CpuBackend direct({2, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  for (const int64_t channels : {3, 16}) {
    SCOPED_TRACE(std::to_string(channels) + " channels");
    Rng rng(71);
    const Tensor x = host_random({4, channels, 32, 32}, rng, DType::BF16, Layout::NHWC);
    const Tensor w = host_random({64, channels, 7, 7}, rng, DType::BF16);
    auto forward = [&](CpuBackend* b) {
      Tensor y = Tensor::empty({4, 64, 16, 16}, DType::BF16, Layout::NHWC);
      if (b)
        b->conv2d_forward(x, w, y, {2, 3});
      else
        cpu_detail::stem_forward(x, w, y, {2, 3}, 2);
      return to_float_vector(y);
    };
    const std::vector<float> got = forward(&automatic), onednn = forward(&direct);
    if (channels > 4) {
      EXPECT_EQ(got, onednn);
      continue;
    }
    const std::vector<float> kernel = forward(nullptr);
    ASSERT_NE(kernel, onednn) << "the kernel and oneDNN gave the same bits: nothing checked";
    EXPECT_EQ(got, kernel);
  }
}

// The engine's copy of 3x3 weights into the layouts oneDNN's backward-data convolutions read (weight_layouts.h)
// against oneDNN's own reorder, byte for byte: FP32 and BF16, one block and several each way, channels in and out
// unequal. (The convolutions that read the copy are checked against float64 by the op cases above.)
TEST(CpuBackend, BackwardDataWeightsAreOneDnnsReorderByteForByte) {
  using dnnl::memory;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  int checked = 0;
  for (const DType dtype : {DType::F32, DType::BF16})
    for (const auto& [K, C] : {std::pair<int64_t, int64_t>{16, 16}, {32, 48}, {64, 16}, {48, 96}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(K) + "x" + std::to_string(C) + "x3x3");
      Rng rng(73);
      const Tensor w = host_random({K, C, 3, 3}, rng, dtype);
      if (!cpu_detail::backward_data_layout_fits(w)) continue;  // no AVX-512 here
      const bool fp32 = dtype == DType::F32;
      const auto type = fp32 ? memory::data_type::f32 : memory::data_type::bf16;
      memory from({{K, C, 3, 3}, type, memory::format_tag::abcd}, engine, const_cast<void*>(w.data()));
      memory oneDNN({{K, C, 3, 3}, type, fp32 ? memory::format_tag::ABcd16a16b : memory::format_tag::ABcd8a16b2a},
                    engine);
      dnnl::reorder(from, oneDNN).execute(stream, from, oneDNN);
      stream.wait();
      const size_t bytes = oneDNN.get_desc().get_size();
      ASSERT_EQ(bytes, static_cast<size_t>(w.numel()) * dtype_size(dtype));
      std::vector<char> ours(bytes);
      cpu_detail::to_backward_data_layout(w, ours.data(), 2);
      EXPECT_EQ(std::memcmp(ours.data(), oneDNN.get_data_handle(), bytes), 0);
      ++checked;
    }
  if (checked == 0) GTEST_SKIP() << "no AVX-512 here: the copy does not run";
}

// The engine's copy of BF16 weights into the layouts oneDNN's BF16 forward convolutions read (weight_layouts.h)
// against oneDNN's own reorder, byte for byte: each block of output channels, 3x3 and 1x1, one item and several each
// way. (The convolutions that read the copy are checked against float64 by the op cases above.)
TEST(CpuBackend, ForwardWeightsAreOneDnnsReorderByteForByte) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  int checked = 0;
  struct Case {
    int64_t K, C, R;
    int block;
    tag layout;
  };
  for (const Case c : {Case{16, 32, 3, 16, tag::AcdB16a2b},
                       {64, 96, 3, 32, tag::AcdB32a2b},
                       {128, 64, 3, 64, tag::AcdB64a2b},
                       {64, 32, 1, 32, tag::AcdB32a2b},
                       {128, 96, 1, 64, tag::AcdB64a2b}}) {
    SCOPED_TRACE(std::to_string(c.K) + "x" + std::to_string(c.C) + "x" + std::to_string(c.R) + "x" +
                 std::to_string(c.R) + ", block " + std::to_string(c.block));
    Rng rng(79);
    const Tensor w = host_random({c.K, c.C, c.R, c.R}, rng, DType::BF16);
    if (!cpu_detail::forward_layout_fits(w, c.block)) continue;  // no AVX-512 here
    const memory::dims dims{c.K, c.C, c.R, c.R};
    memory from({dims, memory::data_type::bf16, tag::abcd}, engine, const_cast<void*>(w.data()));
    memory oneDNN({dims, memory::data_type::bf16, c.layout}, engine);
    dnnl::reorder(from, oneDNN).execute(stream, from, oneDNN);
    stream.wait();
    const size_t bytes = oneDNN.get_desc().get_size();
    ASSERT_EQ(bytes, static_cast<size_t>(w.numel()) * 2);
    std::vector<char> ours(bytes);
    cpu_detail::to_forward_layout(w, c.block, ours.data(), 2);
    EXPECT_EQ(std::memcmp(ours.data(), oneDNN.get_data_handle(), bytes), 0);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no AVX-512 here: the copy does not run";
}

// FP16 and BF16 convolutions, which the CPU emulates, take Winograd with the conversions folded into its transforms:
// the same bits as the emulation's widening to FP32, FP32 convolution and rounding, done here step by step.
TEST(CpuBackend, WinogradFoldsTheEmulationsConversionsBitForBit) {
  CpuBackend b({2, CpuBf16::Emulated, false, ConvAlgorithm::Winograd});  // BF16 emulated on every CPU
  for (DType dtype : {DType::F16, DType::BF16}) {
    Rng rng(5);
    const Tensor x = host_random({2, 64, 12, 13}, rng, dtype, Layout::NHWC);
    const Tensor w = host_random({72, 64, 3, 3}, rng, dtype, Layout::NCHW);  // as the layers keep them
    const Tensor dy = host_random({2, 72, 12, 13}, rng, dtype, Layout::NHWC);
    auto empty_like = [](const Tensor& t, DType d) { return Tensor::empty(t.shape(), d, t.layout()); };
    Tensor y = empty_like(dy, dtype), dx = empty_like(x, dtype), dw = empty_like(w, dtype);
    b.conv2d_forward(x, w, y, {1, 1});
    b.conv2d_backward_data(dy, w, dx, {1, 1});
    b.conv2d_backward_weights(x, dy, dw, {1, 1});

    auto widened = [&](const Tensor& t) {
      Tensor wide = empty_like(t, DType::F32);
      b.convert(t, wide);
      return wide;
    };
    auto rounded = [&](const Tensor& wide) {
      Tensor narrow = empty_like(wide, dtype);
      b.convert(wide, narrow);
      return to_float_vector(narrow);
    };
    Tensor y32 = empty_like(dy, DType::F32), dx32 = empty_like(x, DType::F32), dw32 = empty_like(w, DType::F32);
    b.conv2d_forward(widened(x), widened(w), y32, {1, 1});
    b.conv2d_backward_data(widened(dy), widened(w), dx32, {1, 1});
    b.conv2d_backward_weights(widened(x), widened(dy), dw32, {1, 1});
    EXPECT_EQ(to_float_vector(y), rounded(y32)) << dtype_name(dtype);
    EXPECT_EQ(to_float_vector(dx), rounded(dx32)) << dtype_name(dtype);
    EXPECT_EQ(to_float_vector(dw), rounded(dw32)) << dtype_name(dtype);
  }
  // Folded: no FP32 copy of the activations is made (widening first would hold x and y in FP32 at once).
  Rng rng(6);
  const Tensor x = host_random({4, 64, 64, 64}, rng, DType::F16, Layout::NHWC);
  const Tensor w = host_random({64, 64, 3, 3}, rng, DType::F16, Layout::NCHW);
  Tensor y = Tensor::empty(x.shape(), DType::F16, Layout::NHWC);
  Allocator& allocator = cpu_allocator();
  const size_t live_before = allocator.stats().live_bytes;
  allocator.reset_peak();
  b.conv2d_forward(x, w, y, {1, 1});
  EXPECT_LT(allocator.stats().peak_live_bytes - live_before, x.numel() * sizeof(float));
}

// Batch norm's chunked passes (every CPU type's backward, the emulated types' forward), global average pooling
// and the 16-bit residual sums run the same arithmetic on every SIMD path: the same bits, with channel counts that take
// the register-blocked sums (multiples of 16) and those that do not, in both layouts (NCHW: chunks of one channel). The
// chunked backward reads FP32 and BF16 NHWC tensors in place where their channels fill blocks of 16, and otherwise
// widens each chunk into a copy: both must give the same bits, with and without the ReLU's mask.
TEST(CpuBackend, BatchNormBackwardInPlaceGivesTheWideningPathsBits) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (const Shape& shape : {Shape{4, 32, 6, 6}, Shape{3, 64, 5, 7}, Shape{2, 16, 40, 40}})
      for (bool relu : {false, true})
        for (bool wide : {false, true}) {
          if (wide && dtype == DType::F32) continue;
          Rng rng(11);
          const int64_t C = shape[1];
          const Tensor x = host_random(shape, rng, dtype, Layout::NHWC),
                       dy = host_random(shape, rng, dtype, Layout::NHWC);
          const Tensor y = relu ? host_random(shape, rng, dtype, Layout::NHWC) : Tensor();  // about half positive
          Tensor gamma = host_random({C}, rng, DType::F32);
          const Tensor mean = host_random({C}, rng, DType::F32);
          Tensor var = host_random({C}, rng, DType::F32);
          for (int64_t c = 0; c < C; ++c) var.data_as<float>()[c] = std::abs(var.data_as<float>()[c]) + 0.1f;
          // Gradients past FP16's range and below its normals, so that every rounding case is taken.
          gamma.data_as<float>()[0] = 1e5f;
          gamma.data_as<float>()[1] = 1e-6f;
          CpuBackend b({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
          auto backward = [&](bool widen_every_chunk) {
            Tensor dx = Tensor::empty(shape, wide ? DType::F32 : dtype, Layout::NHWC);
            Tensor dgamma = Tensor::empty({C}, DType::F32), dbeta = Tensor::empty({C}, DType::F32);
            batchnorm_chunked_backward(x, y, dy, gamma, mean, var, dx, dgamma, dbeta, 1e-5f, 2, widen_every_chunk);
            return std::vector{bytes_of(b, dx), bytes_of(b, dgamma), bytes_of(b, dbeta)};
          };
          EXPECT_EQ(backward(false), backward(true))
              << dtype_name(dtype) << " " << x.describe() << (relu ? " with" : " without") << " the ReLU"
              << (wide ? ", dx wide" : "");
        }
}

TEST(CpuBackend, BatchNormAndAveragePoolingGiveTheSameBitsOnEverySimdPath) {
  CpuBackend b({2, CpuBf16::Emulated, false, ConvAlgorithm::Auto});  // BF16 emulated on every CPU
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    for (const auto& [shape, layout] : {std::pair{Shape{4, 32, 6, 6}, Layout::NHWC},
                                        {Shape{3, 24, 5, 7}, Layout::NHWC},
                                        {Shape{2, 3, 40, 40}, Layout::NCHW}}) {
      Rng rng(9);
      const int64_t C = shape[1];
      const Tensor x = host_random(shape, rng, dtype, layout), dy = host_random(shape, rng, dtype, layout);
      const Tensor gamma = host_random({C}, rng, DType::F32), beta = host_random({C}, rng, DType::F32);
      const Tensor pooled_dy = host_random({shape[0], C}, rng, dtype);
      auto run_ops = [&] {
        Tensor y = Tensor::empty(shape, dtype, layout), dx = Tensor::empty(shape, dtype, layout);
        Tensor mean = Tensor::empty({C}, DType::F32), var = Tensor::empty({C}, DType::F32);
        Tensor running_mean = Tensor::zeros({C}, DType::F32), running_var = Tensor::zeros({C}, DType::F32);
        Tensor dgamma = Tensor::empty({C}, DType::F32), dbeta = Tensor::empty({C}, DType::F32);
        Tensor pooled = Tensor::empty({shape[0], C}, dtype), pooled_dx = Tensor::empty(shape, dtype, layout);
        b.batchnorm_relu_forward_training(x, gamma, beta, y, mean, var, running_mean, running_var, 0.1f, 1e-5f);
        b.batchnorm_relu_backward(x, y, dy, gamma, beta, mean, var, dx, dgamma, dbeta, 1e-5f);
        b.global_avgpool_forward(x, pooled);
        b.global_avgpool_backward(pooled_dy, pooled_dx);
        Tensor sum_relu = Tensor::empty(shape, dtype, layout), masked_sum = Tensor::empty(shape, dtype, layout);
        b.add_relu(x, dy, sum_relu);
        b.relu_backward_of_sum(y, x, dy, masked_sum);
        std::vector<std::vector<unsigned char>> results;
        for (const Tensor* t : {&y, &mean, &var, &dx, &dgamma, &dbeta, &pooled, &pooled_dx, &sum_relu, &masked_sum})
          results.push_back(bytes_of(b, *t));
        return results;
      };
      const SimdLevel before = set_simd_limit(SimdLevel::Scalar);
      const auto scalar = run_ops();
      for (SimdLevel level : {SimdLevel::Avx2, SimdLevel::Avx512}) {
        set_simd_limit(level);
        EXPECT_EQ(run_ops(), scalar) << dtype_name(dtype) << " " << C << " channels, the "
                                     << simd_level_name(simd_level()) << " path";
      }
      set_simd_limit(before);
    }
}

// The optimizers and scale-and-check run the same arithmetic on every SIMD path: the same weights, copies, state
// and sums, bit for bit. Sizes with vector tails and several update blocks; two steps each (SGD's first step sets
// its momentum buffer); every copy type.
TEST(CpuBackend, OptimizersAndScaleCheckGiveTheSameBitsOnEverySimdPath) {
  CpuBackend b({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  const std::vector<std::pair<int64_t, DType>> params = {
      {1, DType::BF16}, {4097, DType::F16}, {3 * 2048 + 5, DType::F32}};
  auto run_ops = [&] {
    Rng rng(11);
    std::vector<std::vector<unsigned char>> results;
    auto updates = [&](bool moments) {
      std::vector<ParamUpdate> u;
      for (const auto& [n, copy] : params) {
        ParamUpdate one{host_random({n}, rng, DType::F32), Tensor(),
                        host_random({n}, rng, DType::F32, Layout::NCHW, 0.1), Tensor::zeros({n}, DType::F32),
                        moments ? Tensor::zeros({n}, DType::F32) : Tensor()};
        if (copy != DType::F32) one.copy = Tensor::empty({n}, copy);
        u.push_back(one);
      }
      return u;
    };
    auto record = [&](const std::vector<ParamUpdate>& u) {
      for (const ParamUpdate& one : u)
        for (const Tensor* t : {&one.param, &one.copy, &one.state1, &one.state2})
          if (t->defined()) results.push_back(bytes_of(b, *t));
    };
    for (float momentum : {0.0f, 0.9f})
      for (bool nesterov : {false, true}) {
        std::vector<ParamUpdate> u = updates(false);
        for (bool first : {true, false}) b.sgd_update(u, {0.1f, momentum, 1e-4f, nesterov && momentum != 0, first});
        record(u);
      }
    for (bool decoupled : {false, true}) {
      std::vector<ParamUpdate> u = updates(true);
      for (int64_t step : {1, 2}) b.adam_update(u, {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, decoupled, step});
      record(u);
    }
    for (float factor : {1.0f / 65536, 1.0f}) {
      std::vector<ParamUpdate> u = updates(false);
      std::vector<Tensor*> grads;
      for (ParamUpdate& one : u) grads.push_back(&one.grad);
      b.scale_and_check(grads, factor);
      const double sum = b.read_scalars().sum_of_squares;
      results.push_back(std::vector<unsigned char>(reinterpret_cast<const unsigned char*>(&sum),
                                                   reinterpret_cast<const unsigned char*>(&sum + 1)));
      for (const Tensor* g : grads) results.push_back(bytes_of(b, *g));
    }
    return results;
  };
  const SimdLevel before = set_simd_limit(SimdLevel::Scalar);
  const auto scalar = run_ops();
  for (SimdLevel level : {SimdLevel::Avx2, SimdLevel::Avx512}) {
    set_simd_limit(level);
    EXPECT_EQ(run_ops(), scalar) << "the " << simd_level_name(simd_level()) << " path";
  }
  set_simd_limit(before);
}

// An update asked to check its gradients (SgdParams::check_gradients) finds what scale_and_check(grads, 1) run
// before it finds, bit for bit (the same split between threads, the same lanes), leaves the same weights, and its
// sum of squares is the float64 one; on every SIMD path, with thread counts that split the blocks unevenly.
TEST(CpuBackend, UpdatesCheckTheirGradientsAsScaleAndCheckDoes) {
  const std::vector<std::pair<int64_t, DType>> sizes = {
      {1, DType::BF16}, {4097, DType::F16}, {3 * 2048 + 5, DType::F32}, {5 * 2048, DType::BF16}};
  auto updates = [&](bool with_nan) {
    Rng rng(12);
    std::vector<ParamUpdate> u;
    for (const auto& [n, copy] : sizes) {
      ParamUpdate one{host_random({n}, rng, DType::F32), Tensor(), host_random({n}, rng, DType::F32, Layout::NCHW, 0.1),
                      Tensor::zeros({n}, DType::F32), Tensor::zeros({n}, DType::F32)};
      if (copy != DType::F32) one.copy = Tensor::empty({n}, copy);
      u.push_back(one);
    }
    if (with_nan) u[2].grad.data_as<float>()[3000] = NAN;
    return u;
  };
  auto bytes = [](const Tensor& t) {
    const auto* p = static_cast<const unsigned char*>(t.data());
    return std::vector<unsigned char>(p, p + t.nbytes());
  };
  for (int threads : {2, 3})
    for (SimdLevel level : {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512})
      for (bool adam : {false, true})
        for (bool with_nan : {false, true}) {
          CpuBackend b({threads, CpuBf16::Auto, false, ConvAlgorithm::Auto});
          const SimdLevel before = set_simd_limit(level);
          SCOPED_TRACE(std::to_string(threads) + " threads, the " + simd_level_name(simd_level()) + " path, " +
                       (adam ? "Adam" : "SGD") + (with_nan ? ", a NaN gradient" : ""));
          auto update = [&](std::vector<ParamUpdate>& u, bool check) {
            if (adam)
              b.adam_update(u, {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, false, 1, nullptr, nullptr, check});
            else
              b.sgd_update(u, {0.1f, 0.9f, 1e-4f, false, true, nullptr, nullptr, check});
          };
          std::vector<ParamUpdate> separate = updates(with_nan), checked = updates(with_nan);
          std::vector<Tensor*> grads;
          for (ParamUpdate& one : separate) grads.push_back(&one.grad);
          b.scale_and_check(grads, 1.0f);
          const StepScalars expected = b.read_scalars();
          update(separate, false);
          b.scale_and_check({&separate[0].grad}, 1.0f);  // whatever the check finds must come from the update's
          update(checked, true);
          const StepScalars found = b.read_scalars();
          EXPECT_EQ(found.nonfinite, with_nan);
          EXPECT_EQ(found.nonfinite, expected.nonfinite);
          if (!with_nan) {
            EXPECT_EQ(std::memcmp(&found.sum_of_squares, &expected.sum_of_squares, sizeof(double)), 0)
                << found.sum_of_squares << " against " << expected.sum_of_squares;
            double exact = 0;  // float64, element by element
            for (const ParamUpdate& one : checked)
              for (float g : to_float_vector(one.grad)) exact += static_cast<double>(g) * g;
            EXPECT_NEAR(found.sum_of_squares, exact, exact * 1e-12);
          }
          for (size_t i = 0; i < sizes.size(); ++i)
            for (auto [a, c] :
                 std::vector<std::pair<const Tensor*, const Tensor*>>{{&separate[i].param, &checked[i].param},
                                                                      {&separate[i].copy, &checked[i].copy},
                                                                      {&separate[i].state1, &checked[i].state1},
                                                                      {&separate[i].state2, &checked[i].state2}})
              if (a->defined()) {
                EXPECT_EQ(bytes(*a), bytes(*c)) << "parameter " << i;
              }
          set_simd_limit(before);
        }
  CpuBackend b({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  std::vector<ParamUpdate> u = updates(false);
  Tensor state = Tensor::zeros({kLossScaleStateBytes}, DType::U8);
  EXPECT_THROW(b.sgd_update(u, {0.1f, 0.9f, 0.0f, false, true, &state, nullptr, true}), Error)
      << "a check the update itself is gated by";
}

// An update given a 16-bit gradient (Capabilities::updates_read_16bit_gradients) computes with its values widened:
// the same weights, copies, optimizer state and check, bit for bit, as from the FP32 gradient holding those values;
// on every SIMD path, with thread counts that split the blocks unevenly, an inf among the 16-bit values found.
TEST(CpuBackend, UpdatesReadSixteenBitGradientsAsTheirWidenedValues) {
  EXPECT_TRUE(CpuBackend({2, CpuBf16::Auto, false, ConvAlgorithm::Auto}).capabilities().updates_read_16bit_gradients);
  const std::vector<std::pair<int64_t, DType>> sizes = {
      {1, DType::BF16}, {4097, DType::F16}, {3 * 2048 + 5, DType::BF16}, {5 * 2048, DType::F16}};
  auto updates = [&](bool low, bool with_inf) {
    Rng rng(13);
    std::vector<ParamUpdate> u;
    for (const auto& [n, dtype] : sizes) {
      Tensor low_grad = host_random({n}, rng, dtype, Layout::NCHW, 0.1);
      if (with_inf && n > 3000) low_grad.data_as<uint16_t>()[3000] = dtype == DType::BF16 ? 0x7f80 : 0x7c00;
      Tensor wide = Tensor::empty({n}, DType::F32);
      widen_16bit(dtype, low_grad.data_as<uint16_t>(), wide.data_as<float>(), n);
      u.push_back({host_random({n}, rng, DType::F32), Tensor::empty({n}, dtype), low ? low_grad : wide,
                   Tensor::zeros({n}, DType::F32), Tensor::zeros({n}, DType::F32)});
    }
    return u;
  };
  auto bytes = [](const Tensor& t) {
    const auto* p = static_cast<const unsigned char*>(t.data());
    return std::vector<unsigned char>(p, p + t.nbytes());
  };
  for (int threads : {2, 3})
    for (SimdLevel level : {SimdLevel::Scalar, SimdLevel::Avx512})
      for (bool adam : {false, true})
        for (bool with_inf : {false, true}) {
          CpuBackend b({threads, CpuBf16::Auto, false, ConvAlgorithm::Auto});
          const SimdLevel before = set_simd_limit(level);
          SCOPED_TRACE(std::to_string(threads) + " threads, the " + simd_level_name(simd_level()) + " path, " +
                       (adam ? "Adam" : "SGD") + (with_inf ? ", an inf gradient" : ""));
          auto update = [&](std::vector<ParamUpdate>& u) {
            for (int64_t step : {1, 2}) {  // the second reads the state the first wrote
              if (adam)
                b.adam_update(u, {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, false, step, nullptr, nullptr, true});
              else
                b.sgd_update(u, {0.1f, 0.9f, 1e-4f, false, step == 1, nullptr, nullptr, true});
            }
            return b.read_scalars();
          };
          std::vector<ParamUpdate> wide = updates(false, with_inf), low = updates(true, with_inf);
          const StepScalars from_wide = update(wide), from_low = update(low);
          EXPECT_EQ(from_low.nonfinite, with_inf);
          EXPECT_EQ(std::memcmp(&from_low.sum_of_squares, &from_wide.sum_of_squares, sizeof(double)), 0);
          for (size_t i = 0; i < sizes.size(); ++i) {
            EXPECT_EQ(bytes(low[i].param), bytes(wide[i].param)) << "parameter " << i;
            EXPECT_EQ(bytes(low[i].copy), bytes(wide[i].copy)) << "parameter " << i;
            EXPECT_EQ(bytes(low[i].state1), bytes(wide[i].state1)) << "parameter " << i;
            EXPECT_EQ(bytes(low[i].state2), bytes(wide[i].state2)) << "parameter " << i;
          }
          set_simd_limit(before);
        }
  CpuBackend b({2, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  std::vector<ParamUpdate> u = updates(true, false);
  u[1].grad = Tensor::zeros({4096}, DType::F16);
  EXPECT_THROW(b.sgd_update(u, {0.1f, 0.9f, 0.0f, false, true}), Error) << "a gradient of another shape";
}

}  // namespace
}  // namespace ampwb::testing
