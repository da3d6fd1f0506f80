// Mixed precision: the loss scaler against PyTorch's GradScaler semantics, FP16 emulation against the float64
// reference rounded to FP16, the op policy, an injected overflow, and every precision mode training for real.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "amp/grad_stats.h"
#include "amp/loss_scaler.h"
#include "amp/policy.h"
#include "amp/precision_overrides.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/multiply_add_rate.h"
#include "core/half.h"
#include "core/setting_error.h"
#include "forwarding_backend.h"
#include "image_folder_util.h"
#include "op_test_util.h"
#include "step_util.h"
#include "whole_step.h"
#include "train/mixed_precision_step.h"
#include "train/trainer.h"

namespace ampwb {
namespace {

CpuBackend& backend() {
  static CpuBackend b({2});
  return b;
}

// ---- Loss scaler -----------------------------------------------------------------------------------------------

struct ScalerStep {
  bool finite;
  double scale_used;
  bool skipped;
  double scale_after;
  int64_t tracker_after;
};

// Runs the scripted steps through the scaler with one parameter whose gradient is 1 or inf/NaN.
void expect_sequence(const LossScaleConfig& config, const std::vector<ScalerStep>& script) {
  LossScaler scaler(config);
  Parameter p("w", tensor_from_floats({2.0f}, {1}));
  Sgd sgd(backend(), {OptimizerKind::Sgd, 0.0f});
  for (size_t i = 0; i < script.size(); ++i) {
    const ScalerStep& s = script[i];
    EXPECT_EQ(scaler.scale(), s.scale_used) << "step " << i;
    p.grad.data_as<float>()[0] = s.finite ? scaler.scale() * 0.5f : (i % 2 ? NAN : INFINITY);
    const float before = p.value.data_as<float>()[0];
    const bool stepped = scaler.step(backend(), {&p.grad}, [&] { sgd.step({&p}, 1.0f); });
    EXPECT_EQ(!stepped, s.skipped) << "step " << i;
    if (stepped) {
      EXPECT_EQ(p.value.data_as<float>()[0], before - 0.5f) << "unscaled gradient at step " << i;
    }
    scaler.update();
    EXPECT_EQ(scaler.state().scale, s.scale_after) << "step " << i;
    EXPECT_EQ(scaler.state().growth_tracker, s.tracker_after) << "step " << i;
  }
}

TEST(LossScaler, DynamicSequenceFollowsPyTorchGradScaler) {
  // torch/amp/grad_scaler.py with init_scale 65536, growth 2, backoff 0.5, growth_interval 3: a non-finite step
  // is skipped, halves the scale and resets the tracker; three clean steps in a row double the scale.
  LossScaleConfig c;
  c.growth_interval = 3;
  expect_sequence(c, {{false, 65536, true, 32768, 0},
                      {false, 32768, true, 16384, 0},
                      {true, 16384, false, 16384, 1},
                      {true, 16384, false, 16384, 2},
                      {true, 16384, false, 32768, 0},
                      {true, 32768, false, 32768, 1},
                      {false, 32768, true, 16384, 0},
                      {true, 16384, false, 16384, 1},
                      {true, 16384, false, 16384, 2},
                      {true, 16384, false, 32768, 0},
                      {false, 32768, true, 16384, 0},
                      {true, 16384, false, 16384, 1}});
}

TEST(LossScaler, TheScaleIsKeptInFloat32AsPyTorchKeepsIt) {
  // GradScaler holds its scale in an FP32 tensor and its update kernel multiplies in double, then stores the product
  // rounded to FP32. Where the factors are not powers of two, a scale kept in double drifts from PyTorch's: with
  // backoff 0.7 by the second overflow, with growth 1.1 by the third growth.
  auto scales_after = [](LossScaleConfig c, bool finite, int steps) {
    LossScaler scaler(c);
    Parameter p("w", tensor_from_floats({2.0f}, {1}));
    Sgd sgd(backend(), {OptimizerKind::Sgd, 0.0f});
    std::vector<double> scales;
    for (int i = 0; i < steps; ++i) {
      p.grad.data_as<float>()[0] = finite ? 1.0f : INFINITY;
      scaler.step(backend(), {&p.grad}, [&] { sgd.step({&p}, 0.0f); });
      scaler.update();
      scales.push_back(scaler.state().scale);
    }
    return scales;
  };
  LossScaleConfig backoff;
  backoff.backoff_factor = 0.7;
  float want = 65536.0f;
  for (const double scale : scales_after(backoff, false, 4)) {
    want = static_cast<float>(double{want} * 0.7);
    EXPECT_EQ(scale, want);
  }
  LossScaleConfig growth;
  growth.init_scale = 1.0;
  growth.growth_factor = 1.1;
  growth.growth_interval = 1;
  want = 1.0f;
  for (const double scale : scales_after(growth, true, 4)) {
    want = static_cast<float>(double{want} * 1.1);
    EXPECT_EQ(scale, want);
  }
  growth.init_scale = 0.1;  // not an FP32 number: PyTorch's torch.full(..., dtype=float32) rounds it
  EXPECT_EQ(LossScaler(growth).state().scale, static_cast<double>(0.1f));
}

// PyTorch's own torch.amp.GradScaler, recorded by scripts/gradscaler_trace.py over thousands of scripted steps
// (tests/golden/gradscaler_trace.json): the same gradients through this scaler must give, at every step, the scale
// used, the skip, the scale after update() and the growth tracker that PyTorch gave.
TEST(LossScaler, FollowsTheRecordedPyTorchGradScalerStepForStep) {
  std::ifstream in(AMPWB_GRADSCALER_TRACE);
  ASSERT_TRUE(in) << "cannot read " AMPWB_GRADSCALER_TRACE " (scripts/gradscaler_trace.py writes it)";
  const nlohmann::json trace = nlohmann::json::parse(in);
  ASSERT_EQ(trace.at("format"), "ampwb gradscaler trace 1");
  const nlohmann::json& gradients = trace.at("gradients");
  auto gradient = [&](const std::string& kind) {  // the loss is sum(w * g): g per kind of step
    const nlohmann::json& g = gradients.at(kind);
    return g.is_string() ? std::strtof(g.get<std::string>().c_str(), nullptr) : g.get<float>();
  };
  ASSERT_FALSE(trace.at("configs").empty());
  for (const nlohmann::json& config : trace.at("configs")) {
    const nlohmann::json& settings = config.at("scaler");
    LossScaleConfig c;  // dynamic, hysteresis 1, no minimum or maximum: PyTorch's
    c.init_scale = settings.at("init_scale");
    c.growth_factor = settings.at("growth_factor");
    c.backoff_factor = settings.at("backoff_factor");
    c.growth_interval = settings.at("growth_interval");
    LossScaler scaler(c);
    Parameter p("w", tensor_from_floats({0.0f}, {1}));
    Sgd sgd(backend(), {OptimizerKind::Sgd, 0.0f});
    const nlohmann::json& steps = config.at("steps");
    ASSERT_GT(steps.size(), 100u);
    int64_t skipped = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const nlohmann::json& step = steps[i];  // gradient, scale used, skipped, scale after, growth tracker after
      const std::string where = config.at("name").get<std::string>() + ", step " + std::to_string(i);
      ASSERT_EQ(scaler.scale(), step[1].get<double>()) << where;
      p.value.data_as<float>()[0] = 0.0f;
      p.grad.data_as<float>()[0] = scaler.scale() * gradient(step[0]);  // autograd's FP32 product: may overflow
      const bool stepped = scaler.step(backend(), {&p.grad}, [&] { sgd.step({&p}, 1e-3f); });
      scaler.update();
      ASSERT_EQ(!stepped, step[2].get<bool>()) << where << " (" << step[0] << ")";
      ASSERT_EQ(scaler.state().scale, step[3].get<double>()) << where;
      ASSERT_EQ(scaler.state().growth_tracker, step[4].get<int64_t>()) << where;
      skipped += !stepped;
    }
    EXPECT_GT(skipped, 0) << config.at("name") << ": the trace skips steps";
    EXPECT_LT(skipped, static_cast<int64_t>(steps.size())) << config.at("name") << ": and applies others";
  }
}

TEST(LossScaler, DefaultsArePyTorchs) {
  const LossScaleConfig c;
  EXPECT_EQ(c.init_scale, 65536.0);
  EXPECT_EQ(c.growth_factor, 2.0);
  EXPECT_EQ(c.backoff_factor, 0.5);
  EXPECT_EQ(c.growth_interval, 2000);
  EXPECT_EQ(loss_scale_preset("tensorflow").init_scale, 32768.0);
  EXPECT_EQ(loss_scale_preset("apex").max_scale, 16777216.0);
  EXPECT_EQ(loss_scale_preset("deepspeed").hysteresis, 2);
  EXPECT_EQ(loss_scale_preset("deepspeed").min_scale, 1.0);
  EXPECT_THROW(loss_scale_preset("mxnet"), Error);
}

// The resolver the CLI and the GUI share: the mode's preset, a framework's scaler under the mode's kind, then each
// override given.
TEST(PrecisionOverrides, PresetThenScalerPresetThenOverrides) {
  const PrecisionConfig bf16 = precision_preset(PrecisionMode::AmpBf16);
  const PrecisionConfig fp16 = precision_preset(PrecisionMode::AmpFp16);
  ASSERT_NE(bf16.loss_scale.kind, fp16.loss_scale.kind);  // off and dynamic
  const PrecisionConfig plain = resolve_precision(PrecisionMode::AmpBf16);
  EXPECT_EQ(plain.mode, PrecisionMode::AmpBf16);
  EXPECT_TRUE(plain.master_weights);
  EXPECT_EQ(plain.loss_scale.kind, bf16.loss_scale.kind);

  const PrecisionConfig deepspeed = resolve_precision(PrecisionMode::AmpBf16, {.scaler_preset = "deepspeed"});
  EXPECT_EQ(deepspeed.loss_scale.kind, bf16.loss_scale.kind);  // the mode's kind, DeepSpeed's numbers
  EXPECT_EQ(deepspeed.loss_scale.hysteresis, 2);

  const PrecisionConfig changed = resolve_precision(PrecisionMode::AmpBf16, {.scaler_preset = "deepspeed",
                                                                             .loss_scale_kind = fp16.loss_scale.kind,
                                                                             .master_weights = false,
                                                                             .init_scale = 128.0,
                                                                             .hysteresis = 5});
  EXPECT_EQ(changed.mode, PrecisionMode::AmpBf16);
  EXPECT_EQ(changed.loss_scale.kind, fp16.loss_scale.kind);
  EXPECT_FALSE(changed.master_weights);
  EXPECT_EQ(changed.loss_scale.init_scale, 128.0);
  EXPECT_EQ(changed.loss_scale.hysteresis, 5);
  EXPECT_EQ(changed.loss_scale.min_scale, 1.0);  // DeepSpeed's, not overridden
  EXPECT_THROW(resolve_precision(PrecisionMode::Fp32, {.scaler_preset = "mxnet"}), Error);
}

// overrides_of says what a configuration changed on its mode's preset, so that another mode can take the same
// changes: resolved with its own mode, it gives the configuration back; a preset has none.
TEST(PrecisionOverrides, WhatAConfigChangedOnItsPresetResolvesBackToIt) {
  for (const PrecisionModeInfo& info : kPrecisionModes) {
    const PrecisionOverrides none = overrides_of(precision_preset(info.mode));
    EXPECT_FALSE(none.loss_scale_kind || none.master_weights || none.init_scale || none.growth_factor ||
                 none.backoff_factor || none.growth_interval || none.hysteresis || none.min_scale || none.max_scale)
        << info.name;
    const PrecisionConfig changed = resolve_precision(info.mode, {.scaler_preset = "deepspeed",
                                                                  .loss_scale_kind = LossScaleKind::Static,
                                                                  .master_weights = false,
                                                                  .init_scale = 128.0,
                                                                  .growth_interval = 7});
    TrainConfig again, expected;
    again.precision = resolve_precision(info.mode, overrides_of(changed));
    expected.precision = changed;
    EXPECT_EQ(config_to_json_text(again), config_to_json_text(expected)) << info.name;
  }
  const PrecisionOverrides fp16 = overrides_of(resolve_precision(PrecisionMode::AmpFp16, {.growth_interval = 100}));
  const PrecisionConfig bf16 = resolve_precision(PrecisionMode::AmpBf16, fp16);
  EXPECT_EQ(bf16.loss_scale.growth_interval, 100);
  EXPECT_EQ(bf16.loss_scale.kind, precision_preset(PrecisionMode::AmpBf16).loss_scale.kind);  // not fp16's own
}

TEST(LossScaler, HysteresisMinimumMaximumAndGrowthToInfinity) {
  LossScaleConfig deepspeed = loss_scale_preset("deepspeed");
  deepspeed.growth_interval = 2;
  // Hysteresis 2: the first overflow is skipped without backing off, the second backs off.
  expect_sequence(deepspeed, {{false, 65536, true, 65536, 0},
                              {false, 65536, true, 32768, 0},
                              {true, 32768, false, 32768, 1},
                              {true, 32768, false, 65536, 0}});
  LossScaleConfig bounded;
  bounded.init_scale = 4;
  bounded.min_scale = 2;
  bounded.max_scale = 8;
  bounded.growth_interval = 1;
  expect_sequence(bounded,
                  {{true, 4, false, 8, 0}, {true, 8, false, 8, 0}, {false, 8, true, 4, 0}, {false, 4, true, 2, 0}});
  LossScaler at_minimum(bounded);
  at_minimum.load_state({2, 0, 1});
  Parameter p("w", tensor_from_floats({1.0f}, {1}));
  p.grad.data_as<float>()[0] = INFINITY;
  Sgd sgd(backend(), {OptimizerKind::Sgd, 0.0f});
  at_minimum.step(backend(), {&p.grad}, [&] { sgd.step({&p}, 1.0f); });
  at_minimum.update();
  EXPECT_TRUE(at_minimum.collapsed()) << "overflowing at the minimum scale cannot recover";

  LossScaleConfig huge;
  huge.init_scale = std::ldexp(1.0, 127);
  huge.growth_interval = 1;
  expect_sequence(huge, {{true, std::ldexp(1.0, 127), false, std::ldexp(1.0, 127), 0}});  // 2^128 is inf in FP32
}

TEST(LossScaler, StaticAndOffNeverSkipAndIllegalOrdersAreRefused) {
  LossScaleConfig fixed;
  fixed.kind = LossScaleKind::Static;
  fixed.init_scale = 128;
  LossScaler scaler(fixed);
  Parameter p("w", tensor_from_floats({1.0f}, {1}));
  Sgd sgd(backend(), {OptimizerKind::Sgd, 0.0f});
  p.grad.data_as<float>()[0] = INFINITY;
  EXPECT_TRUE(scaler.step(backend(), {&p.grad}, [&] { sgd.step({&p}, 1.0f); }))
      << "static scaling applies every step (Apex)";
  scaler.update();
  EXPECT_EQ(scaler.scale(), 128.0f);
  EXPECT_EQ(LossScaler({LossScaleKind::Off}).scale(), 1.0f);

  p.grad.data_as<float>()[0] = 1.0f;
  scaler.unscale(backend(), {&p.grad});
  EXPECT_THROW(scaler.unscale(backend(), {&p.grad}), Error);  // twice before update
  scaler.step(backend(), {&p.grad}, [&] { sgd.step({&p}, 1.0f); });
  EXPECT_THROW(scaler.unscale(backend(), {&p.grad}), Error);  // after step
  EXPECT_THROW(scaler.step(backend(), {&p.grad}, [&] { sgd.step({&p}, 1.0f); }), Error);
  scaler.update();
  EXPECT_THROW(scaler.update(), Error);  // update without a step
}

TEST(LossScaler, FusedUnscaleMultipliesByTheReciprocalAndReportsTheNorm) {
  Parameter a("a", tensor_from_floats({3.0f, -4.0f}, {2})), b("b", tensor_from_floats({0.0f}, {1}));
  a.grad = tensor_from_floats({3.0f * 1024, -4.0f * 1024}, {2});
  b.grad = tensor_from_floats({0.0f}, {1});
  LossScaleConfig c;
  c.init_scale = 1024;
  LossScaler scaler(c);
  const LossScaler::Unscaled u = scaler.unscale(backend(), {&a.grad, &b.grad});
  EXPECT_FALSE(u.found_nonfinite);
  EXPECT_FLOAT_EQ(u.grad_norm, 5.0f);
  EXPECT_EQ(to_float_vector(a.grad), (std::vector<float>{3.0f, -4.0f}));
}

// ---- FP16 emulation ------------------------------------------------------------------------------------------

Tensor random_half_tensor(Shape shape, Rng& rng, Layout layout, double scale) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = round_to_half(static_cast<float>(rng.normal() * scale));
  return tensor_from_floats(v, std::move(shape), DType::F16, layout);
}

// Distance between two FP16 values in units in the last place at the reference's magnitude.
double half_ulps(float actual, float expected) {
  if (std::isinf(expected)) return actual == expected ? 0 : 1e9;
  const float a = std::fabs(expected);
  const double ulp = a < kHalfMinNormal ? kHalfMinSubnormal : std::ldexp(1.0, std::ilogb(a) - 10);
  return std::fabs(static_cast<double>(actual) - expected) / ulp;
}

void expect_within_one_half_ulp(const Tensor& actual, const ref::Array& exact) {
  const std::vector<float> got = to_float_vector(actual);
  for (size_t i = 0; i < got.size(); ++i) {
    const float expected = round_to_half(static_cast<float>(exact.v[i]));
    ASSERT_LE(half_ulps(got[i], expected), 1.0) << "element " << i << ": " << got[i] << " vs " << exact.v[i];
  }
}

TEST(Fp16Emulation, ConvolutionWithinOneUlpOfFloat64RoundedToFp16) {
  Rng rng(21);
  for (double scale : {1.0, 40.0, 1e-3}) {  // ordinary, overflowing (outputs past 65504), subnormal outputs
    const Tensor x = random_half_tensor({2, 8, 7, 7}, rng, Layout::NHWC, scale);
    const Tensor w = random_half_tensor({6, 8, 3, 3}, rng, Layout::NCHW, scale);
    Tensor y = Tensor::empty({2, 6, 4, 4}, DType::F16, Layout::NHWC);
    backend().conv2d_forward(x, w, y, {2, 1});
    expect_within_one_half_ulp(y, ref::conv2d_forward(ref::from_tensor(x), ref::from_tensor(w), 2, 1));

    const Tensor dy = random_half_tensor({2, 6, 4, 4}, rng, Layout::NHWC, scale);
    Tensor dx = Tensor::empty(x.shape(), DType::F16, Layout::NHWC), dw = Tensor::empty(w.shape(), DType::F16);
    backend().conv2d_backward_data(dy, w, dx, {2, 1});
    backend().conv2d_backward_weights(x, dy, dw, {2, 1});
    expect_within_one_half_ulp(dx,
                               ref::conv2d_backward_data(ref::from_tensor(dy), ref::from_tensor(w), x.shape(), 2, 1));
    expect_within_one_half_ulp(
        dw, ref::conv2d_backward_weights(ref::from_tensor(x), ref::from_tensor(dy), w.shape(), 2, 1));
  }
}

// The emulation widens BF16 weights straight into the FP32 primitive's blocked layout (one reorder, no plain FP32
// copy first; FP16 where oneDNN has a vectorised reorder for it): every bit as if they were widened by the engine's
// own converter and then convolved, subnormals and signed zeros too, in both types and at the shapes oneDNN runs
// (Winograd's left out).
TEST(Fp16Emulation, WeightsWidenedIntoThePrimitivesLayoutKeepEveryBit) {
  CpuBackend b({2, CpuBf16::Emulated, false, ConvAlgorithm::Direct});
  auto random_floats = [](int64_t n, Rng& rng) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = static_cast<float>(rng.normal());
    return v;
  };
  auto bits_of = [](const Tensor& t) {
    const uint16_t* p = t.data_as<uint16_t>();
    return std::vector<uint16_t>(p, p + t.numel());
  };
  struct Case {
    int64_t C, K, H, R;
    int stride, padding;
    bool all_tiny;  // every weight a subnormal, so a reorder that flushed them would zero the result
  };
  for (DType low : {DType::F16, DType::BF16})
    for (const Case s : {Case{16, 24, 9, 3, 1, 1, false}, Case{32, 64, 8, 1, 2, 0, false},
                         Case{512, 512, 2, 3, 1, 1, false}, Case{16, 24, 9, 3, 1, 1, true}}) {
      SCOPED_TRACE(std::string(dtype_name(low)) + " " + std::to_string(s.C) + "->" + std::to_string(s.K) +
                   (s.all_tiny ? " subnormal" : ""));
      Rng rng(9);
      const int64_t P = (s.H + 2 * s.padding - s.R) / s.stride + 1;
      const float subnormal = low == DType::F16 ? 0x1p-20f : 0x1p-130f;  // under each type's smallest normal
      std::vector<float> weights(static_cast<size_t>(s.K * s.C * s.R * s.R));
      for (size_t i = 0; i < weights.size(); ++i)  // else every fourth a subnormal, every fourth -0
        weights[i] = s.all_tiny || i % 4 == 1 ? static_cast<float>(rng.normal()) * subnormal
                     : i % 4 == 2             ? -0.0f
                                              : static_cast<float>(rng.normal());
      const Tensor w = tensor_from_floats(weights, {s.K, s.C, s.R, s.R}, low, Layout::NCHW);
      const Tensor x =
          tensor_from_floats(random_floats(s.C * s.H * s.H * 4, rng), {4, s.C, s.H, s.H}, low, Layout::NHWC);
      const Tensor dy = tensor_from_floats(random_floats(s.K * P * P * 4, rng), {4, s.K, P, P}, low, Layout::NHWC);
      auto widened = [&](const Tensor& t) {
        Tensor wide = Tensor::empty(t.shape(), DType::F32, t.layout());
        b.convert(t, wide);
        return wide;
      };
      const Tensor w32 = widened(w);
      const ConvParams p{s.stride, s.padding};
      // A pass on the 16-bit tensors, and the same pass on their widened values rounded once: the same bits.
      auto expect_as_widened = [&](const Tensor& in, const Shape& out_shape, auto pass, const char* what) {
        Tensor out = Tensor::empty(out_shape, low, Layout::NHWC),
               expected = Tensor::empty(out_shape, low, Layout::NHWC),
               out32 = Tensor::empty(out_shape, DType::F32, Layout::NHWC);
        pass(in, w, out);
        pass(widened(in), w32, out32);
        b.convert(out32, expected);
        EXPECT_EQ(bits_of(out), bits_of(expected)) << what;
      };
      expect_as_widened(
          x, dy.shape(), [&](const Tensor& i, const Tensor& k, Tensor& o) { b.conv2d_forward(i, k, o, p); }, "forward");
      expect_as_widened(
          dy, x.shape(), [&](const Tensor& i, const Tensor& k, Tensor& o) { b.conv2d_backward_data(i, k, o, p); },
          "backward data");
    }
}

TEST(Fp16Emulation, MatrixProductWithinOneUlpAndOverflowsToInfinity) {
  Rng rng(22);
  for (double scale : {1.0, 300.0, 1e-3}) {
    const Tensor x = random_half_tensor({5, 24}, rng, Layout::NCHW, scale);
    const Tensor w = random_half_tensor({7, 24}, rng, Layout::NCHW, scale);
    const Tensor b = random_half_tensor({7}, rng, Layout::NCHW, scale);
    Tensor y = Tensor::empty({5, 7}, DType::F16);
    backend().linear_forward(x, w, b, y);
    const ref::Array exact = ref::linear_forward(ref::from_tensor(x), ref::from_tensor(w), ref::from_tensor(b));
    expect_within_one_half_ulp(y, exact);
    if (scale == 300.0) {
      bool saw_inf = false;
      for (float v : to_float_vector(y)) saw_inf |= std::isinf(v);
      EXPECT_TRUE(saw_inf) << "products past 65504 must overflow to inf, as FP16 storage on a GPU does";
    }
  }
}

TEST(Fp16Emulation, BackendRoundingToFp16MatchesRoundToNearestEven) {
  // The emulation stores results through the backend's f32 -> f16 conversion: it must round exactly like the
  // reference conversion (ties to even, signed zeros, subnormals kept, 65520 and above to inf).
  std::vector<float> values = {65504.0f,
                               65519.99f,
                               65520.0f,
                               1e6f,
                               -70000.0f,
                               std::ldexp(1.0f, -25),
                               std::ldexp(1.5f, -25),
                               std::ldexp(3.0f, -26),
                               std::ldexp(1.0f, -14),
                               1.0f + std::ldexp(1.0f, -11),
                               1.0f + std::ldexp(3.0f, -11),
                               -0.0f};
  Rng rng(23);
  for (int i = 0; i < 20000; ++i)
    values.push_back(static_cast<float>(std::ldexp(rng.normal(), static_cast<int>(rng.below(60)) - 40)));
  const Tensor src = tensor_from_floats(values, {static_cast<int64_t>(values.size())});
  Tensor half = Tensor::empty(src.shape(), DType::F16);
  backend().convert(src, half);
  Tensor back = Tensor::empty(src.shape(), DType::F32);
  backend().convert(half, back);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(half.data_as<uint16_t>()[i], float_to_half_bits(values[i])) << values[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(back.data_as<float>()[i]), std::bit_cast<uint32_t>(round_to_half(values[i])));
  }
}

// ---- BF16 emulation ------------------------------------------------------------------------------------------
// Where oneDNN has no BF16 primitive (below AVX-512), or the cores' BF16 multiply-adds are slower than their FP32
// ones, the engine computes BF16 ops in FP32 on the BF16 values and rounds the result to BF16, as it does for FP16.
// CpuBf16::Emulated forces that path on any CPU, CpuBf16::Native oneDNN's wherever the cores run BF16.

CpuBackend& emulating_backend() {
  static CpuBackend b({2, CpuBf16::Emulated});
  return b;
}

CpuBackend& native_backend() {
  static CpuBackend b({2, CpuBf16::Native});
  return b;
}

Tensor random_bf16_tensor(Shape shape, Rng& rng, Layout layout, double scale = 1.0) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = round_to_bfloat16(static_cast<float>(rng.normal() * scale));
  return tensor_from_floats(v, std::move(shape), DType::BF16, layout);
}

// One FP32 computation rounded once: within one BF16 ulp (8 significant bits) of the exact value rounded to BF16
// (`ulps` of them where the computation rounds more than once).
void expect_within_one_bf16_ulp(const Tensor& actual, const ref::Array& exact, const char* what, double ulps = 1) {
  ASSERT_EQ(actual.dtype(), DType::BF16) << what;
  const std::vector<float> got = to_float_vector(actual);
  for (size_t i = 0; i < got.size(); ++i) {
    const float expected = round_to_bfloat16(static_cast<float>(exact.v[i]));
    const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(expected), 0x1p-126f)) - 7);
    ASSERT_LE(std::fabs(static_cast<double>(got[i]) - expected), ulps * ulp)
        << what << " element " << i << ": " << got[i] << " vs " << exact.v[i];
  }
}

// Every BF16 op on b against the float64 reference, each result within one BF16 ulp of the exact value; max
// pooling's gradient within `pool_gradient_ulps` (where overlapping windows sum in BF16).
void expect_every_bf16_op_within_one_ulp(CpuBackend& b, double pool_gradient_ulps = 1) {
  Rng rng(31);
  const Tensor x = random_bf16_tensor({2, 8, 7, 7}, rng, Layout::NHWC),
               w = random_bf16_tensor({6, 8, 3, 3}, rng, Layout::NCHW);
  const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w);
  Tensor y = Tensor::empty({2, 6, 4, 4}, DType::BF16, Layout::NHWC);
  b.conv2d_forward(x, w, y, {2, 1});
  expect_within_one_bf16_ulp(y, ref::conv2d_forward(rx, rw, 2, 1), "conv forward");
  const Tensor dy = random_bf16_tensor({2, 6, 4, 4}, rng, Layout::NHWC);
  Tensor dx = Tensor::empty(x.shape(), DType::BF16, Layout::NHWC), dw = Tensor::empty(w.shape(), DType::BF16);
  b.conv2d_backward_data(dy, w, dx, {2, 1});
  b.conv2d_backward_weights(x, dy, dw, {2, 1});
  expect_within_one_bf16_ulp(dx, ref::conv2d_backward_data(ref::from_tensor(dy), rw, x.shape(), 2, 1), "conv data");
  expect_within_one_bf16_ulp(dw, ref::conv2d_backward_weights(rx, ref::from_tensor(dy), w.shape(), 2, 1),
                             "conv weights");

  // Batch norm: BF16 activations, FP32 scale, shift and statistics.
  const Tensor gamma = testing::random_tensor({8}, rng), beta = testing::random_tensor({8}, rng);
  Tensor bn_y = Tensor::empty(x.shape(), DType::BF16, Layout::NHWC), mean = testing::empty_f32({8}),
         var = testing::empty_f32({8}), running_mean = tensor_from_floats(std::vector<float>(8, 0.0f), {8}),
         running_var = tensor_from_floats(std::vector<float>(8, 1.0f), {8});
  b.batchnorm_forward_training(x, gamma, beta, bn_y, mean, var, running_mean, running_var, 0.1f, 1e-5f);
  const ref::BatchNormResult bn =
      ref::batchnorm_forward_training(rx, ref::from_tensor(gamma), ref::from_tensor(beta), 1e-5);
  expect_within_one_bf16_ulp(bn_y, bn.y, "batch norm forward");
  EXPECT_LT(testing::relative_error(mean, bn.mean),
            testing::tolerance(testing::Kernel::BatchNormTraining, testing::Precision::BF16, testing::Result::Fp32));
  const Tensor bn_dy = random_bf16_tensor(x.shape(), rng, Layout::NHWC);
  Tensor bn_dx = Tensor::empty(x.shape(), DType::BF16, Layout::NHWC), dgamma = testing::empty_f32({8}),
         dbeta = testing::empty_f32({8});
  b.batchnorm_backward(x, bn_dy, gamma, mean, var, bn_dx, dgamma, dbeta, 1e-5f);
  const ref::BatchNormGrads bn_grads =
      ref::batchnorm_backward(rx, ref::from_tensor(bn_dy), ref::from_tensor(gamma), 1e-5);
  expect_within_one_bf16_ulp(bn_dx, bn_grads.dx, "batch norm backward");
  EXPECT_LT(testing::relative_error(dgamma, bn_grads.dgamma), 1e-4) << "FP32 sums over BF16 inputs";

  // Max pooling (overlapping windows: the gradient sums) and the linear layer.
  Tensor pooled = Tensor::empty({2, 8, 4, 4}, DType::BF16, Layout::NHWC), workspace;
  b.maxpool_forward(x, pooled, workspace, {3, 2, 1});
  expect_within_one_bf16_ulp(pooled, ref::maxpool_forward(rx, 3, 2, 1), "max pool forward");
  const Tensor pool_dy = random_bf16_tensor(pooled.shape(), rng, Layout::NHWC);
  Tensor pool_dx = Tensor::empty(x.shape(), DType::BF16, Layout::NHWC);
  b.maxpool_backward(pool_dy, workspace, pool_dx, {3, 2, 1});
  expect_within_one_bf16_ulp(pool_dx, ref::maxpool_backward(rx, ref::from_tensor(pool_dy), 3, 2, 1), "max pool back",
                             pool_gradient_ulps);

  const Tensor lx = random_bf16_tensor({5, 24}, rng, Layout::NCHW), lw = random_bf16_tensor({7, 24}, rng, Layout::NCHW);
  const Tensor lb = random_bf16_tensor({7}, rng, Layout::NCHW), ldy = random_bf16_tensor({5, 7}, rng, Layout::NCHW);
  Tensor ly = Tensor::empty({5, 7}, DType::BF16), ldx = Tensor::empty({5, 24}, DType::BF16),
         ldw = Tensor::empty({7, 24}, DType::BF16), ldb = Tensor::empty({7}, DType::BF16);
  b.linear_forward(lx, lw, lb, ly);
  b.linear_backward(ldy, lx, lw, ldx, ldw, ldb);
  const ref::Array rlx = ref::from_tensor(lx), rlw = ref::from_tensor(lw);
  expect_within_one_bf16_ulp(ly, ref::linear_forward(rlx, rlw, ref::from_tensor(lb)), "linear forward");
  const ref::LinearGrads lg = ref::linear_backward(ref::from_tensor(ldy), rlx, rlw);
  expect_within_one_bf16_ulp(ldx, lg.dx, "linear dx");
  expect_within_one_bf16_ulp(ldw, lg.dw, "linear dw");
  expect_within_one_bf16_ulp(ldb, lg.db, "linear db");
}

TEST(Bf16Emulation, EveryOpWithinOneUlpOfFloat64RoundedToBf16) {
  CpuBackend& b = emulating_backend();
  EXPECT_EQ(b.bf16_implementation(), "") << "CpuBf16::Emulated must keep BF16 away from oneDNN's BF16 primitives";
  expect_every_bf16_op_within_one_ulp(b);
}

TEST(Bf16Emulation, NativeBf16OpsWithinOneUlpOfFloat64RoundedToBf16) {
  if (native_backend().bf16_implementation().empty())
    GTEST_SKIP() << "oneDNN runs no BF16 natively on this CPU (" << backend().isa() << ")";
  // oneDNN's BF16 max pooling sums overlapping windows' gradients in BF16, rounding at each sum.
  expect_every_bf16_op_within_one_ulp(native_backend(), 4);
}

TEST(Bf16Emulation, CapabilitiesSayWhatRunsAsOneDnnAnswers) {
  const std::string implementation = backend().bf16_implementation();
  const ComputeSupport bf16 = backend().capabilities().bf16;
  EXPECT_TRUE(bf16.available);
  if (implementation.empty()) {  // an AVX2-only CPU, or ONEDNN_MAX_CPU_ISA=AVX2
    EXPECT_FALSE(bf16.native);
    EXPECT_NE(bf16.how.find("emulated by the engine"), std::string::npos) << bf16.how;
  } else {
    EXPECT_NE(bf16.how.find(implementation), std::string::npos) << bf16.how;
  }
  if (bf16.speed_vs_fp32 > 0) {
    EXPECT_FALSE(bf16.speed_source.empty()) << "a speed figure names its measurement";
  }
  const ComputeSupport emulated = emulating_backend().capabilities().bf16;
  EXPECT_FALSE(emulated.native);
  EXPECT_NE(emulated.how.find("emulated by the engine"), std::string::npos) << emulated.how;
}

TEST(Bf16Emulation, TheCoresMultiplyAddRatesAreMeasured) {
  const MultiplyAddRates& rates = one_core_multiply_add_rates();
  // One core of any x86-64 CPU this runs on: from 8 flops a cycle (AVX2, one FMA port, 1 GHz) to 64 (AVX-512, two
  // ports, 5 GHz): a broken loop or timer lands far outside.
  EXPECT_GT(rates.fp32_gflops, 4.0);
  EXPECT_LT(rates.fp32_gflops, 400.0);
  if (cpu_has_avx512_bf16()) {
    // VDPBF16PS does 4 flops a lane: from half FP32's rate (one port, Intel without AMX) to twice it (Zen 5). A
    // busy sibling thread can slow one loop more than the other; a loop counting its flops wrong lands at 4x or more.
    EXPECT_GT(rates.bf16_gflops / rates.fp32_gflops, 0.2);
    EXPECT_LT(rates.bf16_gflops / rates.fp32_gflops, 3.2);
  } else {
    EXPECT_EQ(rates.bf16_gflops, 0.0) << "no AVX512-BF16, no rate";
  }
}

// The convolutions of a small ResNet-20 (width 16, 16 px, batch 8) on oneDNN's native BF16 primitives against the
// float64 reference: each pass is one FP32 accumulation rounded once to BF16.
TEST(Bf16Emulation, NativeBf16ConvolutionsOfAResNet20AgainstFloat64) {
  if (native_backend().bf16_implementation().empty())
    GTEST_SKIP() << "oneDNN runs no BF16 natively on this CPU (" << backend().isa() << ")";
  struct Shape4 {
    int64_t C, K, H, R;
    int stride, padding;
  };
  for (const Shape4 s : {Shape4{3, 16, 16, 3, 1, 1}, Shape4{16, 16, 16, 3, 1, 1}, Shape4{16, 32, 16, 3, 2, 1},
                         Shape4{16, 32, 16, 1, 2, 0}, Shape4{32, 32, 8, 3, 1, 1}, Shape4{32, 64, 8, 1, 2, 0},
                         Shape4{64, 64, 4, 3, 1, 1}}) {
    SCOPED_TRACE(std::to_string(s.C) + "->" + std::to_string(s.K) + " " + std::to_string(s.R) + "x" +
                 std::to_string(s.R) + " s" + std::to_string(s.stride) + " @" + std::to_string(s.H));
    Rng rng(5);
    const int64_t P = (s.H + 2 * s.padding - s.R) / s.stride + 1;
    const Tensor x = random_bf16_tensor({8, s.C, s.H, s.H}, rng, Layout::NHWC),
                 w = random_bf16_tensor({s.K, s.C, s.R, s.R}, rng, Layout::NCHW),
                 dy = random_bf16_tensor({8, s.K, P, P}, rng, Layout::NHWC);
    Tensor y = Tensor::empty(dy.shape(), DType::BF16, Layout::NHWC),
           dx = Tensor::empty(x.shape(), DType::BF16, Layout::NHWC), dw = Tensor::empty(w.shape(), DType::BF16);
    CpuBackend& b = native_backend();
    b.conv2d_forward(x, w, y, {s.stride, s.padding});
    b.conv2d_backward_data(dy, w, dx, {s.stride, s.padding});
    b.conv2d_backward_weights(x, dy, dw, {s.stride, s.padding});
    const ref::Array rx = ref::from_tensor(x), rw = ref::from_tensor(w), rdy = ref::from_tensor(dy);
    EXPECT_LT(testing::relative_error(y, ref::conv2d_forward(rx, rw, s.stride, s.padding)), 1e-2) << "forward";
    EXPECT_LT(testing::relative_error(dx, ref::conv2d_backward_data(rdy, rw, x.shape(), s.stride, s.padding)), 1e-2)
        << "backward data";
    EXPECT_LT(testing::relative_error(dw, ref::conv2d_backward_weights(rx, rdy, w.shape(), s.stride, s.padding)), 1e-2)
        << "backward weights";
  }
}

TEST(Bf16Emulation, NativeBf16OnlyWhereItOutpacesFp32) {
  const std::string native = native_backend().bf16_implementation();
  if (native.empty())
    GTEST_SKIP() << "oneDNN runs no BF16 natively on this CPU (" << backend().isa() << "): only emulation";
  const MultiplyAddRates& rates = one_core_multiply_add_rates();
  const bool pays = native.find("amx") != std::string::npos || rates.bf16_gflops >= 1.2 * rates.fp32_gflops;
  const std::string automatic = CpuBackend({2, CpuBf16::Auto}).bf16_implementation();
  EXPECT_EQ(automatic, pays ? native : "") << "BF16 at " << rates.bf16_gflops / rates.fp32_gflops << "x FP32";
  const ComputeSupport caps = CpuBackend({2, CpuBf16::Auto}).capabilities().bf16;
  EXPECT_EQ(caps.native, pays);
  if (!pays) {
    EXPECT_NE(caps.how.find("would be slower than FP32 ones"), std::string::npos) << caps.how;
  }
  EXPECT_TRUE(native_backend().capabilities().bf16.native) << "asked for, it is taken";
}

TEST(Bf16Emulation, TheEnvironmentChoosesForAuto) {
  ::setenv("AMPWB_CPU_BF16", "emulated", 1);
  EXPECT_EQ(CpuBackend({2, CpuBf16::Auto}).bf16_implementation(), "");
  const std::string how = CpuBackend({2, CpuBf16::Auto}).capabilities().bf16.how;
  EXPECT_NE(how.find("on request"), std::string::npos) << how;
  ::setenv("AMPWB_CPU_BF16", "native", 1);
  EXPECT_EQ(CpuBackend({2, CpuBf16::Auto}).bf16_implementation(), native_backend().bf16_implementation());
  EXPECT_EQ(CpuBackend({2, CpuBf16::Emulated}).bf16_implementation(), "") << "an explicit choice stands";
  ::setenv("AMPWB_CPU_BF16", "fast", 1);
  try {
    CpuBackend({2, CpuBf16::Auto});
    ADD_FAILURE() << "AMPWB_CPU_BF16=fast was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AMPWB_CPU_BF16 is 'fast': native or emulated"), std::string::npos)
        << e.what();
  }
  ::unsetenv("AMPWB_CPU_BF16");
}

// Asked for oneDNN's BF16 where it runs none natively (below AVX-512, or plain AVX-512, where oneDNN would emulate
// BF16 itself), the backend emulates as asked-for emulation does: the same step, bit for bit, so that a run's record
// ("emulated by the engine") says what computed it.
TEST(Bf16Emulation, NativeAskedWithoutNativeBf16IsTheEnginesEmulation) {
  if (!native_backend().bf16_implementation().empty())
    GTEST_SKIP() << "oneDNN runs BF16 natively on this CPU (" << native_backend().bf16_implementation()
                 << "): the NativeBf16 tests hold that path";
  const ResNetConfig net{20, 4, 3, 16, Stem::Auto};
  const testing::StepOutcome native = testing::one_training_step(native_backend(), "amp-bf16", net, 8, 41);
  const testing::StepOutcome emulated = testing::one_training_step(emulating_backend(), "amp-bf16", net, 8, 41);
  EXPECT_EQ(native.loss, emulated.loss);
  ASSERT_EQ(native.grads.size(), emulated.grads.size());
  for (size_t t = 0; t < native.grads.size(); ++t) EXPECT_EQ(native.grads[t], emulated.grads[t]) << "parameter " << t;
}

TEST(Bf16Emulation, AgreesWithNativeBf16OnATinyResNetFromTheSameSeed) {
  if (native_backend().bf16_implementation().empty())
    GTEST_SKIP() << "oneDNN has no BF16 primitives that run natively on this CPU (" << backend().isa()
                 << "): both sides would be the engine's emulation";
  // One amp-bf16 step of ResNet-20 from the same weights and batch, on oneDNN's BF16 primitives and on the
  // engine's emulation, beside the same step in FP32. Both BF16 sides round the same BF16 inputs and accumulate in
  // FP32; they differ in summation order and in the rounding of intermediate results. At initialisation, with batch
  // norm over 8 images, a weight gradient is a small difference of large terms, and BF16's 2^-8 shows in it as up
  // to 70% against FP32 (0.1% to 70% by parameter; Intel Xeon with AVX512-BF16). So the two BF16 sides must agree
  // within that noise, parameter by parameter: no further apart than 1.5x the distance of the emulation from FP32
  // (measured: at most 0.89x of it over the 65 parameters on that Xeon; 0.55% apart on Zen 5). A wrong op or
  // rounding puts them as far apart as the gradients are large. (Each op alone is held to the float64 reference
  // above; over several steps on random labels the runs drift apart chaotically.)
  using testing::StepOutcome;
  const ResNetConfig net{20, 4, 3, 16, Stem::Auto};
  const StepOutcome native = testing::one_training_step(native_backend(), "amp-bf16", net, 8, 41);
  const StepOutcome emulated = testing::one_training_step(emulating_backend(), "amp-bf16", net, 8, 41);
  const StepOutcome fp32 = testing::one_training_step(emulating_backend(), "fp32", net, 8, 41);
  EXPECT_NEAR(emulated.loss, native.loss, 1e-2 * native.loss);
  for (size_t t = 0; t < native.grads.size(); ++t) {
    const double apart = testing::relative_l2({emulated.grads[t]}, {native.grads[t]});
    const double noise = testing::relative_l2({emulated.grads[t]}, {fp32.grads[t]});
    EXPECT_LT(apart, 1.5 * noise) << "gradient of parameter " << t;
    EXPECT_LT(apart, 0.8) << "gradient of parameter " << t;
  }
}

// The whole-step check (whole_step.h, as test_cuda_training holds the GPU's step to the CPU's) tells the formats
// apart: on the CPU, an FP32 step checked as a 16-bit mode's step is refused, and the same mode's step computed
// another way (one thread instead of two: BF16's oneDNN kernels then differ) passes.
TEST(WholeStepCheck, RefusesAnFp32StepAsA16BitModesAndTakesTheModesOwn) {
  CpuBackend two({2}), one({1});
  const testing::StepOutcome fp32 = testing::whole_step(two, "fp32"), fp32_other = testing::whole_step(one, "fp32");
  for (const testing::StepTolerance& tol : testing::kWholeStepTolerances) {
    const std::string mode = tol.mode;
    if (mode == "fp32" || mode == "tf32") continue;
    const testing::StepOutcome in_mode = testing::whole_step(two, mode), other = testing::whole_step(one, mode);
    const std::string refusal = testing::whole_step_mismatch(fp32_other, in_mode, fp32, tol);
    std::printf("an FP32 step as %s: %s\n", tol.mode, refusal.c_str());
    EXPECT_NE(refusal, "") << "an FP32 step passes as " << mode << "'s";
    EXPECT_EQ(testing::whole_step_mismatch(other, in_mode, fp32, tol), "") << mode << " on one thread";
  }
}

// ---- Policy ----------------------------------------------------------------------------------------------------

TEST(PrecisionPolicy, AutocastTableDecidesEachOpsType) {
  const PrecisionPolicy fp16(precision_preset("amp-fp16")), bf16(precision_preset("amp-bf16")), fp32;
  EXPECT_EQ(fp16.compute_dtype(OpClass::Conv, DType::F32), DType::F16);
  EXPECT_EQ(fp16.compute_dtype(OpClass::Linear, DType::F32), DType::F16);
  EXPECT_EQ(fp16.compute_dtype(OpClass::BatchNorm, DType::F16), DType::F16);
  EXPECT_EQ(fp16.compute_dtype(OpClass::Loss, DType::F16), DType::F32);
  EXPECT_EQ(fp16.compute_dtype(OpClass::Relu, DType::F32), DType::F32) << "elementwise ops follow their input";
  EXPECT_EQ(bf16.compute_dtype(OpClass::Conv, DType::F32), DType::BF16);
  EXPECT_EQ(fp32.compute_dtype(OpClass::Conv, DType::F32), DType::F32);
  EXPECT_TRUE(fp16.master_weights());
  EXPECT_FALSE(PrecisionPolicy(precision_preset("fp16-pure")).master_weights());
  EXPECT_TRUE(PrecisionPolicy(precision_preset("fp16-pure")).everything_low());
  EXPECT_EQ(precision_preset("amp-fp16").loss_scale.kind, LossScaleKind::Dynamic);
  EXPECT_EQ(precision_preset("amp-bf16").loss_scale.kind, LossScaleKind::Off);
  const std::string table = fp16.describe();
  EXPECT_NE(table.find("conv2d: low precision -> f16"), std::string::npos) << table;
  EXPECT_NE(table.find("cross_entropy: fp32 -> f32"), std::string::npos) << table;
  EXPECT_THROW(precision_preset("fp8"), Error);
}

TEST(GradientProbe, HistogramOfLog2MagnitudesWithFp16Fractions) {
  GradientProbe probe;
  probe.record_activation_gradient(
      tensor_from_floats({0.0f, 1.0f, -1.5f, std::ldexp(1.0f, -30), 1e5f, INFINITY, std::ldexp(1.0f, -24)}, {7}));
  const std::vector<GradientHistogram> h = probe.take(3, 1024);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].kind, "activation");
  EXPECT_EQ(h[0].epoch, 3);
  EXPECT_EQ(h[0].loss_scale, 1024);
  EXPECT_EQ(h[0].total, 7);
  EXPECT_EQ(h[0].zeros, 1);
  EXPECT_EQ(h[0].nonfinite, 1);
  EXPECT_EQ(h[0].counts[static_cast<size_t>(0 - h[0].min_log2)], 2);  // 1 and 1.5 in [2^0, 2^1)
  EXPECT_EQ(h[0].counts[static_cast<size_t>(-30 - h[0].min_log2)], 1);
  EXPECT_DOUBLE_EQ(h[0].underflow_fraction, 1.0 / 7);  // 2^-30 (2^-24 itself is representable)
  EXPECT_DOUBLE_EQ(h[0].overflow_fraction, 2.0 / 7);   // 1e5 and inf
}

// ---- Whole steps and runs --------------------------------------------------------------------------------------

TEST(MixedPrecisionStep, InjectedOverflowSkipsTheStepAndLeavesWeightsBitIdentical) {
  Rng rng(24);
  ResNet model(backend(), {20, 3, 3, 8, Stem::Auto}, rng);
  Sgd sgd(backend(), {OptimizerKind::Sgd, 0.9f});
  PrecisionConfig config = precision_preset("amp-fp16");
  config.loss_scale.init_scale = std::ldexp(1.0, 40);  // scaled loss gradients overflow FP16's 65504
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(backend(), model, sgd, policy, scaler, 0.0f, 0.0f);
  const Tensor images = testing::random_tensor({4, 3, 8, 8}, rng, Layout::NHWC);
  Tensor labels = Tensor::empty({4}, DType::I32);
  for (int i = 0; i < 4; ++i) labels.data_as<int32_t>()[i] = i % 3;
  std::vector<std::vector<float>> before;
  for (Parameter* p : model.parameters()) before.push_back(to_float_vector(p->value));

  const StepResult r = step.run(images, labels, 0.1f);
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(r.loss_scale, std::ldexp(1.0f, 40));
  EXPECT_TRUE(std::isinf(r.grad_norm) || std::isnan(r.grad_norm));
  EXPECT_EQ(scaler.scale(), std::ldexp(1.0f, 39));
  EXPECT_TRUE(sgd.state().empty()) << "a skipped step must not touch the optimizer";
  const std::vector<Parameter*> params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<float> after = to_float_vector(params[i]->value);
    ASSERT_EQ(std::memcmp(after.data(), before[i].data(), after.size() * sizeof(float)), 0) << params[i]->name;
  }
  // The scale keeps backing off until the gradients fit; then the step is taken.
  int steps = 1;
  while (step.run(images, labels, 0.1f).skipped) ASSERT_LT(++steps, 40);
  EXPECT_LE(scaler.scale(), 65504.0f * 16);
}

TEST(MixedPrecisionStep, StepsAreDeferredAndCapturedByDefaultOnAGpuOnly) {
  Rng rng(26);
  ResNet model(backend(), {20, 3, 3, 8, Stem::Auto}, rng);
  Sgd sgd(backend(), {OptimizerKind::Sgd, 0.9f});
  const PrecisionPolicy policy(precision_preset("amp-fp16"));
  LossScaler scaler(precision_preset("amp-fp16").loss_scale);
  MixedPrecisionStep step(backend(), model, sgd, policy, scaler, 0.0f, 0.0f);
  const Device cpu = Device::cpu(), gpu = Device::cuda(0);  // the plan reads the settings and the device's kind
  auto plan = [&](const Device& d, const char* host_sync, const char* graphs) {
    const StepPlan p = plan_steps(step, d, *parse_choice<HostSync>(host_sync), *parse_choice<CudaGraphs>(graphs));
    return std::pair{p.deferred, p.captured};
  };
  EXPECT_EQ(plan(gpu, "auto", "auto"), std::pair(true, true)) << "a GPU's default: deferred and captured";
  EXPECT_EQ(plan(cpu, "auto", "auto"), std::pair(false, false)) << "a CPU waits for nothing: nothing to capture";
  EXPECT_EQ(plan(gpu, "auto", "off"), std::pair(true, false));
  EXPECT_EQ(plan(gpu, "every-step", "auto"), std::pair(false, false)) << "auto captures deferred steps only";
  EXPECT_EQ(plan(cpu, "deferred", "auto"), std::pair(true, false));
  EXPECT_EQ(plan(cpu, "deferred", "on"), std::pair(true, true)) << "asked for: the step says why it cannot";
  EXPECT_THROW(plan(gpu, "every-step", "on"), Error);
  EXPECT_THROW(plan(cpu, "auto", "on"), Error);

  MixedPrecisionStep clipping(backend(), model, sgd, policy, scaler, 0.0f, 1.0f);  // needs the host every step
  const StepPlan p = plan_steps(clipping, gpu, HostSync::Auto, CudaGraphs::Auto);
  EXPECT_FALSE(p.deferred);
  EXPECT_FALSE(p.captured) << "auto falls back to op by op, without an error";
  try {
    plan_steps(clipping, gpu, HostSync::Auto, CudaGraphs::On);
    ADD_FAILURE() << "capture of steps that wait was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("clipping"), std::string::npos) << e.what();
  }

  // amp-fp8's scalings live on the device too: its steps are deferred and captured as the others are.
  const PrecisionPolicy fp8(precision_preset("amp-fp8"));
  MixedPrecisionStep fp8_step(backend(), model, sgd, fp8, scaler, 0.0f, 0.0f);
  for (const CudaGraphs graphs : {CudaGraphs::Auto, CudaGraphs::On}) {
    const StepPlan fp8_plan = plan_steps(fp8_step, gpu, HostSync::Auto, graphs);
    EXPECT_TRUE(fp8_plan.deferred);
    EXPECT_TRUE(fp8_plan.captured);
  }
}

TEST(MixedPrecisionStep, OptimizerWritesTheFp16WeightCopiesAndASkippedStepLeavesBothUntouched) {
  Rng rng(25);
  ResNet model(backend(), {20, 3, 3, 8, Stem::Auto}, rng);
  Sgd sgd(backend(), {OptimizerKind::Sgd, 0.9f, true, 1e-4f});  // momentum, Nesterov and weight decay
  PrecisionConfig config = precision_preset("amp-fp16");
  config.loss_scale.init_scale = 1024;
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(backend(), model, sgd, policy, scaler, 0.0f, 0.0f);
  const Tensor images = testing::random_tensor({4, 3, 8, 8}, rng, Layout::NHWC);
  Tensor labels = Tensor::empty({4}, DType::I32);
  for (int i = 0; i < 4; ++i) labels.data_as<int32_t>()[i] = i % 3;
  for (int i = 0; i < 2; ++i) ASSERT_FALSE(step.run(images, labels, 0.1f).skipped);

  auto bytes = [](const Tensor& t) {
    const auto* p = static_cast<const unsigned char*>(t.data());
    return std::vector<unsigned char>(p, p + t.nbytes());
  };
  struct Kept {
    std::vector<unsigned char> value, copy;
    uint64_t version;
  };
  std::vector<Kept> kept;
  for (Parameter* p : model.parameters()) {
    if (!p->compute.defined()) continue;  // batch norm's parameters: FP32 only
    SCOPED_TRACE(p->name);
    EXPECT_EQ(p->compute.dtype(), DType::F16);
    EXPECT_EQ(p->compute_version, p->version) << "the update wrote the copy: value_as has nothing to convert";
    Tensor converted = Tensor::empty(p->value.shape(), DType::F16, p->value.layout());
    backend().convert(p->value, converted);
    EXPECT_EQ(bytes(p->compute), bytes(converted)) << "the copy is the updated master, rounded as convert() rounds";
    kept.push_back({bytes(p->value), bytes(p->compute), p->version});
  }
  ASSERT_GE(kept.size(), 20u) << "every convolution and the classifier compute in FP16";

  config.loss_scale.init_scale = std::ldexp(1.0, 40);  // scaled loss gradients overflow FP16's 65504
  LossScaler overflowing_scaler(config.loss_scale);
  MixedPrecisionStep overflowing(backend(), model, sgd, policy, overflowing_scaler, 0.0f, 0.0f);
  ASSERT_TRUE(overflowing.run(images, labels, 0.1f).skipped);
  size_t i = 0;
  for (Parameter* p : model.parameters()) {
    if (!p->compute.defined()) continue;
    SCOPED_TRACE(p->name);
    EXPECT_EQ(bytes(p->value), kept[i].value) << "a skipped step leaves the master";
    EXPECT_EQ(bytes(p->compute), kept[i].copy) << "and its copy";
    EXPECT_EQ(p->version, kept[i].version);
    ++i;
  }
}

// Counts the gradient checks a step asks for: on their own (scale_and_check) or inside the update.
class CheckCounter final : public testing::ForwardingBackend {
 public:
  CheckCounter() : ForwardingBackend(std::make_unique<CpuBackend>(BackendOptions{2})) {}
  void scale_and_check(const std::vector<Tensor*>& tensors, float factor) override {
    ++separate_checks;
    inner().scale_and_check(tensors, factor);
  }
  void sgd_update(const std::vector<ParamUpdate>& params, const SgdParams& p) override {
    checks_in_updates += p.check_gradients;
    inner().sgd_update(params, p);
  }
  int separate_checks = 0, checks_in_updates = 0;
};

// Where nothing waits on the gradients' check (no loss scale, no clipping: fp32, amp-bf16), the update makes it in
// its own pass, and reads amp-bf16's 16-bit weight gradients as backward left them (widening them itself): the same
// losses, gradient norms, gradients and weights, bit for bit, as the step that checks first (here one with a
// clipping norm no gradient reaches) from FP32 gradients, and the norm is the float64 one of the gradients.
TEST(MixedPrecisionStep, AnUngatedStepChecksItsGradientsInsideTheUpdateWithTheSameBits) {
  for (const char* mode : {"fp32", "amp-bf16", "amp-fp16"}) {
    SCOPED_TRACE(mode);
    const PrecisionConfig config = precision_preset(mode);
    const PrecisionPolicy policy(config);
    CheckCounter fused_backend, separate_backend;
    int low_grads[2] = {0, 0};  // fused, separate: parameters whose last gradient stayed 16-bit
    std::vector<std::vector<float>> grads[2];
    auto run = [&](CheckCounter& b, float clip_norm, std::vector<StepResult>& results) {
      Rng rng(27);
      auto model = std::make_unique<ResNet>(b, ResNetConfig{20, 3, 3, 8, Stem::Auto}, rng);
      Sgd sgd(b, {OptimizerKind::Sgd, 0.9f});
      LossScaler scaler(config.loss_scale);
      MixedPrecisionStep step(b, *model, sgd, policy, scaler, 0.0f, clip_norm);
      const Tensor images = testing::random_tensor({4, 3, 8, 8}, rng, Layout::NHWC);
      Tensor labels = Tensor::empty({4}, DType::I32);
      for (int i = 0; i < 4; ++i) labels.data_as<int32_t>()[i] = i % 3;
      for (int i = 0; i < 3; ++i) results.push_back(step.run(images, labels, 0.1f));
      double sum = 0;  // the last step's gradients, float64
      const bool separate = clip_norm > 0;
      for (Parameter* p : model->parameters()) {
        low_grads[separate] += p->low_grad.defined();
        EXPECT_NE(p->low_grad.defined(), p->grad.defined()) << p->name << ": a gradient is kept once";
        grads[separate].push_back(to_float_vector(fp32_gradient(b, *p)));
        for (float g : grads[separate].back()) sum += static_cast<double>(g) * g;
      }
      EXPECT_NEAR(results.back().grad_norm, std::sqrt(sum), std::sqrt(sum) * 1e-6);
      return model;
    };
    std::vector<StepResult> fused, separate;
    const auto fused_model = run(fused_backend, 0.0f, fused);
    const auto separate_model = run(separate_backend, 1e30f, separate);
    const bool ungated = config.loss_scale.kind == LossScaleKind::Off;
    EXPECT_EQ(fused_backend.checks_in_updates, ungated ? 3 : 0);
    EXPECT_EQ(fused_backend.separate_checks, ungated ? 0 : 3);
    EXPECT_EQ(separate_backend.checks_in_updates, 0);
    // The classifier's gradient is widened by its layer (Layer::widen_grad) wherever BF16 runs, natively or not.
    if (mode == std::string("amp-bf16"))
      EXPECT_GT(low_grads[0], 0);
    else
      EXPECT_EQ(low_grads[0], 0);
    EXPECT_EQ(low_grads[1], 0) << "a step that checks first reads FP32 gradients";
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_EQ(grads[0][i], grads[1][i]) << "parameter " << i;
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_EQ(std::memcmp(&fused[i].grad_norm, &separate[i].grad_norm, sizeof(float)), 0) << "step " << i;
      EXPECT_EQ(std::memcmp(&fused[i].loss, &separate[i].loss, sizeof(float)), 0) << "step " << i;
      EXPECT_EQ(fused[i].skipped, separate[i].skipped);
    }
    const auto a = fused_model->parameters(), b = separate_model->parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(std::memcmp(a[i]->value.data(), b[i]->value.data(), a[i]->value.nbytes()), 0) << a[i]->name;
  }
}

class EveryMode : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryMode, TrainsATinyResNetWithFallingLoss) {
  const fs::path data = make_stripes_folder("mode_" + GetParam(), 24, 12);
  TrainConfig c;
  c.data_dir = data.string();
  c.depth = 20;
  c.epochs = 4;
  c.batch_size = 8;
  c.lr = 0.05f;
  c.threads = 2;
  c.data.validation_fraction = 0.25;
  c.precision = precision_preset(GetParam());
  struct Losses : TrainObserver {
    std::vector<EpochReport> epochs;
    std::vector<GradientHistogram> histograms;
    void on_epoch(const EpochReport& e) override { epochs.push_back(e); }
    void on_histogram(const GradientHistogram& h) override { histograms.push_back(h); }
  } observed;
  Trainer trainer(c, &observed);
  const RunEnd end = trainer.run();
  ASSERT_EQ(end.status, RunStatus::Finished) << end.reason;
  ASSERT_EQ(observed.epochs.size(), 4u);
  EXPECT_LT(observed.epochs.back().train_loss, 0.7 * observed.epochs.front().train_loss) << GetParam();
  EXPECT_EQ(observed.histograms.size(), 2u * 4) << "activation and weight gradients every epoch";
  fs::remove_all(data);
}

INSTANTIATE_TEST_SUITE_P(Modes, EveryMode,
                         ::testing::Values("fp32", "amp-fp16", "amp-bf16", "fp16-o2", "fp16-pure", "amp-fp8"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(EveryMode, Tf32IsRefusedOnTheCpuWithAReason) {
  TrainConfig c;
  c.data_dir = fs::temp_directory_path().string();
  c.precision = precision_preset("tf32");
  Trainer trainer(c, nullptr);
  const RunEnd end = trainer.run();
  EXPECT_EQ(end.status, RunStatus::Failed);
  EXPECT_NE(end.reason.find("TF32 is a tensor-core format of NVIDIA GPUs"), std::string::npos) << end.reason;
}

}  // namespace
}  // namespace ampwb
