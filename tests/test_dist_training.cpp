// Data-parallel steps on real ranks: ctest runs this program under `mpirun -np 2` (dist.training_two_ranks), every
// rank running the same tests in the same order, so every collective is reached by every rank (no ASSERT between
// collectives). Each rank trains on its own batch; each also computes every rank's gradients alone, from the seeds,
// to know what the average must be.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/crc32c.h"
#include "dist/make_communicator.h"
#include "op_test_util.h"
#include "train/gradient_reducer.h"
#include "train/mixed_precision_step.h"

namespace ampwb {
namespace {

constexpr uint64_t kModelSeed = 59, kBatchSeed = 590;
const ResNetConfig kModel{20, 3, 3, 8, Stem::Auto};  // depth, classes, channels, image size

Communicator& world() {
  static const std::unique_ptr<Communicator> communicator = make_communicator(read_launch_info(process_environment()));
  return *communicator;
}

struct Batch {
  Tensor images, labels;
};

// Rank r's batch of 4 random images; with `poisoned`, one pixel is infinite, so its gradients are not finite.
Batch batch_of(int rank, bool poisoned = false) {
  Rng rng(kBatchSeed + static_cast<uint64_t>(rank));
  Batch b{testing::random_tensor({4, 3, 8, 8}, rng, Layout::NHWC), Tensor::empty({4}, DType::I32)};
  for (int n = 0; n < 4; ++n) b.labels.data_as<int32_t>()[n] = static_cast<int32_t>(rng.below(3));
  if (poisoned) b.images.data_as<float>()[5] = INFINITY;
  return b;
}

struct Steps {
  std::vector<StepResult> results;
  std::vector<float> scales;                       // the loss scale after each step
  std::vector<std::vector<uint32_t>> checksums;    // of every parameter's value after each step
  std::vector<std::vector<float>> initial, grads;  // the weights before the first step; the last step's gradients
};

// `steps` steps on `batch` of a fresh ResNet and SGD with momentum in `mode`, one CPU thread. With `world`, each
// rank starts from weights of its own, which the reducer's broadcast replaces with rank 0's; alone, from rank 0's.
Steps train(const std::string& mode, const Batch& batch, int steps, Communicator* world) {
  CpuBackend backend({1});
  Rng rng(kModelSeed + (world ? static_cast<uint64_t>(world->rank()) * 1000 : 0));
  ResNet model(backend, kModel, rng);
  Sgd sgd(backend, {OptimizerKind::Sgd, 0.9f});
  PrecisionConfig config = precision_preset(mode);
  config.loss_scale.init_scale = 1024;
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(backend, model, sgd, policy, scaler, 0.0f, 0.0f);
  std::optional<GradientReducer> reducer;
  if (world) {
    std::vector<Buffer*> buffers;
    model.collect_buffers(buffers);
    reducer.emplace(*world, model.parameters());
    reducer->broadcast_from_rank0(buffers);
    step.set_gradient_reducer(&*reducer);
  }
  Steps out;
  for (Parameter* p : model.parameters()) out.initial.push_back(to_float_vector(p->value));
  for (int i = 0; i < steps; ++i) {
    out.results.push_back(step.run(batch.images, batch.labels, 0.1f));
    out.scales.push_back(scaler.scale());
    std::vector<uint32_t>& sums = out.checksums.emplace_back();
    for (Parameter* p : model.parameters()) sums.push_back(crc32c(p->value.data(), p->value.nbytes()));
  }
  for (Parameter* p : model.parameters()) out.grads.push_back(to_float_vector(fp32_gradient(backend, *p)));
  return out;
}

// Rank 0's values on every rank, to compare with its own.
template <class T>
std::vector<T> rank_zero_values(std::vector<T> values) {
  world().broadcast(values.data(), values.size() * sizeof(T), 0);
  return values;
}

class DataParallelStep : public ::testing::TestWithParam<const char*> {};

// Each rank's gradients are the mean of every rank's (the same bits as summing the ranks' own gradients in FP32 and
// halving), and every step leaves bit-identical weights on every rank, from weights that differed before.
TEST_P(DataParallelStep, GradientsAreTheRanksMeanAndWeightsStayBitIdentical) {
  const std::string mode = GetParam();
  const int ranks = world().world_size();
  EXPECT_EQ(ranks, 2) << "run under mpirun -np 2";
  constexpr int kSteps = 4;
  const Steps distributed = train(mode, batch_of(world().rank()), kSteps, &world());

  std::vector<std::vector<float>> mean;  // every rank's first-step gradients alone, summed in rank order, averaged
  for (int r = 0; r < ranks; ++r) {
    const Steps alone = train(mode, batch_of(r), 1, nullptr);
    if (mean.empty()) mean.assign(alone.grads.size(), {});
    for (size_t p = 0; p < alone.grads.size(); ++p) {
      mean[p].resize(alone.grads[p].size());
      for (size_t i = 0; i < mean[p].size(); ++i) mean[p][i] += alone.grads[p][i];
    }
  }
  const Steps one_step = train(mode, batch_of(world().rank()), 1, &world());
  size_t differing = 0;
  for (size_t p = 0; p < mean.size(); ++p)
    for (size_t i = 0; i < mean[p].size(); ++i)
      differing += one_step.grads[p][i] != mean[p][i] * (1.0f / static_cast<float>(ranks));
  EXPECT_EQ(differing, 0u) << "gradient values that are not the ranks' mean";

  for (int s = 0; s < kSteps; ++s) {
    std::vector<uint32_t> sums = distributed.checksums[static_cast<size_t>(s)];
    EXPECT_EQ(rank_zero_values(sums), sums) << mode << ": the weights after step " << s + 1 << " differ";
    EXPECT_FALSE(distributed.results[static_cast<size_t>(s)].skipped) << "step " << s + 1;
  }
  EXPECT_EQ(rank_zero_values(distributed.scales), distributed.scales);
}

INSTANTIATE_TEST_SUITE_P(Modes, DataParallelStep, ::testing::Values("fp32", "amp-fp16", "amp-bf16"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// An overflow on one rank is an overflow on every rank: all skip the step, keep their weights, and back the scale off
// alike; the next step, from finite batches everywhere, is taken everywhere.
TEST(DataParallelStepOverflow, AnInfOnOneRankSkipsTheStepOnEveryRank) {
  const int last = world().world_size() - 1;
  const Steps poisoned = train("amp-fp16", batch_of(world().rank(), world().rank() == last), 1, &world());
  int64_t skipped = poisoned.results[0].skipped ? 1 : 0;
  world().all_reduce_sum(&skipped, 1);
  EXPECT_EQ(skipped, world().world_size()) << "ranks that skipped the step";
  EXPECT_EQ(poisoned.scales[0], 512.0f) << "backed off once from 1024";
  EXPECT_EQ(rank_zero_values(poisoned.scales), poisoned.scales);
  std::vector<uint32_t> sums = poisoned.checksums[0];
  EXPECT_EQ(rank_zero_values(sums), sums) << "the weights differ between the ranks";
  // Unchanged: rank 0's weights before the step, which every rank took.
  const Steps fresh = train("amp-fp16", batch_of(0), 0, nullptr);
  for (size_t p = 0; p < fresh.initial.size(); ++p)
    EXPECT_EQ(crc32c(fresh.initial[p].data(), fresh.initial[p].size() * sizeof(float)), sums[p]) << "parameter " << p;
}

}  // namespace
}  // namespace ampwb
