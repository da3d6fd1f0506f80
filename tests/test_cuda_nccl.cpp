// NCCL's communicator (engine/dist/nccl_communicator.h) on one GPU: a world of one rank (its unique id, its set-up,
// its stream beside the backend's), so that the host collectives, the device collectives and a data-parallel training
// through GradientReducer are checked on the one GPU a lent machine has. NCCL runs one rank's collectives without its
// multi-rank kernels, so real sums over several GPUs are not checked here. Needs a CUDA GPU and skips without one;
// any failure on a GPU fails.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/make_backend.h"
#include "backend/profiled_backend.h"
#include "dist/nccl_communicator.h"
#include "op_test_util.h"
#include "train/gradient_reducer.h"
#include "train/mixed_precision_step.h"

namespace ampwb {
namespace {

using namespace std::chrono_literals;

constexpr const char* kNoGpu = "no usable CUDA GPU on this machine (cudaGetDeviceCount reports an error or 0 devices)";

std::unique_ptr<NcclCommunicator> one_rank() {
  // Well inside the verification part's own limit, so that a hang is reported by the test that hung.
  return std::make_unique<NcclCommunicator>(LaunchInfo{}, 0, nullptr, std::chrono::seconds(20));
}

// The backend the trainer makes, behind the ProfiledBackend it wraps it in; cuDNN's heuristics instead of timed
// algorithms, so that two runs choose the same convolutions.
std::unique_ptr<ProfiledBackend> gpu_backend() {
  CudaBackendOptions options;
  options.deterministic = true;  // the same algorithms in every backend, none summing with atomics
  auto backend = std::make_unique<ProfiledBackend>(std::make_unique<CudaBackend>(options));
  backend->set_enabled(false);
  return backend;
}

TEST(CudaNccl, OneRankLeavesHostDataAsItIs) {
  if (cuda_device_count() == 0) GTEST_SKIP() << kNoGpu;
  const std::unique_ptr<NcclCommunicator> world = one_rank();
  EXPECT_EQ(world->rank(), 0);
  EXPECT_EQ(world->world_size(), 1);
  EXPECT_EQ(world->device_index(), 0);
  EXPECT_TRUE(world->reduces_device_memory());
  EXPECT_EQ(world->describe().rfind("NCCL 2.", 0), 0u) << world->describe();
  std::vector<float> floats{1.5f, -2.0f, 3e-39f};
  std::vector<double> doubles{0.25, -1e300};
  std::vector<int64_t> counts{int64_t{1} << 40, 7};
  std::vector<uint16_t> halves{0x3c00, 0x7bff};  // FP16 1 and 65504
  world->all_reduce_sum(floats.data(), floats.size());
  world->all_reduce_sum(doubles.data(), doubles.size());
  world->all_reduce_sum(counts.data(), counts.size());
  world->all_reduce_sum(halves.data(), halves.size(), Float16Format::F16);
  EXPECT_EQ(floats, (std::vector<float>{1.5f, -2.0f, 3e-39f}));
  EXPECT_EQ(doubles, (std::vector<double>{0.25, -1e300}));
  EXPECT_EQ(counts, (std::vector<int64_t>{int64_t{1} << 40, 7}));
  EXPECT_EQ(halves, (std::vector<uint16_t>{0x3c00, 0x7bff}));
  char bytes[3] = {'a', 'b', 'c'};
  world->broadcast(bytes, sizeof bytes, 0);
  EXPECT_EQ(std::string(bytes, 3), "abc");
  world->barrier();
  EXPECT_THROW(world->broadcast(bytes, 1, 1), Error);  // rank 1 of 1
}

// In place, on the communicator's stream after the upload queued on the backend's, which wrote the values; a host
// collective after them follows them, and the backend's stream, once joined, waits for them. One rank's mean is its
// own values, bit for bit (NCCL's average multiplies by 1 / 1), and a bucket of several spans goes as one group.
TEST(CudaNccl, DeviceCollectivesFollowTheBackendsStreamWhichWaitsForThem) {
  if (cuda_device_count() == 0) GTEST_SKIP() << kNoGpu;
  const std::unique_ptr<NcclCommunicator> world = one_rank();
  const std::unique_ptr<ProfiledBackend> backend = gpu_backend();
  void* stream = cuda_stream_of(*backend);
  ASSERT_NE(stream, nullptr);
  world->set_device_stream(stream);
  Rng rng(59);
  const Tensor host = testing::random_tensor({3, 1000}, rng);
  Tensor device = Tensor::empty(host.shape(), DType::F32, host.layout(), backend->device());
  backend->convert(host, device);
  float* values = device.data_as<float>();
  world->device_inputs_ready(0);
  world->all_reduce_mean_on_device({{values, 1000}, {values + 1000, 2000}}, 0);
  world->broadcast_on_device(device.data(), device.nbytes(), 0);
  int64_t one = 1;
  world->all_reduce_sum(&one, 1);
  EXPECT_EQ(one, 1);
  world->join_device_collectives();
  const Tensor back = on_host(*backend, device);
  EXPECT_EQ(std::memcmp(back.data(), host.data(), host.nbytes()), 0) << "one rank's mean changed its values";
}

// The all-reduce waits for the backend's work marked before it, not for the host: with the backend's stream held by
// a host function, a host collective behind the all-reduce on the communicator's stream cannot finish until the
// function lets go.
TEST(CudaNccl, TheAllReduceWaitsForTheBackendsWorkMarkedBeforeIt) {
  if (cuda_device_count() == 0) GTEST_SKIP() << kNoGpu;
  const std::unique_ptr<NcclCommunicator> world = one_rank();
  const std::unique_ptr<ProfiledBackend> backend = gpu_backend();
  auto* const stream = static_cast<cudaStream_t>(cuda_stream_of(*backend));
  world->set_device_stream(stream);
  Rng rng(61);
  const Tensor host = testing::random_tensor({1000}, rng);
  Tensor device = Tensor::empty(host.shape(), DType::F32, host.layout(), backend->device());
  backend->convert(host, device);
  std::atomic<bool> go{false};
  ASSERT_EQ(cudaLaunchHostFunc(
                stream,
                [](void* flag) {
                  while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(1ms);
                },
                &go),
            cudaSuccess);
  world->device_inputs_ready(0);
  world->all_reduce_mean_on_device({{device.data_as<float>(), 1000}}, 0);
  std::atomic<bool> done{false};
  std::string failure;
  std::thread behind([&] {
    try {
      int64_t one = 1;
      world->all_reduce_sum(&one, 1);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    done = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(done.load()) << "a collective finished before the backend's work the all-reduce waits for";
  go = true;
  behind.join();
  EXPECT_EQ(failure, "");
  world->join_device_collectives();
  const Tensor back = on_host(*backend, device);
  EXPECT_EQ(std::memcmp(back.data(), host.data(), host.nbytes()), 0);
}

struct Trained {
  std::vector<StepResult> results;
  std::vector<std::vector<float>> first_grads;  // after the first step's all-reduce
  std::vector<std::vector<float>> weights;      // after the last step
};

// Four steps of a ResNet-20 on the GPU, SGD with momentum, the same batch each step; with `world`, data-parallel
// through GradientReducer (its buffers broadcast, its gradients averaged by NCCL).
Trained train(const std::string& mode, NcclCommunicator* world) {
  const std::unique_ptr<ProfiledBackend> backend = gpu_backend();
  Rng rng(590);
  ResNet model(*backend, {20, 10, 3, 16, Stem::Auto}, rng);
  Sgd sgd(*backend, {OptimizerKind::Sgd, 0.9f});
  PrecisionConfig config = precision_preset(mode);
  config.loss_scale.init_scale = 1024;
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(*backend, model, sgd, policy, scaler, 0.0f, 0.0f);
  std::optional<GradientReducer> reducer;
  if (world) {
    world->set_device_stream(cuda_stream_of(*backend));
    std::vector<Buffer*> buffers;
    model.collect_buffers(buffers);
    reducer.emplace(*world, model.parameters());
    reducer->broadcast_from_rank0(buffers);
    step.set_gradient_reducer(&*reducer);
  }
  Tensor labels = Tensor::empty({16}, DType::I32);
  for (int n = 0; n < 16; ++n) labels.data_as<int32_t>()[n] = static_cast<int32_t>(rng.below(10));
  const Tensor images = testing::random_tensor({16, 3, 16, 16}, rng, Layout::NHWC);
  Trained out;
  for (int i = 0; i < 4; ++i) {
    out.results.push_back(step.run(backend->upload(images), backend->upload(labels), 0.05f));
    if (i == 0)
      for (Parameter* p : model.parameters())
        out.first_grads.push_back(to_float_vector(on_host(*backend, fp32_gradient(*backend, *p))));
  }
  for (Parameter* p : model.parameters()) out.weights.push_back(to_float_vector(on_host(*backend, p->value)));
  return out;
}

// The largest |a - b| over all the tensors, relative to the largest |b|.
double max_relative_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double diff = 0, scale = 0;
  for (size_t t = 0; t < b.size(); ++t)
    for (size_t i = 0; i < b[t].size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(a.at(t).at(i)) - b[t][i]));
      scale = std::max(scale, std::fabs(static_cast<double>(b[t][i])));
    }
  return diff / std::max(scale, 1e-30);
}

class CudaNcclTraining : public ::testing::TestWithParam<const char*> {};

// One rank over NCCL trains as the same rank without a communicator, bit for bit: the same steps taken, the same
// scale, the same losses, gradients and weights (a sum over one rank is a copy, an average over one a division by
// 1; deterministic cuDNN algorithms, since timed or atomic ones differ in the last bits from one backend to the next
// and four steps grow that to 1e-3).
TEST_P(CudaNcclTraining, OneRankFollowsTheTrainingWithoutIt) {
  if (cuda_device_count() == 0) GTEST_SKIP() << kNoGpu;
  const std::string mode = GetParam();
  const std::unique_ptr<NcclCommunicator> world = one_rank();
  const Trained alone = train(mode, nullptr);
  const Trained over_nccl = train(mode, world.get());
  ASSERT_EQ(over_nccl.results.size(), alone.results.size());
  for (size_t i = 0; i < alone.results.size(); ++i) {
    EXPECT_EQ(over_nccl.results[i].skipped, alone.results[i].skipped) << "step " << i;
    EXPECT_FALSE(alone.results[i].skipped) << "step " << i;
    EXPECT_EQ(over_nccl.results[i].loss_scale, alone.results[i].loss_scale) << "step " << i;
    EXPECT_EQ(over_nccl.results[i].loss, alone.results[i].loss) << "step " << i;
  }
  const double grads = max_relative_difference(over_nccl.first_grads, alone.first_grads);
  const double weights = max_relative_difference(over_nccl.weights, alone.weights);
  std::printf("%s: first step's gradients differ by %.3g, final weights by %.3g (of the largest value)\n", mode.c_str(),
              grads, weights);
  EXPECT_EQ(grads, 0.0) << mode;
  EXPECT_EQ(weights, 0.0) << mode;
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaNcclTraining, ::testing::Values("fp32", "amp-fp16", "amp-bf16"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace ampwb
