// Short trainings on the GPU, one per precision mode, with falling loss, through the engine's device placement
// (parameters, gradients, optimizer state and batch-norm statistics on the GPU, batches copied up each step). They
// need a CUDA GPU and skip without one; any failure on a GPU fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "amp/policy.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/profiled_backend.h"
#include "idx_util.h"
#include "step_util.h"
#include "whole_step.h"
#include "train/machine_load.h"
#include "train/mixed_precision_step.h"
#include "train/trainer.h"
#include "gpu_required.h"

namespace ampwb {
namespace {

class CudaEveryMode : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEveryMode, TrainsATinyResNetOnTheGpuWithFallingLoss) {
  if (cuda_device_count() == 0)
    GTEST_SKIP() << "no usable CUDA GPU on this machine (cudaGetDeviceCount reports an error or 0 devices)";
  if (GetParam() == "amp-fp8")
    if (const Capabilities caps = make_backend(DeviceChoice::cuda(0), {1})->capabilities(); !caps.fp8.available)
      GTEST_SKIP() << test::kDoesNotApply << "the backend declares no FP8 compute on " << caps.device_name << ": "
                   << caps.fp8.how;
  const fs::path data = make_stripes_idx("cuda_mode_" + GetParam(), 32, 16);
  TrainConfig c;
  c.data_dir = data.string();
  c.device = DeviceChoice::cuda(0);
  c.depth = 20;
  c.epochs = 4;
  c.batch_size = 16;
  c.lr = 0.05f;
  c.threads = 2;
  c.precision = precision_preset(GetParam());
  struct Epochs : TrainObserver {
    std::vector<EpochReport> epochs;
    std::string device;
    void on_start(const RunInfo& info) override { device = info.backend_description; }
    void on_epoch(const EpochReport& e) override { epochs.push_back(e); }
    void on_epoch_times(const EpochTimes& t) override { times.push_back(t); }
    std::vector<EpochTimes> times;
  } observed;
  Trainer trainer(c, &observed);
  const RunEnd end = trainer.run();
  fs::remove_all(data);
  ASSERT_EQ(end.status, RunStatus::Finished) << end.reason;
  EXPECT_EQ(observed.device.rfind("cuda:0", 0), 0u) << observed.device;
  if (GetParam() == "tf32") {  // the trainer must switch the backend's TF32 math on for this mode
    EXPECT_NE(observed.device.find("TF32 on"), std::string::npos) << observed.device;
  }
  ASSERT_EQ(observed.epochs.size(), 4u);
  EXPECT_LT(observed.epochs.back().train_loss, 0.7 * observed.epochs.front().train_loss) << GetParam();
  EXPECT_GT(observed.epochs.back().peak_bytes, 0u) << "peak GPU memory per epoch";
  // Captured steps are the GPU's default where the steps are deferred: every mode's (amp-fp8's scalings stay on the
  // device).
  ASSERT_FALSE(observed.times.empty());
  const EpochTimes& last = observed.times.back();
  EXPECT_GT(last.replayed, 0.0) << GetParam() << ": " << last.why_not_captured;
  EXPECT_EQ(last.why_not_captured, "");
  // Each epoch's load holds the GPU's clock, within what it can run at, and the other processes on it (NVML).
  EXPECT_GT(last.load.gpu_mhz, 0.0) << machine_load_text(last.load);
  EXPECT_LE(last.load.gpu_mhz, last.load.gpu_max_mhz) << machine_load_text(last.load);
  EXPECT_GE(last.load.gpu_other_processes, 0) << machine_load_text(last.load);
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaEveryMode,
                         ::testing::Values("fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-o2", "amp-fp8"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The GPU's whole step against the CPU's in every mode, within the tolerances of whole_step.h.
class CudaWholeStep : public ::testing::TestWithParam<testing::StepTolerance> {};

TEST_P(CudaWholeStep, MatchesTheCpuBackendFromTheSameWeightsAndBatch) {
  if (cuda_device_count() == 0)
    GTEST_SKIP() << "no usable CUDA GPU on this machine (cudaGetDeviceCount reports an error or 0 devices)";
  const testing::StepTolerance& tol = GetParam();
  auto gpu = make_backend(DeviceChoice::cuda(0), {2, CpuBf16::Auto, std::string(tol.mode) == "tf32"});
  CpuBackend cpu({2});
  const testing::StepOutcome on_gpu = testing::whole_step(*gpu, tol.mode);
  // The CPU has no TF32: it runs the FP32 step that TF32 approximates.
  const std::string mode = tol.mode;
  const testing::StepOutcome cpu_fp32 = testing::whole_step(cpu, "fp32");
  const testing::StepOutcome on_cpu = mode == "fp32" || mode == "tf32" ? cpu_fp32 : testing::whole_step(cpu, mode);
  ASSERT_EQ(on_gpu.skipped, on_cpu.skipped);
  const testing::StepDistance d = testing::step_distance(on_gpu, on_cpu);
  std::printf("%s, GPU against CPU: loss %.3g, gradients %.3g, weights %.3g; gradients from the CPU's FP32 step %.3g\n",
              tol.mode, d.loss, d.grads, d.weights, testing::relative_l2(on_gpu.grads, cpu_fp32.grads));
  EXPECT_EQ(testing::whole_step_mismatch(on_gpu, on_cpu, cpu_fp32, tol), "");
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaWholeStep, ::testing::ValuesIn(testing::kWholeStepTolerances),
                         [](const ::testing::TestParamInfo<testing::StepTolerance>& info) {
                           std::string name = info.param.mode;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// 40 amp-fp16 steps of a ResNet-20 on the GPU that overflow at first, back off, then grow the scale every 3 clean
// steps: waiting at each step, deferred, or deferred and captured (CUDA graphs). `scheduled`: the learning rate
// changes every step and steps 20-25 take batches of 12 instead of 16.
struct CudaSteps {
  std::vector<StepResult> results;
  std::vector<int64_t> waits;  // host waits made by each call
  int64_t replayed = 0;
  std::string why_not_captured;
  LossScaler::State scaler;
};

CudaSteps run_cuda_steps(const std::string& how, const std::string& optimizer_kind, bool scheduled,
                         const std::string& mode = "amp-fp16") {
  ProfiledBackend backend(make_backend(DeviceChoice::cuda(0), {2}));
  backend.set_enabled(false);
  Rng rng(11);
  ResNet model(backend, {20, 10, 3, 16, Stem::Auto}, rng);
  auto optimizer = make_optimizer(backend, {*parse_choice<OptimizerKind>(optimizer_kind), 0.9f});
  PrecisionConfig config = precision_preset(mode);
  if (mode == "amp-fp16") {  // a scale that overflows, then grows every third step
    config.loss_scale.init_scale = 1e30;
    config.loss_scale.growth_interval = 3;
  }
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(backend, model, *optimizer, policy, scaler, 0.0f, 0.0f);
  EXPECT_EQ(step.why_not_deferred(), "");
  step.set_capture(how == "captured");
  CudaSteps out;
  Rng data(12);
  for (int i = 0; i < 40; ++i) {
    const int64_t batch = scheduled && i >= 20 && i < 26 ? 12 : 16;
    Tensor labels = Tensor::empty({batch}, DType::I32);
    for (int n = 0; n < batch; ++n) labels.data_as<int32_t>()[n] = static_cast<int32_t>((n * 7 + i) % 10);
    const Tensor images = backend.upload(testing::random_tensor({batch, 3, 16, 16}, data, Layout::NHWC));
    const Tensor device_labels = backend.upload(labels);
    const float lr = scheduled ? 0.002f * static_cast<float>(1 + i % 3) : 0.02f;
    const int64_t waits = backend.host_waits();
    if (how == "waiting") {
      out.results.push_back(step.run(images, device_labels, lr));
    } else if (std::optional<StepResult> r = step.run_deferred(images, device_labels, lr)) {
      out.results.push_back(*r);
    }
    out.waits.push_back(backend.host_waits() - waits);
  }
  if (how != "waiting") {
    const int64_t waits = backend.host_waits();
    if (std::optional<StepResult> r = step.finish_deferred()) out.results.push_back(*r);
    out.waits.push_back(backend.host_waits() - waits);
  }
  out.replayed = step.replayed_steps();
  out.why_not_captured = step.why_not_captured();
  out.scaler = scaler.state();
  return out;
}

// The same overflows and scales, and losses within cuDNN's run-to-run differences (its weight-gradient algorithms
// may sum with atomics, so not bit for bit).
void expect_to_follow(const CudaSteps& steps, const CudaSteps& reference) {
  ASSERT_EQ(steps.results.size(), reference.results.size());
  int skipped = 0;
  for (size_t i = 0; i < reference.results.size(); ++i) {
    EXPECT_EQ(steps.results[i].skipped, reference.results[i].skipped) << "step " << i;
    EXPECT_EQ(steps.results[i].loss_scale, reference.results[i].loss_scale) << "step " << i;
    if (!reference.results[i].skipped) {
      EXPECT_NEAR(steps.results[i].loss, reference.results[i].loss, 1e-3 * std::fabs(reference.results[i].loss))
          << "step " << i;
    }
    skipped += reference.results[i].skipped;
  }
  EXPECT_GT(skipped, 0) << "the run was meant to overflow";
  EXPECT_EQ(steps.scaler.scale, reference.scaler.scale);
  EXPECT_EQ(steps.scaler.growth_tracker, reference.scaler.growth_tracker);
}

// Steps that never wait for the GPU: the loss scale on the device, the skip decided there, each step's
// numbers read one step late. In steady state a step makes no host wait (ProfiledBackend counts them); the results
// follow the steps that wait.
TEST(CudaDeferredSteps, NeverWaitForTheGpuAndFollowTheStepsThatWait) {
  if (cuda_device_count() == 0)
    GTEST_SKIP() << "no usable CUDA GPU on this machine (cudaGetDeviceCount reports an error or 0 devices)";
  const CudaSteps waiting = run_cuda_steps("waiting", "sgd", false),
                  deferred = run_cuda_steps("deferred", "sgd", false);
  for (size_t i = 0; i < waiting.waits.size(); ++i) {  // a skipped step also copies its gradients back (forensics)
    if (!waiting.results[i].skipped) {
      EXPECT_EQ(waiting.waits[i], 1) << "step " << i << " reads its numbers once";
    }
  }
  std::vector<int64_t> no_waits(41, 0);
  no_waits.back() = 1;  // collecting the last step
  EXPECT_EQ(deferred.waits, no_waits);
  expect_to_follow(deferred, waiting);
}

// The deferred steps captured as CUDA graphs (one per batch shape, after its first steps) and replayed: every step
// after each shape's first two is a replay and none waits for the GPU, and the results follow the same steps run op
// by op, with a learning rate that changes every step and a second batch shape between. RecordingBackend's tests
// (test_placement) hold the same kind of schedule to the waiting steps bit for bit on the CPU.
TEST(CudaCapturedSteps, ReplayAsGraphsAndFollowTheStepsRunOpByOp) {
  if (cuda_device_count() == 0)
    GTEST_SKIP() << "no usable CUDA GPU on this machine (cudaGetDeviceCount reports an error or 0 devices)";
  const CudaSteps op_by_op = run_cuda_steps("deferred", "adam", true),
                  captured = run_cuda_steps("captured", "adam", true);
  EXPECT_EQ(captured.why_not_captured, "");
  EXPECT_EQ(captured.replayed, 40 - 2 * MixedPrecisionStep::kEagerSteps) << "all but each shape's first steps";
  std::vector<int64_t> no_waits(41, 0);
  no_waits.back() = 1;
  EXPECT_EQ(captured.waits, no_waits);
  expect_to_follow(captured, op_by_op);
}

// amp-fp8's steps captured too: each replay casts with the scales its steps before gave, the scalings updated on the
// device inside the graph, as the same steps run op by op do (losses within 1%: a scale follows amaxes that cuDNN's
// run-to-run differences move a little, and the casts round to 3 or 2 mantissa bits).
TEST(CudaCapturedSteps, Fp8StepsReplayWithTheirScalingsOnTheDevice) {
  if (cuda_device_count() == 0)
    GTEST_SKIP() << "no usable CUDA GPU on this machine (cudaGetDeviceCount reports an error or 0 devices)";
  if (const Capabilities caps = make_backend(DeviceChoice::cuda(0), {1})->capabilities(); !caps.fp8.available)
    GTEST_SKIP() << test::kDoesNotApply << "the backend declares no FP8 compute on " << caps.device_name << ": "
                 << caps.fp8.how;
  const CudaSteps op_by_op = run_cuda_steps("deferred", "sgd", true, "amp-fp8"),
                  captured = run_cuda_steps("captured", "sgd", true, "amp-fp8");
  EXPECT_EQ(captured.why_not_captured, "");
  EXPECT_EQ(captured.replayed, 40 - 2 * MixedPrecisionStep::kEagerSteps) << "all but each shape's first steps";
  std::vector<int64_t> no_waits(41, 0);
  no_waits.back() = 1;
  EXPECT_EQ(captured.waits, no_waits);
  ASSERT_EQ(captured.results.size(), op_by_op.results.size());
  for (size_t i = 0; i < op_by_op.results.size(); ++i)
    EXPECT_NEAR(captured.results[i].loss, op_by_op.results[i].loss, 1e-2 * std::fabs(op_by_op.results[i].loss))
        << "step " << i;
}

}  // namespace
}  // namespace ampwb
