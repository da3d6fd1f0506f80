// Per-layer numerics: ValueRange against hand-counted fractions, one probed step's first convolution
// against a direct recomputation, and real tiny trainings in amp-fp16 and fp32 that report every convolution,
// linear and batch-norm layer, at the interval asked for, into the run store.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "amp/layer_probe.h"
#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "image_folder_util.h"
#include "op_test_util.h"
#include "store/run_store.h"
#include "store/store_recorder.h"
#include "train/mixed_precision_step.h"
#include "train/trainer.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;

CpuBackend& backend() {
  static CpuBackend b({2});
  return b;
}

TEST(ValueRange, CountsEachClassOfValueAgainstFp16Range) {
  // 2 zeros, 2 below 2^-24 (FP16 flushes them), 2 above 65504 (FP16 makes them inf), inf and NaN, 2 ordinary.
  const Tensor t = tensor_from_floats({0.0f, -0.0f, 1e-8f, -3e-8f, 1.0f, -2.5f, 70000.0f, -1e5f, INFINITY, NAN}, {10});
  const ValueRange r = value_range(t);
  EXPECT_EQ(r.count, 10);
  EXPECT_EQ(r.max_abs, 1e5);  // of the finite values: the inf is not a magnitude
  EXPECT_DOUBLE_EQ(r.zero_fraction, 0.2);
  EXPECT_DOUBLE_EQ(r.underflow_fraction, 0.2);
  EXPECT_DOUBLE_EQ(r.overflow_fraction, 0.2);
  EXPECT_DOUBLE_EQ(r.nonfinite_fraction, 0.2);
  EXPECT_DOUBLE_EQ(r.below_normal_fraction, 0.2);  // the two below 2^-24 are below 2^-14 too
  // 2^-24 itself is FP16's smallest subnormal, 65504 its largest finite: neither is lost.
  const ValueRange edges = value_range(tensor_from_floats({kHalfMinSubnormal, kHalfMax, -kHalfMax}, {3}));
  EXPECT_EQ(edges.underflow_fraction, 0.0);
  EXPECT_EQ(edges.overflow_fraction, 0.0);
  EXPECT_EQ(edges.max_abs, 65504.0);
  EXPECT_DOUBLE_EQ(edges.below_normal_fraction, 1.0 / 3);  // 2^-24 is a subnormal; 2^-14 is the smallest normal
  EXPECT_EQ(value_range(tensor_from_floats({kHalfMinNormal}, {1})).below_normal_fraction, 0.0);
}

TEST(ValueRange, AnFp16TensorIsMeasuredAsStored) {
  // Stored in FP16, 1e-8 has become 0 and 70000 inf: the loss shows as zeros and non-finite values.
  const Tensor low = cast(backend(), tensor_from_floats({1e-8f, 1.0f, 70000.0f, 0.5f}, {4}), DType::F16);
  const ValueRange r = value_range(low);
  EXPECT_EQ(r.count, 4);
  EXPECT_EQ(r.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(r.zero_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.nonfinite_fraction, 0.25);
  EXPECT_EQ(r.underflow_fraction, 0.0);
}

TEST(ValueRange, AnFp16TensorShowsItsGradientsNearUnderflowAsBelowNormal) {
  // 1e-8 is lost to FP16 storage (a zero now, no longer an underflow); 1e-6 survives as a subnormal: the
  // below-2^-14 share is what still shows a gradient at FP16's edge.
  const Tensor low = cast(backend(), tensor_from_floats({1e-8f, 1e-6f, 1e-3f, 0.5f}, {4}), DType::F16);
  const ValueRange r = value_range(low);
  EXPECT_EQ(r.underflow_fraction, 0.0);
  EXPECT_DOUBLE_EQ(r.zero_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.below_normal_fraction, 0.25);
}

TEST(ValueRange, AnEmptyTensorHasZeroFractionsNotNaN) {
  const ValueRange r = value_range(Tensor::empty({0}, DType::F32));
  EXPECT_EQ(r.count, 0);
  for (double f : {r.max_abs, r.underflow_fraction, r.overflow_fraction, r.zero_fraction, r.nonfinite_fraction})
    EXPECT_EQ(f, 0.0);
  // ...so it survives the JSON the store keeps (NaN would become null and be refused).
  LayerNumerics n;
  n.activation = r;
  EXPECT_NO_THROW(nlohmann::json(n).get<LayerNumerics>());
}

TEST(LayerNumerics, ProbedStepMeasuresFirstConvolutionAsADirectRecomputation) {
  Rng rng(7);
  const ResNetConfig model_config{20, 4, 3, 8, Stem::Auto};
  ResNet model(backend(), model_config, rng);
  Sgd sgd(backend(), {OptimizerKind::Sgd, 0.9f});
  PrecisionConfig config = precision_preset("amp-fp16");
  config.loss_scale.init_scale = 1024;
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(backend(), model, sgd, policy, scaler, 0.0f, 0.0f);
  const Tensor images = testing::random_tensor({4, 3, 8, 8}, rng, Layout::NHWC);
  Tensor labels = Tensor::empty({4}, DType::I32);
  for (int n = 0; n < 4; ++n) labels.data_as<int32_t>()[n] = n;
  Parameter& conv1 = *model.parameters().front();
  ASSERT_EQ(conv1.name, "conv1.weight");
  const Tensor weight_before = on_host(backend(), conv1.value).clone();

  GradientProbe probe;
  const StepResult r = step.run(images, labels, 0.1f, &probe);
  ASSERT_FALSE(r.skipped);
  const std::vector<LayerNumerics> layers = probe.layers().take(1, 0, r.loss_scale);
  ASSERT_FALSE(layers.empty());
  const LayerNumerics& first = layers.front();
  EXPECT_EQ(first.layer, "conv1");
  EXPECT_EQ(first.kind, "conv");
  EXPECT_EQ(first.in_channels, 3);
  EXPECT_EQ(first.out_channels, 16);
  EXPECT_EQ(first.forward_dtype, "f16");
  EXPECT_EQ(first.backward_dtype, "f16");
  // The images cast to FP16, the weight copy refreshed, the FP16 weight gradient widened (no input gradient).
  EXPECT_EQ(first.casts, 3);
  EXPECT_EQ(first.loss_scale, 1024);

  // The same convolution, computed directly: the same op on the same FP16 operands gives the same values.
  const Tensor x = cast(backend(), images, DType::F16);
  const Tensor w = cast(backend(), weight_before, DType::F16);
  Tensor y = Tensor::empty({4, 16, 8, 8}, DType::F16, x.layout());
  backend().conv2d_forward(x, w, y, {1, 1});
  const ValueRange direct = value_range(y);
  EXPECT_EQ(first.activation.count, direct.count);
  EXPECT_EQ(first.activation.max_abs, direct.max_abs);
  EXPECT_EQ(first.activation.zero_fraction, direct.zero_fraction);
  // The weight gradient was recorded scaled; the step then unscaled it in place (1/1024 is exact).
  const ValueRange unscaled = value_range(on_host(backend(), conv1.grad));
  EXPECT_EQ(first.weight_grad.count, 16 * 3 * 3 * 3);
  EXPECT_FLOAT_EQ(static_cast<float>(first.weight_grad.max_abs), static_cast<float>(unscaled.max_abs * 1024));
  EXPECT_GT(first.activation_grad.max_abs, 0);
  EXPECT_EQ(first.activation_grad.count, direct.count);  // the gradient of the output has the output's shape
}

class NumericsRecorder : public TrainObserver {
 public:
  void on_step(const StepReport& s) override { steps.push_back(s); }
  void on_histogram(const GradientHistogram& h) override { histograms.push_back(h); }
  void on_layer_numerics(const std::vector<LayerNumerics>& layers) override { probed.push_back(layers); }
  std::vector<StepReport> steps;
  std::vector<GradientHistogram> histograms;
  std::vector<std::vector<LayerNumerics>> probed;
};

TrainConfig tiny_config(const fs::path& data, const std::string& mode) {
  TrainConfig c;
  c.data_dir = data.string();
  c.depth = 20;
  c.epochs = 2;
  c.batch_size = 4;
  c.lr = 0.05f;
  c.threads = 2;
  c.data.validation_fraction = 0.25;
  c.precision = precision_preset(mode);
  return c;
}

// The layers a probed step must report: every parameter named "<layer>.weight", with its kind by name.
std::map<std::string, std::string> weighted_layers(const TrainConfig& c, int classes, int image_size) {
  Rng rng(0);
  ResNet model(backend(), {c.depth, classes, 3, image_size, c.stem}, rng);
  std::map<std::string, std::string> kinds;
  for (const Parameter* p : model.parameters()) {
    if (!p->name.ends_with(".weight")) continue;
    const std::string layer = p->name.substr(0, p->name.size() - 7);
    const bool bn = layer.find("bn") != std::string::npos || layer.ends_with("downsample.1");
    kinds[layer] = layer == "fc" ? "linear" : bn ? "batch_norm" : "conv";
  }
  return kinds;
}

void expect_every_layer(const std::vector<LayerNumerics>& layers, const std::map<std::string, std::string>& expected,
                        const std::string& mode, const StepReport& step) {
  std::set<std::string> seen;
  for (const LayerNumerics& n : layers) {
    SCOPED_TRACE(mode + " " + n.layer);
    EXPECT_TRUE(seen.insert(n.layer).second) << "reported twice";
    ASSERT_TRUE(expected.contains(n.layer)) << "not a layer of the model";
    EXPECT_EQ(n.kind, expected.at(n.layer));
    EXPECT_EQ(n.step, step.step);
    EXPECT_EQ(n.epoch, step.epoch);
    EXPECT_EQ(n.loss_scale, step.loss_scale);
    const bool matmul = n.kind != "batch_norm";
    // amp-fp16: convolutions and linear in FP16; batch norm's statistics in FP32 always.
    const std::string compute = mode == "amp-fp16" && matmul ? "f16" : "f32";
    EXPECT_EQ(n.forward_dtype, compute);
    EXPECT_EQ(n.backward_dtype, compute);
    if (mode == "fp32") {
      EXPECT_EQ(n.casts, 0);
    }
    if (mode == "amp-fp16" && matmul) {
      EXPECT_GE(n.casts, 1);  // at least its weight gradient widened
    }
    EXPECT_GT(n.in_channels, 0);
    EXPECT_GT(n.out_channels, 0);
    for (const ValueRange* r : {&n.activation, &n.activation_grad, &n.weight_grad}) {
      EXPECT_GT(r->count, 0);
      EXPECT_TRUE(std::isfinite(r->max_abs));
      EXPECT_GE(r->zero_fraction, 0.0);
      EXPECT_LE(r->zero_fraction + r->underflow_fraction + r->overflow_fraction + r->nonfinite_fraction, 1.0 + 1e-12);
    }
    EXPECT_GT(n.activation.max_abs, 0);
    EXPECT_EQ(n.activation_grad.count, n.activation.count);
    if (n.kind == "batch_norm") {
      EXPECT_EQ(n.weight_grad.count, n.out_channels);
    }
  }
  EXPECT_EQ(seen.size(), expected.size());
  // Forward order: the stem first, the classifier last.
  EXPECT_EQ(layers.front().layer, "conv1");
  EXPECT_EQ(layers.back().layer, "fc");
}

TEST(LayerNumerics, RealTrainingReportsEveryLayerOnceAnEpoch) {
  const fs::path data = make_stripes_folder("numerics", 12, 16);
  for (const std::string mode : {"amp-fp16", "fp32"}) {
    SCOPED_TRACE(mode);
    const TrainConfig c = tiny_config(data, mode);
    NumericsRecorder rec;
    train(c, &rec);
    const auto expected = weighted_layers(c, 2, 16);
    ASSERT_EQ(expected.size(), 43u);  // ResNet-20: 21 convolutions, 21 batch norms, fc
    ASSERT_EQ(rec.probed.size(), 2u) << "the last step of each epoch";
    const int64_t steps_per_epoch = static_cast<int64_t>(rec.steps.size()) / 2;
    for (size_t e = 0; e < rec.probed.size(); ++e) {
      const StepReport& last = rec.steps[(e + 1) * steps_per_epoch - 1];
      expect_every_layer(rec.probed[e], expected, mode, last);
    }
  }
  fs::remove_all(data);
}

TEST(LayerNumerics, NumericsEveryAddsStepsButLeavesTheHistogramsOnce) {
  const fs::path data = make_stripes_folder("numerics_every", 12, 16);
  TrainConfig c = tiny_config(data, "amp-fp16");
  c.max_steps_per_epoch = 4;
  NumericsRecorder every_epoch, every_step, every_second;
  train(c, &every_epoch);
  c.numerics_every = 1;
  train(c, &every_step);
  c.numerics_every = 2;
  train(c, &every_second);
  const int64_t total = static_cast<int64_t>(every_step.steps.size());
  const int64_t per_epoch = total / 2;
  ASSERT_EQ(per_epoch, 4);  // steps 0..3 and 4..7
  EXPECT_EQ(every_epoch.probed.size(), 2u);
  EXPECT_EQ(every_step.probed.size(), static_cast<size_t>(total));
  // Every second step (1, 3, 5, 7): here the last steps of the epochs are among them.
  ASSERT_EQ(every_second.probed.size(), 4u);
  for (size_t i = 0; i < every_second.probed.size(); ++i)
    EXPECT_EQ(every_second.probed[i].front().step, static_cast<int64_t>(2 * i + 1));
  // The histograms stay the last step's: two (activation, weight) per epoch whatever the interval.
  EXPECT_EQ(every_step.histograms.size(), every_epoch.histograms.size());
  for (size_t i = 0; i < every_step.histograms.size(); ++i)
    EXPECT_EQ(every_step.histograms[i].total, every_epoch.histograms[i].total);
  TrainConfig negative = c;
  negative.numerics_every = -1;
  try {
    validate(negative);
    ADD_FAILURE() << "a negative interval was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the per-layer numerics' interval must not be negative"), std::string::npos)
        << e.what();
  }
  fs::remove_all(data);
}

class StoreAndKeep : public StoreRecorder {
 public:
  using StoreRecorder::StoreRecorder;
  void on_layer_numerics(const std::vector<LayerNumerics>& layers) override {
    StoreRecorder::on_layer_numerics(layers);
    reported.insert(reported.end(), layers.begin(), layers.end());
  }
  std::vector<LayerNumerics> reported;
};

TEST(LayerNumerics, RunStoreKeepsWhatTheTrainingReported) {
  const fs::path data = make_stripes_folder("numerics_store", 12, 16);
  const fs::path db = fs::temp_directory_path() / "ampwb_numerics_store.sqlite";
  fs::remove(db);
  const TrainConfig c = tiny_config(data, "amp-fp16");
  int64_t id = 0;
  std::vector<LayerNumerics> reported;
  {
    RunStore store(db.string());
    StoreAndKeep recorder(store, c);
    train(c, &recorder);
    id = recorder.run_id();
    reported = recorder.reported;
  }
  ASSERT_EQ(reported.size(), 2u * 43u);
  const RunStore store(db.string(), RunStore::Mode::ReadOnly);
  const std::vector<LayerNumerics> stored = store.layer_numerics(id);
  ASSERT_EQ(stored.size(), reported.size());
  for (size_t i = 0; i < stored.size(); ++i) EXPECT_EQ(nlohmann::json(stored[i]), nlohmann::json(reported[i])) << i;
  fs::remove_all(data);
  fs::remove(db);
}

}  // namespace
}  // namespace ampwb
