// Every CPU backend op, forward and backward, against the float64 reference: random shapes with odd sizes,
// stride 1 and 2, padding, batch 1, in both layouts. FP32 relative error under 1e-5.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "nn/loss.h"
#include "op_test_util.h"

namespace ampwb {
namespace {
using testing::empty_f32;
using testing::kFp32Tolerance;
using testing::random_tensor;
using testing::relative_error;

CpuBackend& backend() {
  static CpuBackend b({2});
  return b;
}

struct ConvCase {
  int64_t N, C, H, W, K, R;
  int stride, padding;
  Layout layout;
};

std::string conv_case_name(const ::testing::TestParamInfo<ConvCase>& info) {
  const ConvCase& c = info.param;
  return "N" + std::to_string(c.N) + "C" + std::to_string(c.C) + "H" + std::to_string(c.H) + "W" + std::to_string(c.W) +
         "K" + std::to_string(c.K) + "R" + std::to_string(c.R) + "s" + std::to_string(c.stride) + "p" +
         std::to_string(c.padding) + layout_name(c.layout);
}

class ConvOp : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvOp, ForwardAndBackwardMatchReference) {
  const ConvCase& c = GetParam();
  Rng rng(1);
  const ConvParams p{c.stride, c.padding};
  const int64_t P = (c.H + 2 * c.padding - c.R) / c.stride + 1, Q = (c.W + 2 * c.padding - c.R) / c.stride + 1;
  Tensor x = random_tensor({c.N, c.C, c.H, c.W}, rng, c.layout);
  Tensor w = random_tensor({c.K, c.C, c.R, c.R}, rng);
  Tensor dy = random_tensor({c.N, c.K, P, Q}, rng, c.layout);
  Tensor y = empty_f32({c.N, c.K, P, Q}, c.layout), dx = empty_f32(x.shape(), c.layout), dw = empty_f32(w.shape());
  backend().conv2d_forward(x, w, y, p);
  backend().conv2d_backward_data(dy, w, dx, p);
  backend().conv2d_backward_weights(x, dy, dw, p);
  const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w), rdy = ref::from_tensor(dy);
  EXPECT_LT(relative_error(y, ref::conv2d_forward(rx, rw, c.stride, c.padding)), kFp32Tolerance);
  EXPECT_LT(relative_error(dx, ref::conv2d_backward_data(rdy, rw, x.shape(), c.stride, c.padding)), kFp32Tolerance);
  EXPECT_LT(relative_error(dw, ref::conv2d_backward_weights(rx, rdy, w.shape(), c.stride, c.padding)), kFp32Tolerance);
}

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> cases;
  for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
    cases.push_back({1, 3, 7, 7, 5, 3, 1, 1, layout});    // batch 1, odd sizes
    cases.push_back({2, 4, 9, 11, 6, 3, 2, 1, layout});   // stride 2, non-square
    cases.push_back({3, 5, 8, 8, 4, 1, 2, 0, layout});    // 1x1 stride 2 (projection shortcut)
    cases.push_back({2, 3, 13, 13, 8, 7, 2, 3, layout});  // the 7x7 stem
    cases.push_back({1, 16, 5, 5, 16, 3, 1, 0, layout});  // no padding
    cases.push_back({2, 6, 10, 7, 3, 5, 1, 2, layout});
    cases.push_back({2, 32, 6, 6, 24, 3, 2, 1, layout});  // wider channels (vectorised paths)
    cases.push_back({2, 64, 4, 4, 16, 1, 1, 0, layout});  // bottleneck 1x1 reduce (oneDNN's 1x1 kernels)
    cases.push_back({2, 16, 5, 5, 64, 1, 1, 0, layout});  // bottleneck 1x1 expand
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Shapes, ConvOp, ::testing::ValuesIn(conv_cases()), conv_case_name);

struct Nchw {
  int64_t N, C, H, W;
  Layout layout;
};
std::string nchw_name(const ::testing::TestParamInfo<Nchw>& info) {
  const Nchw& c = info.param;
  return "N" + std::to_string(c.N) + "C" + std::to_string(c.C) + "H" + std::to_string(c.H) + "W" + std::to_string(c.W) +
         layout_name(c.layout);
}
std::vector<Nchw> nchw_cases() {
  std::vector<Nchw> cases;
  for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
    cases.push_back({1, 3, 5, 5, layout});
    cases.push_back({4, 7, 3, 2, layout});
    cases.push_back({2, 16, 8, 8, layout});
    cases.push_back({3, 33, 4, 5, layout});
  }
  return cases;
}

class BatchNormOp : public ::testing::TestWithParam<Nchw> {};

TEST_P(BatchNormOp, TrainingInferenceAndBackwardMatchReference) {
  const Nchw& c = GetParam();
  Rng rng(2);
  const float eps = 1e-5f, momentum = 0.1f;
  Tensor x = random_tensor({c.N, c.C, c.H, c.W}, rng, c.layout, 2.0);
  Tensor gamma = random_tensor({c.C}, rng), beta = random_tensor({c.C}, rng);
  Tensor dy = random_tensor(x.shape(), rng, c.layout);
  Tensor running_mean = random_tensor({c.C}, rng), running_var = empty_f32({c.C});
  for (int64_t i = 0; i < c.C; ++i) running_var.data_as<float>()[i] = 0.5f + static_cast<float>(i) / c.C;
  const ref::Array old_mean = ref::from_tensor(running_mean), old_var = ref::from_tensor(running_var);

  Tensor y = empty_f32(x.shape(), c.layout), mean = empty_f32({c.C}), var = empty_f32({c.C});
  backend().batchnorm_forward_training(x, gamma, beta, y, mean, var, running_mean, running_var, momentum, eps);
  const ref::Array rx = ref::from_tensor(x), rg = ref::from_tensor(gamma), rb = ref::from_tensor(beta);
  const ref::BatchNormResult expected = ref::batchnorm_forward_training(rx, rg, rb, eps);
  EXPECT_LT(relative_error(y, expected.y), kFp32Tolerance);
  EXPECT_LT(relative_error(mean, expected.mean), kFp32Tolerance);
  EXPECT_LT(relative_error(var, expected.var), kFp32Tolerance);

  // Running statistics as PyTorch: momentum 0.1, the unbiased batch variance.
  const double count = static_cast<double>(c.N * c.H * c.W);
  ref::Array want_mean({c.C}), want_var({c.C});
  for (int64_t i = 0; i < c.C; ++i) {
    want_mean.v[i] = 0.9 * old_mean.v[i] + 0.1 * expected.mean.v[i];
    want_var.v[i] = 0.9 * old_var.v[i] + 0.1 * expected.var.v[i] * count / (count - 1);
  }
  EXPECT_LT(relative_error(running_mean, want_mean), kFp32Tolerance);
  EXPECT_LT(relative_error(running_var, want_var), kFp32Tolerance);

  Tensor dx = empty_f32(x.shape(), c.layout), dgamma = empty_f32({c.C}), dbeta = empty_f32({c.C});
  backend().batchnorm_backward(x, dy, gamma, mean, var, dx, dgamma, dbeta, eps);
  const ref::BatchNormGrads grads = ref::batchnorm_backward(rx, ref::from_tensor(dy), rg, eps);
  EXPECT_LT(relative_error(dx, grads.dx), kFp32Tolerance);
  EXPECT_LT(relative_error(dgamma, grads.dgamma), kFp32Tolerance);
  EXPECT_LT(relative_error(dbeta, grads.dbeta), kFp32Tolerance);

  Tensor y_eval = empty_f32(x.shape(), c.layout);
  backend().batchnorm_forward_inference(x, gamma, beta, y_eval, running_mean, running_var, eps);
  EXPECT_LT(relative_error(y_eval, ref::batchnorm_forward_inference(rx, rg, rb, ref::from_tensor(running_mean),
                                                                    ref::from_tensor(running_var), eps)),
            kFp32Tolerance);
}
INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormOp, ::testing::ValuesIn(nchw_cases()), nchw_name);

class ElementwiseOps : public ::testing::TestWithParam<Nchw> {};

TEST_P(ElementwiseOps, ReluAddAndGlobalAvgPoolMatchReference) {
  const Nchw& c = GetParam();
  Rng rng(3);
  Tensor x = random_tensor({c.N, c.C, c.H, c.W}, rng, c.layout), b = random_tensor(x.shape(), rng, c.layout);
  Tensor dy = random_tensor(x.shape(), rng, c.layout);
  Tensor y = empty_f32(x.shape(), c.layout), dx = empty_f32(x.shape(), c.layout), sum = empty_f32(x.shape(), c.layout);
  backend().relu_forward(x, y);
  backend().relu_backward(y, dy, dx);
  backend().add(x, b, sum);
  const ref::Array ry = ref::relu_forward(ref::from_tensor(x));
  EXPECT_EQ(relative_error(y, ry), 0.0);
  EXPECT_EQ(relative_error(dx, ref::relu_backward(ry, ref::from_tensor(dy))), 0.0);
  EXPECT_LT(relative_error(sum, ref::add(ref::from_tensor(x), ref::from_tensor(b))), kFp32Tolerance);

  Tensor pooled = empty_f32({c.N, c.C}), dpooled = random_tensor({c.N, c.C}, rng);
  Tensor dpool_x = empty_f32(x.shape(), c.layout);
  backend().global_avgpool_forward(x, pooled);
  backend().global_avgpool_backward(dpooled, dpool_x);
  EXPECT_LT(relative_error(pooled, ref::global_avgpool_forward(ref::from_tensor(x))), kFp32Tolerance);
  EXPECT_LT(relative_error(dpool_x, ref::global_avgpool_backward(ref::from_tensor(dpooled), x.shape())),
            kFp32Tolerance);
}
INSTANTIATE_TEST_SUITE_P(Shapes, ElementwiseOps, ::testing::ValuesIn(nchw_cases()), nchw_name);

struct PoolCase {
  int64_t N, C, H, W;
  int kernel, stride, padding;
  Layout layout;
};

class MaxPoolOp : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPoolOp, ForwardAndBackwardMatchReference) {
  const PoolCase& c = GetParam();
  Rng rng(4);
  const PoolParams p{c.kernel, c.stride, c.padding};
  const int64_t P = (c.H + 2 * c.padding - c.kernel) / c.stride + 1;
  const int64_t Q = (c.W + 2 * c.padding - c.kernel) / c.stride + 1;
  Tensor x = random_tensor({c.N, c.C, c.H, c.W}, rng, c.layout), dy = random_tensor({c.N, c.C, P, Q}, rng, c.layout);
  Tensor y = empty_f32({c.N, c.C, P, Q}, c.layout), dx = empty_f32(x.shape(), c.layout), workspace;
  backend().maxpool_forward(x, y, workspace, p);
  backend().maxpool_backward(dy, workspace, dx, p);
  const ref::Array rx = ref::from_tensor(x);
  EXPECT_EQ(relative_error(y, ref::maxpool_forward(rx, c.kernel, c.stride, c.padding)), 0.0);
  EXPECT_LT(relative_error(dx, ref::maxpool_backward(rx, ref::from_tensor(dy), c.kernel, c.stride, c.padding)),
            kFp32Tolerance);
}

std::vector<PoolCase> pool_cases() {
  std::vector<PoolCase> cases;
  for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
    cases.push_back({1, 3, 7, 7, 3, 2, 1, layout});  // the ResNet stem's pool, odd size
    cases.push_back({2, 4, 8, 9, 2, 2, 0, layout});
    cases.push_back({2, 17, 11, 11, 3, 2, 1, layout});
    cases.push_back({1, 2, 5, 5, 3, 1, 1, layout});  // overlapping windows, stride 1
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Shapes, MaxPoolOp, ::testing::ValuesIn(pool_cases()),
                         [](const ::testing::TestParamInfo<PoolCase>& info) {
                           const PoolCase& c = info.param;
                           return "H" + std::to_string(c.H) + "W" + std::to_string(c.W) + "k" +
                                  std::to_string(c.kernel) + "s" + std::to_string(c.stride) + "p" +
                                  std::to_string(c.padding) + layout_name(c.layout);
                         });

TEST(LinearOp, ForwardAndBackwardMatchReference) {
  Rng rng(5);
  for (auto [N, I, O] : {std::tuple<int64_t, int64_t, int64_t>{1, 5, 3}, {7, 13, 10}, {16, 64, 100}}) {
    Tensor x = random_tensor({N, I}, rng), w = random_tensor({O, I}, rng), b = random_tensor({O}, rng);
    Tensor dy = random_tensor({N, O}, rng);
    Tensor y = empty_f32({N, O}), dx = empty_f32({N, I}), dw = empty_f32({O, I}), db = empty_f32({O});
    backend().linear_forward(x, w, b, y);
    backend().linear_backward(dy, x, w, dx, dw, db);
    const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w);
    EXPECT_LT(relative_error(y, ref::linear_forward(rx, rw, ref::from_tensor(b))), kFp32Tolerance);
    const ref::LinearGrads g = ref::linear_backward(ref::from_tensor(dy), rx, rw);
    EXPECT_LT(relative_error(dx, g.dx), kFp32Tolerance);
    EXPECT_LT(relative_error(dw, g.dw), kFp32Tolerance);
    EXPECT_LT(relative_error(db, g.db), kFp32Tolerance);
  }
}

TEST(SoftmaxCrossEntropyOp, LossAndGradientMatchReference) {
  Rng rng(6);
  for (double smoothing : {0.0, 0.1})
    for (float grad_scale : {1.0f, 1024.0f}) {
      Tensor logits = random_tensor({9, 5}, rng, Layout::NCHW, 3.0), labels = Tensor::empty({9}, DType::I32);
      std::vector<int32_t> label_values;
      for (int i = 0; i < 9; ++i)
        label_values.push_back(labels.data_as<int32_t>()[i] = static_cast<int32_t>(rng.below(5)));
      Tensor dlogits = empty_f32({9, 5});
      backend().softmax_cross_entropy(logits, labels, static_cast<float>(smoothing), grad_scale, dlogits);
      const StepScalars read = backend().read_scalars();
      ref::CrossEntropyResult expected = ref::softmax_cross_entropy(ref::from_tensor(logits), label_values, smoothing);
      for (double& d : expected.dlogits.v) d *= grad_scale;
      EXPECT_NEAR(read.loss, expected.loss, kFp32Tolerance * expected.loss);
      EXPECT_LT(relative_error(dlogits, expected.dlogits), kFp32Tolerance);
      EXPECT_EQ(read.correct, count_topk_correct(logits, labels, 1)) << "the top-1 count of the same pass";
    }
}

TEST(SoftmaxCrossEntropyOp, TopOneCountsTiesAgainstTheSample) {
  // Rows: the label strictly highest (counts), tied with another class (does not), below another (does not).
  const Tensor logits = tensor_from_floats({3, 1, 2, /**/ 2, 2, 0, /**/ 0, 1, 5}, {3, 3});
  const Tensor labels = tensor_from_floats({0, 1, 0}, {3}, DType::I32);
  Tensor dlogits = empty_f32({3, 3});
  backend().softmax_cross_entropy(logits, labels, 0.0f, 1.0f, dlogits);
  EXPECT_EQ(backend().read_scalars().correct, 1);
}

TEST(ScaleAndCheckOp, ScalesInPlaceAndReportsTheSumOfSquaresAndInfNan) {
  Tensor a = tensor_from_floats({1, -2, 3}, {3}), b = tensor_from_floats({0.5f}, {1});
  backend().scale_and_check({&a, &b}, 2.0f);
  StepScalars read = backend().read_scalars();
  EXPECT_EQ(to_float_vector(a), (std::vector<float>{2, -4, 6}));
  EXPECT_EQ(to_float_vector(b), (std::vector<float>{1}));
  EXPECT_FALSE(read.nonfinite);
  EXPECT_DOUBLE_EQ(read.sum_of_squares, 4 + 16 + 36 + 1);
  Tensor big = tensor_from_floats({3e38f}, {1});
  backend().scale_and_check({&a, &big}, 2.0f);  // the scaling itself overflows
  read = backend().read_scalars();
  EXPECT_TRUE(read.nonfinite);
  backend().scale_and_check({&a}, 1.0f);
  EXPECT_FALSE(backend().read_scalars().nonfinite) << "each call reports its own tensors";
}

TEST(ConvertOp, LayoutsAndDtypes) {
  Rng rng(7);
  Tensor x = random_tensor({2, 5, 3, 4}, rng, Layout::NCHW, 100.0);
  const std::vector<float> values = to_float_vector(x);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      Tensor converted = Tensor::empty(x.shape(), dtype, layout);
      backend().convert(x, converted);
      const std::vector<float> got = to_float_vector(converted);
      for (size_t i = 0; i < values.size(); ++i) {
        const float want = dtype == DType::F16    ? round_to_half(values[i])
                           : dtype == DType::BF16 ? round_to_bfloat16(values[i])
                                                  : values[i];
        ASSERT_EQ(got[i], want) << converted.describe() << " element " << i;
      }
    }
}

TEST(CpuBackend, ReportsIsaAndRefusesBadShapes) {
  EXPECT_NE(backend().description().find("oneDNN 2."), std::string::npos);
  EXPECT_TRUE(backend().supports(Op::Conv2d, DType::F16)) << "emulated: oneDNN 2.6 has no FP16 on the CPU";
  EXPECT_FALSE(backend().supports(Op::SgdUpdate, DType::F16)) << "optimizers update FP32 master weights";
  Tensor x = empty_f32({1, 3, 5, 5}), w = empty_f32({4, 2, 3, 3}), y = empty_f32({1, 4, 5, 5});
  EXPECT_THROW(backend().conv2d_forward(x, w, y, {1, 1}), Error);
}

}  // namespace
}  // namespace ampwb

namespace ampwb {
namespace {

TEST(SixteenBitOps, ReluAndAddMatchTheReferenceRoundedToTheStorageType) {
  Rng rng(8);
  for (DType dtype : {DType::F16, DType::BF16}) {
    auto rounded = [dtype](double v) {
      return dtype == DType::F16 ? round_to_half(static_cast<float>(v)) : round_to_bfloat16(static_cast<float>(v));
    };
    std::vector<float> a(3 * 5 * 4 * 4), b(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = rounded(rng.normal() * 3);
      b[i] = rounded(rng.normal() * 3);
    }
    a[0] = -0.0f;
    a[1] = 0.0f;
    const Tensor x = tensor_from_floats(a, {3, 5, 4, 4}, dtype, Layout::NHWC);
    const Tensor z = tensor_from_floats(b, {3, 5, 4, 4}, dtype, Layout::NHWC);
    Tensor y = Tensor::empty(x.shape(), dtype, Layout::NHWC), dx = Tensor::empty(x.shape(), dtype, Layout::NHWC);
    Tensor sum = Tensor::empty(x.shape(), dtype, Layout::NHWC);
    backend().relu_forward(x, y);
    backend().relu_backward(y, z, dx);
    backend().add(x, z, sum);
    const std::vector<float> got_y = to_float_vector(y), got_dx = to_float_vector(dx), got_sum = to_float_vector(sum);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(got_y[i], a[i] > 0 ? a[i] : 0.0f) << dtype_name(dtype) << " relu " << i;
      ASSERT_EQ(got_dx[i], a[i] > 0 ? b[i] : 0.0f) << dtype_name(dtype) << " relu backward " << i;
      ASSERT_EQ(got_sum[i], rounded(static_cast<double>(a[i]) + b[i])) << dtype_name(dtype) << " add " << i;
    }
  }
}

}  // namespace
}  // namespace ampwb
