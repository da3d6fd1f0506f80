// The CUDA backend: every op against the float64 reference in every precision mode, the fused scale-and-check,
// the loss scaler on GPU tensors, conversions, memory accounting and out-of-memory reporting. These run only where
// a CUDA GPU is usable and skip (GTEST_SKIP, with the reason) elsewhere. The tests at the end run everywhere: how a
// build with CUDA behaves on a machine without a GPU.
//
// Tolerances, relative error max|a - b| / max|ref| (one table, each loosened value with its reason):
//   fp32  1e-5   FP32 storage and math, FP32 accumulation (the CPU backend's bound)
//   tf32  1e-3   convolution and linear inputs rounded to TF32's 10-bit mantissa inside the tensor cores
//   fp16  1e-2   outputs rounded to FP16 (11-bit significand: 2^-11 relative) after FP32 accumulation
//   bf16  1e-2   outputs rounded to BF16 (8-bit significand: 2^-8 = 0.4% relative)
// Inputs of 16-bit modes are generated in FP32, rounded to the storage type, and the reference is computed from the
// rounded values: the tolerance covers the op's own rounding only.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>

#include "amp/loss_scaler.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "core/half.h"
#include "nn/layer.h"
#include "nn/loss.h"
#include "op_test_util.h"
#include "optim/optimizer.h"

namespace ampwb {
namespace {
using testing::kFp32Tolerance;
using testing::relative_error;

constexpr const char* kNoGpu =
    "no usable CUDA GPU on this machine (cudaGetDeviceCount reports an error or 0 devices): GPU tests skipped";

bool have_gpu() { return cuda_device_count() > 0; }

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << kNoGpu

// One backend for the whole program: the caching allocator is per device, and its blocks are reused in stream
// order of one backend's compute stream.
CudaBackend& gpu() {
  static CudaBackend* backend = new CudaBackend();  // only ever created after have_gpu()
  return *backend;
}

CpuBackend& cpu() {
  static CpuBackend b({2});
  return b;
}

struct Mode {
  const char* name;
  DType dtype;
  bool tf32;
  double tolerance;
};
const Mode kFp32{"fp32", DType::F32, false, 1e-5};
const Mode kTf32{"tf32", DType::F32, true, 1e-3};
const Mode kFp16{"fp16", DType::F16, false, 1e-2};
const Mode kBf16{"bf16", DType::BF16, false, 1e-2};
const std::vector<Mode> kModes{kFp32, kTf32, kFp16, kBf16};
void PrintTo(const Mode& m, std::ostream* out) { *out << m.name; }

// Sets the backend's TF32 switch for the scope.
struct Tf32Scope {
  explicit Tf32Scope(bool on) { gpu().set_allow_tf32(on); }
  ~Tf32Scope() { gpu().set_allow_tf32(false); }
};

float rounded(float v, DType dtype) {
  return dtype == DType::F16 ? round_to_half(v) : dtype == DType::BF16 ? round_to_bfloat16(v) : v;
}

// A host tensor of normal values (times scale) representable in dtype.
Tensor host_random(Shape shape, Rng& rng, DType dtype, Layout layout = Layout::NCHW, double scale = 1.0) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = rounded(static_cast<float>(rng.normal() * scale), dtype);
  return tensor_from_floats(v, std::move(shape), dtype, layout);
}

Tensor to_gpu(const Tensor& host) {
  Tensor dev = Tensor::empty(host.shape(), host.dtype(), host.layout(), gpu().device());
  gpu().convert(host, dev);
  return dev;
}

Tensor to_host(const Tensor& dev) {
  Tensor host = Tensor::empty(dev.shape(), dev.dtype(), dev.layout());
  gpu().convert(dev, host);
  return host;
}

// An output tensor on the GPU filled with NaN, so that an element the op does not write fails the comparison.
Tensor gpu_nan(Shape shape, DType dtype, Layout layout = Layout::NCHW) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)), std::numeric_limits<float>::quiet_NaN());
  return to_gpu(tensor_from_floats(v, std::move(shape), dtype, layout));
}

double error(const Tensor& dev, const ref::Array& expected) { return relative_error(to_host(dev), expected); }

// ---- Convolution ------------------------------------------------------------------------------------------------

struct ConvCase {
  int64_t N, C, H, W, K, R;
  int stride, padding;
};

struct ConvParam {
  ConvCase c;
  Mode mode;
  Layout layout;
  Layout weight_layout;
};

void PrintTo(const ConvParam& p, std::ostream* out) {
  *out << p.mode.name << " x" << layout_name(p.layout) << " w" << layout_name(p.weight_layout);
}

std::string conv_name(const ::testing::TestParamInfo<ConvParam>& info) {
  const ConvCase& c = info.param.c;
  return std::string(info.param.mode.name) + "_N" + std::to_string(c.N) + "C" + std::to_string(c.C) + "H" +
         std::to_string(c.H) + "W" + std::to_string(c.W) + "K" + std::to_string(c.K) + "R" + std::to_string(c.R) + "s" +
         std::to_string(c.stride) + "p" + std::to_string(c.padding) + layout_name(info.param.layout) + "_w" +
         layout_name(info.param.weight_layout);
}

class CudaConv : public ::testing::TestWithParam<ConvParam> {};

TEST_P(CudaConv, ForwardAndBackwardMatchReference) {
  SKIP_WITHOUT_GPU();
  const ConvCase& c = GetParam().c;
  const Mode& mode = GetParam().mode;
  const Layout layout = GetParam().layout;
  Tf32Scope tf32(mode.tf32);
  Rng rng(11);
  const ConvParams p{c.stride, c.padding};
  const int64_t P = (c.H + 2 * c.padding - c.R) / c.stride + 1, Q = (c.W + 2 * c.padding - c.R) / c.stride + 1;
  const Tensor x = host_random({c.N, c.C, c.H, c.W}, rng, mode.dtype, layout);
  const Tensor w = host_random({c.K, c.C, c.R, c.R}, rng, mode.dtype, GetParam().weight_layout);
  const Tensor dy = host_random({c.N, c.K, P, Q}, rng, mode.dtype, layout);
  Tensor y = gpu_nan({c.N, c.K, P, Q}, mode.dtype, layout), dx = gpu_nan(x.shape(), mode.dtype, layout);
  Tensor dw = gpu_nan(w.shape(), mode.dtype, GetParam().weight_layout);
  const Tensor gx = to_gpu(x), gw = to_gpu(w), gdy = to_gpu(dy);
  gpu().conv2d_forward(gx, gw, y, p);
  gpu().conv2d_backward_data(gdy, gw, dx, p);
  gpu().conv2d_backward_weights(gx, gdy, dw, p);
  const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w), rdy = ref::from_tensor(dy);
  EXPECT_LT(error(y, ref::conv2d_forward(rx, rw, c.stride, c.padding)), mode.tolerance);
  EXPECT_LT(error(dx, ref::conv2d_backward_data(rdy, rw, x.shape(), c.stride, c.padding)), mode.tolerance);
  EXPECT_LT(error(dw, ref::conv2d_backward_weights(rx, rdy, w.shape(), c.stride, c.padding)), mode.tolerance);
}

std::vector<ConvParam> conv_params() {
  const std::vector<ConvCase> cases = {
      {1, 3, 7, 7, 5, 3, 1, 1},      // batch 1, odd sizes, 3 channels (padded to 8 in 16-bit NHWC)
      {2, 4, 9, 11, 6, 3, 2, 1},     // stride 2, non-square
      {3, 5, 8, 8, 4, 1, 2, 0},      // 1x1 stride 2 (projection shortcut), 5 channels (padded)
      {2, 3, 13, 13, 8, 7, 2, 3},    // the 7x7 stem
      {1, 16, 5, 5, 16, 3, 1, 0},    // no padding
      {2, 32, 6, 6, 24, 3, 2, 1},    // wider channels
      {2, 64, 4, 4, 16, 1, 1, 0},    // bottleneck 1x1 reduce
      {4, 64, 14, 14, 64, 3, 1, 1},  // a ResNet 3x3 block shape (tensor-core kernels)
  };
  std::vector<ConvParam> params;
  for (const ConvCase& c : cases) {
    for (const Mode& m : kModes) params.push_back({c, m, Layout::NHWC, Layout::NHWC});
    params.push_back({c, kFp32, Layout::NCHW, Layout::NCHW});
    params.push_back({c, kFp16, Layout::NHWC, Layout::NCHW});  // weights reordered per call
  }
  return params;
}
INSTANTIATE_TEST_SUITE_P(Shapes, CudaConv, ::testing::ValuesIn(conv_params()), conv_name);

TEST(CudaConvExtra, Fp32GradientOfFp16WeightsAndAlgorithmsCachedOncePerShape) {
  SKIP_WITHOUT_GPU();
  Rng rng(12);
  const ConvParams p{1, 1};
  const Tensor x = host_random({2, 3, 8, 8}, rng, DType::F16, Layout::NHWC);
  const Tensor dy = host_random({2, 8, 8, 8}, rng, DType::F16, Layout::NHWC);
  Tensor dw = gpu_nan({8, 3, 3, 3}, DType::F32);  // an FP32 gradient from FP16 activations, NCHW (KCRS)
  const size_t plans_before = gpu().conv_plans_cached();
  for (int i = 0; i < 3; ++i) gpu().conv2d_backward_weights(to_gpu(x), to_gpu(dy), dw, p);
  EXPECT_LE(gpu().conv_plans_cached(), plans_before + 1) << "one plan per shape, made once";
  EXPECT_LT(error(dw, ref::conv2d_backward_weights(ref::from_tensor(x), ref::from_tensor(dy), dw.shape(), 1, 1)),
            kFp16.tolerance);
  EXPECT_FALSE(gpu().conv_plans().empty());
}

// ---- Batch normalization ----------------------------------------------------------------------------------------

struct Nchw {
  int64_t N, C, H, W;
};
struct NchwParam {
  Nchw s;
  Mode mode;
  Layout layout;
};
void PrintTo(const NchwParam& p, std::ostream* out) { *out << p.mode.name << ' ' << layout_name(p.layout); }
std::string nchw_name(const ::testing::TestParamInfo<NchwParam>& info) {
  const Nchw& c = info.param.s;
  return std::string(info.param.mode.name) + "_N" + std::to_string(c.N) + "C" + std::to_string(c.C) + "H" +
         std::to_string(c.H) + "W" + std::to_string(c.W) + layout_name(info.param.layout);
}
std::vector<NchwParam> nchw_params() {
  std::vector<NchwParam> params;
  for (const Nchw& s : std::vector<Nchw>{{1, 3, 5, 5}, {4, 7, 3, 2}, {2, 16, 8, 8}, {3, 33, 4, 5}, {8, 64, 7, 7}})
    for (const Mode& m : {kFp32, kFp16, kBf16})
      for (Layout layout : {Layout::NCHW, Layout::NHWC}) params.push_back({s, m, layout});
  return params;
}

// FP32 statistics and parameter gradients from 16-bit activations: FP32 sums of many terms that partly cancel.
double stats_tolerance(const Mode& m) { return m.dtype == DType::F32 ? kFp32Tolerance : 1e-4; }

class CudaBatchNorm : public ::testing::TestWithParam<NchwParam> {};

TEST_P(CudaBatchNorm, TrainingInferenceAndBackwardMatchReference) {
  SKIP_WITHOUT_GPU();
  const Nchw& c = GetParam().s;
  const Mode& mode = GetParam().mode;
  const Layout layout = GetParam().layout;
  Rng rng(13);
  const float eps = 1e-5f, momentum = 0.1f;
  const Tensor x = host_random({c.N, c.C, c.H, c.W}, rng, mode.dtype, layout, 2.0);
  const Tensor dy = host_random(x.shape(), rng, mode.dtype, layout);
  const Tensor gamma = host_random({c.C}, rng, DType::F32), beta = host_random({c.C}, rng, DType::F32);
  Tensor running_mean = host_random({c.C}, rng, DType::F32), running_var = Tensor::empty({c.C}, DType::F32);
  for (int64_t i = 0; i < c.C; ++i) running_var.data_as<float>()[i] = 0.5f + static_cast<float>(i) / c.C;
  const ref::Array old_mean = ref::from_tensor(running_mean), old_var = ref::from_tensor(running_var);

  Tensor g_running_mean = to_gpu(running_mean), g_running_var = to_gpu(running_var);
  const Tensor gx = to_gpu(x), ggamma = to_gpu(gamma), gbeta = to_gpu(beta);
  Tensor y = gpu_nan(x.shape(), mode.dtype, layout), mean = gpu_nan({c.C}, DType::F32),
         var = gpu_nan({c.C}, DType::F32);
  gpu().batchnorm_forward_training(gx, ggamma, gbeta, y, mean, var, g_running_mean, g_running_var, momentum, eps);
  const ref::Array rx = ref::from_tensor(x), rg = ref::from_tensor(gamma), rb = ref::from_tensor(beta);
  const ref::BatchNormResult expected = ref::batchnorm_forward_training(rx, rg, rb, eps);
  EXPECT_LT(error(y, expected.y), mode.tolerance);
  EXPECT_LT(error(mean, expected.mean), stats_tolerance(mode));
  EXPECT_LT(error(var, expected.var), stats_tolerance(mode));
  const double count = static_cast<double>(c.N * c.H * c.W);
  ref::Array want_mean({c.C}), want_var({c.C});
  for (int64_t i = 0; i < c.C; ++i) {
    want_mean.v[i] = 0.9 * old_mean.v[i] + 0.1 * expected.mean.v[i];
    want_var.v[i] = 0.9 * old_var.v[i] + 0.1 * expected.var.v[i] * (count > 1 ? count / (count - 1) : 1.0);
  }
  EXPECT_LT(error(g_running_mean, want_mean), stats_tolerance(mode));
  EXPECT_LT(error(g_running_var, want_var), stats_tolerance(mode));

  Tensor dx = gpu_nan(x.shape(), mode.dtype, layout), dgamma = gpu_nan({c.C}, DType::F32);
  Tensor dbeta = gpu_nan({c.C}, DType::F32);
  gpu().batchnorm_backward(gx, to_gpu(dy), ggamma, mean, var, dx, dgamma, dbeta, eps);
  const ref::BatchNormGrads grads = ref::batchnorm_backward(rx, ref::from_tensor(dy), rg, eps);
  EXPECT_LT(error(dx, grads.dx), mode.tolerance);
  EXPECT_LT(error(dgamma, grads.dgamma), stats_tolerance(mode));
  EXPECT_LT(error(dbeta, grads.dbeta), stats_tolerance(mode));

  Tensor y_eval = gpu_nan(x.shape(), mode.dtype, layout);
  gpu().batchnorm_forward_inference(gx, ggamma, gbeta, y_eval, g_running_mean, g_running_var, eps);
  EXPECT_LT(error(y_eval, ref::batchnorm_forward_inference(rx, rg, rb, ref::from_tensor(to_host(g_running_mean)),
                                                           ref::from_tensor(to_host(g_running_var)), eps)),
            mode.tolerance);
}
INSTANTIATE_TEST_SUITE_P(Shapes, CudaBatchNorm, ::testing::ValuesIn(nchw_params()), nchw_name);

// ---- Elementwise and pooling --------------------------------------------------------------------------------------

class CudaElementwise : public ::testing::TestWithParam<NchwParam> {};

TEST_P(CudaElementwise, ReluAddAndGlobalAvgPoolMatchReference) {
  SKIP_WITHOUT_GPU();
  const Nchw& c = GetParam().s;
  const Mode& mode = GetParam().mode;
  const Layout layout = GetParam().layout;
  Rng rng(14);
  std::vector<float> a(static_cast<size_t>(c.N * c.C * c.H * c.W));
  for (float& v : a) v = rounded(static_cast<float>(rng.normal() * 3), mode.dtype);
  a[0] = -0.0f;
  if (a.size() > 1) a[1] = 0.0f;
  const Tensor x = tensor_from_floats(a, {c.N, c.C, c.H, c.W}, mode.dtype, layout);
  const Tensor b = host_random(x.shape(), rng, mode.dtype, layout, 3.0);
  const Tensor dy = host_random(x.shape(), rng, mode.dtype, layout);
  const Tensor gx = to_gpu(x);
  Tensor y = gpu_nan(x.shape(), mode.dtype, layout), dx = gpu_nan(x.shape(), mode.dtype, layout);
  Tensor sum = gpu_nan(x.shape(), mode.dtype, layout);
  gpu().relu_forward(gx, y);
  gpu().relu_backward(y, to_gpu(dy), dx);
  gpu().add(gx, to_gpu(b), sum);
  const ref::Array ry = ref::relu_forward(ref::from_tensor(x));
  EXPECT_EQ(error(y, ry), 0.0) << "ReLU is exact";
  EXPECT_EQ(error(dx, ref::relu_backward(ry, ref::from_tensor(dy))), 0.0);
  // The sum rounded once to the storage type: within one rounding of the exact sum.
  EXPECT_LT(error(sum, ref::add(ref::from_tensor(x), ref::from_tensor(b))),
            mode.dtype == DType::F32 ? kFp32Tolerance : mode.tolerance);
  // add with operands in different layouts (the interface allows it)
  const Layout other = layout == Layout::NHWC ? Layout::NCHW : Layout::NHWC;
  Tensor b_other = Tensor::empty(b.shape(), b.dtype(), other);
  cpu().convert(b, b_other);
  Tensor mixed = gpu_nan(x.shape(), mode.dtype, layout);
  gpu().add(gx, to_gpu(b_other), mixed);
  EXPECT_EQ(std::memcmp(to_host(mixed).data(), to_host(sum).data(), sum.nbytes()), 0);

  Tensor pooled = gpu_nan({c.N, c.C}, mode.dtype);
  const Tensor dpooled = host_random({c.N, c.C}, rng, mode.dtype);
  Tensor dpool_x = gpu_nan(x.shape(), mode.dtype, layout);
  gpu().global_avgpool_forward(gx, pooled);
  gpu().global_avgpool_backward(to_gpu(dpooled), dpool_x);
  EXPECT_LT(error(pooled, ref::global_avgpool_forward(ref::from_tensor(x))),
            mode.dtype == DType::F32 ? kFp32Tolerance : mode.tolerance);
  EXPECT_LT(error(dpool_x, ref::global_avgpool_backward(ref::from_tensor(dpooled), x.shape())),
            mode.dtype == DType::F32 ? kFp32Tolerance : mode.tolerance);
}
INSTANTIATE_TEST_SUITE_P(Shapes, CudaElementwise, ::testing::ValuesIn(nchw_params()), nchw_name);

struct PoolParam {
  int64_t N, C, H, W;
  int kernel, stride, padding;
  Mode mode;
  Layout layout;
};

void PrintTo(const PoolParam& p, std::ostream* out) { *out << p.mode.name << ' ' << layout_name(p.layout); }

class CudaMaxPool : public ::testing::TestWithParam<PoolParam> {};

TEST_P(CudaMaxPool, ForwardAndBackwardMatchReference) {
  SKIP_WITHOUT_GPU();
  const PoolParam& c = GetParam();
  Rng rng(15);
  const PoolParams p{c.kernel, c.stride, c.padding};
  const int64_t P = (c.H + 2 * c.padding - c.kernel) / c.stride + 1;
  const int64_t Q = (c.W + 2 * c.padding - c.kernel) / c.stride + 1;
  const Tensor x = host_random({c.N, c.C, c.H, c.W}, rng, c.mode.dtype, c.layout);
  const Tensor dy = host_random({c.N, c.C, P, Q}, rng, c.mode.dtype, c.layout);
  Tensor y = gpu_nan({c.N, c.C, P, Q}, c.mode.dtype, c.layout), dx = gpu_nan(x.shape(), c.mode.dtype, c.layout);
  Tensor workspace;
  gpu().maxpool_forward(to_gpu(x), y, workspace, p);
  gpu().maxpool_backward(to_gpu(dy), workspace, dx, p);
  const ref::Array rx = ref::from_tensor(x);
  EXPECT_EQ(error(y, ref::maxpool_forward(rx, c.kernel, c.stride, c.padding)), 0.0) << "a selection is exact";
  // Overlapping windows add up to ceil(k/s)^2 gradients in FP32, rounded once.
  EXPECT_LT(error(dx, ref::maxpool_backward(rx, ref::from_tensor(dy), c.kernel, c.stride, c.padding)),
            c.mode.dtype == DType::F32 ? kFp32Tolerance : c.mode.tolerance);
}

std::vector<PoolParam> pool_params() {
  std::vector<PoolParam> params;
  for (const Mode& m : {kFp32, kFp16, kBf16})
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      params.push_back({1, 3, 7, 7, 3, 2, 1, m, layout});  // the ResNet stem's pool, odd size
      params.push_back({2, 4, 8, 9, 2, 2, 0, m, layout});
      params.push_back({2, 17, 11, 11, 3, 2, 1, m, layout});
      params.push_back({1, 2, 5, 5, 3, 1, 1, m, layout});       // overlapping windows, stride 1
      params.push_back({4, 64, 112, 112, 3, 2, 1, m, layout});  // ResNet's stem pool at 224 px
    }
  return params;
}
INSTANTIATE_TEST_SUITE_P(Shapes, CudaMaxPool, ::testing::ValuesIn(pool_params()),
                         [](const ::testing::TestParamInfo<PoolParam>& info) {
                           const PoolParam& c = info.param;
                           return std::string(c.mode.name) + "_N" + std::to_string(c.N) + "C" + std::to_string(c.C) +
                                  "H" + std::to_string(c.H) + "W" + std::to_string(c.W) + "k" +
                                  std::to_string(c.kernel) + "s" + std::to_string(c.stride) + "p" +
                                  std::to_string(c.padding) + layout_name(c.layout);
                         });

// ---- Linear -------------------------------------------------------------------------------------------------------

class CudaLinear : public ::testing::TestWithParam<Mode> {};

TEST_P(CudaLinear, ForwardAndBackwardMatchReference) {
  SKIP_WITHOUT_GPU();
  const Mode& mode = GetParam();
  Tf32Scope tf32(mode.tf32);
  Rng rng(16);
  for (auto [N, I, O] : {std::tuple<int64_t, int64_t, int64_t>{1, 5, 3}, {7, 13, 10}, {16, 64, 100}, {64, 512, 1000}}) {
    const Tensor x = host_random({N, I}, rng, mode.dtype), w = host_random({O, I}, rng, mode.dtype);
    const Tensor b = host_random({O}, rng, mode.dtype), dy = host_random({N, O}, rng, mode.dtype);
    Tensor y = gpu_nan({N, O}, mode.dtype), dx = gpu_nan({N, I}, mode.dtype);
    Tensor dw = gpu_nan({O, I}, mode.dtype), db = gpu_nan({O}, mode.dtype);
    const Tensor gx = to_gpu(x), gw = to_gpu(w), gdy = to_gpu(dy);
    gpu().linear_forward(gx, gw, to_gpu(b), y);
    gpu().linear_backward(gdy, gx, gw, dx, dw, db);
    const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w);
    const std::string at = std::string(mode.name) + " N" + std::to_string(N) + " I" + std::to_string(I);
    EXPECT_LT(error(y, ref::linear_forward(rx, rw, ref::from_tensor(b))), mode.tolerance) << at;
    const ref::LinearGrads g = ref::linear_backward(ref::from_tensor(dy), rx, rw);
    EXPECT_LT(error(dx, g.dx), mode.tolerance) << at;
    EXPECT_LT(error(dw, g.dw), mode.tolerance) << at;
    EXPECT_LT(error(db, g.db), mode.dtype == DType::F32 ? kFp32Tolerance : mode.tolerance) << at;
    if (mode.dtype != DType::F32) {  // FP32 gradients straight from 16-bit products
      Tensor dw32 = gpu_nan({O, I}, DType::F32), db32 = gpu_nan({O}, DType::F32), none;
      gpu().linear_backward(gdy, gx, gw, none, dw32, db32);
      EXPECT_LT(error(dw32, g.dw), 1e-4) << at << ": FP32 output of FP32-accumulated products";
      EXPECT_LT(error(db32, g.db), 1e-5) << at;
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Modes, CudaLinear, ::testing::ValuesIn(kModes),
                         [](const ::testing::TestParamInfo<Mode>& info) { return std::string(info.param.name); });

// ---- Loss -----------------------------------------------------------------------------------------------------------

TEST(CudaSoftmaxCrossEntropy, LossAndGradientMatchReference) {
  SKIP_WITHOUT_GPU();
  Rng rng(17);
  for (auto [N, K] : {std::pair<int64_t, int64_t>{9, 5}, {256, 1000}, {3, 2000}})
    for (double smoothing : {0.0, 0.1})
      for (float grad_scale : {1.0f, 65536.0f}) {
        const Tensor logits = host_random({N, K}, rng, DType::F32, Layout::NCHW, 3.0);
        Tensor labels = Tensor::empty({N}, DType::I32);
        std::vector<int32_t> label_values;
        for (int64_t i = 0; i < N; ++i)
          label_values.push_back(labels.data_as<int32_t>()[i] = static_cast<int32_t>(rng.below(static_cast<int>(K))));
        Tensor dlogits = gpu_nan({N, K}, DType::F32);
        gpu().softmax_cross_entropy(to_gpu(logits), to_gpu(labels), static_cast<float>(smoothing), grad_scale, dlogits);
        const StepScalars read = gpu().read_scalars();
        ref::CrossEntropyResult expected =
            ref::softmax_cross_entropy(ref::from_tensor(logits), label_values, smoothing);
        for (double& d : expected.dlogits.v) d *= grad_scale;
        EXPECT_NEAR(read.loss, expected.loss, kFp32Tolerance * expected.loss) << "N" << N << " K" << K;
        EXPECT_LT(error(dlogits, expected.dlogits), kFp32Tolerance) << "N" << N << " K" << K;
        EXPECT_EQ(read.correct, count_topk_correct(logits, labels, 1)) << "N" << N << " K" << K;
      }
  Tensor logits = to_gpu(host_random({2, 3}, rng, DType::F32)), dlogits = gpu_nan({2, 3}, DType::F32);
  const Tensor bad = to_gpu(tensor_from_floats({0.0f, 3.0f}, {2}, DType::I32));
  try {
    gpu().softmax_cross_entropy(logits, bad, 0.0f, 1.0f, dlogits);
    gpu().read_scalars();
    FAIL() << "label 3 of 3 classes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 3 outside [0, 3)"), std::string::npos) << e.what();
  }
}

// ---- Conversions ----------------------------------------------------------------------------------------------------

TEST(CudaConvert, EveryDtypeAndLayoutBothWaysAndOnTheDevice) {
  SKIP_WITHOUT_GPU();
  Rng rng(18);
  const Tensor x = host_random({2, 5, 3, 4}, rng, DType::F32, Layout::NCHW, 100.0);
  const std::vector<float> values = to_float_vector(x);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      Tensor on_gpu = Tensor::empty(x.shape(), dtype, layout, gpu().device());
      gpu().convert(x, on_gpu);  // host FP32 NCHW -> device, converted on the GPU
      Tensor back = Tensor::empty(x.shape(), DType::F32, Layout::NHWC);
      gpu().convert(on_gpu, back);  // device -> host FP32 NHWC
      Tensor device_copy = Tensor::empty(x.shape(), DType::F32, Layout::NCHW, gpu().device());
      gpu().convert(on_gpu, device_copy);  // on the device
      const std::vector<float> got = to_float_vector(back), got2 = to_float_vector(to_host(device_copy));
      for (size_t i = 0; i < values.size(); ++i) {
        const float want = rounded(values[i], dtype);  // round to nearest even, as F16C and the CPU backend
        ASSERT_EQ(got[i], want) << dtype_name(dtype) << ' ' << layout_name(layout) << " element " << i;
        ASSERT_EQ(got2[i], want) << dtype_name(dtype) << ' ' << layout_name(layout) << " element " << i;
      }
    }
  // FP16 range: overflow to inf, below half the smallest subnormal to zero, signed zero kept.
  const Tensor edge = tensor_from_floats({65520.0f, 1e-8f, -0.0f, 65504.0f, -1e6f}, {5});
  Tensor half = Tensor::empty({5}, DType::F16, Layout::NCHW, gpu().device());
  gpu().convert(edge, half);
  const std::vector<float> h = to_float_vector(to_host(half));
  EXPECT_TRUE(std::isinf(h[0]) && h[0] > 0);
  EXPECT_EQ(h[1], 0.0f);
  EXPECT_TRUE(std::signbit(h[2]));
  EXPECT_EQ(h[3], 65504.0f);
  EXPECT_TRUE(std::isinf(h[4]) && h[4] < 0);
  // Labels and bytes travel exactly.
  const Tensor labels = tensor_from_floats({0, 7, 123456, 3}, {4}, DType::I32);
  EXPECT_EQ(to_float_vector(to_host(to_gpu(labels))), to_float_vector(labels));
}

TEST(CudaConvert, UploadIsWaitedForByItsFirstUse) {
  SKIP_WITHOUT_GPU();
  Rng rng(19);
  for (int i = 0; i < 4; ++i) {
    const Tensor batch = host_random({8, 3, 32, 32}, rng, DType::F16, Layout::NHWC);
    const Tensor dev = gpu().upload(batch);
    Tensor y = Tensor::empty(batch.shape(), DType::F16, Layout::NHWC, gpu().device());
    gpu().relu_forward(dev, y);  // the first use waits for the copy
    const std::vector<float> want = to_float_vector(batch), got = to_float_vector(to_host(y));
    for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(got[k], want[k] > 0 ? want[k] : 0.0f) << "batch " << i;
  }
}

// ---- Optimizers, scale-and-check, loss scaler ---------------------------------------------------------------------

TEST(CudaOptimizers, SgdAndAdamMatchTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  Rng rng(20);
  const int64_t n = 10007;
  for (bool nesterov : {false, true}) {
    Tensor w = host_random({n}, rng, DType::F32), buf = Tensor::zeros({n}, DType::F32);
    Tensor gw = to_gpu(w), gbuf = to_gpu(buf);
    for (int step = 0; step < 3; ++step) {
      const Tensor g = host_random({n}, rng, DType::F32);
      const SgdParams p{0.1f, 0.9f, 1e-4f, nesterov, step == 0};
      cpu().sgd_update(w, g, buf, p);
      gpu().sgd_update(gw, to_gpu(g), gbuf, p);
    }
    EXPECT_LT(relative_error(to_host(gw), ref::from_tensor(w)), 1e-6) << "nesterov " << nesterov;
    EXPECT_LT(relative_error(to_host(gbuf), ref::from_tensor(buf)), 1e-6) << "nesterov " << nesterov;
  }
  for (bool decoupled : {false, true}) {
    Tensor w = host_random({n}, rng, DType::F32), m = Tensor::zeros({n}, DType::F32),
           v = Tensor::zeros({n}, DType::F32);
    Tensor gw = to_gpu(w), gm = to_gpu(m), gv = to_gpu(v);
    for (int64_t step = 1; step <= 3; ++step) {
      const Tensor g = host_random({n}, rng, DType::F32);
      const AdamParams p{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, decoupled, step};
      cpu().adam_update(w, g, m, v, p);
      gpu().adam_update(gw, to_gpu(g), gm, gv, p);
    }
    EXPECT_LT(relative_error(to_host(gw), ref::from_tensor(w)), 1e-6) << "decoupled " << decoupled;
    EXPECT_LT(relative_error(to_host(gv), ref::from_tensor(v)), 1e-6) << "decoupled " << decoupled;
  }
}

TEST(CudaScaleAndCheck, OneLaunchOverManyTensorsScalesExactlyAndFindsInfAndNan) {
  SKIP_WITHOUT_GPU();
  Rng rng(21);
  // Sizes around the 4096-element chunk, an empty tensor, and one large enough for every block to loop.
  const std::vector<int64_t> sizes = {1, 4095, 4096, 4097, 0, 3, 1 << 20, 12345};
  std::vector<Tensor> host, dev;
  for (int64_t n : sizes) {
    host.push_back(host_random({n}, rng, DType::F32, Layout::NCHW, 100.0));
    dev.push_back(to_gpu(host.back()));
  }
  std::vector<Tensor*> ptrs;
  for (Tensor& t : dev) ptrs.push_back(&t);
  const float factor = static_cast<float>(1.0 / 65536.0);
  gpu().scale_and_check(ptrs, factor);
  const StepScalars r = gpu().read_scalars();
  double want = 0;
  for (size_t k = 0; k < host.size(); ++k) {
    const std::vector<float> before = to_float_vector(host[k]), after = to_float_vector(to_host(dev[k]));
    for (size_t i = 0; i < before.size(); ++i) {
      const float v = before[i] * factor;
      ASSERT_EQ(after[i], v) << "tensor " << k << " element " << i;
      want += static_cast<double>(v) * v;
    }
  }
  EXPECT_FALSE(r.nonfinite);
  EXPECT_NEAR(r.sum_of_squares, want, 1e-12 * want);
  gpu().scale_and_check(ptrs, 1.0f);
  const StepScalars again = gpu().read_scalars();
  EXPECT_EQ(again.sum_of_squares, r.sum_of_squares) << "deterministic: partials added in a fixed order";

  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> v(5000, 1.0f);
    v[4321] = bad;
    Tensor t = to_gpu(tensor_from_floats(v, {5000}));
    std::vector<Tensor*> with_bad = ptrs;
    with_bad.push_back(&t);
    gpu().scale_and_check(with_bad, 1.0f);
    EXPECT_TRUE(gpu().read_scalars().nonfinite) << bad;
  }
  // Overflow made by the scaling itself is found too.
  Tensor big = to_gpu(tensor_from_floats({3e38f}, {1}));
  gpu().scale_and_check({&big}, 2.0f);
  EXPECT_TRUE(gpu().read_scalars().nonfinite);
}

TEST(CudaLossScaler, DynamicScalingSkipsOverflowsAndUnscalesOnTheGpu) {
  SKIP_WITHOUT_GPU();
  LossScaleConfig c;
  c.growth_interval = 2;
  LossScaler scaler(c);
  Parameter p("w", tensor_from_floats({2.0f}, {1}));
  p.value = to_gpu(p.value);
  p.grad = to_gpu(tensor_from_floats({0.0f}, {1}));
  Sgd sgd(gpu(), {"sgd", 0.0f});  // no momentum: no optimizer state
  const std::vector<bool> finite = {false, true, true, true, false, true};
  const std::vector<double> after = {32768, 32768, 65536, 65536, 32768, 32768};
  for (size_t i = 0; i < finite.size(); ++i) {
    const float g = finite[i] ? scaler.scale() * 0.5f : std::numeric_limits<float>::infinity();
    gpu().convert(tensor_from_floats({g}, {1}), p.grad);
    const float before = to_float_vector(to_host(p.value))[0];
    const bool stepped = scaler.step(gpu(), {&p.grad}, [&] { sgd.step({&p}, 1.0f); });
    EXPECT_EQ(stepped, finite[i]) << "step " << i;
    const float now = to_float_vector(to_host(p.value))[0];
    if (stepped) {
      EXPECT_EQ(now, before - 0.5f) << "unscaled gradient 0.5 at step " << i;
    } else {
      EXPECT_EQ(now, before) << "a skipped step leaves the weight alone";
    }
    scaler.update();
    EXPECT_EQ(scaler.state().scale, after[i]) << "step " << i;
  }
}

// ---- Device, memory, errors -------------------------------------------------------------------------------------

TEST(CudaDevice, DescriptionMemoryAccountingAndOutOfMemory) {
  SKIP_WITHOUT_GPU();
  const std::string d = gpu().description();
  EXPECT_EQ(d.rfind("cuda:0 (", 0), 0u) << d;
  EXPECT_NE(d.find(cuda_devices().at(0).name), std::string::npos) << d;
  EXPECT_NE(d.find("GiB"), std::string::npos) << d;
  EXPECT_NE(d.find("cuDNN 9."), std::string::npos) << d;
  EXPECT_TRUE(gpu().supports(Op::Conv2d, DType::F16));
  EXPECT_TRUE(gpu().supports(Op::Conv2d, DType::BF16));
  EXPECT_FALSE(gpu().supports(Op::SgdUpdate, DType::F16));

  Allocator& allocator = allocator_for(gpu().device());
  allocator.reset_peak();
  const size_t live = allocator.stats().live_bytes;
  {
    Tensor a = Tensor::empty({64 << 20}, DType::U8, Layout::NCHW, gpu().device());
    EXPECT_GE(allocator.stats().live_bytes, live + (64u << 20));
  }
  EXPECT_EQ(allocator.stats().live_bytes, live);
  EXPECT_GE(allocator.stats().peak_live_bytes, live + (64u << 20));
  EXPECT_GE(allocator.stats().cached_bytes, 64u << 20) << "freed blocks are kept for reuse";
  EXPECT_EQ(gpu().memory_stats().peak_live_bytes, allocator.stats().peak_live_bytes);

  try {
    Tensor huge = Tensor::empty({int64_t{1} << 50}, DType::U8, Layout::NCHW, gpu().device());  // 1 PiB
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of GPU memory"), std::string::npos) << what;
    EXPECT_NE(what.find("smaller --batch-size"), std::string::npos) << what;
  }
  // The backend still works after the failure.
  const Tensor x = tensor_from_floats({-1.0f, 2.0f}, {2});
  Tensor y = Tensor::empty({2}, DType::F32, Layout::NCHW, gpu().device());
  gpu().relu_forward(to_gpu(x), y);
  EXPECT_EQ(to_float_vector(to_host(y)), (std::vector<float>{0.0f, 2.0f}));
}

TEST(CudaDevice, HostTensorsAreRefusedByNameAndAutoPicksTheGpu) {
  SKIP_WITHOUT_GPU();
  const Tensor host = tensor_from_floats({1.0f}, {1});
  Tensor out = Tensor::empty({1}, DType::F32, Layout::NCHW, gpu().device());
  try {
    gpu().relu_forward(host, out);
    FAIL() << "a host tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not on cuda:0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(make_backend("auto")->device(), Device::cuda(0));
  EXPECT_THROW(make_backend("cuda:" + std::to_string(cuda_device_count())), Error);
}

// ---- Without a GPU (these run on every machine of a CUDA build) ---------------------------------------------------

TEST(CudaWithoutGpu, CudaIsRefusedClearlyAndAutoPicksTheCpu) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present: the no-GPU behaviour cannot be observed here";
  for (const char* name : {"cuda", "cuda:0", "cuda:1"}) {
    try {
      make_backend(name);
      FAIL() << name << " accepted without a GPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no usable CUDA GPU"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(make_backend("auto", {1})->device(), Device::cpu());
  EXPECT_THROW(CudaBackend{}, Error);
  try {
    Tensor::empty({4}, DType::F32, Layout::NCHW, Device::cuda(0));
    FAIL() << "a CUDA tensor was allocated without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a usable CUDA device"), std::string::npos) << e.what();
  }
}

TEST(CudaWithoutGpu, MalformedDeviceNamesAreRefusedByName) {
  for (const char* name : {"cuda:", "cuda:x", "cuda0", "cuda:-1", "cudaa"}) {
    try {
      make_backend(name);
      FAIL() << name << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown device"), std::string::npos) << name << ": " << e.what();
    }
  }
}

TEST(CudaCheck, FailedCallsAreReportedWithTheCallAndTheError) {
  // Runs with or without a GPU: device 9999 never exists (and without a driver the call fails anyway).
  try {
    CUDA_CHECK(cudaSetDevice(9999));
    FAIL() << "cudaSetDevice(9999) succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUDA call cudaSetDevice(9999) failed: cudaError"), std::string::npos) << what;
    EXPECT_NE(what.find("test_cuda_ops.cpp"), std::string::npos) << what;
  }
  // With a GPU the failed call's error is cleared; without a driver the runtime's error 35 stays (sticky).
  if (have_gpu()) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed call's error is cleared";
  }
}

}  // namespace
}  // namespace ampwb
