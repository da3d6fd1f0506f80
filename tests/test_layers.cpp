// Finite-difference gradient checks of every layer and of a whole tiny ResNet, run through the CPU backend in FP32.
// The derivative of a scalar loss along random directions (input and every parameter at once) is compared with
// the one backward() gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "amp/fp8_scaling.h"
#include "amp/policy.h"
#include "backend/cpu/cpu_backend.h"
#include "core/fp8.h"
#include "models/resnet.h"
#include "nn/activation.h"
#include "nn/batchnorm2d.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "op_test_util.h"

namespace ampwb {
namespace {
using testing::random_tensor;

CpuBackend& backend() {
  static CpuBackend b({2});
  return b;
}

double dot(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = to_float_vector(a), y = to_float_vector(b);
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += static_cast<double>(x[i]) * y[i];
  return s;
}

// t += step * direction, elementwise (same shape and layout).
void axpy(Tensor& t, double step, const Tensor& direction) {
  float* p = t.data_as<float>();
  const float* d = direction.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] += static_cast<float>(step * d[i]);
}

// Compares the analytic directional derivative of loss() with a central difference, for `directions` random
// directions over the input (when it has a gradient) and every parameter.
void check_directional_derivatives(Layer& layer, Tensor x, bool input_has_grad, double h, double tolerance,
                                   int directions = 3) {
  Rng rng(99);
  std::vector<Parameter*> params;
  layer.collect_parameters(params);
  const Tensor y = layer.forward(x, Mode::Train);
  const Tensor r = random_tensor(y.shape(), rng, y.layout());
  auto loss = [&] { return dot(r, layer.forward(x, Mode::Train)); };
  layer.forward(x, Mode::Train);
  const Tensor dx = layer.backward(r);
  ASSERT_EQ(dx.defined(), input_has_grad);
  for (int d = 0; d < directions; ++d) {
    const Tensor vx = random_tensor(x.shape(), rng, x.layout());
    std::vector<Tensor> vp;
    double analytic = input_has_grad ? dot(dx, vx) : 0.0;
    for (Parameter* p : params) {
      vp.push_back(random_tensor(p->value.shape(), rng));
      analytic += dot(p->grad, vp.back());
    }
    auto move = [&](double step) {
      if (input_has_grad) axpy(x, step, vx);
      for (size_t i = 0; i < params.size(); ++i) axpy(params[i]->value, step, vp[i]);
    };
    move(h);
    const double up = loss();
    move(-2 * h);
    const double down = loss();
    move(h);
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(numeric, analytic, tolerance * std::max(1.0, std::fabs(analytic)))
        << "direction " << d << ": numeric " << numeric << " analytic " << analytic;
  }
}

TEST(LayerGradients, Conv2d) {
  Rng rng(1);
  for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
    Conv2d conv(backend(), "conv", 3, 5, 3, 2, 1, rng);
    check_directional_derivatives(conv, random_tensor({2, 3, 7, 6}, rng, layout), true, 1e-2, 2e-3);
  }
  Conv2d stem(backend(), "stem", 3, 4, 7, 2, 3, rng);
  stem.set_input_needs_grad(false);
  check_directional_derivatives(stem, random_tensor({2, 3, 9, 9}, rng, Layout::NHWC), false, 1e-2, 2e-3);
}

TEST(LayerGradients, BatchNorm2d) {
  Rng rng(2);
  for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
    BatchNorm2d bn(backend(), "bn", 6);
    check_directional_derivatives(bn, random_tensor({3, 6, 4, 5}, rng, layout, 3.0), true, 1e-2, 5e-3);
  }
}

// A batch norm with its ReLU fused in (Backend::batchnorm_relu_*) gives the bits of a batch norm layer followed by a
// ReLU layer, forward and backward, in every storage type and layout.
TEST(FusedBatchNormRelu, SameBitsAsTheTwoLayers) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (layout == Layout::NHWC ? " nhwc" : " nchw"));
      Rng rng(7);
      BatchNorm2d fused(backend(), "bn", 6, /*relu=*/true);
      Sequential separate(backend());
      auto& bn = static_cast<BatchNorm2d&>(separate.add(std::make_unique<BatchNorm2d>(backend(), "bn", 6)));
      separate.add(std::make_unique<ReLU>(backend()));
      for (int step = 0; step < 2; ++step) {  // the second with running statistics the first one moved
        Tensor x = Tensor::empty({3, 6, 4, 5}, dtype, layout), dy = Tensor::empty(x.shape(), dtype, layout);
        backend().convert(random_tensor(x.shape(), rng, layout, 3.0), x);
        backend().convert(random_tensor(x.shape(), rng, layout), dy);
        const Tensor y_fused = fused.forward(x, Mode::Train), y_separate = separate.forward(x, Mode::Train);
        EXPECT_EQ(to_float_vector(y_fused), to_float_vector(y_separate)) << "forward";
        int negative = 0;
        for (float v : to_float_vector(y_fused)) negative += v == 0.0f;
        EXPECT_GT(negative, 20) << "the ReLU must have zeros to make";
        EXPECT_EQ(to_float_vector(fused.backward(dy)), to_float_vector(separate.backward(dy))) << "dx";
        EXPECT_EQ(to_float_vector(fused.gamma().grad), to_float_vector(bn.gamma().grad)) << "dgamma";
        EXPECT_EQ(to_float_vector(fused.running_var().value), to_float_vector(bn.running_var().value));
        EXPECT_EQ(to_float_vector(fused.forward(x, Mode::Eval)), to_float_vector(separate.forward(x, Mode::Eval)));
      }
    }
}

// Two ranks in one process, a thread each, for synchronised batch norm: sum() returns on both once both have called
// it, with each rank's data become rank 0's plus rank 1's (the same bits on both, as an all-reduce).
class TwoRankSum {
 public:
  void sum(int rank, double* data, size_t count) {
    std::unique_lock lock(mutex_);
    const uint64_t round = round_;
    data_[rank] = data;
    if (++arrived_ < 2) {
      summed_.wait(lock, [&] { return round_ != round; });
      return;
    }
    for (size_t i = 0; i < count; ++i) data_[0][i] = data_[1][i] = data_[0][i] + data_[1][i];
    arrived_ = 0;
    ++round_;
    summed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable summed_;
  double* data_[2] = {};
  int arrived_ = 0;
  uint64_t round_ = 0;
};

ref::Array concatenated(const ref::Array& a, const ref::Array& b) {  // along N
  ref::Array out = a;
  out.shape[0] += b.shape[0];
  out.v.insert(out.v.end(), b.v.begin(), b.v.end());
  return out;
}

ref::Array rounded(const ref::Array& a, DType dtype) {  // what a perfect backend would store
  return ref::from_tensor(tensor_from_floats(std::vector<float>(a.v.begin(), a.v.end()), a.shape, dtype));
}

// Synchronised batch norm on two ranks holding half a batch each gives the float64 reference's batch norm of the
// whole batch: its output, input gradient and running statistics on each rank, and its gamma and beta gradients as
// the ranks' sum (the gradient reducer then averages them, and the loss being each rank's mean, that average is the
// whole batch's). The halves differ in mean, so that a rank's own statistics are far from the whole batch's.
TEST(SynchronisedBatchNorm, TwoRanksWithHalfTheBatchEachGiveTheWholeBatch) {
  using testing::Kernel;
  using testing::Precision;
  for (Precision precision : {Precision::FP32, Precision::FP16, Precision::BF16})
    for (bool relu : {false, true}) {
      const DType dtype = testing::storage_dtype(precision);
      const Layout layout = relu ? Layout::NHWC : Layout::NCHW;
      SCOPED_TRACE(std::string(testing::precision_name(precision)) + (relu ? " with relu, nhwc" : " nchw"));
      constexpr int kChannels = 6;
      const Shape half{2, kChannels, 4, 5};
      Rng rng(59);
      Tensor x[2], dy[2];
      for (int r = 0; r < 2; ++r) {
        std::vector<float> values = to_float_vector(random_tensor(half, rng, Layout::NCHW, 3.0));
        for (float& v : values) v += 2.0f * static_cast<float>(r) + 1.0f;
        x[r] = tensor_from_floats(values, half, dtype, layout);
        dy[r] = tensor_from_floats(to_float_vector(random_tensor(half, rng)), half, dtype, layout);
      }
      const Tensor gamma = random_tensor({kChannels}, rng), beta = random_tensor({kChannels}, rng);

      TwoRankSum rank_sum;
      ref::Array y[2], dx[2], dgamma[2], dbeta[2], running_mean[2], running_var[2], own_y[2];
      auto rank = [&](int r, bool synchronised) {
        CpuBackend backend({1});  // a backend each: its primitive cache is one thread's
        BatchNorm2d bn(backend, "bn", kChannels, relu);
        backend.convert(gamma, bn.gamma().value);
        backend.convert(beta, bn.beta().value);
        if (!synchronised) {
          own_y[r] = ref::from_tensor(bn.forward(x[r], Mode::Train));
          return;
        }
        bn.set_rank_sum([&rank_sum, r](double* data, size_t count) { rank_sum.sum(r, data, count); });
        y[r] = ref::from_tensor(bn.forward(x[r], Mode::Train));
        dx[r] = ref::from_tensor(bn.backward(dy[r]));
        dgamma[r] = ref::from_tensor(bn.gamma().grad);
        dbeta[r] = ref::from_tensor(bn.beta().grad);
        running_mean[r] = ref::from_tensor(bn.running_mean().value);
        running_var[r] = ref::from_tensor(bn.running_var().value);
      };
      std::thread other(rank, 1, true);
      rank(0, true);
      other.join();
      rank(0, false);
      rank(1, false);

      const ref::Array x_all = concatenated(ref::from_tensor(x[0]), ref::from_tensor(x[1]));
      const ref::Array dy_all = concatenated(ref::from_tensor(dy[0]), ref::from_tensor(dy[1]));
      const ref::Array g = ref::from_tensor(gamma), b = ref::from_tensor(beta);
      constexpr double kEps = 1e-5;
      const ref::BatchNormResult want = ref::batchnorm_forward_training(x_all, g, b, kEps);
      const ref::Array got_y = concatenated(y[0], y[1]);
      // The ReLU's mask from the output the layer made: a value the rounding takes to the other side of 0 is
      // either side's.
      const ref::BatchNormGrads grads =
          ref::batchnorm_backward(x_all, relu ? ref::relu_backward(got_y, dy_all) : dy_all, g, kEps);

      const double forward = testing::tolerance(Kernel::BatchNormTraining, precision);
      const double backward = testing::tolerance(Kernel::BatchNormBackward, precision);
      const double fp32 = testing::tolerance(Kernel::BatchNormBackward, Precision::FP32);
      const ref::Array want_y = rounded(relu ? ref::relu_forward(want.y) : want.y, dtype);
      EXPECT_LE(testing::relative_error(got_y, want_y), forward) << "y";
      EXPECT_GT(testing::relative_error(concatenated(own_y[0], own_y[1]), want_y), 0.1)
          << "each rank's own statistics must be far from the whole batch's, or the test proves nothing";
      EXPECT_LE(testing::relative_error(concatenated(dx[0], dx[1]), rounded(grads.dx, dtype)), backward) << "dx";
      ref::Array dgamma_sum = dgamma[0], dbeta_sum = dbeta[0];
      for (int c = 0; c < kChannels; ++c) {
        dgamma_sum.v[c] += dgamma[1].v[c];
        dbeta_sum.v[c] += dbeta[1].v[c];
      }
      EXPECT_LE(testing::relative_error(dgamma_sum, grads.dgamma), fp32) << "dgamma";
      EXPECT_LE(testing::relative_error(dbeta_sum, grads.dbeta), fp32) << "dbeta";
      ref::Array want_mean = want.mean, want_var = want.var;  // PyTorch's update from 0 and 1, the variance unbiased
      const double count = static_cast<double>(x_all.v.size()) / kChannels;
      for (int c = 0; c < kChannels; ++c) {
        want_mean.v[c] *= 0.1;
        want_var.v[c] = 0.9 + 0.1 * want_var.v[c] * count / (count - 1);
      }
      for (int r = 0; r < 2; ++r) {
        EXPECT_LE(testing::relative_error(running_mean[r], want_mean), fp32) << "running mean, rank " << r;
        EXPECT_LE(testing::relative_error(running_var[r], want_var), fp32) << "running variance, rank " << r;
      }
      EXPECT_EQ(running_var[0].v, running_var[1].v) << "the ranks' running statistics differ";
    }
}

// Where the backend emulates a 16-bit dtype, Conv2d widens the output gradient once for both of its gradients
// (each op alone would widen it again): the bits of the two backend ops called on the 16-bit tensors themselves.
TEST(Conv2dBackward, WideningTheGradientOnceKeepsTheBitsOfTheOps) {
  for (const char* mode : {"amp-fp16", "amp-bf16"}) {
    SCOPED_TRACE(mode);
    const PrecisionPolicy policy{precision_preset(mode)};
    const DType low = policy.low();
    Rng rng(11);
    Conv2d conv(backend(), "conv", 8, 6, 3, 1, 1, rng);
    conv.set_policy(policy);
    Tensor x = Tensor::empty({2, 8, 5, 5}, low, Layout::NHWC), dy = Tensor::empty({2, 6, 5, 5}, low, Layout::NHWC);
    backend().convert(random_tensor(x.shape(), rng, Layout::NHWC), x);
    const Tensor dy32 = random_tensor(dy.shape(), rng, Layout::NHWC);  // as an FP32 layer after it would send it
    backend().convert(dy32, dy);                                       // rounded, as the layer must round it
    conv.forward(x, Mode::Train);
    const Tensor dx = conv.backward(dy32);

    Tensor w = Tensor::empty(conv.weight().value.shape(), low);
    backend().convert(conv.weight().value, w);
    Tensor dx_ops = Tensor::empty(x.shape(), low, Layout::NHWC), dw_ops = Tensor::empty(w.shape(), low);
    backend().conv2d_backward_data(dy, w, dx_ops, conv.params());
    backend().conv2d_backward_weights(x, dy, dw_ops, conv.params());
    EXPECT_EQ(to_float_vector(dx), to_float_vector(dx_ops)) << "dx";
    EXPECT_EQ(to_float_vector(conv.weight().grad), to_float_vector(dw_ops)) << "dw";
  }
}

// Where the backend emulates a 16-bit dtype, a batch norm hands the convolution before it the gradient wide (FP32
// holding the 16-bit values) instead of a 16-bit one the convolution would widen: the same bits everywhere. (BF16
// emulated on every CPU, as on those where oneDNN's would be slower or absent.)
CpuBackend& emulating_backend() {
  static CpuBackend b({2, CpuBf16::Emulated});
  return b;
}

TEST(ConvBatchNormPair, TheWideGradientKeepsTheBitsOfTheSixteenBitOne) {
  for (const char* mode : {"amp-fp16", "amp-bf16"})
    for (bool relu : {true, false})
      for (Layout layout : {Layout::NHWC, Layout::NCHW}) {
        SCOPED_TRACE(std::string(mode) + (relu ? " relu" : "") + (layout == Layout::NHWC ? " nhwc" : " nchw"));
        const PrecisionPolicy policy{precision_preset(mode)};
        const DType low = policy.low();
        struct Pair {
          Pair(Rng& rng, bool relu)
              : conv(emulating_backend(), "conv", 8, 16, 3, 1, 1, rng), bn(emulating_backend(), "bn", 16, relu) {}
          Conv2d conv;
          BatchNorm2d bn;
        };
        auto make = [&](bool wide) {
          Rng rng(13);  // the same weights for both
          auto pair = std::make_unique<Pair>(rng, relu);
          pair->conv.set_policy(policy);
          pair->bn.set_policy(policy);
          pair->conv.set_output_grad_wide(wide);
          pair->bn.set_input_grad_wide(wide);
          return pair;
        };
        auto wide = make(true), narrow = make(false);
        Rng rng(14);
        Tensor x = Tensor::empty({2, 8, 6, 5}, low, layout), dy = Tensor::empty({2, 16, 6, 5}, low, layout);
        emulating_backend().convert(random_tensor(x.shape(), rng, layout), x);
        emulating_backend().convert(random_tensor(dy.shape(), rng, layout), dy);
        EXPECT_EQ(to_float_vector(wide->bn.forward(wide->conv.forward(x, Mode::Train), Mode::Train)),
                  to_float_vector(narrow->bn.forward(narrow->conv.forward(x, Mode::Train), Mode::Train)));
        const Tensor g_wide = wide->bn.backward(dy), g_narrow = narrow->bn.backward(dy);
        EXPECT_EQ(g_wide.dtype(), DType::F32) << "the wide path was not taken";
        EXPECT_EQ(g_narrow.dtype(), low);
        EXPECT_EQ(to_float_vector(g_wide), to_float_vector(g_narrow)) << "the gradient between them";
        EXPECT_EQ(to_float_vector(wide->conv.backward(g_wide)), to_float_vector(narrow->conv.backward(g_narrow)))
            << "dx";
        EXPECT_EQ(to_float_vector(wide->conv.weight().grad), to_float_vector(narrow->conv.weight().grad)) << "dw";
        EXPECT_EQ(to_float_vector(wide->bn.gamma().grad), to_float_vector(narrow->bn.gamma().grad)) << "dgamma";
      }
}

// ---- amp-fp8: convolutions and linear layers on FP8 values with delayed scaling ---------------------------------

const PrecisionPolicy& fp8_policy(bool first_and_last = false) {
  static const PrecisionPolicy plain(precision_preset(PrecisionMode::AmpFp8)), edges = [] {
    PrecisionConfig c = precision_preset(PrecisionMode::AmpFp8);
    c.fp8.first_and_last = true;
    return PrecisionPolicy(c);
  }();
  return first_and_last ? edges : plain;
}

double amax_of(const Tensor& t) {
  double m = 0;
  for (float v : to_float_vector(t)) m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

// t's values as a cast with `scale` leaves them (FP8 values times 1/scale), in float64 for the reference ops.
ref::Array fp8_rounded(const Tensor& t, Fp8Format format, float scale) {
  ref::Array a = ref::from_tensor(t);
  for (double& v : a.v) v = static_cast<double>(round_to_fp8(format, static_cast<float>(v) * scale)) / scale;
  return a;
}

// What a step does at its end (MixedPrecisionStep: the scalings of its recorded casts updated), then the host's copy
// fetched for the test to read.
void end_step(Fp8LayerScaling& s) {
  std::vector<Fp8ScalingUpdate> updates;
  for (Fp8TensorScaling* t : s.tensors())
    if (const std::optional<Fp8ScalingUpdate> u = t->take_update()) updates.push_back(*u);
  backend().update_fp8_scalings(updates);
  s.fetch(backend());
}

// Two training steps of an FP8 convolution: the first casts with scale 1 (nothing seen yet, as Transformer Engine
// starts), the second with the scales the first step's amaxes gave. The second step's output and gradients are the
// float64 reference of the FP8-rounded operands (the emulation computes exactly that, then rounds once to BF16 or
// FP32), and the reference of the unrounded ones within FP8's own rounding (op_tolerances.h's FP8 rows).
TEST(Fp8Layers, Conv2dComputesOnScaledFp8ValuesAndFollowsTheAmax) {
  Rng rng(21);
  Conv2d conv(backend(), "conv", 8, 6, 3, 1, 1, rng);
  conv.set_policy(fp8_policy());
  ASSERT_NE(conv.fp8_scaling(), nullptr);
  const Tensor x = random_tensor({2, 8, 6, 6}, rng, Layout::NHWC, 3.0),
               dy = random_tensor({2, 6, 6, 6}, rng, Layout::NHWC, 1e-3);
  Fp8LayerScaling& s = *conv.fp8_scaling();
  for (int step = 0; step < 2; ++step) {
    conv.forward(x, Mode::Train);
    conv.backward(dy);
    end_step(s);
  }
  // After each step the scale puts the history's amax at the format's max (margin 0).
  EXPECT_FLOAT_EQ(s.input.scaling().scale(), kE4M3Max / static_cast<float>(amax_of(x)));
  EXPECT_FLOAT_EQ(s.output_grad.scaling().scale(), kE5M2Max / static_cast<float>(amax_of(dy)));
  EXPECT_EQ(s.input.last().amax, static_cast<float>(amax_of(x)));
  EXPECT_EQ(s.input.last().scale, s.input.scaling().scale()) << "the amax did not change: nor did the scale";

  const std::vector<float> history = s.input.scaling().amax_history();
  const Tensor y = conv.forward(x, Mode::Train);
  const Tensor dx = conv.backward(dy);
  end_step(s);
  const float sx = s.input.last().scale, sw = s.weight.last().scale, sdy = s.output_grad.last().scale;
  EXPECT_EQ(y.dtype(), DType::BF16) << "what an FP8 convolution hands on";
  EXPECT_NE(s.input.scaling().amax_history(), history) << "a training step records its amax";
  const ref::Array qx = fp8_rounded(x, Fp8Format::E4M3, sx), qw = fp8_rounded(conv.weight().value, Fp8Format::E4M3, sw);
  const ref::Array qdy = fp8_rounded(dy, Fp8Format::E5M2, sdy);
  using testing::Kernel;
  using testing::Precision;
  const double bf16 = testing::tolerance(Kernel::Conv2dForward, Precision::BF16);
  EXPECT_LE(testing::relative_error(y, ref::conv2d_forward(qx, qw, 1, 1)), bf16);
  EXPECT_LE(testing::relative_error(dx, ref::conv2d_backward_data(qdy, qw, x.shape(), 1, 1)), bf16);
  EXPECT_LE(testing::relative_error(conv.weight().grad,
                                    ref::conv2d_backward_weights(qx, qdy, conv.weight().value.shape(), 1, 1)),
            testing::tolerance(Kernel::Conv2dBackwardWeights, Precision::FP32));

  const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(conv.weight().value), rdy = ref::from_tensor(dy);
  EXPECT_LE(testing::relative_error(y, ref::conv2d_forward(rx, rw, 1, 1)),
            testing::tolerance(Kernel::Conv2dForward, Precision::FP8) + bf16);
  EXPECT_LE(testing::relative_error(dx, ref::conv2d_backward_data(rdy, rw, x.shape(), 1, 1)),
            testing::tolerance(Kernel::Conv2dBackwardData, Precision::FP8) + bf16);
  EXPECT_LE(testing::relative_error(conv.weight().grad, ref::conv2d_backward_weights(rx, rdy, rw.shape, 1, 1)),
            testing::tolerance(Kernel::Conv2dBackwardWeights, Precision::FP8));

  // Evaluation casts with the scales as they are and records nothing.
  const std::vector<float> before = s.input.scaling().amax_history();
  conv.forward(x, Mode::Eval);
  EXPECT_EQ(s.input.scaling().amax_history(), before);
}

// A training cast's amax joins its scaling when its update is queued, where the scaling lives (a step queues them
// at its end, so that a GPU's step never waits for the host), and at the latest by the tensor's next recorded cast,
// which then uses the updated scale; an evaluation cast queues nothing. The host reads the scaling as last fetched;
// a probe reads a cast before its update.
TEST(Fp8Layers, ACastsAmaxIsTakenByItsUpdateOrByTheNextRecordedCast) {
  Rng rng(24);
  const Tensor x = random_tensor({4, 16}, rng, Layout::NCHW, 10.0);
  const auto amax = static_cast<float>(amax_of(x));
  Fp8TensorScaling t(backend(), Fp8Format::E4M3, {}, false);
  t.cast(backend(), x, true);
  t.fetch(backend());
  EXPECT_EQ(t.last().scale, 1.0f) << "nothing seen yet: scale 1";
  EXPECT_EQ(t.last().amax, amax) << "the cast's statistics, before its update";
  EXPECT_THROW(t.scaling(), Error) << "its update waits";
  const Tensor q1 = t.cast(backend(), x, false);
  EXPECT_EQ(amax_of(q1), round_to_fp8(Fp8Format::E4M3, amax)) << "an evaluation cast between uses the scale as it is";
  const std::optional<Fp8ScalingUpdate> update = t.take_update();
  ASSERT_TRUE(update);
  backend().update_fp8_scalings({*update});
  EXPECT_FALSE(t.take_update()) << "nothing waits: the amax is not taken twice";
  t.fetch(backend());
  EXPECT_FLOAT_EQ(t.scaling().scale(), kE4M3Max / amax);
  EXPECT_EQ(t.last().scale, 1.0f) << "the scale the cast used";
  const std::vector<float>& history = t.scaling().amax_history();
  EXPECT_EQ(std::count(history.begin(), history.end(), amax), 1);
  EXPECT_EQ(history.back(), amax);

  Fp8TensorScaling u(backend(), Fp8Format::E4M3, {}, false);
  u.cast(backend(), x, true);
  const Tensor q2 = u.cast(backend(), x, true);  // the first cast's update comes first, then this cast with its scale
  EXPECT_EQ(amax_of(q2), kE4M3Max) << "the largest value cast to the format's max";
  u.fetch(backend());
  EXPECT_FLOAT_EQ(u.last().scale, kE4M3Max / amax);
  EXPECT_EQ(u.last().amax, amax);
}

// Transformer Engine's E4M3 formats: the output gradient in E4M3 as well, scaled to E4M3's max, and the data
// gradient computed from its E4M3 values.
TEST(Fp8Layers, AllE4M3CastsTheOutputGradientInE4M3) {
  PrecisionConfig config = precision_preset(PrecisionMode::AmpFp8);
  config.fp8.formats = Fp8Formats::E4M3;
  const PrecisionPolicy policy(config);
  Rng rng(23);
  Conv2d conv(backend(), "conv", 8, 6, 3, 1, 1, rng);
  conv.set_policy(policy);
  const Tensor x = random_tensor({2, 8, 6, 6}, rng, Layout::NHWC, 3.0),
               dy = random_tensor({2, 6, 6, 6}, rng, Layout::NHWC, 1e-3);
  conv.forward(x, Mode::Train);
  conv.backward(dy);
  Fp8LayerScaling& s = *conv.fp8_scaling();
  end_step(s);
  EXPECT_EQ(s.output_grad.format(), Fp8Format::E4M3);
  EXPECT_FLOAT_EQ(s.output_grad.scaling().scale(), kE4M3Max / static_cast<float>(amax_of(dy)));
  conv.forward(x, Mode::Train);
  const Tensor dx = conv.backward(dy);
  end_step(s);
  const ref::Array qdy = fp8_rounded(dy, Fp8Format::E4M3, s.output_grad.last().scale),
                   qw = fp8_rounded(conv.weight().value, Fp8Format::E4M3, s.weight.last().scale);
  EXPECT_LE(testing::relative_error(dx, ref::conv2d_backward_data(qdy, qw, x.shape(), 1, 1)),
            testing::tolerance(testing::Kernel::Conv2dForward, testing::Precision::BF16));
}

TEST(Fp8Layers, LinearComputesOnScaledFp8Values) {
  Rng rng(22);
  Linear fc(backend(), "fc", 24, 7, rng);
  fc.set_policy(fp8_policy());
  const Tensor x = random_tensor({5, 24}, rng), dy = random_tensor({5, 7}, rng, Layout::NCHW, 0.1);
  for (int step = 0; step < 2; ++step) {
    fc.forward(x, Mode::Train);
    fc.backward(dy);
  }
  const Tensor y = fc.forward(x, Mode::Train);
  const Tensor dx = fc.backward(dy);
  using testing::Kernel;
  using testing::Precision;
  const double bf16 = testing::tolerance(Kernel::LinearForward, Precision::BF16);
  const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(fc.weight().value);
  EXPECT_LE(testing::relative_error(y, ref::linear_forward(rx, rw, ref::from_tensor(fc.bias().value))),
            testing::tolerance(Kernel::LinearForward, Precision::FP8) + bf16);
  const ref::LinearGrads g = ref::linear_backward(ref::from_tensor(dy), rx, rw);
  const double fp8 = testing::tolerance(Kernel::LinearBackward, Precision::FP8);
  EXPECT_LE(testing::relative_error(dx, g.dx), fp8 + bf16);
  EXPECT_LE(testing::relative_error(fc.weight().grad, g.dw), fp8);
  EXPECT_LE(testing::relative_error(fc.bias().grad, g.db), fp8);
}

// The network's first and last layers stay in BF16 unless the setting includes them; a ResNet marks them.
TEST(Fp8Layers, TheFirstAndLastLayersStayInBf16UnlessTheSettingIncludesThem) {
  Rng rng(23);
  ResNet net(backend(), {20, 3, 3, 8, Stem::Auto}, rng);
  for (bool edges : {false, true}) {
    int fp8 = 0, layers = 0;
    std::vector<std::string> bf16;
    net.visit([&](Layer& layer) {
      layer.set_policy(fp8_policy(edges));
      auto* conv = dynamic_cast<Conv2d*>(&layer);
      auto* linear = dynamic_cast<Linear*>(&layer);
      if (!conv && !linear) return;
      ++layers;
      if (layer.fp8_scaling())
        ++fp8;
      else
        bf16.push_back(conv ? conv->weight().name : linear->weight().name);
    });
    if (edges) {
      EXPECT_EQ(fp8, layers);
    } else {
      EXPECT_EQ(bf16, (std::vector<std::string>{"conv1.weight", "fc.weight"}));
    }
  }
  const Tensor x = random_tensor({2, 3, 8, 8}, rng, Layout::NHWC);
  const Tensor logits = net.forward(x, Mode::Train);
  EXPECT_EQ(logits.dtype(), DType::BF16);
}

TEST(LayerGradients, Relu) {
  Rng rng(3);
  ReLU relu(backend());
  // Inputs at least 0.05 from the kink at 0, so the finite difference never straddles it.
  Tensor x = random_tensor({2, 4, 5, 5}, rng, Layout::NHWC);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float& v = x.data_as<float>()[i];
    v = v >= 0 ? v + 0.05f : v - 0.05f;
  }
  check_directional_derivatives(relu, x, true, 1e-3, 1e-3);
}

TEST(LayerGradients, MaxPool2d) {
  Rng rng(3);
  MaxPool2d pool(backend(), {3, 2, 1});
  check_directional_derivatives(pool, random_tensor({2, 3, 9, 9}, rng, Layout::NHWC), true, 1e-3, 1e-2);
}

TEST(LayerGradients, GlobalAvgPool) {
  Rng rng(3);
  GlobalAvgPool gap(backend());
  check_directional_derivatives(gap, random_tensor({2, 7, 3, 5}, rng, Layout::NHWC), true, 1e-2, 2e-3);
}

TEST(LayerGradients, Linear) {
  Rng rng(4);
  Linear fc(backend(), "fc", 9, 4, rng);
  check_directional_derivatives(fc, random_tensor({5, 9}, rng), true, 1e-2, 2e-3);
}

TEST(LayerGradients, SoftmaxCrossEntropy) {
  Rng rng(5);
  Tensor logits = random_tensor({6, 4}, rng, Layout::NCHW, 2.0), labels = Tensor::empty({6}, DType::I32);
  for (int i = 0; i < 6; ++i) labels.data_as<int32_t>()[i] = i % 4;
  SoftmaxCrossEntropy loss(backend(), 0.1f);
  loss.forward(logits, labels);
  const Tensor grad = loss.backward().clone();
  const Tensor v = random_tensor(logits.shape(), rng);
  const double h = 1e-2;
  axpy(logits, h, v);
  const double up = loss.forward_and_read(logits, labels);
  axpy(logits, -2 * h, v);
  const double down = loss.forward_and_read(logits, labels);
  EXPECT_NEAR((up - down) / (2 * h), dot(grad, v), 2e-3 * std::max(1.0, std::fabs(dot(grad, v))));
}

// A whole tiny ResNet: the loss's derivative along the gradient direction, and single weights of the stem, a
// middle convolution, a batch norm and the classifier.
void check_resnet_gradients(const ResNetConfig& config, int64_t batch) {
  Rng rng(6);
  ResNet model(backend(), config, rng);
  SoftmaxCrossEntropy loss(backend());
  const Tensor x = random_tensor({batch, 3, config.image_size, config.image_size}, rng, Layout::NHWC);
  Tensor labels = Tensor::empty({batch}, DType::I32);
  for (int64_t i = 0; i < batch; ++i) labels.data_as<int32_t>()[i] = static_cast<int32_t>(i % config.num_classes);
  auto loss_value = [&] { return static_cast<double>(loss.forward_and_read(model.forward(x, Mode::Train), labels)); };
  loss_value();
  model.backward(loss.backward());
  std::vector<Parameter*> params = model.parameters();
  std::vector<Tensor> grads;
  double norm2 = 0;
  for (Parameter* p : params) {
    grads.push_back(p->grad.clone());
    norm2 += dot(p->grad, p->grad);
  }
  const double norm = std::sqrt(norm2);
  ASSERT_GT(norm, 0);

  // Steps sized so the loss moves by about 0.01 (along the gradient) and 0.001 (one weight, where a max-pool
  // switch is likelier): large enough to stand above FP32 rounding, small enough for the
  // curvature of a deep network at initialisation (bottleneck ResNets are steep there).
  const double h = 1e-2 / norm;  // along the unit gradient direction
  for (size_t i = 0; i < params.size(); ++i) axpy(params[i]->value, h / norm, grads[i]);
  const double up = loss_value();
  for (size_t i = 0; i < params.size(); ++i) axpy(params[i]->value, -2 * h / norm, grads[i]);
  const double down = loss_value();
  for (size_t i = 0; i < params.size(); ++i) axpy(params[i]->value, h / norm, grads[i]);
  EXPECT_NEAR((up - down) / (2 * h), norm, 2e-2 * norm) << "derivative along the gradient";

  for (size_t index : {size_t{0}, params.size() / 3, params.size() / 2 + 1, params.size() - 2}) {
    Parameter& p = *params[index];
    const float* g = grads[index].data_as<float>();
    int64_t best = 0;  // the largest gradient entry of this tensor, well above float noise
    for (int64_t j = 1; j < p.value.numel(); ++j)
      if (std::fabs(g[j]) > std::fabs(g[best])) best = j;
    float& w = p.value.data_as<float>()[best];
    const float saved = w;
    const double step = 1e-3 / std::max(1.0, static_cast<double>(std::fabs(g[best])));
    w = saved + static_cast<float>(step);
    const double plus = loss_value();
    w = saved - static_cast<float>(step);
    const double minus = loss_value();
    w = saved;
    EXPECT_NEAR((plus - minus) / (2 * step), g[best], 5e-2 * std::fabs(g[best]) + 1e-4) << p.name;
  }
}

TEST(ResNetGradients, TinyCifarResNet20) { check_resnet_gradients({20, 3, 3, 8, Stem::Auto}, 4); }

TEST(ResNetGradients, ResNet18WithImageNetStemAndMaxPool) { check_resnet_gradients({18, 3, 3, 64, Stem::ImageNet}, 4); }

TEST(ResNetGradients, BottleneckResNet50) { check_resnet_gradients({50, 3, 3, 16, Stem::Small}, 4); }

}  // namespace
}  // namespace ampwb
