// The gradients' all-reduce on real ranks (train/gradient_reducer.h): ctest runs this program under `mpirun -np 2`
// (dist.gradients_two_ranks), every rank running the same tests in the same order, so every collective is reached by
// every rank (no ASSERT between collectives). The overlapped all-reduce gives the bits of the one after backward; a
// 16-bit all-reduce's mean is within the bound docs/distributed.md states of a float64 reference; FP16's overflow
// skips the step on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/crc32c.h"
#include "core/half.h"
#include "core/setting_error.h"
#include "dist/make_communicator.h"
#include "nn/loss.h"
#include "op_test_util.h"
#include "train/gradient_reducer.h"
#include "train/mixed_precision_step.h"

namespace ampwb {
namespace {

constexpr uint64_t kModelSeed = 591, kBatchSeed = 5910;
const ResNetConfig kModel{20, 3, 3, 8, Stem::Auto};  // depth, classes, channels, image size
constexpr size_t kSmallBuckets = 16 << 10;           // the model's 0.27 M parameters in many buckets

Communicator& world() {
  static const std::unique_ptr<Communicator> communicator = make_communicator(read_launch_info(process_environment()));
  return *communicator;
}

struct Batch {
  Tensor images, labels;
};

Batch batch_of(int rank) {
  Rng rng(kBatchSeed + static_cast<uint64_t>(rank));
  Batch b{testing::random_tensor({4, 3, 8, 8}, rng, Layout::NHWC), Tensor::empty({4}, DType::I32)};
  for (int n = 0; n < 4; ++n) b.labels.data_as<int32_t>()[n] = static_cast<int32_t>(rng.below(3));
  return b;
}

// The same model on every rank (one seed), its gradients from this rank's batch, scaled as AMP's loss scale does.
struct Model {
  CpuBackend backend{{1}};
  Rng rng{kModelSeed};
  ResNet net{backend, kModel, rng};
  SoftmaxCrossEntropy loss{backend};

  void backward(float loss_scale) {
    const Batch batch = batch_of(world().rank());
    loss.forward(net.forward(batch.images, Mode::Train), batch.labels, loss_scale);
    net.backward(loss.backward());
  }
  std::vector<std::vector<float>> grads() {
    std::vector<std::vector<float>> out;
    for (Parameter* p : net.parameters()) out.push_back(to_float_vector(p->grad));
    return out;
  }
  void set_grads(const std::vector<std::vector<float>>& values) {
    const std::vector<Parameter*> params = net.parameters();
    for (size_t p = 0; p < params.size(); ++p)
      std::memcpy(params[p]->grad.data(), values[p].data(), values[p].size() * sizeof(float));
  }
};

uint32_t checksum(const std::vector<std::vector<float>>& values) {
  uint32_t sum = 0;
  for (const auto& v : values) sum = crc32c(v.data(), v.size() * sizeof(float), sum);
  return sum;
}

uint32_t rank_zero_value(uint32_t value) {
  world().broadcast(&value, sizeof value, 0);
  return value;
}

// Buckets all-reduced as backward leaves their layers give the bits of the same buckets all-reduced after backward.
TEST(GradientAllReduce, OverlappedWithBackwardGivesTheSameBitsAsAfterIt) {
  EXPECT_EQ(world().world_size(), 2) << "run under mpirun -np 2";
  Model after;
  after.backward(1024);
  GradientReducer after_reducer(world(), after.net.parameters(), GradientAllReduce::F32, kSmallBuckets);
  after_reducer.average_gradients();

  Model overlapped;
  GradientReducer reducer(world(), overlapped.net.parameters(), GradientAllReduce::F32, kSmallBuckets);
  std::vector<size_t> launched;  // after each of backward's layers
  reducer.begin();
  overlapped.net.set_gradients_final([&](Layer& layer) {
    reducer.gradients_final(layer);
    launched.push_back(reducer.buckets_launched());
  });
  overlapped.backward(1024);
  overlapped.net.set_gradients_final(nullptr);
  reducer.finish();

  EXPECT_GT(reducer.buckets(), 3u);
  EXPECT_GE(launched.size(), 3u);
  if (launched.size() >= 2) {
    EXPECT_GT(launched[launched.size() - 2], 1u) << "buckets handed over before backward reached the stem";
    EXPECT_EQ(launched.back(), reducer.buckets());
  }
  const auto want = after.grads(), got = overlapped.grads();
  size_t differing = 0;
  for (size_t p = 0; p < want.size(); ++p)
    for (size_t i = 0; i < want[p].size(); ++i) differing += std::memcmp(&want[p][i], &got[p][i], sizeof(float)) != 0;
  EXPECT_EQ(differing, 0u);
  const uint32_t mine = checksum(got);
  EXPECT_EQ(rank_zero_value(mine), mine) << "the ranks' means differ";
}

struct Precision {
  GradientAllReduce precision;
  double unit_roundoff;  // of the format the values travel in
  double underflow;      // the most a value in the format's subnormal range loses to one rounding
};

class SixteenBitAllReduce : public ::testing::TestWithParam<Precision> {};

// Each element of the mean is within N u mean_r |g_r| (+ FP16's subnormal steps) of the float64 mean: each rank's
// gradient rounded once (u |g_r|), each of the N - 1 partial sums rounded once more (u of at most sum_r |g_r|).
TEST_P(SixteenBitAllReduce, MeanIsWithinTheStatedBoundOfTheExactMean) {
  const Precision p = GetParam();
  const double n = world().world_size();
  Model model;
  model.backward(1024);
  const std::vector<std::vector<float>> mine = model.grads();

  std::vector<double> exact, mean_abs;  // over the ranks, every gradient value side by side
  for (const auto& values : mine)
    for (float v : values) exact.push_back(v), mean_abs.push_back(std::abs(static_cast<double>(v)));
  world().all_reduce_sum(exact.data(), exact.size());
  world().all_reduce_sum(mean_abs.data(), mean_abs.size());
  for (size_t i = 0; i < exact.size(); ++i) exact[i] /= n, mean_abs[i] /= n;

  auto mean_in = [&](GradientAllReduce precision) {
    model.set_grads(mine);
    GradientReducer reducer(world(), model.net.parameters(), precision, kSmallBuckets);
    reducer.average_gradients();
    std::vector<float> flat;
    for (const auto& values : model.grads()) flat.insert(flat.end(), values.begin(), values.end());
    return flat;
  };
  const std::vector<float> f32 = mean_in(GradientAllReduce::F32), low = mean_in(p.precision);

  size_t outside_16 = 0, outside_32 = 0, rounded = 0;
  double worst = 0;  // the largest error over its bound's mean |g| term
  for (size_t i = 0; i < exact.size(); ++i) {
    const double fp32_rounding = 0x1p-24 * std::abs(exact[i]);  // the mean itself, 1/N times the sum, in FP32
    // The division by N before the sum rounds too where N is not a power of two, and below 2^-14 wherever it is.
    const double divisions = std::exp2(std::round(std::log2(n))) == n ? 0 : 1;
    const double bound_16 =
        (n + divisions) * p.unit_roundoff * (1 + 0x1p-10) * mean_abs[i] + (n + 1) * p.underflow + fp32_rounding;
    const double bound_32 = (n - 1) * 0x1p-24 * mean_abs[i] + fp32_rounding;
    const double error_16 = std::abs(low[i] - exact[i]);
    outside_16 += error_16 > bound_16;
    outside_32 += std::abs(f32[i] - exact[i]) > bound_32;
    rounded += low[i] != f32[i];
    if (mean_abs[i] > 0) worst = std::max(worst, error_16 / (n * p.unit_roundoff * mean_abs[i]));
  }
  EXPECT_EQ(outside_16, 0u) << "16-bit means outside the bound, of " << exact.size();
  EXPECT_EQ(outside_32, 0u) << "FP32 means outside FP32's bound";
  EXPECT_GT(rounded, exact.size() / 2) << "the 16-bit mean should differ from FP32's where it rounded";
  std::cout << "largest 16-bit error: " << worst << " of N u mean |g|\n";
  std::vector<float> low_copy = low;
  const uint32_t sum = crc32c(low_copy.data(), low_copy.size() * sizeof(float));
  EXPECT_EQ(rank_zero_value(sum), sum) << "the ranks' 16-bit means differ";
}

INSTANTIATE_TEST_SUITE_P(Formats, SixteenBitAllReduce,
                         ::testing::Values(Precision{GradientAllReduce::F16, 0x1p-11, 0x1p-25},
                                           Precision{GradientAllReduce::BF16, 0x1p-8, 0}),
                         [](const auto& info) {
                           return info.param.precision == GradientAllReduce::F16 ? "fp16" : "bf16";
                         });

// Past 65504 an FP16 value becomes inf: a rank's own value, or the sum of finite ones.
TEST(SixteenBitAllReduce, Fp16OverflowIsInfOnEveryRank) {
  std::vector<uint16_t> values = {float_to_half_bits(world().rank() == 0 ? 70000.0f : 1.0f),
                                  float_to_half_bits(40000.0f), float_to_half_bits(30000.0f),
                                  float_to_bfloat16_bits(40960.0f)};
  world().all_reduce_sum(values.data(), 3, Float16Format::F16);
  world().all_reduce_sum(values.data() + 3, 1, Float16Format::BF16);
  EXPECT_TRUE(std::isinf(half_bits_to_float(values[0])));
  EXPECT_TRUE(std::isinf(half_bits_to_float(values[1]))) << "40000 + 40000";
  EXPECT_EQ(half_bits_to_float(values[2]), 60000.0f);
  EXPECT_EQ(bfloat16_bits_to_float(values[3]), 81920.0f) << "BF16: FP32's range";
}

// A loss scale that puts gradients past FP16's range but not FP32's or BF16's: with the FP16 all-reduce the step is
// skipped on every rank and the scale backs off, as PyTorch's GradScaler does behind DDP's fp16_compress_hook; the
// FP32 and BF16 all-reduces take it.
TEST(SixteenBitAllReduce, Fp16OverflowSkipsTheStepOnEveryRankAndBacksTheScaleOff) {
  for (GradientAllReduce precision : {GradientAllReduce::F32, GradientAllReduce::BF16, GradientAllReduce::F16}) {
    Model model;
    Sgd sgd(model.backend, {OptimizerKind::Sgd, 0.9f});
    PrecisionConfig config = precision_preset("amp-bf16");
    config.loss_scale.kind = LossScaleKind::Dynamic;
    config.loss_scale.init_scale = 0x1p30;
    const PrecisionPolicy policy(config);
    LossScaler scaler(config.loss_scale);
    MixedPrecisionStep step(model.backend, model.net, sgd, policy, scaler, 0.0f, 0.0f);
    GradientReducer reducer(world(), model.net.parameters(), precision);
    step.set_gradient_reducer(&reducer);
    const Batch batch = batch_of(world().rank());
    const StepResult r = step.run(batch.images, batch.labels, 0.1f);
    int64_t skipped = r.skipped ? 1 : 0;
    world().all_reduce_sum(&skipped, 1);
    const bool fp16 = precision == GradientAllReduce::F16;
    EXPECT_EQ(skipped, fp16 ? world().world_size() : 0) << "ranks that skipped the step";
    EXPECT_EQ(scaler.scale(), fp16 ? 0x1p29f : 0x1p30f);
  }
}

// Without a dynamic scale nothing would skip that step: the weights would take the inf. Refused, naming the setting.
TEST(SixteenBitAllReduce, Fp16NeedsADynamicLossScale) {
  Model model;
  Sgd sgd(model.backend, {OptimizerKind::Sgd, 0.9f});
  PrecisionConfig config = precision_preset("amp-bf16");
  config.loss_scale.kind = LossScaleKind::Static;
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(model.backend, model.net, sgd, policy, scaler, 0.0f, 0.0f);
  GradientReducer fp16(world(), model.net.parameters(), GradientAllReduce::F16);
  try {
    step.set_gradient_reducer(&fp16);
    ADD_FAILURE() << "an FP16 all-reduce with a static loss scale was accepted";
  } catch (const SettingError& e) {
    EXPECT_EQ(e.setting(), "data_parallel.gradient_allreduce");
  }
  GradientReducer bf16(world(), model.net.parameters(), GradientAllReduce::BF16);
  EXPECT_NO_THROW(step.set_gradient_reducer(&bf16));
}

}  // namespace
}  // namespace ampwb
