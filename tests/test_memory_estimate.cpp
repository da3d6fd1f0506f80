// The memory estimate (train/memory_estimate.h): against the allocator's measured peak, the largest batch that
// fits, the refusal of a run that cannot fit by the real program under a real address-space limit, and the words
// an allocation failure during a run ends with.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <new>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "forwarding_backend.h"
#include "test_cli_util.h"
#include "train/benchmark.h"
#include "train/memory_estimate.h"
#include "train/trainer.h"

namespace ampwb {
namespace {

using cli_test::TempDir;

struct PeakCase {
  int depth, image_size, batch_size;
  const char* precision;
};

class MemoryEstimateAccuracy : public ::testing::TestWithParam<PeakCase> {};

// The estimate predicts the allocator's peak of live tensor bytes over a training step (what `ampwb bench` reports
// as peak tensors): the one measure that counts every tensor the step holds and nothing the process holds besides
// (the allocator's cache, code, oneDNN's primitives), so the comparison tests the estimate and not the machine.
// Warm-up steps until the optimizer's state exists, then one measured step, on synthetic data.
TEST_P(MemoryEstimateAccuracy, WithinAQuarterOfTheMeasuredPeak) {
  const PeakCase& c = GetParam();
  BenchConfig bench;
  bench.depth = c.depth;
  bench.image_size = c.image_size;
  bench.batch_size = c.batch_size;
  bench.num_classes = 10;
  bench.precision = parse_precision_mode(c.precision);
  bench.steps = 1;
  // The optimizer's state is made by its first step. Dynamic loss scaling starts at 2^16, where FP16's first
  // gradients overflow and steps are skipped until the scale has come down: more warm-up there.
  bench.warmup = precision_preset(bench.precision).loss_scale.kind == LossScaleKind::Dynamic ? 8 : 1;
  bench.threads = 1;  // one thread: two tests side by side on two cores would each wait at OpenMP barriers
  const BenchResult measured = run_benchmark(bench);

  TrainConfig as_run;
  as_run.depth = c.depth;
  as_run.batch_size = c.batch_size;
  as_run.precision = precision_preset(bench.precision);
  as_run.optimizer = {OptimizerKind::Sgd, 0.9f};
  MemoryEstimateInput input =
      memory_estimate_input(as_run, c.image_size, 10, make_backend(DeviceChoice::cpu(), {1})->capabilities());
  input.extra_input_batches = 0;  // the benchmark's one batch, no loader
  const MemoryEstimate estimate = estimate_training_memory(input);
  const double ratio = static_cast<double>(estimate.total()) / static_cast<double>(measured.peak_bytes);
  std::printf(
      "ResNet-%d %d px batch %d %s: estimate %.1f MiB (weights %.1f, copies %.1f, optimizer %.1f, "
      "activations %.1f, workspace %.1f), measured peak %.1f MiB, ratio %.3f\n",
      c.depth, c.image_size, c.batch_size, c.precision, estimate.total() / 1048576.0, estimate.weights / 1048576.0,
      estimate.low_precision_copies / 1048576.0, estimate.optimizer_state / 1048576.0, estimate.activations / 1048576.0,
      estimate.workspace / 1048576.0, measured.peak_bytes / 1048576.0, ratio);
  EXPECT_GT(ratio, 0.75) << "the estimate is more than 25% below the measured peak";
  EXPECT_LT(ratio, 1.25) << "the estimate is more than 25% above the measured peak";
}

INSTANTIATE_TEST_SUITE_P(ResNets, MemoryEstimateAccuracy,
                         ::testing::Values(PeakCase{20, 32, 32, "fp32"}, PeakCase{20, 32, 32, "amp-fp16"},
                                           PeakCase{20, 32, 32, "amp-bf16"}, PeakCase{20, 32, 32, "amp-fp8"},
                                           PeakCase{18, 64, 16, "fp32"}, PeakCase{18, 64, 16, "amp-fp16"},
                                           PeakCase{18, 64, 16, "amp-bf16"}, PeakCase{18, 64, 16, "amp-fp8"},
                                           PeakCase{50, 64, 16, "fp32"}, PeakCase{50, 64, 16, "amp-fp16"},
                                           PeakCase{50, 64, 16, "amp-bf16"}, PeakCase{50, 64, 16, "amp-fp8"}),
                         [](const ::testing::TestParamInfo<PeakCase>& info) {
                           std::string name = "ResNet" + std::to_string(info.param.depth) + "_" +
                                              std::to_string(info.param.image_size) + "px_" + info.param.precision;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

MemoryEstimateInput resnet152_at_224(int batch) {
  MemoryEstimateInput in;
  in.depth = 152;
  in.image_size = 224;
  in.batch_size = batch;
  in.num_classes = 1000;
  in.precision = precision_preset(PrecisionMode::Fp32);
  return in;
}

// The run: ResNet-152 at 224 px, batch 4096. Estimated without allocating, and far beyond 24 GiB.
TEST(MemoryEstimate, GrowsWithTheBatchAndTheImageAndNeedsNoAllocation) {
  const size_t live_before = cpu_allocator().stats().live_bytes;
  const MemoryEstimate big = estimate_training_memory(resnet152_at_224(4096));
  EXPECT_EQ(cpu_allocator().stats().live_bytes, live_before) << "the estimate allocates no tensor";
  EXPECT_GT(big.total(), size_t{24} << 30);
  EXPECT_GT(big.activations, big.weights) << "at batch 4096 the activations dominate";
  const MemoryEstimate half = estimate_training_memory(resnet152_at_224(2048));
  EXPECT_LT(half.total(), big.total());
  EXPECT_EQ(half.weights, big.weights) << "the weights do not depend on the batch";
  MemoryEstimateInput smaller = resnet152_at_224(4096);
  smaller.image_size = 112;
  EXPECT_LT(estimate_training_memory(smaller).activations, big.activations);
  MemoryEstimateInput amp = resnet152_at_224(4096);
  amp.precision = precision_preset(PrecisionMode::AmpBf16);
  const MemoryEstimate amp_estimate = estimate_training_memory(amp);
  EXPECT_LT(amp_estimate.activations, big.activations) << "16-bit activations take half the bytes";
  EXPECT_GT(amp_estimate.low_precision_copies, 0u);
  EXPECT_EQ(big.low_precision_copies, 0u) << "FP32 keeps no 16-bit copies";
}

TEST(MemoryEstimate, LargestBatchThatFitsIsTheLargest) {
  for (const size_t available : {size_t{3} << 30, size_t{24} << 30, size_t{80} << 30}) {
    const int fits = largest_batch_that_fits(resnet152_at_224(4096), available);
    ASSERT_GE(fits, 2) << available;
    EXPECT_LE(estimate_training_memory(resnet152_at_224(fits)).total(), available);
    EXPECT_GT(estimate_training_memory(resnet152_at_224(fits + 1)).total(), available);
  }
  const size_t two = estimate_training_memory(resnet152_at_224(2)).total();
  EXPECT_EQ(largest_batch_that_fits(resnet152_at_224(4096), two), 2);
  EXPECT_EQ(largest_batch_that_fits(resnet152_at_224(4096), two - 1), 0) << "not even batch 2 fits";
  const std::string advice =
      memory_advice(resnet152_at_224(4096), estimate_training_memory(resnet152_at_224(4096)), size_t{24} << 30);
  EXPECT_NE(
      advice.find("a batch size of " +
                  std::to_string(largest_batch_that_fits(resnet152_at_224(4096), size_t{24} << 30)) + " or less fits"),
      std::string::npos)
      << advice;
  EXPECT_NE(advice.find("24.0 GiB available"), std::string::npos) << advice;
}

TEST(MemoryEstimate, AvailableMemoryIsReadFromThisMachine) {
  const size_t available = available_host_memory();
  EXPECT_GT(available, size_t{0}) << "MemAvailable at least";
  EXPECT_LE(available, make_backend(DeviceChoice::cpu(), {1})->capabilities().memory_bytes)
      << "no more than the machine has";
}

// Through the real program under a real limit: `prlimit --as` caps the address space at 4 GiB, and a run that needs
// far more (ResNet-50 at 512 px, batch 40) is refused before the store records it, with the estimate, what is
// available and the batch size that fits; never std::bad_alloc.
TEST(MemoryEstimate, TrainRefusesARunThatCannotFitUnderAnAddressSpaceLimit) {
  if (!fs::exists("/usr/bin/prlimit")) GTEST_SKIP() << "util-linux's prlimit is not installed";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory takes terabytes of address space: under a 4 GiB limit the program "
                  "cannot start (the plain build runs this test)";
#endif
  TempDir dir("memory_refusal");
  const std::string db = dir.file("runs.sqlite");
  const cli_test::Result r =
      cli_test::ampwb({"train", "--data", cli_test::stripes().string(), "--depth", "50", "--image-size", "512",
                       "--batch-size", "40", "--epochs", "1", "--db", db, "--name", "too-big"},
                      {"/usr/bin/prlimit", "--as=4294967296", "--"});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("ampwb train: error: not enough memory: this run needs \u2248 "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" available: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" or less fits"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("bad_alloc"), std::string::npos) << r.output;
  const size_t said = r.output.find(" GiB available");
  ASSERT_NE(said, std::string::npos) << "under 4 GiB, what is available is said in GiB or MiB: " << r.output;
  const double available_gib = std::stod(r.output.substr(r.output.rfind(' ', said - 1) + 1));
  EXPECT_LT(available_gib, 4.0) << "the address-space limit, not the machine's memory: " << r.output;
  RunStore store(db, RunStore::Mode::ReadOnly);
  EXPECT_TRUE(store.runs().empty()) << "nothing recorded";
  EXPECT_EQ(store.integrity_check(), "ok");

  // The batch it advises is smaller than the one refused.
  const std::string advice = "a batch size of ";
  const size_t advised_at = r.output.find(advice, r.output.find("available: "));
  ASSERT_NE(advised_at, std::string::npos) << r.output;
  const int advised = std::stoi(r.output.substr(advised_at + advice.size()));
  EXPECT_GE(advised, 2);
  EXPECT_LT(advised, 40);
}

// An allocation that still fails during a run (here injected into a convolution) ends it as failed in the same
// words as the refusal, never "std::bad_alloc", and the store records the failure whole.
class FailAllocation : public testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) override {
    if (++calls_ > 30) throw std::bad_alloc();
    inner().conv2d_forward(x, w, y, p);
  }

 private:
  int calls_ = 0;
};

TEST(MemoryEstimate, AnAllocationFailureDuringARunEndsItInWords) {
  TempDir dir("memory_failure");
  const std::string db = dir.file("runs.sqlite");
  TrainConfig c;
  c.data_dir = cli_test::stripes().string();
  c.depth = 20;
  c.epochs = 1;
  c.batch_size = 4;
  c.image_size = 16;
  c.max_steps_per_epoch = 3;
  c.threads = 2;
  int64_t run = 0;
  RunEnd end;
  {
    RunStore store(db);
    StoreRecorder recorder(store, c);
    Trainer trainer(c, &recorder);
    trainer.decorate_backend([](std::unique_ptr<Backend> b) { return std::make_unique<FailAllocation>(std::move(b)); });
    end = trainer.run();
    run = recorder.run_id();
  }
  EXPECT_EQ(end.status, RunStatus::Failed);
  EXPECT_EQ(end.reason.find("bad_alloc"), std::string::npos) << end.reason;
  EXPECT_EQ(end.reason.rfind("out of memory: this run needs \u2248 ", 0), 0u) << end.reason;
  EXPECT_NE(end.reason.find(" or less fits"), std::string::npos) << end.reason;
  RunStore store(db, RunStore::Mode::ReadOnly);
  ASSERT_NE(run, 0);
  EXPECT_EQ(store.run(run).status, RunStatus::Failed);
  EXPECT_EQ(store.run(run).end_reason, end.reason);
  EXPECT_EQ(store.integrity_check(), "ok");
}

}  // namespace
}  // namespace ampwb
