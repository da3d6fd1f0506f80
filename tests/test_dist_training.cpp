// Data-parallel steps on real ranks: ctest runs this program under `mpirun -np 2` (dist.training_two_ranks), every
// rank running the same tests in the same order, so every collective is reached by every rank (no ASSERT between
// collectives). Each rank trains on its own batch; each also computes every rank's gradients alone, from the seeds,
// to know what the average must be, or, for synchronised batch norm, one process's run at the global batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/crc32c.h"
#include "data/shard.h"
#include "dist/make_communicator.h"
#include "nn/batchnorm2d.h"
#include "op_test_util.h"
#include "step_util.h"
#include "train/gradient_reducer.h"
#include "train/mixed_precision_step.h"

namespace ampwb {
namespace {

using testing::StepRig;

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
  StepRig rig(backend, mode, kModel, rng);
  ResNet& model = rig.model;
  MixedPrecisionStep& step = rig.step;
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
    out.scales.push_back(rig.scaler.scale());
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

// ---- Synchronised batch norm: two ranks at batch B against one process at batch 2B ---------------------------------

constexpr int kSyncSteps = 20, kPerRank = 4, kImageValues = 3 * 8 * 8;
constexpr float kSyncLr = 0.002f;  // small enough that 20 steps stay out of chaos (0.05 amplified 1e-7 to 1e-1)

// One epoch of kSyncSteps global batches of random images, the same on every rank, and its shuffled order (one
// seed for every rank, as the loaders shuffle).
struct Epoch {
  std::vector<float> images;  // (N, 3, 8, 8), an image's values contiguous
  std::vector<int32_t> labels;
  std::vector<int64_t> order;
};

Epoch random_epoch() {
  constexpr int64_t kImages = int64_t{kSyncSteps} * 2 * kPerRank;
  Rng rng(kBatchSeed);
  Epoch e;
  e.images = to_float_vector(testing::random_tensor({kImages, kImageValues}, rng));
  for (int64_t i = 0; i < kImages; ++i) e.labels.push_back(static_cast<int32_t>(rng.below(3)));
  e.order.resize(kImages);
  std::iota(e.order.begin(), e.order.end(), int64_t{0});
  rng.shuffle(e.order.begin(), e.order.end());
  return e;
}

// The batches `shard` takes of the epoch at `batch_size` each (data/shard.h, as the training loader cuts them), as
// lists of images.
std::vector<std::vector<int64_t>> shard_batches(const Epoch& e, int batch_size, DataShard shard) {
  const ShardPlan plan = plan_shard(static_cast<int64_t>(e.order.size()), batch_size, false, shard);
  const std::vector<int64_t> mine = take_shard(e.order, shard, plan.shard_size);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t b = 0; b < plan.batches(); ++b)
    batches.emplace_back(mine.begin() + plan.begins[static_cast<size_t>(b)],
                         mine.begin() + plan.begins[static_cast<size_t>(b) + 1]);
  return batches;
}

Batch gather(const Epoch& e, const std::vector<int64_t>& images) {
  const auto n = static_cast<int64_t>(images.size());
  std::vector<float> values;
  Batch b{Tensor(), Tensor::empty({n}, DType::I32)};
  for (int64_t i = 0; i < n; ++i) {
    const auto at = e.images.begin() + images[static_cast<size_t>(i)] * kImageValues;
    values.insert(values.end(), at, at + kImageValues);
    b.labels.data_as<int32_t>()[i] = e.labels[static_cast<size_t>(images[static_cast<size_t>(i)])];
  }
  b.images = tensor_from_floats(values, {n, 3, 8, 8}, DType::F32, Layout::NHWC);
  return b;
}

struct Trajectory {
  std::vector<double> losses;              // each step's, over every rank's batch
  std::vector<std::vector<float>> finals;  // every parameter's and buffer's change over the steps
  int skipped = 0;
};

// A step on each batch, from rank 0's weights, SGD with momentum in `mode`, one CPU thread. With `world`: the ranks'
// gradients averaged and, with `sync`, batch norm synchronised over them; a step's loss the ranks' mean.
Trajectory train_batches(const std::string& mode, const std::vector<Batch>& batches, Communicator* world, bool sync) {
  CpuBackend backend({1});
  Rng rng(kModelSeed);
  StepRig rig(backend, mode, kModel, rng);
  ResNet& model = rig.model;
  MixedPrecisionStep& step = rig.step;
  std::optional<GradientReducer> reducer;
  if (world) {
    reducer.emplace(*world, model.parameters());
    if (sync)
      synchronise_batch_norm(model, [world](double* data, size_t count) { world->all_reduce_sum(data, count); });
    step.set_gradient_reducer(&*reducer, !sync);  // synchronised batch norm's collectives run in backward
  }
  std::vector<Buffer*> buffers;
  model.collect_buffers(buffers);
  std::vector<std::vector<float>> initial;
  for (Parameter* p : model.parameters()) initial.push_back(to_float_vector(p->value));
  for (Buffer* b : buffers) initial.push_back(to_float_vector(b->value));
  Trajectory out;
  for (const Batch& batch : batches) {
    const StepResult result = step.run(batch.images, batch.labels, kSyncLr);
    double loss = result.loss;
    if (world) {
      world->all_reduce_sum(&loss, 1);
      loss /= world->world_size();
    }
    out.losses.push_back(loss);
    out.skipped += result.skipped ? 1 : 0;
  }
  for (Parameter* p : model.parameters()) out.finals.push_back(to_float_vector(p->value));
  for (Buffer* b : buffers) out.finals.push_back(to_float_vector(b->value));
  for (size_t t = 0; t < initial.size(); ++t)
    for (size_t i = 0; i < initial[t].size(); ++i) out.finals[t][i] -= initial[t][i];
  return out;
}

// How far a run is from the reference: the largest relative difference of a step's loss, and of a final tensor
// (max |a - b| over max |b|, so that near-zero entries cannot inflate it).
struct Distance {
  double loss = 0, weights = 0;
};

Distance distance(const Trajectory& a, const Trajectory& reference, size_t steps) {
  Distance d;
  for (size_t s = 0; s < steps; ++s)
    d.loss = std::max(d.loss, std::fabs(a.losses[s] - reference.losses[s]) / std::fabs(reference.losses[s]));
  for (size_t t = 0; t < reference.finals.size(); ++t) {
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < reference.finals[t].size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(a.finals[t][i] - reference.finals[t][i])));
      scale = std::max(scale, static_cast<double>(std::fabs(reference.finals[t][i])));
    }
    d.weights = std::max(d.weights, diff / scale);
  }
  return d;
}

// The bounds, per mode, on a synchronised run's distance from the one process at the global batch, over its first
// `steps` steps' losses and, where `weights` > 0, the change of every parameter and buffer over those steps. Not
// bit-identical: each rank sums its B images' statistics, gradient sums and weight gradients in FP32 and the ranks'
// sums are added after (one process sums 2B at once). FP32, 20 steps: measured on Zen 5 loss 6.5e-7 and weights
// 7.1e-5 (per rank statistics: 0.11 and 2.1); the bounds leave 15x room. AMP: a statistic a few FP32 ulps apart moves
// some 16-bit activations across a rounding boundary (2^-11 FP16, 2^-8 BF16 relative), and over 20 steps the two
// runs drift apart as far as per-rank statistics do (measured: loss 0.04 for both, against 0.08-0.11), so only the
// first step's loss (forward with the global statistics) is bounded: measured 2e-4 FP16, 5e-8 BF16, against 5e-2
// with per-rank statistics. docs/distributed.md states the gap.
struct SyncBound {
  const char* mode;
  size_t steps;
  double loss, weights;  // weights 0: not compared
};
constexpr SyncBound kSyncBounds[] = {
    {"fp32", kSyncSteps, 1e-5, 1e-3},
    {"amp-fp16", 1, 2e-3, 0},
    {"amp-bf16", 1, 2e-3, 0},
};

class SynchronisedBatchNorm : public ::testing::TestWithParam<const char*> {};

// --sync-batchnorm's promise: two ranks at batch B train as one process at batch 2B from the same seed, when rank r
// takes the epoch's order r, r + 2, ... (DistributedSampler's semantics), so that the ranks' batch k together are
// the one process's batch k.
TEST_P(SynchronisedBatchNorm, TwoRanksAtBatchBTrainAsOneProcessAtBatch2B) {
  const std::string mode = GetParam();
  EXPECT_EQ(world().world_size(), 2) << "run under mpirun -np 2";
  const Epoch epoch = random_epoch();
  const auto whole = shard_batches(epoch, 2 * kPerRank, {0, 1});
  const std::vector<std::vector<int64_t>> ranks[2] = {shard_batches(epoch, kPerRank, {0, 2}),
                                                      shard_batches(epoch, kPerRank, {1, 2})};
  EXPECT_EQ(whole.size(), static_cast<size_t>(kSyncSteps));
  std::vector<Batch> mine, one_process;
  for (size_t k = 0; k < whole.size(); ++k) {
    std::vector<int64_t> together = ranks[0][k];
    together.insert(together.end(), ranks[1][k].begin(), ranks[1][k].end());
    std::vector<int64_t> expected = whole[k];
    std::sort(together.begin(), together.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(together, expected) << "the ranks' batch " << k << " together is not the one process's";
    mine.push_back(gather(epoch, ranks[world().rank()][k]));
    one_process.push_back(gather(epoch, whole[k]));
  }

  const Trajectory reference = train_batches(mode, one_process, nullptr, false);
  const Trajectory synchronised = train_batches(mode, mine, &world(), true);
  const Trajectory per_rank = train_batches(mode, mine, &world(), false);
  const SyncBound& bound =
      *std::find_if(std::begin(kSyncBounds), std::end(kSyncBounds), [&](const SyncBound& b) { return b.mode == mode; });
  const Distance sync = distance(synchronised, reference, bound.steps);
  const Distance unsync = distance(per_rank, reference, bound.steps);
  if (world().rank() == 0)
    std::cout << mode << ": synchronised batch norm's distance from one process at batch " << 2 * kPerRank << " over "
              << bound.steps << " steps: loss " << sync.loss << ", weights " << sync.weights
              << "; with batch norm per rank: loss " << unsync.loss << ", weights " << unsync.weights << "\n";
  EXPECT_EQ(reference.skipped + synchronised.skipped, 0) << "a skipped step would make the runs incomparable";
  EXPECT_LE(sync.loss, bound.loss) << "losses";
  EXPECT_GT(unsync.loss, 10 * bound.loss) << "batch norm per rank must miss the bound by far, or the test proves "
                                             "nothing";
  if (bound.weights > 0) {
    EXPECT_LE(sync.weights, bound.weights) << "the weights' and running statistics' changes";
    EXPECT_GT(unsync.weights, 10 * bound.weights) << "the same for the weights";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, SynchronisedBatchNorm, ::testing::Values("fp32", "amp-fp16", "amp-bf16"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace ampwb
