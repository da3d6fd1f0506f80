// The precision divergence (amp/precision_divergence.h, train/divergence_step.h) of a tiny ResNet on real images:
// FP32 against itself is exactly zero; amp-bf16's first convolution differs from FP32 by BF16 rounding, as a direct
// computation of that convolution says; the layers it names follow from its per-layer numbers; gradients are
// compared unscaled; and the run's model, batch-norm statistics and optimizer are left bitwise as they were.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "image_folder_util.h"
#include "train/divergence_step.h"
#include "train/mixed_precision_step.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;

CpuBackend& backend() {
  static CpuBackend b({2});
  return b;
}

// A batch of 8 real 16x16 images (stripes, two classes), as the trainer's loader makes it.
Batch real_batch() {
  static const fs::path data = make_stripes_folder("divergence", 8, 16);
  const Dataset dataset = Dataset::open(data.string(), {0.25, 1, 0, "-"});
  LoaderOptions loading;
  loading.image_size = 16;
  loading.batch_size = 8;
  loading.seed = 1;
  loading.cache_budget_bytes = 0;
  DataLoader loader(dataset, Split::Train, loading);
  loader.start_epoch(1);
  Batch batch;
  EXPECT_TRUE(loader.next(batch));
  return batch;
}

// A ResNet-20 after a few amp-bf16 SGD steps on the batch: trained weights, moved batch-norm statistics, momentum.
struct TrainedModel {
  Rng rng{3};
  ResNet model{backend(), {20, 2, 3, 16, Stem::Auto}, rng};
  Sgd sgd{backend(), {OptimizerKind::Sgd, 0.9f}};
  PrecisionPolicy policy{precision_preset("amp-bf16")};
  LossScaler scaler{policy.config().loss_scale};

  explicit TrainedModel(const Batch& batch) {
    MixedPrecisionStep step(backend(), model, sgd, policy, scaler, 0.0f, 0.0f);
    for (int i = 0; i < 3; ++i) step.run(batch.images, batch.labels, 0.05f);
  }
};

std::vector<std::vector<uint8_t>> bytes_of(const std::vector<const Tensor*>& tensors) {
  std::vector<std::vector<uint8_t>> out;
  for (const Tensor* t : tensors) {
    const Tensor host = on_host(backend(), *t);
    const auto* p = static_cast<const uint8_t*>(host.data());
    out.emplace_back(p, p + host.nbytes());
  }
  return out;
}

// Everything of the run's that a step could change: master weights, their low-precision copies, gradients,
// batch-norm running statistics, the optimizer's momentum.
std::vector<const Tensor*> run_state(TrainedModel& m) {
  std::vector<const Tensor*> out;
  for (Parameter* p : m.model.parameters()) {
    out.push_back(&p->value);
    out.push_back(p->low_grad.defined() ? &p->low_grad : &p->grad);  // the gradient as the step left it
    if (p->compute.defined()) out.push_back(&p->compute);
  }
  std::vector<Buffer*> buffers;
  m.model.collect_buffers(buffers);
  for (Buffer* b : buffers) out.push_back(&b->value);
  for (auto& [name, t] : m.sgd.state()) out.push_back(&t);
  return out;
}

double relative_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(diff / norm);
}

TEST(PrecisionDivergence, Fp32AgainstItselfIsExactlyZeroAndNamesNothing) {
  const Batch batch = real_batch();
  TrainedModel m(batch);
  const PrecisionPolicy fp32;
  const PrecisionDivergence d = measure_divergence(backend(), m.model, fp32, batch.images, batch.labels, {});
  size_t weighted = 0;  // every conv, batch norm and linear layer: each has a "<layer>.weight"
  for (const Parameter* p : m.model.parameters()) weighted += p->name.ends_with(".weight");
  ASSERT_EQ(d.layers.size(), weighted);
  EXPECT_EQ(d.layers.front().layer, "conv1");
  EXPECT_EQ(d.layers.back().layer, "fc");
  for (const LayerDivergence& l : d.layers) {
    SCOPED_TRACE(l.layer);
    for (const TensorDivergence* t : {&l.activation, &l.activation_grad, &l.weight_grad}) {
      EXPECT_TRUE(t->measured());
      EXPECT_EQ(t->relative_error, 0.0);
    }
  }
  EXPECT_EQ(d.loss.relative_error, 0.0);
  EXPECT_EQ(d.unit_roundoff, 0.0);
  EXPECT_TRUE(d.first_departing.empty());
  EXPECT_TRUE(d.largest_growth.empty());
  EXPECT_NE(divergence_sentence(d).find("its own reference"), std::string::npos);
}

TEST(PrecisionDivergence, AmpBf16FirstConvolutionDiffersByBf16RoundingAsADirectComputation) {
  const Batch batch = real_batch();
  TrainedModel m(batch);
  const Tensor w = on_host(backend(), m.model.parameters().front()->value).clone();
  const PrecisionDivergence d = measure_divergence(backend(), m.model, m.policy, batch.images, batch.labels, {});
  ASSERT_FALSE(d.layers.empty());
  EXPECT_EQ(d.mode, "amp-bf16");
  EXPECT_EQ(d.samples, 8);
  EXPECT_EQ(d.unit_roundoff, 1.0 / 256);
  const LayerDivergence& conv1 = d.layers.front();
  ASSERT_EQ(conv1.layer, "conv1");
  EXPECT_EQ(conv1.forward_dtype, "bf16");

  // The stem convolution directly: FP32 operands against BF16 ones (FP32 accumulation, a BF16 output).
  const Tensor x = batch.images;
  Tensor y32 = Tensor::empty({8, 16, 16, 16}, DType::F32, x.layout());
  backend().conv2d_forward(x, w, y32, {1, 1});
  const Tensor x16 = cast(backend(), x, DType::BF16), w16 = cast(backend(), w, DType::BF16);
  Tensor y16 = Tensor::empty({8, 16, 16, 16}, DType::BF16, x.layout());
  backend().conv2d_forward(x16, w16, y16, {1, 1});
  const double direct = relative_l2(to_float_vector(y16), to_float_vector(y32));
  EXPECT_NEAR(conv1.activation.relative_error, direct, direct * 1e-9);
  // Of the order of one BF16 rounding: more than a tenth of it, well under the departure line.
  EXPECT_GT(direct, 0.1 * d.unit_roundoff);
  EXPECT_LT(direct, 2 * d.unit_roundoff);
  // Gradients differ more (ReLU masks flipped by rounding near zero: here about 0.35 at the stem), but less than
  // their own size.
  EXPECT_GT(conv1.weight_grad.relative_error, 0.0);
  EXPECT_LT(conv1.weight_grad.relative_error, 1.0);
  // Their own norm within that error of FP32's (the triangle inequality): BF16 loses no gradient here.
  EXPECT_NEAR(conv1.weight_grad.norm / conv1.weight_grad.reference_norm, 1.0,
              conv1.weight_grad.relative_error * 1.0001);
  EXPECT_GT(d.loss.relative_error, 0.0);
  EXPECT_LT(d.loss.relative_error, 0.05);

  // The named layers follow from the per-layer numbers, by the rule of the header.
  std::string first;
  std::string growth;
  double largest = 0, input_error = 0;
  for (const LayerDivergence& l : d.layers) {
    ASSERT_TRUE(l.activation.measured()) << l.layer;
    if (first.empty() && l.activation.relative_error > kDepartureUnits * d.unit_roundoff) first = l.layer;
    const double g = l.activation.relative_error / std::max(input_error, d.unit_roundoff);
    if (g > largest) {
      largest = g;
      growth = l.layer;
    }
    input_error = l.activation.relative_error;
  }
  EXPECT_EQ(d.first_departing, first);
  EXPECT_EQ(d.largest_growth, growth);
  EXPECT_DOUBLE_EQ(d.largest_growth_factor, largest);
  EXPECT_NE(first, "conv1");
  const std::string sentence = divergence_sentence(d);
  EXPECT_NE(sentence.find(first.empty() ? "'s activations stay within" : "departs from FP32 first at " + first),
            std::string::npos)
      << sentence;
  // The line is the activations'; the gradients, well over it here, are said to differ more, the largest named.
  double largest_grad = 0;
  std::string largest_grad_layer;
  for (const LayerDivergence& l : d.layers)
    for (const TensorDivergence* t : {&l.activation_grad, &l.weight_grad})
      if (t->relative_error > largest_grad) {
        largest_grad = t->relative_error;
        largest_grad_layer = l.layer;
      }
  ASSERT_GT(largest_grad, d.threshold);
  const TensorDivergence largest_text{largest_grad, 1, 0};
  EXPECT_NE(sentence.find("its gradients differ more (up to " + relative_error_text(largest_text) + ", " +
                          largest_grad_layer + "'s"),
            std::string::npos)
      << sentence;
}

// The sentence on gradients says what they hold: inf/NaN before any error, and "more" only where it is more.
TEST(PrecisionDivergence, TheSentenceSaysWhatTheGradientsHold) {
  PrecisionDivergence d;
  d.mode = "amp-bf16";
  d.format = "bf16";
  d.unit_roundoff = 1.0 / 256;
  d.threshold = kDepartureUnits * d.unit_roundoff;
  d.loss = {0.001, 1, 0};
  const auto layer = [](const std::string& name, double activation, TensorDivergence grad) {
    return LayerDivergence{name, "conv", "bf16", {activation, 1, 0}, grad, {0.001, 1, 0}};
  };
  d.layers = {layer("conv1", 0.002, {0.5, 1, 0}), layer("fc", 0.003, {0.01, 1, 0})};
  find_departures(d);
  std::string sentence = divergence_sentence(d);
  EXPECT_NE(sentence.find("its gradients differ more (up to 5.00e-01, conv1's output gradient)"), std::string::npos)
      << sentence;
  d.layers = {layer("conv1", 0.4, {0.1, 1, 0}), layer("fc", 0.003, {0.01, 1, 0})};  // activations past it first
  find_departures(d);
  sentence = divergence_sentence(d);
  EXPECT_NE(sentence.find("its gradients are over the line too (up to 1.00e-01, conv1's output gradient)"),
            std::string::npos)
      << sentence;
  d.layers = {layer("conv1", 0.002, {0.5, 1, 0}), layer("fc", 0.003, {0, 0, 3})};
  find_departures(d);
  sentence = divergence_sentence(d);
  EXPECT_NE(sentence.find("its gradients hold inf/NaN where FP32's are finite (fc's output gradient among them)"),
            std::string::npos)
      << sentence;
  EXPECT_EQ(sentence.find("up to"), std::string::npos) << sentence;
  // Gradients all zero where FP32's are not (FP16 without loss scaling, late in training): underflow, said as such.
  d.mode = "fp16-pure";
  d.format = "fp16";
  const TensorDivergence zero =
      compare_values(std::vector<float>(4, 0.0f).data(), 1, std::vector<float>{3e-8f, -1e-8f, 0, 2e-8f}.data(), 4);
  EXPECT_EQ(zero.norm, 0);
  EXPECT_DOUBLE_EQ(zero.relative_error, 1);
  d.layers = {layer("conv1", 0.002, zero), layer("fc", 0.003, {0.5, 1, 0, 0.8})};
  find_departures(d);
  sentence = divergence_sentence(d);
  EXPECT_NE(sentence.find("its gradients vanish: 1 of 4 are all zero where FP32's are not (conv1's output gradient "
                          "among them), their values under FP16's smallest, with no loss scale to lift them"),
            std::string::npos)
      << sentence;
  EXPECT_EQ(sentence.find("ReLU's zeros"), std::string::npos) << sentence;
}

TEST(PrecisionDivergence, ScaledGradientsAreComparedUnscaled) {
  const Batch batch = real_batch();
  TrainedModel m(batch);
  const PrecisionPolicy fp16(precision_preset("amp-fp16"));
  const PrecisionDivergence d =
      measure_divergence(backend(), m.model, fp16, batch.images, batch.labels, {1024.0f, 0.0f});
  EXPECT_EQ(d.loss_scale, 1024);
  EXPECT_EQ(d.unit_roundoff, 1.0 / 2048);
  for (const LayerDivergence& l : d.layers) {
    SCOPED_TRACE(l.layer);
    ASSERT_TRUE(l.weight_grad.measured());
    ASSERT_TRUE(l.activation_grad.measured());
    // Scaled, every gradient would be 1023 times too large.
    EXPECT_LT(l.weight_grad.relative_error, 0.5);
    EXPECT_LT(l.activation_grad.relative_error, 0.5);
  }
}

TEST(PrecisionDivergence, LeavesTheRunsModelAndOptimizerBitwiseUnchanged) {
  const Batch batch = real_batch();
  TrainedModel m(batch);
  const std::vector<const Tensor*> state = run_state(m);
  ASSERT_GT(m.sgd.state().size(), 0u);
  const auto before = bytes_of(state);
  measure_divergence(backend(), m.model, m.policy, batch.images, batch.labels, {});
  EXPECT_EQ(bytes_of(run_state(m)), before);
}

TEST(PrecisionDivergence, RefusesTf32AndASingleSample) {
  const Batch batch = real_batch();
  TrainedModel m(batch);
  const PrecisionPolicy tf32(precision_preset("tf32"));
  EXPECT_THROW(measure_divergence(backend(), m.model, tf32, batch.images, batch.labels, {}), Error);
  DivergenceOptions one;
  one.max_samples = 1;
  EXPECT_THROW(measure_divergence(backend(), m.model, m.policy, batch.images, batch.labels, one), Error);
}

}  // namespace
}  // namespace ampwb
