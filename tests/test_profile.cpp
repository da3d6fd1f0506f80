// The timing decorator (backend/profiled_backend.h): it counts every op of a real training step in its class,
// changes no result, and its times fit inside the step's wall time; `run_benchmark` reports it per class.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/profiled_backend.h"
#include "forwarding_backend.h"
#include "nn/conv2d.h"
#include "op_test_util.h"
#include "train/benchmark.h"
#include "train/mixed_precision_step.h"
#include "train/step_timer.h"

namespace ampwb {
namespace {

int64_t calls(const OpTimes& t, TimeClass c) { return t.calls[static_cast<size_t>(c)]; }

// One amp-bf16 step of a tiny ResNet-20; returns the updated weights.
std::vector<std::vector<float>> one_step(Backend& backend, int* conv_layers = nullptr) {
  Rng rng(3);
  ResNet model(backend, {20, 4, 3, 8, Stem::Auto}, rng);
  if (conv_layers) model.visit([&](Layer& l) { *conv_layers += dynamic_cast<Conv2d*>(&l) != nullptr; });
  auto optimizer = make_optimizer(backend, {OptimizerKind::Sgd, 0.9f});
  const PrecisionConfig config = precision_preset(PrecisionMode::AmpBf16);
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(backend, model, *optimizer, policy, scaler, 0.0f, 0.0f);
  Tensor labels = Tensor::empty({4}, DType::I32);
  for (int n = 0; n < 4; ++n) labels.data_as<int32_t>()[n] = n;
  step.run(testing::random_tensor({4, 3, 8, 8}, rng, Layout::NHWC), labels, 0.1f);
  std::vector<std::vector<float>> weights;
  for (Parameter* p : model.parameters()) weights.push_back(to_float_vector(p->value));
  return weights;
}

TEST(ProfiledBackend, CountsEveryOpOfAStepInItsClassAndChangesNoResult) {
  ProfiledBackend profiled(std::make_unique<CpuBackend>(BackendOptions{2}));
  CpuBackend plain({2});
  int convs = 0;
  const auto with_timer = one_step(profiled, &convs);
  const auto without = one_step(plain);
  ASSERT_EQ(with_timer.size(), without.size());
  for (size_t i = 0; i < without.size(); ++i)
    ASSERT_EQ(std::memcmp(with_timer[i].data(), without[i].data(), without[i].size() * sizeof(float)), 0) << i;

  const OpTimes& t = profiled.times();
  ASSERT_GT(convs, 0);
  EXPECT_EQ(calls(t, TimeClass::ConvForward), convs);
  EXPECT_EQ(calls(t, TimeClass::ConvBackwardWeights), convs);
  EXPECT_GE(calls(t, TimeClass::ConvBackwardData), convs - 1) << "every convolution but the stem passes dx back";
  EXPECT_EQ(calls(t, TimeClass::Linear), 2) << "the classifier, forward and backward";
  EXPECT_EQ(calls(t, TimeClass::Loss), 1);
  EXPECT_EQ(calls(t, TimeClass::HostWait), 1) << "the step reads its scalars once";
  EXPECT_GT(calls(t, TimeClass::BatchNorm), 0);
  EXPECT_GT(calls(t, TimeClass::Add), 0);
  EXPECT_GT(calls(t, TimeClass::Optimizer), 0);
  EXPECT_GT(calls(t, TimeClass::Convert), 0) << "amp-bf16 casts weights and activations";
  for (size_t c = 0; c < t.seconds.size(); ++c) EXPECT_GE(t.seconds[c], 0.0) << time_class_name(TimeClass(c));
}

TEST(ProfiledBackend, DisabledItForwardsWithoutTiming) {
  ProfiledBackend profiled(std::make_unique<CpuBackend>(BackendOptions{2}));
  profiled.set_enabled(false);
  CpuBackend plain({2});
  const auto disabled = one_step(profiled);
  const auto without = one_step(plain);
  ASSERT_EQ(disabled.size(), without.size());
  for (size_t i = 0; i < without.size(); ++i)
    ASSERT_EQ(std::memcmp(disabled[i].data(), without[i].data(), without[i].size() * sizeof(float)), 0) << i;
  EXPECT_EQ(profiled.times().total_seconds(), 0.0);
  for (int64_t n : profiled.times().calls) EXPECT_EQ(n, 0);
  profiled.set_enabled(true);
  one_step(profiled);
  EXPECT_EQ(calls(profiled.times(), TimeClass::HostWait), 1) << "enabled again, it times again";
}

// An emulated FP16 convolution widens its inputs to FP32 and rounds its result back: the profile bills that to
// conversions, not to the convolution, and an op that converts nothing bills nothing there.
TEST(ProfiledBackend, BillsTheConversionsInsideAnOpToConvert) {
  ProfiledBackend profiled(std::make_unique<CpuBackend>(BackendOptions{2}));
  Rng rng(5);
  auto fp16 = [&](Shape shape) {
    Tensor t = Tensor::empty(shape, DType::F16, Layout::NHWC);
    profiled.inner().convert(testing::random_tensor(shape, rng, Layout::NHWC), t);
    return t;
  };
  const Tensor x = fp16({2, 16, 8, 8}), w = fp16({16, 16, 3, 3});
  Tensor y = Tensor::empty({2, 16, 8, 8}, DType::F16, Layout::NHWC);
  const auto start = std::chrono::steady_clock::now();
  profiled.conv2d_forward(x, w, y, {1, 1});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const OpTimes& t = profiled.times();
  const double converting = t.seconds[static_cast<size_t>(TimeClass::Convert)];
  EXPECT_GT(converting, 0.0);
  EXPECT_GT(t.seconds[static_cast<size_t>(TimeClass::ConvForward)], 0.0);
  EXPECT_EQ(calls(t, TimeClass::ConvForward), 1);
  EXPECT_EQ(calls(t, TimeClass::Convert), 0) << "no convert op was called";
  EXPECT_LE(t.total_seconds(), seconds) << "billed apart, the parts still fit the op's wall time";

  profiled.reset();
  const Tensor x32 = testing::random_tensor({2, 16, 8, 8}, rng, Layout::NHWC);
  Tensor y32 = testing::empty_f32({2, 16, 8, 8}, Layout::NHWC);
  profiled.relu_forward(x32, y32);
  EXPECT_GT(profiled.times().seconds[static_cast<size_t>(TimeClass::Relu)], 0.0);
  EXPECT_EQ(profiled.times().seconds[static_cast<size_t>(TimeClass::Convert)], 0.0) << "an FP32 ReLU converts nothing";
}

// On a GPU the profiler brackets each op with two marks on the device's clock and reads them afterwards, never
// waiting after an op. A backend whose marks count and whose clock runs a millisecond per mark shows it: each class
// gets a millisecond a call, no op waits, and the marks are read once, then cleared.
class MarkCounting final : public testing::ForwardingBackend {
 public:
  MarkCounting() : ForwardingBackend(std::make_unique<CpuBackend>(BackendOptions{2})) {}
  void synchronize() override { ++syncs; }
  int64_t mark() override { return next++; }
  double seconds_between(int64_t from, int64_t to) override { return ++reads, static_cast<double>(to - from) * 1e-3; }
  void clear_marks() override { ++clears, next = 0; }
  int64_t next = 0, syncs = 0, reads = 0, clears = 0;
};

TEST(ProfiledBackend, OnADeviceTimesEachOpByItsMarksWithoutWaiting) {
  auto counting = std::make_unique<MarkCounting>();
  MarkCounting* marks = counting.get();
  ProfiledBackend profiled(std::move(counting));
  profiled.set_device_timing(true);
  one_step(profiled);
  EXPECT_EQ(marks->syncs, 0) << "no wait after an op";
  EXPECT_EQ(marks->reads, 0) << "nothing read before times()";
  const int64_t ops = marks->next / 2;
  ASSERT_GT(ops, 0);
  const OpTimes& t = profiled.times();
  int64_t timed_calls = 0;
  for (size_t c = 0; c < t.seconds.size(); ++c) {
    EXPECT_NEAR(t.seconds[c], static_cast<double>(t.calls[c]) * 1e-3, 1e-9) << time_class_name(TimeClass(c));
    timed_calls += t.calls[c];
  }
  EXPECT_EQ(timed_calls, ops) << "two marks an op";
  EXPECT_EQ(marks->reads, ops);
  EXPECT_EQ(marks->clears, 1);
  profiled.times();
  EXPECT_EQ(marks->reads, ops) << "each mark read once";
  EXPECT_EQ(calls(profiled.times(), TimeClass::HostWait), 1) << "the step's read of its scalars is timed as well";
}

// A CPU backend that says it is a GPU: what the step timer decides from the device alone.
class CalledAGpu final : public testing::ForwardingBackend {
 public:
  CalledAGpu() : ForwardingBackend(std::make_unique<CpuBackend>(BackendOptions{2})) {}
  Device device() const override { return {Device::Kind::CUDA, 0}; }
};

// The steps of an epoch of `steps` that the timer times, the last one probed.
std::vector<int64_t> timed_steps(ProfiledBackend& backend, int64_t steps) {
  StepTimer timer(backend);
  std::vector<int64_t> timed;
  for (int64_t b = 0; b < steps; ++b)
    if (timer.begin(b, steps, b == steps - 1, 0.0)) {
      EXPECT_TRUE(backend.enabled());
      timed.push_back(b);
      timer.end(0.0);
    }
  EXPECT_FALSE(backend.enabled()) << "off between steps: the evaluation is not timed";
  return timed;
}

TEST(StepTimer, TimesEveryCpuStepAndOneGpuStepInTenButNotTheFirstOrTheProbedOne) {
  ProfiledBackend cpu(std::make_unique<CpuBackend>(BackendOptions{2}));
  EXPECT_EQ(timed_steps(cpu, 5), (std::vector<int64_t>{1, 2, 3})) << "step 0 does the one-time work";
  EXPECT_EQ(timed_steps(cpu, 3), (std::vector<int64_t>{1}));
  EXPECT_EQ(timed_steps(cpu, 2), (std::vector<int64_t>{0})) << "the only step that is not probed";
  EXPECT_EQ(timed_steps(cpu, 1), (std::vector<int64_t>{0})) << "an epoch's only step, probed or not";
  ProfiledBackend gpu(std::make_unique<CalledAGpu>());
  EXPECT_EQ(timed_steps(gpu, 25), (std::vector<int64_t>{1, 11, 21}));
  EXPECT_EQ(timed_steps(gpu, 22), (std::vector<int64_t>{1, 11})) << "step 21 is the probed one";
  EXPECT_EQ(timed_steps(gpu, 1), (std::vector<int64_t>{0}));
}

TEST(StepTimer, TakesPerStepMeansOfTheTimedSteps) {
  ProfiledBackend profiled(std::make_unique<CpuBackend>(BackendOptions{2}));
  StepTimer timer(profiled);
  ASSERT_FALSE(timer.begin(0, 4, false, 0.0));
  timer.end(1.0);  // an untimed step: nothing of it is kept
  ASSERT_TRUE(timer.begin(1, 4, false, 1.0));
  one_step(profiled);
  timer.end(1.5);  // the loader's wait grew by half a second
  ASSERT_TRUE(timer.begin(2, 4, false, 1.5));
  timer.discard();  // a step that did not run
  ASSERT_TRUE(timer.begin(3, 4, false, 1.5));
  timer.end(1.6);
  const EpochTimes t = timer.take(7);
  EXPECT_EQ(t.epoch, 7);
  EXPECT_EQ(t.steps, 2);
  EXPECT_NEAR(t.data_wait_seconds, 0.3, 1e-12);
  EXPECT_GT(t.op_seconds[static_cast<size_t>(TimeClass::ConvForward)], 0);
  EXPECT_GE(t.step_seconds, t.op_total_seconds()) << "the ops ran inside the step's wall time";
  EXPECT_EQ(timer.take(8).steps, 0) << "take() starts the next epoch";
}

TEST(ProfiledBackend, TheBenchmarkReportsTheClassesInsideTheStepsWallTime) {
  BenchConfig c;
  c.depth = 20;
  c.image_size = 16;
  c.batch_size = 8;
  c.num_classes = 10;
  c.steps = 3;
  c.warmup = 1;
  c.threads = 2;
  c.profile = true;
  const BenchResult r = run_benchmark(c);
  EXPECT_EQ(calls(r.profile, TimeClass::HostWait), 3) << "one wait per timed step, warm-up excluded";
  EXPECT_GT(r.profile.total_seconds(), 0.0);
  EXPECT_LE(r.profile.total_seconds(), r.profiled_seconds) << "the classes are parts of the steps";
  c.profile = false;
  EXPECT_EQ(calls(run_benchmark(c).profile, TimeClass::HostWait), 0) << "no profile unless asked";
}

// `ampwb bench ARGS` through a shell; its output and exit status.
std::pair<int, std::string> ampwb_bench(const std::string& args) {
  const std::string command = std::string("'") + AMPWB_BINARY + "' bench " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  return {pclose(pipe), output};
}

TEST(ProfiledBackend, AmpwbBenchProfilePrintsEveryClassPerStep) {
  const std::string tiny =
      "--depth 20 --image-size 16 --batch-size 8 --classes 10 --steps 2 --warmup 1 --threads 2 "
      "--precision amp-bf16 --profile";
  const auto [status, output] = ampwb_bench(tiny + " --json");
  ASSERT_EQ(status, 0) << output;
  const nlohmann::json j = nlohmann::json::parse(output.substr(output.rfind("\n{") + 1));
  const nlohmann::json& profile = j.at("profile_ms_per_step");
  for (size_t c = 0; c < static_cast<size_t>(TimeClass::Count); ++c)
    EXPECT_GE(profile.at(time_class_name(static_cast<TimeClass>(c))).get<double>(), 0.0) << c;
  EXPECT_GE(profile.at("other").get<double>(), 0.0) << "the classes lie inside the step";
  EXPECT_GT(profile.at("conv_forward").get<double>(), 0.0);

  const auto [text_status, text] = ampwb_bench(tiny);  // the table
  ASSERT_EQ(text_status, 0) << text;
  for (const char* row : {"where the mean step's", "conv_forward", "batch_norm", "host_wait", "other"})
    EXPECT_NE(text.find(row), std::string::npos) << row << " in\n" << text;
}

// --conv-algorithm picks the CPU's FP32 3x3 convolutions, and the backend's description (stored with every run)
// says which the step used.
TEST(ProfiledBackend, AmpwbBenchConvAlgorithmNamesTheConvolutionsUsed) {
  const std::string tiny =
      "--depth 18 --image-size 32 --batch-size 2 --classes 10 --steps 1 --warmup 0 --threads 2 --precision fp32";
  const auto [status, winograd] = ampwb_bench(tiny + " --conv-algorithm winograd");
  ASSERT_EQ(status, 0) << winograd;
  EXPECT_NE(winograd.find("Winograd F(2x2,3x3)"), std::string::npos) << winograd;
  const auto [direct_status, direct] = ampwb_bench(tiny + " --conv-algorithm direct");
  ASSERT_EQ(direct_status, 0) << direct;
  EXPECT_EQ(direct.find("Winograd"), std::string::npos) << direct;
  const auto [refused_status, refused] = ampwb_bench(tiny + " --conv-algorithm fft");
  EXPECT_NE(refused_status, 0);
  EXPECT_NE(refused.find("fft"), std::string::npos) << refused;
}

}  // namespace
}  // namespace ampwb
