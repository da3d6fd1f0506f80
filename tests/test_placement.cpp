// Device placement without a GPU: a backend whose tensors live on a second "device" (host memory labelled cpu:1)
// refuses any tensor that is not on it, as the CUDA backend refuses host tensors. Mixed-precision steps in every
// mode run through it with host batches and must give the plain CPU backend's results bit for bit, with every
// parameter, gradient, optimizer state and batch-norm statistic on the device.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <tuple>

#include "amp/fp8_scaling.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/profiled_backend.h"
#include "core/allocator.h"
#include "op_test_util.h"
#include "recording_backend.h"
#include "train/config.h"
#include "train/mixed_precision_step.h"

namespace ampwb {
namespace {

const Device kDevice{Device::Kind::CPU, 1};

// Every op (backend_ops.def) checks the tensors it is given are on kDevice, then runs on the CPU backend (the memory
// is host memory).
class StrictDeviceOps : public Backend {
 public:
#define AMPWB_OP(name, time_class, params, args)                              \
  void name params override {                                                 \
    std::apply([](const auto&... a) { (check_arg(a), ...); }, std::tie args); \
    cpu_.name args;                                                           \
  }
#include "backend/backend_ops.def"

 protected:
  static void check(std::initializer_list<const Tensor*> tensors) {
    for (const Tensor* t : tensors)
      AMPWB_CHECK(t->device() == kDevice, t->describe() << " is not on " << kDevice.str());
  }
  // The tensors among an op's arguments: each one defined (linear_backward's dx may not be), a loss-scale state
  // given, the defined tensors of each parameter update.
  static void check_arg(const Tensor& t) {
    if (t.defined()) check({&t});
  }
  static void check_arg(const std::vector<Tensor*>& tensors) {
    for (const Tensor* t : tensors) check({t});
  }
  static void check_arg(const std::vector<ParamUpdate>& params) {
    for (const ParamUpdate& u : params)
      for (const Tensor* t : {&u.param, &u.copy, &u.grad, &u.state1, &u.state2}) check_arg(*t);
  }
  static void check_arg(const GradScale& s) {
    if (s.state) check({s.state});
  }
  static void check_arg(const SgdParams& p) {
    if (p.skip_if_found_inf) check({p.skip_if_found_inf});
  }
  static void check_arg(const AdamParams& p) {
    if (p.skip_if_found_inf) check({p.skip_if_found_inf});
  }
  static void check_arg(const Fp8Factor& f) {
    for (const Tensor* t : {f.inverses[0], f.inverses[1], f.scale})
      if (t) check({t});
  }
  static void check_arg(const ScaledCast& c) { check_arg(c.scale); }
  static void check_arg(const std::vector<Fp8ScalingUpdate>& updates) {
    for (const Fp8ScalingUpdate& u : updates) check({u.state, u.stats});
  }
  template <class Other>
  static void check_arg(const Other&) {}  // numbers and shapes

  CpuBackend cpu_{BackendOptions{2}};
};

class StrictDeviceBackend final : public StrictDeviceOps {
 public:
  Device device() const override { return kDevice; }
  std::string description() const override { return "strict cpu:1 over " + cpu_.description(); }
  Capabilities capabilities() const override { return cpu_.capabilities(); }
  int64_t host_copies = 0;  // device -> host conversions
  int64_t reads = 0;        // read_scalars() calls
  int64_t uploads = 0;      // upload() calls
  int64_t posts = 0;        // post_scalars() calls
  int64_t downloads = 0;    // download() calls (their copies are not host_copies)

  // The workspace is the backend's own record, made by forward: not checked.
  void maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) override {
    check({&x, &y}), cpu_.maxpool_forward(x, y, workspace, p);
  }
  void maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) override {
    check({&dy, &dx}), cpu_.maxpool_backward(dy, workspace, dx, p);
  }
  void convert(const Tensor& src, Tensor& dst) override {  // between devices too
    if (src.device() == kDevice && dst.device() == Device::cpu()) ++host_copies;
    cpu_.convert(src, dst);
  }
  StepScalars read_scalars() override { return ++reads, cpu_.read_scalars(); }
  void post_scalars(const Tensor* state) override {
    if (state) check({state});
    ++posts, cpu_.post_scalars(state);
  }
  PostedScalars collect_scalars() override { return cpu_.collect_scalars(); }
  Tensor upload(const Tensor& host) override { return ++uploads, Backend::upload(host); }
  std::vector<Tensor> download(const std::vector<Tensor>& tensors) override {
    ++downloads;
    std::vector<Tensor> host;
    for (const Tensor& t : tensors) {
      check({&t});
      host.push_back(Tensor::empty(t.shape(), t.dtype(), t.layout()));
      cpu_.convert(t, host.back());
    }
    return host;
  }
};

struct StepOutcome {
  std::vector<float> losses;
  int skipped = 0;
  std::vector<std::vector<float>> params;
};

// A tiny ResNet-20 (3 classes, 8 px images) and its step, as the tests of this file train it: from a seed, with an
// optimizer (momentum 0.9) and a precision.
struct TinyTraining {
  Rng rng;
  ResNet model;
  std::unique_ptr<Optimizer> optimizer;
  PrecisionPolicy policy;
  LossScaler scaler;
  MixedPrecisionStep step;
  TinyTraining(Backend& backend, uint64_t seed, OptimizerKind kind, const PrecisionConfig& config)
      : rng(seed),
        model(backend, {20, 3, 3, 8, Stem::Auto}, rng),
        optimizer(make_optimizer(backend, {kind, 0.9f})),
        policy(config),
        scaler(config.loss_scale),
        step(backend, model, *optimizer, policy, scaler, 0.0f, 0.0f) {}
};

// Three steps of a tiny ResNet from batches uploaded ahead, as the trainer does; everything the model keeps must be
// on the backend's device. Step 1 records the gradient probe (through host copies); the other steps must wait for
// the device once, in one read of its scalars, and copy nothing else back (amp-fp8's scalings included).
StepOutcome train_three_steps(Backend& backend, const std::string& mode, StrictDeviceBackend* strict = nullptr) {
  TinyTraining t(backend, 5, OptimizerKind::Adam, precision_preset(mode));
  GradientProbe probe;
  StepOutcome out;
  for (int i = 0; i < 3; ++i) {
    Tensor labels = Tensor::empty({4}, DType::I32);
    for (int n = 0; n < 4; ++n) labels.data_as<int32_t>()[n] = n % 3;
    const Tensor images = backend.upload(testing::random_tensor({4, 3, 8, 8}, t.rng, Layout::NHWC));
    const Tensor device_labels = backend.upload(labels);
    const int64_t copies = strict ? strict->host_copies : 0, reads = strict ? strict->reads : 0,
                  downloads = strict ? strict->downloads : 0;
    const StepResult r = t.step.run(images, device_labels, 0.01f, i == 1 ? &probe : nullptr);
    out.losses.push_back(r.loss);
    out.skipped += r.skipped;
    if (strict && i != 1) {
      // A skipped step's forensics copy each gradient back to name the layers that overflowed; a step taken copies
      // nothing.
      const int64_t forensics = r.skipped ? static_cast<int64_t>(t.model.parameters().size()) : 0;
      EXPECT_EQ(strict->host_copies - copies, forensics) << "step " << i << ": no other tensor comes back to the host";
      EXPECT_EQ(strict->reads - reads, 1) << "step " << i << ": one read of the step's scalars";
      EXPECT_EQ(strict->downloads - downloads, 0) << "step " << i << ": amp-fp8's scalings stay on the device";
    }
  }
  EXPECT_EQ(probe.take(1, 1.0).size(), 2u) << "the gradient probe reads device gradients through host copies";
  for (Parameter* p : t.model.parameters()) {
    EXPECT_EQ(p->value.device(), backend.device()) << p->name;
    EXPECT_EQ((p->low_grad.defined() ? p->low_grad : p->grad).device(), backend.device()) << p->name;
    out.params.push_back(to_float_vector(on_host(backend, p->value)));
  }
  std::vector<Buffer*> buffers;
  t.model.collect_buffers(buffers);
  for (Buffer* b : buffers) EXPECT_EQ(b->value.device(), backend.device()) << b->name;
  for (auto& [key, state] : t.optimizer->state()) EXPECT_EQ(state.device(), backend.device()) << key;
  return out;
}

class Placement : public ::testing::TestWithParam<std::string> {};

TEST_P(Placement, EveryModeRunsOnTheDeviceAndMatchesTheHostBitForBit) {
  StrictDeviceBackend device;
  CpuBackend host({2});
  const StepOutcome on_device = train_three_steps(device, GetParam(), &device);
  const StepOutcome on_host_cpu = train_three_steps(host, GetParam());
  EXPECT_EQ(on_device.losses, on_host_cpu.losses);
  ASSERT_EQ(on_device.params.size(), on_host_cpu.params.size());
  for (size_t i = 0; i < on_device.params.size(); ++i)
    ASSERT_EQ(std::memcmp(on_device.params[i].data(), on_host_cpu.params[i].data(),
                          on_device.params[i].size() * sizeof(float)),
              0)
        << "parameter " << i;
  EXPECT_EQ(device.uploads, 6) << "the batches went up through upload()";
}

INSTANTIATE_TEST_SUITE_P(Modes, Placement,
                         ::testing::Values("fp32", "amp-fp16", "amp-bf16", "fp16-o2", "fp16-pure", "amp-fp8"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The trainer times its steps through ProfiledBackend, which waits for the device after each op (synchronize()):
// that wait is not a read, so a timed step still reads the device once and copies nothing back.
TEST(Placement, ATimedStepStillReadsTheDeviceOnce) {
  for (const bool timed : {true, false}) {
    auto strict = std::make_unique<StrictDeviceBackend>();
    StrictDeviceBackend* device = strict.get();
    ProfiledBackend profiled(std::move(strict));
    profiled.set_enabled(timed);
    CpuBackend host({2});
    const StepOutcome timed_steps = train_three_steps(profiled, "amp-fp16", device);
    EXPECT_EQ(timed_steps.losses, train_three_steps(host, "amp-fp16").losses);
    EXPECT_GT(timed_steps.skipped, 0) << "amp-fp16 starts at 65536 and skips: the forensics' copies are counted too";
    EXPECT_EQ(profiled.times().calls[static_cast<size_t>(TimeClass::HostWait)], timed ? 3 : 0);
  }
}

// Steps that never wait for the host: the loss scale stays on the device, the update is skipped there,
// and each step's numbers come back one step late. Every step's result, the weights, the scaler's state and the
// optimizer's count must be the waiting step's bit for bit, with no read of the device and no copy back during the
// steps, and, through the timing decorator, no host wait but the last step's collection.
struct DeferredCase {
  std::string mode, optimizer, loss_scale;  // loss_scale: "" for the mode's own
};

struct StepsOutcome {
  std::vector<StepResult> results;
  std::vector<std::vector<float>> params;
  LossScaler::State scaler;
  int64_t optimizer_steps = 0;
  std::vector<std::vector<float>> fp8_scalings;  // amp-fp8: each tensor's amax history, then its scale
};

std::vector<std::vector<float>> fp8_scalings_of(Backend& backend, ResNet& model) {
  std::vector<std::vector<float>> out;
  model.visit([&](Layer& layer) {
    if (Fp8LayerScaling* fp8 = layer.fp8_scaling()) {
      fp8->fetch(backend);
      for (const Fp8TensorScaling* t : fp8->tensors()) {
        out.push_back(t->scaling().amax_history());
        out.back().push_back(t->scaling().scale());
      }
    }
  });
  return out;
}

// The case's precision: its mode, its loss scale, and a scale that grows as well as backs off within the steps.
PrecisionConfig case_config(const DeferredCase& c) {
  PrecisionConfig config = precision_preset(c.mode);
  if (c.loss_scale == "static") config.loss_scale = {LossScaleKind::Static, 1024.0};
  config.loss_scale.growth_interval = 2;
  return config;
}

StepsOutcome train_steps(Backend& backend, const DeferredCase& c, bool deferred, StrictDeviceBackend* strict,
                         ProfiledBackend* profiled) {
  TinyTraining t(backend, 7, *parse_choice<OptimizerKind>(c.optimizer), case_config(c));
  EXPECT_EQ(t.step.why_not_deferred(), "");
  StepsOutcome out;
  constexpr int kSteps = 8;
  const int64_t reads = strict->reads, copies = strict->host_copies, posts = strict->posts;
  for (int i = 0; i < kSteps; ++i) {
    Tensor labels = Tensor::empty({4}, DType::I32);
    for (int n = 0; n < 4; ++n) labels.data_as<int32_t>()[n] = (n + i) % 3;
    const Tensor images = backend.upload(testing::random_tensor({4, 3, 8, 8}, t.rng, Layout::NHWC));
    const Tensor device_labels = backend.upload(labels);
    if (!deferred) {
      out.results.push_back(t.step.run(images, device_labels, 0.05f));
      continue;
    }
    const int64_t waits = profiled ? profiled->host_waits() : 0;
    const std::optional<StepResult> previous = t.step.run_deferred(images, device_labels, 0.05f);
    EXPECT_EQ(previous.has_value(), i > 0) << "step " << i << " returns the step before's result";
    if (previous) out.results.push_back(*previous);
    if (profiled) {
      EXPECT_EQ(profiled->host_waits(), waits) << "step " << i << " waited for the device";
    }
  }
  if (deferred) {
    EXPECT_EQ(strict->reads - reads, 0) << "no step read the device";
    EXPECT_EQ(strict->host_copies - copies, 0) << "no step copied a tensor back";
    EXPECT_EQ(strict->posts - posts, kSteps) << "each step posted its numbers once";
    const int64_t waits = profiled ? profiled->host_waits() : 0;
    const std::optional<StepResult> last = t.step.finish_deferred();
    EXPECT_TRUE(last.has_value());
    if (last) out.results.push_back(*last);
    if (profiled) {
      EXPECT_EQ(profiled->host_waits(), waits + 1) << "collecting the last step waits for the device";
    }
    EXPECT_FALSE(t.step.finish_deferred().has_value()) << "nothing left";
  }
  for (Parameter* p : t.model.parameters()) out.params.push_back(to_float_vector(on_host(backend, p->value)));
  out.fp8_scalings = fp8_scalings_of(backend, t.model);
  out.scaler = t.scaler.state();
  out.optimizer_steps = t.optimizer->steps_taken();
  return out;
}

void PrintTo(const DeferredCase& c, std::ostream* out) { *out << c.mode << " " << c.optimizer << " " << c.loss_scale; }

class DeferredStep : public ::testing::TestWithParam<DeferredCase> {};

TEST_P(DeferredStep, MatchesTheStepThatWaitsBitForBit) {
  const DeferredCase& c = GetParam();
  auto strict = std::make_unique<StrictDeviceBackend>();
  StrictDeviceBackend* device = strict.get();
  ProfiledBackend profiled(std::move(strict));
  profiled.set_enabled(false);  // as the trainer's untimed steps
  StrictDeviceBackend waiting_device;
  const StepsOutcome deferred = train_steps(profiled, c, true, device, &profiled);
  const StepsOutcome waiting = train_steps(waiting_device, c, false, &waiting_device, nullptr);
  ASSERT_EQ(deferred.results.size(), waiting.results.size());
  int skipped = 0, grown = 0;
  for (size_t i = 0; i < waiting.results.size(); ++i) {
    const StepResult& a = deferred.results[i];
    const StepResult& b = waiting.results[i];
    EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << "step " << i << ": " << a.loss << " " << b.loss;
    EXPECT_EQ(a.correct, b.correct) << "step " << i;
    EXPECT_EQ(a.loss_scale, b.loss_scale) << "step " << i;
    EXPECT_EQ(a.skipped, b.skipped) << "step " << i;
    EXPECT_EQ(std::memcmp(&a.grad_norm, &b.grad_norm, sizeof(float)), 0) << "step " << i;
    skipped += b.skipped;
    grown += i > 0 && b.loss_scale > waiting.results[i - 1].loss_scale;
  }
  if ((c.mode == "amp-fp16" || c.mode == "fp16-o2") && c.loss_scale.empty()) {
    EXPECT_GT(skipped, 0) << "the case meant to skip on the device did not";
    EXPECT_GT(grown, 0) << "the case meant to grow the scale on the device did not";
  }
  ASSERT_EQ(deferred.params.size(), waiting.params.size());
  for (size_t i = 0; i < waiting.params.size(); ++i)
    EXPECT_EQ(
        std::memcmp(deferred.params[i].data(), waiting.params[i].data(), waiting.params[i].size() * sizeof(float)), 0)
        << "parameter " << i;
  EXPECT_EQ(deferred.scaler.scale, waiting.scaler.scale);
  EXPECT_EQ(deferred.scaler.growth_tracker, waiting.scaler.growth_tracker);
  EXPECT_EQ(deferred.optimizer_steps, waiting.optimizer_steps) << "a skipped step is not counted as taken";
}

INSTANTIATE_TEST_SUITE_P(Modes, DeferredStep,
                         ::testing::Values(DeferredCase{"fp32", "sgd", ""}, DeferredCase{"amp-fp16", "sgd", ""},
                                           DeferredCase{"amp-bf16", "sgd", ""}, DeferredCase{"fp16-o2", "sgd", ""},
                                           DeferredCase{"amp-fp16", "sgd", "static"},
                                           DeferredCase{"amp-bf16", "adam", ""}, DeferredCase{"fp32", "adamw", ""},
                                           DeferredCase{"amp-fp16", "adam", ""}, DeferredCase{"fp16-o2", "adamw", ""},
                                           DeferredCase{"amp-fp8", "sgd", ""}),
                         [](const ::testing::TestParamInfo<DeferredCase>& info) {
                           std::string name = info.param.mode + "_" + info.param.optimizer +
                                              (info.param.loss_scale.empty() ? "" : "_" + info.param.loss_scale);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Captured steps (CUDA graphs, emulated by RecordingBackend): once a batch shape has run kEagerSteps
// deferred steps op by op, its step is recorded once and then replayed. Every result, the weights, the scaler and the
// optimizer's count must be those of the steps that wait, bit for bit, with a learning rate that changes every step,
// a second batch shape, and a waiting step between (as the trainer's probed step at the end of an epoch).
struct ScheduledSteps {
  StepsOutcome outcome;
  std::string why_not_captured;
  int64_t replayed = 0;
};

ScheduledSteps train_on_schedule(Backend& backend, const DeferredCase& c, bool deferred, bool capture) {
  TinyTraining t(backend, 11, *parse_choice<OptimizerKind>(c.optimizer), case_config(c));
  t.step.set_capture(capture);
  ScheduledSteps out;
  for (int i = 0; i < 14; ++i) {
    const int64_t batch = i >= 6 && i <= 8 ? 3 : 4;
    Tensor labels = Tensor::empty({batch}, DType::I32);
    for (int n = 0; n < batch; ++n) labels.data_as<int32_t>()[n] = (n + i) % 3;
    const Tensor images = backend.upload(testing::random_tensor({batch, 3, 8, 8}, t.rng, Layout::NHWC));
    const Tensor device_labels = backend.upload(labels);
    const float lr = 0.02f * static_cast<float>(1 + i % 3);
    if (!deferred || i == 10) {
      if (std::optional<StepResult> r = t.step.finish_deferred()) out.outcome.results.push_back(*r);
      out.outcome.results.push_back(t.step.run(images, device_labels, lr));
    } else if (std::optional<StepResult> r = t.step.run_deferred(images, device_labels, lr)) {
      out.outcome.results.push_back(*r);
    }
  }
  if (std::optional<StepResult> r = t.step.finish_deferred()) out.outcome.results.push_back(*r);
  for (Parameter* p : t.model.parameters()) out.outcome.params.push_back(to_float_vector(on_host(backend, p->value)));
  out.outcome.fp8_scalings = fp8_scalings_of(backend, t.model);
  out.outcome.scaler = t.scaler.state();
  out.outcome.optimizer_steps = t.optimizer->steps_taken();
  out.why_not_captured = t.step.why_not_captured();
  out.replayed = t.step.replayed_steps();
  return out;
}

void expect_same_steps(const StepsOutcome& a, const StepsOutcome& b) {
  ASSERT_EQ(a.results.size(), b.results.size());
  for (size_t i = 0; i < a.results.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.results[i].loss, &b.results[i].loss, sizeof(float)), 0) << "step " << i;
    EXPECT_EQ(a.results[i].correct, b.results[i].correct) << "step " << i;
    EXPECT_EQ(a.results[i].loss_scale, b.results[i].loss_scale) << "step " << i;
    EXPECT_EQ(a.results[i].skipped, b.results[i].skipped) << "step " << i;
    EXPECT_EQ(std::memcmp(&a.results[i].grad_norm, &b.results[i].grad_norm, sizeof(float)), 0) << "step " << i;
  }
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_EQ(std::memcmp(a.params[i].data(), b.params[i].data(), a.params[i].size() * sizeof(float)), 0)
        << "parameter " << i;
  EXPECT_EQ(a.scaler.scale, b.scaler.scale);
  EXPECT_EQ(a.scaler.growth_tracker, b.scaler.growth_tracker);
  EXPECT_EQ(a.optimizer_steps, b.optimizer_steps);
  EXPECT_EQ(a.fp8_scalings, b.fp8_scalings) << "amp-fp8's amax histories and scales";
}

class CapturedStep : public ::testing::TestWithParam<DeferredCase> {};

TEST_P(CapturedStep, ReplaysMatchTheStepsThatWaitBitForBit) {
  const DeferredCase& c = GetParam();
  testing::RecordingBackend recording(std::make_unique<StrictDeviceBackend>());
  StrictDeviceBackend waiting_device;
  const ScheduledSteps captured = train_on_schedule(recording, c, true, true);
  const ScheduledSteps waiting = train_on_schedule(waiting_device, c, false, false);
  EXPECT_EQ(captured.why_not_captured, "");
  EXPECT_EQ(recording.captures, 2) << "one capture per batch shape";
  // Batch 4: steps 0-1 op by op, 2 captured, 3-5 and 9 replayed; batch 3: 6-7 op by op, 8 captured; 10 waits;
  // 11-13 replayed.
  EXPECT_EQ(recording.replays, 9);
  EXPECT_EQ(captured.replayed, 9);
  expect_same_steps(captured.outcome, waiting.outcome);
  if (c.mode == "amp-fp16" && c.loss_scale.empty()) {
    int skipped = 0;
    for (const StepResult& r : waiting.outcome.results) skipped += r.skipped;
    EXPECT_GT(skipped, 0) << "the case meant to skip on the device did not";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, CapturedStep,
                         ::testing::Values(DeferredCase{"fp32", "sgd", ""}, DeferredCase{"amp-fp16", "sgd", ""},
                                           DeferredCase{"amp-fp16", "sgd", "static"},
                                           DeferredCase{"amp-bf16", "adam", ""}, DeferredCase{"fp16-o2", "adamw", ""},
                                           DeferredCase{"amp-fp8", "adam", ""}),
                         [](const ::testing::TestParamInfo<DeferredCase>& info) {
                           std::string name = info.param.mode + "_" + info.param.optimizer +
                                              (info.param.loss_scale.empty() ? "" : "_" + info.param.loss_scale);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// A captured step's memory on the GPU (cuda_graph.cpp): recorded once into a pool of its own, which measures what it
// allocates, then again into a pool planned from that trace, whose blocks share memory as their lifetimes allow. On
// the CPU the steps run as they fill the pools, so a plan that placed two tensors held at once over each other
// would change the results. Steps 2 and 4 measure, 3 and 5 follow their plans in one pool (5 reusing 3's arena, as a
// second capture does): they must give the steps from the shared cache bit for bit, and take nothing beside the arena.
TEST(CapturedStep, StepsInAPlannedPoolMatchStepsFromTheSharedCacheBitForBit) {
  for (const char* mode : {"fp32", "amp-fp16", "amp-bf16"}) {
    SCOPED_TRACE(mode);
    CpuBackend backend(BackendOptions{2});
    Allocator& allocator = allocator_for(Device::cpu());
    auto train = [&](bool pooled) {
      TinyTraining t(backend, 13, OptimizerKind::Sgd, precision_preset(mode));
      StepsOutcome out;
      const int measuring[] = {allocator.new_pool(), allocator.new_pool()}, planned = allocator.new_pool();
      for (int i = 0; i < 8; ++i) {
        Tensor labels = Tensor::empty({4}, DType::I32);
        for (int n = 0; n < 4; ++n) labels.data_as<int32_t>()[n] = (n + i) % 3;
        const Tensor images = testing::random_tensor({4, 3, 8, 8}, t.rng, Layout::NHWC);
        const int pool = !pooled || i < 2 || i > 5 ? 0 : i % 2 ? planned : measuring[i / 4];
        const size_t unplanned = allocator.stats().live_bytes;
        if (pool == planned) allocator.plan_pool(planned, allocator.pool_trace(measuring[i / 4]));
        const size_t live = allocator.stats().live_bytes;
        if (i == 5 && pooled) {
          EXPECT_EQ(live, unplanned) << "step 5 planned into step 3's arena";
        }
        if (pool) allocator.begin_pool(pool);
        std::optional<StepResult> r = t.step.run_deferred(images, labels, 0.02f);
        if (pool) allocator.end_pool();
        if (pool == planned) {
          EXPECT_EQ(allocator.stats().live_bytes, live) << "step " << i << " left its plan";
        }
        if (r) out.results.push_back(*r);
      }
      if (std::optional<StepResult> r = t.step.finish_deferred()) out.results.push_back(*r);
      for (Parameter* p : t.model.parameters()) out.params.push_back(to_float_vector(p->value));
      out.scaler = t.scaler.state();
      out.optimizer_steps = t.optimizer->steps_taken();
      for (const int pool : {planned, measuring[0], measuring[1]}) allocator.release_pool(pool);
      return out;
    };
    const StepsOutcome shared = train(false);
    expect_same_steps(train(true), shared);
  }
}

// An optimizer's first step is decided on the host (SGD's momentum buffer starts as the gradient itself), so a step
// captured before the optimizer has taken one would replay "first" every time: momentum lost. Here the first two
// steps overflow and are collected (as at an epoch's end) before the third, where the shape's step would be captured.
TEST(CapturedStep, NoStepIsCapturedBeforeTheOptimizersFirst) {
  struct Run {
    StepsOutcome outcome;
    int64_t replayed = 0;
  };
  auto train = [](Backend& backend, bool deferred) {
    PrecisionConfig config = precision_preset("amp-fp16");
    config.loss_scale.init_scale = 0x1p60;  // overflows, then 2^35 overflows, then 2^10 does not
    config.loss_scale.backoff_factor = 0x1p-25;
    TinyTraining t(backend, 12, OptimizerKind::Sgd, config);
    t.step.set_capture(deferred);
    Run run;
    auto keep = [&](std::optional<StepResult> r) {
      if (r) run.outcome.results.push_back(*r);
    };
    for (int i = 0; i < 8; ++i) {
      Tensor labels = Tensor::empty({4}, DType::I32);
      for (int n = 0; n < 4; ++n) labels.data_as<int32_t>()[n] = (n + i) % 3;
      const Tensor images = backend.upload(testing::random_tensor({4, 3, 8, 8}, t.rng, Layout::NHWC));
      const Tensor device_labels = backend.upload(labels);
      if (!deferred) {
        keep(t.step.run(images, device_labels, 0.05f));
        continue;
      }
      keep(t.step.run_deferred(images, device_labels, 0.05f));
      if (i == 1) keep(t.step.finish_deferred());  // both steps skipped and collected: the count is back to 0
    }
    keep(t.step.finish_deferred());
    for (Parameter* p : t.model.parameters()) run.outcome.params.push_back(to_float_vector(on_host(backend, p->value)));
    run.outcome.scaler = t.scaler.state();
    run.outcome.optimizer_steps = t.optimizer->steps_taken();
    run.replayed = t.step.replayed_steps();
    return run;
  };
  testing::RecordingBackend recording(std::make_unique<StrictDeviceBackend>());
  StrictDeviceBackend waiting_device;
  const Run captured = train(recording, true), waiting = train(waiting_device, false);
  ASSERT_EQ(waiting.outcome.results.size(), 8u);
  EXPECT_TRUE(waiting.outcome.results[0].skipped && waiting.outcome.results[1].skipped);
  EXPECT_FALSE(waiting.outcome.results[2].skipped) << "the schedule meant the first two steps to overflow only";
  EXPECT_EQ(recording.captures, 1);
  EXPECT_EQ(captured.replayed, 5) << "steps 0 and 1 op by op, 2 too (no step taken yet), 3 captured, 4-7 replayed";
  expect_same_steps(captured.outcome, waiting.outcome);
}

void expect_refused_capture_runs_op_by_op(const DeferredCase& c) {
  StrictDeviceBackend waiting_device;
  const ScheduledSteps waiting = train_on_schedule(waiting_device, c, false, false);
  StrictDeviceBackend cannot;
  const ScheduledSteps uncaptured = train_on_schedule(cannot, c, true, true);
  EXPECT_NE(uncaptured.why_not_captured.find("nothing to capture"), std::string::npos) << uncaptured.why_not_captured;
  EXPECT_EQ(uncaptured.replayed, 0);
  expect_same_steps(uncaptured.outcome, waiting.outcome);
  testing::RecordingBackend failing(std::make_unique<StrictDeviceBackend>());
  failing.refuse_updates = true;
  const ScheduledSteps failed = train_on_schedule(failing, c, true, true);
  EXPECT_NE(failed.why_not_captured.find("an update (refused by the test)"), std::string::npos)
      << failed.why_not_captured;
  EXPECT_EQ(failing.captures, 0);
  EXPECT_EQ(failed.replayed, 0);
  expect_same_steps(failed.outcome, waiting.outcome);
}

// Where the backend cannot capture, or a capture fails part way (after the forward and backward were recorded),
// the steps run op by op with the reason kept, and nothing of the failed capture shows: Adam's count included, and
// amp-fp8's recorded casts, which ran nothing either.
TEST(CapturedStep, ARefusedCaptureRunsTheStepsOpByOpWithTheReason) {
  for (const DeferredCase& c : {DeferredCase{"amp-fp16", "adam", ""}, DeferredCase{"amp-fp8", "adam", ""}}) {
    SCOPED_TRACE(c.mode);
    expect_refused_capture_runs_op_by_op(c);
  }
}

TEST(DeferredStep, SettingsThatNeedTheHostAreRefusedWithTheReason) {
  CpuBackend backend({2});
  Rng rng(1);
  ResNet model(backend, {20, 3, 3, 8, Stem::Auto}, rng);
  auto reason = [&](const std::string& mode, const std::string& optimizer_kind, float clip, int hysteresis) {
    auto optimizer = make_optimizer(backend, {*parse_choice<OptimizerKind>(optimizer_kind), 0.9f});
    PrecisionConfig config = precision_preset(mode);
    config.loss_scale.hysteresis = hysteresis;
    const PrecisionPolicy policy(config);
    LossScaler scaler(config.loss_scale);
    MixedPrecisionStep step(backend, model, *optimizer, policy, scaler, 0.0f, clip);
    return step.why_not_deferred();
  };
  EXPECT_EQ(reason("amp-fp16", "sgd", 0, 1), "");
  EXPECT_NE(reason("amp-fp16", "sgd", 1.0f, 1).find("clipping"), std::string::npos);
  EXPECT_EQ(reason("amp-fp16", "adam", 0, 1), "") << "Adam's count of the steps taken is kept on the device";
  EXPECT_NE(reason("amp-fp16", "sgd", 0, 2).find("hysteresis"), std::string::npos);
  EXPECT_NE(reason("fp16-pure", "sgd", 0, 1).find("master weights"), std::string::npos);
  auto optimizer = make_optimizer(backend, {OptimizerKind::Sgd, 0.9f});
  const PrecisionConfig config = precision_preset("fp16-pure");
  const PrecisionPolicy policy(config);
  LossScaler scaler(config.loss_scale);
  MixedPrecisionStep step(backend, model, *optimizer, policy, scaler, 0.0f, 0.0f);
  const Tensor images = testing::random_tensor({2, 3, 8, 8}, rng, Layout::NHWC);
  const Tensor labels = tensor_from_floats({0, 1}, {2}, DType::I32);
  EXPECT_THROW(step.run_deferred(images, labels, 0.01f), Error);
}

TEST(Placement, HostAndDeviceCopiesGoBothWays) {
  StrictDeviceBackend device;
  const Tensor host = tensor_from_floats({1, 2, 3, 4, 5, 6}, {1, 2, 1, 3}, DType::F32, Layout::NHWC);
  const Tensor up = on_device(device, host);
  EXPECT_EQ(up.device(), kDevice);
  EXPECT_FALSE(up.same_storage(host));
  EXPECT_TRUE(on_device(device, up).same_storage(up)) << "already there: no copy";
  const Tensor down = on_host(device, up);
  EXPECT_EQ(down.device(), Device::cpu());
  EXPECT_EQ(to_float_vector(down), to_float_vector(host));
  EXPECT_TRUE(on_host(device, host).same_storage(host));
}

}  // namespace
}  // namespace ampwb
