// The diagnosis (analysis/diagnosis.h) on real trainings of tiny ResNets on real PNG files, recorded into real SQLite
// stores: each rule fires on a run made to trigger it, a healthy run triggers none, and `ampwb explain` prints the
// same findings as text and JSON.
#include <gtest/gtest.h>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>

#include "analysis/diagnosis.h"
#include "analysis/run_speed.h"
#include "analysis/time_comparison.h"
#include "backend/backend.h"
#include "backend/make_backend.h"
#include "spinners.h"
#include "store/run_store.h"
#include "store/store_recorder.h"
#include "test_cli_util.h"
#include "train/scale_collapse.h"
#include "train/trainer.h"

namespace ampwb {
namespace {
using namespace cli_test;

// ResNet-20 on the 16 px stripes, 2 epochs of 7 steps: what each test then bends towards its rule.
TrainConfig base_config(const std::string& data = stripes().string()) {
  TrainConfig c;
  c.data_dir = data;
  c.depth = 20;
  c.epochs = 2;
  c.batch_size = 8;
  c.lr = 0.05f;
  c.threads = 2;
  c.data.validation_fraction = 0.25;
  return c;
}

TrainConfig with_mode(TrainConfig c, PrecisionMode mode) {
  const PrecisionConfig preset = precision_preset(mode);
  c.precision = preset;
  return c;
}

class Diagnosis : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new TempDir("diagnosis"); }
  static void TearDownTestSuite() { delete dir_; }
  static std::string db() { return dir_->file("runs.sqlite"); }

  // Trains `c` to its end (finished or failed) with the run store recording, and loads what was stored.
  static RunEvidence trained(const TrainConfig& c) {
    RunStore store(db());
    StoreRecorder recorder(store, c);
    Trainer trainer(c, &recorder);
    trainer.run();
    EXPECT_NE(recorder.run_id(), 0) << "the run did not start";
    return load_evidence(store, recorder.run_id());
  }
  static RunEvidence stored(int64_t id) { return load_evidence(RunStore(db(), RunStore::Mode::ReadOnly), id); }

  static const RunEvidence& healthy() {
    static const RunEvidence run = [] {
      TrainConfig c = base_config();
      // Enough work per step that the optimizer and host work stay far under batch_too_small's 12% on a noisy
      // machine (at 16 px they took 16% in one CI run, 11.3 ms of compute a step): 32 px does 4x the work.
      c.batch_size = 16;
      c.image_size = 32;
      return trained(c);
    }();
    return run;
  }
  static const RunEvidence& fp16_with_clipping() {
    static const RunEvidence run = [] {
      TrainConfig c = with_mode(base_config(), PrecisionMode::AmpFp16);
      c.grad_clip_norm = 1.0f;
      return trained(c);
    }();
    return run;
  }

  static TempDir* dir_;
};
TempDir* Diagnosis::dir_ = nullptr;

std::string format_g(double value) {  // as the findings print a scale
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string listing(const std::vector<Finding>& findings) {
  std::string out;
  for (const Finding& f : findings)
    out += "  [" + std::string(severity_name(f.severity)) + "] " + f.rule + ": " + f.title + " | " + f.evidence + "\n";
  return out.empty() ? "  (none)\n" : out;
}

const Finding* find(const std::vector<Finding>& findings, const std::string& rule) {
  for (const Finding& f : findings)
    if (f.rule == rule) return &f;
  return nullptr;
}

// The finding of `rule` among the run's, failing the test (and listing them) when it is not there.
Finding expect_finding(const std::vector<Finding>& findings, const std::string& rule) {
  const Finding* f = find(findings, rule);
  EXPECT_NE(f, nullptr) << rule << " did not fire; the findings:\n" << listing(findings);
  return f ? *f : Finding{};
}

// The timing rules (data_bound, batch_too_small) judge ratios of measured times. A sanitizer slows the engine's own
// code and not the uninstrumented libraries it calls (image decoding, oneDNN), so under one those ratios describe
// the instrumentation, not the run: the tests of those rules skip there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kTimesDistorted = true;
#else
constexpr bool kTimesDistorted = false;
#endif
#define SKIP_WHERE_TIMES_ARE_DISTORTED() \
  if (kTimesDistorted) GTEST_SKIP() << "a sanitizer's instrumentation distorts the ratios of step times"

bool is_timing_rule(const Finding& f) { return f.rule == "data_bound" || f.rule == "batch_too_small"; }

// Whether other work shared the machine while the run trained: measured, not controlled by the test.
bool timed_beside_other_work(const RunEvidence& run) {
  return !timing_warning({{run.run.id, mean_epoch_times(run.times).load}}).empty();
}

TEST_F(Diagnosis, AHealthyRunTriggersNone) {
  const RunEvidence& run = healthy();
  ASSERT_EQ(run.run.status, RunStatus::Finished) << run.run.end_reason;
  std::vector<Finding> findings = diagnose(run);
  if (kTimesDistorted) std::erase_if(findings, is_timing_rule);
  // The one finding a healthy run may get is the machine's load, exactly when the load was recorded as heavy.
  const size_t said = std::erase_if(findings, [](const Finding& f) { return f.rule == "timing_unreliable"; });
  EXPECT_EQ(said, timed_beside_other_work(run) ? 1u : 0u) << machine_load_text(mean_epoch_times(run.times).load);
  EXPECT_TRUE(findings.empty()) << listing(findings);
}

// A run that did not train to its end says so first: the other findings cover only the epochs it completed.
TEST_F(Diagnosis, ARunThatDidNotFinishSaysHowFarItGot) {
  RunEvidence stopped = healthy();
  stopped.run.status = RunStatus::Cancelled;
  stopped.run.end_reason = "stopped by the user at epoch 2";
  stopped.run.epochs = 20;
  const Finding f = expect_finding(diagnose(stopped), "unfinished");
  EXPECT_EQ(f.title, "Stopped after " + std::to_string(stopped.epochs.size()) + " of 20 epochs");
  EXPECT_EQ(f.severity, Severity::Note);
  expect_contains(f.evidence, "status stopped, " + std::to_string(stopped.epochs.size()) + " of 20 epochs completed");
  expect_contains(f.evidence, "stopped by the user at epoch 2");
  expect_contains(f.action, "resume it from its last checkpoint");
  stopped.run.status = RunStatus::Failed;
  EXPECT_EQ(expect_finding(diagnose(stopped), "unfinished").severity, Severity::Problem);
  EXPECT_EQ(diagnose(stopped).front().rule, "unfinished");  // a problem: listed first
  EXPECT_EQ(find(diagnose(healthy()), "unfinished"), nullptr);
}

// Two classes of one and the same picture cannot be told apart: the model answers one class for every image, and
// the accuracy it reads (that class's share) is said to be no result. The healthy run, which learned, is not.
TEST_F(Diagnosis, AModelThatAnswersOneClassForEveryImageHasLearnedNothing) {
  const fs::path data = dir_->file("one picture");
  for (const char* cls : {"cat", "dog"}) {
    fs::create_directories(data / cls);
    for (int i = 0; i < 20; ++i)
      cv::imwrite((data / cls / (std::to_string(i) + ".png")).string(),
                  cv::Mat(16, 16, CV_8UC3, cv::Scalar(90, 140, 60)));
  }
  const RunEvidence run = trained(with_mode(base_config(data.string()), PrecisionMode::AmpBf16));
  ASSERT_EQ(run.run.status, RunStatus::Finished) << run.run.end_reason;
  const Finding f = expect_finding(diagnose(run), "one_class");
  EXPECT_EQ(f.severity, Severity::Problem);
  const int64_t images = run.run.info.validation_images;
  const bool cat = f.title.find("'cat'") != std::string::npos;
  EXPECT_EQ(f.title, std::string("The model answers '") + (cat ? "cat" : "dog") +
                         "' for every image: it has not learned to tell the classes apart");
  expect_contains(f.evidence, "epoch 2: '" + std::string(cat ? "cat" : "dog") + "' for " + std::to_string(images) +
                                  " of " + std::to_string(images) + " validation images, whose share of them is 50%");
  expect_contains(f.evidence, "the validation accuracy of 50% is that share, not a result");
  expect_contains(f.action, "where an FP32 run of the same settings learns and this one does not, the precision");
  EXPECT_EQ(diagnose(run).front().rule, "one_class");  // a problem: listed first
  EXPECT_EQ(find(diagnose(healthy()), "one_class"), nullptr);
  // Against an FP32 baseline that learned, the precision is the suspect, and the advice says so with its figure.
  RunEvidence learned;
  learned.run.id = 41;
  learned.run.config.precision = precision_preset("fp32");
  EpochReport epoch;
  epoch.epoch = 2, epoch.validation_accuracy = 0.9;
  learned.epochs = {epoch};
  const Finding against = expect_finding(diagnose(run, &learned), "one_class");
  EXPECT_EQ(against.action,
            "the FP32 baseline, run 41, learned (90%): where their other settings match (ampwb compare "
            "41 " +
                std::to_string(run.run.id) +
                "), the precision is at fault, and the findings on its numerics say where");
  learned.epochs[0].validation_accuracy = 0.55;  // no better than the one class's share, to 10 points
  expect_contains(expect_finding(diagnose(run, &learned), "one_class").action, "train more epochs");
}

TEST_F(Diagnosis, AStepWaitingForItsDataIsDataBound) {
  SKIP_WHERE_TIMES_ARE_DISTORTED();
  // Large PNGs decoded every epoch by one thread, for a model that takes little time per step. One compute thread
  // leaves the loader a core of its own: at 768 px it then keeps the step waiting 82-84% of its time on a Zen 4, far
  // past the rule's 25%. With two compute threads the three shared the two cores and the wait was 34-68% of steps
  // that took 10-47 ms (at 384 px, 26-34%: it missed once).
  const fs::path big = make_stripes_folder("diagnosis_big", 24, 768);
  TrainConfig c = base_config(big.string());
  c.image_size = 16;
  c.data.loader_threads = 1;
  c.data.cache_budget_mb = 0;
  c.threads = 1;
  const RunEvidence run = trained(c);
  fs::remove_all(big);
  const Finding f = expect_finding(diagnose(run), "data_bound");
  EXPECT_EQ(f.severity, Severity::Problem);
  expect_contains(f.evidence, "the loader kept training waiting");
  EXPECT_EQ(find(diagnose(healthy()), "data_bound"), nullptr);
}

TEST_F(Diagnosis, EmulatedFp16OnTheCpuIsSaidAndClippingOrderExplained) {
  const std::vector<Finding> findings = diagnose(fp16_with_clipping());
  expect_contains(expect_finding(findings, "fp16_emulated").evidence, "emulated");
  const Finding clip = expect_finding(findings, "clipping_order");
  expect_contains(clip.evidence, "clip norm 1:");
  expect_contains(clip.evidence, "on the still-scaled gradients it would have clipped 100%");
}

TEST_F(Diagnosis, Bf16WithoutNativeSupportIsSaid) {
  // oneDNN limited to AVX2 has no BF16 convolutions on any CPU: the engine emulates BF16.
  const Result r = run({"/usr/bin/env", "ONEDNN_MAX_CPU_ISA=AVX2",
                        AMPWB_BINARY,   "train",
                        "--data",       stripes().string(),
                        "--depth",      "20",
                        "--epochs",     "1",
                        "--batch-size", "8",
                        "--threads",    "2",
                        "--precision",  "amp-bf16",
                        "--db",         db(),
                        "--name",       "bf16 on avx2"});
  ASSERT_EQ(r.status, 0) << r.output;
  const RunEvidence run = stored(RunStore(db(), RunStore::Mode::ReadOnly).resolve("bf16 on avx2"));
  expect_contains(expect_finding(diagnose(run), "bf16_not_native").evidence, "emulated by the engine");
  // Where this CPU computes BF16 natively, a run here is not told otherwise.
  const RunEvidence here = trained(with_mode(base_config(), PrecisionMode::AmpBf16));
  const bool native = make_backend(DeviceChoice::cpu())->capabilities().bf16.native;
  EXPECT_EQ(find(diagnose(here), "bf16_not_native") != nullptr, !native) << listing(diagnose(here));
}

TEST_F(Diagnosis, ScalingFromAnAbsurdScaleSkipsStepsAndTheScheduleRunsOn) {
  TrainConfig c = with_mode(base_config(), PrecisionMode::AmpFp16);
  c.precision.loss_scale.init_scale = std::ldexp(1.0, 40);  // every gradient inf in FP16 until it backs off
  const RunEvidence run = trained(c);
  ASSERT_EQ(run.run.status, RunStatus::Finished) << run.run.end_reason;
  const std::vector<Finding> findings = diagnose(run);
  // The scaler halving the scale until the gradients fit: the initial scale's fault, not a collapse.
  const Finding initial = expect_finding(findings, "initial_scale_too_high");
  EXPECT_EQ(initial.severity, Severity::Warning);
  expect_contains(initial.evidence, "the initial loss scale 1.09951e+12 was too high: ");
  // Its 16 steps halve 2^40 only to 2^24: every one skipped, the scale still far above GradScaler's 2^16.
  const std::vector<SkippedRun> skips = skipped_runs(run.steps);
  ASSERT_EQ(skips.size(), 1u);
  EXPECT_EQ(skips.front().length, static_cast<int64_t>(run.steps.size()));
  expect_contains(initial.evidence, "all 16 steps were skipped, the last at a scale of 3.35544e+07, still too high");
  expect_contains(initial.action, "start the scale at 65536 or lower");
  EXPECT_EQ(find(findings, "scale_collapse"), nullptr) << listing(findings);
  EXPECT_EQ(find(findings, "skipped_steps"), nullptr) << "no step after them, skipped or not";
  const Finding schedule = expect_finding(findings, "lr_schedule_skips");
  expect_contains(schedule.evidence, "the cosine schedule advanced through");
  expect_contains(schedule.action, "start the loss scale lower");  // nothing else overflowed
  // From 2^28 the scaler finds a scale that works within the run: the steps after train, at the scale it says.
  c.precision.loss_scale.init_scale = std::ldexp(1.0, 28);
  c.precision.loss_scale.growth_interval = 2;  // then probing higher every other step: skips of its own
  const RunEvidence found = trained(c);
  const std::vector<SkippedRun> found_skips = skipped_runs(found.steps);
  ASSERT_FALSE(found_skips.empty());
  const SkippedRun& search = found_skips.front();
  ASSERT_TRUE(search.found_initial_level()) << listing(diagnose(found));
  ASSERT_GE(search.length, kScaleCollapseRun) << "too few skips to be told";
  const StepReport& first_trained = found.steps[static_cast<size_t>(search.length)];
  ASSERT_FALSE(first_trained.skipped);
  const Finding level = expect_finding(diagnose(found), "initial_scale_too_high");
  expect_contains(level.evidence, "the initial loss scale 2.68435e+08 was too high: the first " +
                                      std::to_string(search.length) + " steps were skipped, lowering it to " +
                                      format_g(first_trained.loss_scale) + ", at which the gradients were finite");
  expect_contains(level.action, "start the scale at " + format_g(first_trained.loss_scale) + " or lower");
  const Finding later = expect_finding(diagnose(found), "skipped_steps");
  expect_contains(later.evidence, "(after the first " + std::to_string(search.length) + ", the initial scale's)");
  EXPECT_EQ(find(diagnose(found), "scale_collapse"), nullptr);
  // A constant schedule has nothing to run on.
  c.precision.loss_scale.growth_interval = 2000;
  c.schedule = Schedule::Constant;
  EXPECT_EQ(find(diagnose(trained(c)), "lr_schedule_skips"), nullptr);
}

TEST_F(Diagnosis, ADivergingRunCollapsesTheScaleAndOverflowsItsActivations) {
  TrainConfig c = with_mode(base_config(), PrecisionMode::AmpFp16);
  c.lr = 1e4f;  // the first update blows the weights up; FP16 activations overflow from then on
  c.max_consecutive_skipped = 1000;
  const RunEvidence run = trained(c);
  const std::vector<Finding> findings = diagnose(run);
  const Finding collapse = expect_finding(findings, "scale_collapse");
  EXPECT_EQ(collapse.severity, Severity::Problem);
  expect_contains(collapse.evidence, "consecutive steps skipped");
  expect_contains(expect_finding(findings, "activation_overflow_risk").evidence, "max |activation|");
  expect_contains(expect_finding(findings, "lr_schedule_skips").action, "fix what overflows first");

  // The live alarm, fed the run's events in the order the trainer reported them, fires once, on the step that made
  // the run of skips as long as the rule's, and names the layers the stored finding names.
  ScaleCollapseWatch watch;
  int fired = 0;
  int64_t fired_at = -1;
  size_t next_overflow = 0;
  for (const StepReport& s : run.steps) {
    if (watch.step(s)) ++fired, fired_at = s.step;
    while (next_overflow < run.overflows.size() && run.overflows[next_overflow].step <= s.step)
      watch.overflow(run.overflows[next_overflow++]);
  }
  EXPECT_EQ(fired, 1);
  ASSERT_TRUE(watch.collapsed());
  EXPECT_EQ(fired_at, watch.latest()->first_step + kScaleCollapseRun - 1);
  const std::string origins = overflow_origins(watch.latest()->overflows);
  ASSERT_FALSE(origins.empty()) << "the skipped steps named no layer";
  expect_contains(collapse.evidence, origins);
  expect_contains(watch.warning(), "inf/NaN gradients started in " + origins + ". Try: ");
}

TEST(ScaleCollapseWatch, OnlyAnUnbrokenRunOfSkipsCounts) {
  ScaleCollapseWatch watch;
  int64_t step = 0;
  auto report = [&](bool skipped) { return watch.step(StepReport{1, step++, 1, 0, 0, 1024, skipped, 0, 0}); };
  for (int64_t i = 0; i + 1 < kScaleCollapseRun; ++i) EXPECT_FALSE(report(true));
  EXPECT_FALSE(report(false));  // one clean step: the scaler found a scale that works
  EXPECT_FALSE(watch.collapsed());
  for (int64_t i = 0; i + 1 < kScaleCollapseRun; ++i) EXPECT_FALSE(report(true));
  EXPECT_TRUE(report(true));
  EXPECT_FALSE(report(true));  // the same collapse goes on: said once
  EXPECT_EQ(watch.collapses(), 1);
  EXPECT_EQ(watch.latest()->length, kScaleCollapseRun + 1);
}

// Skips from the first step are said live as what they may be, and once a step trains again, as an initial scale too
// high; a collapse later in the run is a collapse of its own.
TEST(ScaleCollapseWatch, SkipsFromTheFirstStepThatEndAreTheInitialScale) {
  ScaleCollapseWatch watch;
  int64_t step = 0;
  double scale = std::ldexp(1.0, 40);
  auto report = [&](bool skipped) {
    const bool fired = watch.step(StepReport{1, step++, 1, 0, 0, static_cast<float>(scale), skipped, 0, 0});
    if (skipped) scale /= 2;
    return fired;
  };
  for (int64_t i = 0; i + 1 < kScaleCollapseRun; ++i) EXPECT_FALSE(report(true));
  EXPECT_TRUE(report(true));
  expect_contains(watch.warning(), "the first 10 steps were all skipped, the loss scale falling from 1.09951e+12 to");
  expect_contains(watch.warning(), "If steps train again, the initial scale was too high; if not, no scale fixes");
  for (int i = 0; i < 5; ++i) report(true);
  EXPECT_FALSE(report(false));
  EXPECT_TRUE(watch.latest()->found_initial_level());
  expect_contains(watch.warning(),
                  "the initial loss scale 1.09951e+12 was too high: the first 15 steps were skipped, lowering it to "
                  "3.35544e+07, at which the gradients were finite. Try: those steps trained nothing: start the scale "
                  "at 3.35544e+07 or lower");
  for (int64_t i = 0; i < kScaleCollapseRun; ++i) report(true);
  EXPECT_EQ(watch.collapses(), 2);
  EXPECT_FALSE(watch.latest()->found_initial_level());
  expect_contains(watch.warning(), "the loss scale collapsed: 10 consecutive steps skipped (16 to 25)");
}

TEST_F(Diagnosis, AmpwbTrainWarnsOnceWhenTheScaleCollapses) {
  std::vector<std::string> args = tiny_training(db(), 2, 10);
  for (const char* flag : {"--precision", "amp-fp16", "--lr", "10000", "--max-skipped", "1000", "--name", "collapse"})
    args.push_back(flag);
  const Result r = ampwb(args);
  const std::string warning = "ampwb train: warning: the loss scale collapsed: ";
  const size_t at = r.output.find(warning);
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(warning, at + 1), std::string::npos) << "warned more than once:\n" << r.output;
  // The layers it names are where the stored overflow reports say the overflows started.
  const RunEvidence run = stored(RunStore(db(), RunStore::Mode::ReadOnly).resolve("collapse"));
  expect_finding(diagnose(run), "scale_collapse");
  std::set<std::string> origins;
  for (const OverflowReport& o : run.overflows)
    if (!o.layers.empty()) origins.insert(o.layers.front());
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  expect_contains(line, kScaleCollapseAdvice);
  const std::string lead = "inf/NaN gradients started in ";
  const size_t from = line.find(lead), to = line.find(". Try: ");
  ASSERT_NE(from, std::string::npos) << line;
  std::string named = line.substr(from + lead.size(), to - from - lead.size()) + ", ";
  int layers = 0;
  for (size_t start = 0, comma; (comma = named.find(", ", start)) != std::string::npos; start = comma + 2, ++layers) {
    const std::string layer = named.substr(start, named.find(' ', start) - start);
    EXPECT_TRUE(origins.count(layer)) << layer << " is not where a stored overflow started: " << line;
  }
  EXPECT_GE(layers, 1);
}

TEST_F(Diagnosis, Fp16GradientsWithoutLossScalingUnderflow) {
  TrainConfig c = with_mode(base_config(), PrecisionMode::AmpFp16);
  c.precision.loss_scale.kind = LossScaleKind::Off;
  const Finding f = expect_finding(diagnose(trained(c)), "gradient_underflow");
  expect_contains(f.evidence, "of activation gradients are below 2^-14");
  // The same run with amp-fp16's dynamic loss scaling is not told so.
  EXPECT_EQ(find(diagnose(fp16_with_clipping()), "gradient_underflow"), nullptr);
}

// amp-fp8's scaling set wrong either way, its layers named with the numbers: a negative margin scales each tensor's
// amax past E4M3's 448, clipping its largest values; a margin of 12 leaves 2^5.8 of range beneath it, making its
// smaller values zero, and more so with gradients in E4M3. The scaling's defaults trigger neither.
TEST_F(Diagnosis, Fp8ThatClipsOrFlushesValuesNamesItsTensors) {
  TrainConfig c = with_mode(base_config(), PrecisionMode::AmpFp8);
  RunEvidence run = trained(c);
  const std::vector<Finding> plain = diagnose(run);
  EXPECT_EQ(find(plain, "fp8_saturation"), nullptr) << listing(plain);
  EXPECT_EQ(find(plain, "fp8_underflow"), nullptr) << listing(plain);
  // A share just past the rule's 0.1% reads as it is, not rounded to 0%.
  for (LayerNumerics& n : run.layers)
    if (n.layer == "layer1.0.conv1") n.fp8_input.saturated_fraction = 0.0015;
  expect_contains(expect_finding(diagnose(run), "fp8_saturation").evidence, "(E4M3): 0.15% clipped");
  // Clipping at an earlier probe that the last one no longer shows is a note, at the probe that clipped most.
  const int64_t last_step = run.layers.back().step;
  int64_t earlier_step = -1;
  for (LayerNumerics& n : run.layers) {
    n.fp8_input.saturated_fraction = 0;
    if (n.step != last_step && n.layer == "layer1.0.conv1") {
      n.fp8_input.saturated_fraction = 0.02;
      earlier_step = n.step;
    }
  }
  ASSERT_GE(earlier_step, 0) << "the run probed one step only";
  const Finding earlier = expect_finding(diagnose(run), "fp8_saturation");
  EXPECT_EQ(earlier.severity, Severity::Note);
  expect_contains(earlier.title, "FP8 clipped the largest values earlier in the run, not at its end");
  expect_contains(earlier.evidence,
                  "the most at step " + std::to_string(earlier_step) + ": layer1.0.conv1's input (E4M3): 2% clipped");
  // A rise of the amax reaches the scale a step later whatever the history's length: the margin is the remedy.
  expect_contains(earlier.action, "precision.fp8.margin");
  EXPECT_EQ(earlier.action.find("amax_history_length"), std::string::npos) << earlier.action;
  for (LayerNumerics& n : run.layers) n.fp8_input.saturated_fraction = 0;

  c.precision.fp8.scaling.margin = -3;
  const Finding clipped = expect_finding(diagnose(trained(c)), "fp8_saturation");
  expect_contains(clipped.title, "FP8 clips the largest values of ");
  expect_contains(clipped.evidence, "layer1.0.conv1's ");
  expect_contains(clipped.evidence, "(E4M3): ");
  expect_contains(clipped.evidence, " clipped, amax ");
  expect_contains(clipped.action, "raise the margin (precision.fp8.margin, here -3)");
  EXPECT_EQ(clipped.action.find("amax_rule"), std::string::npos)
      << "the defaults' rule and history: " << clipped.action;
  EXPECT_EQ(clipped.action.find("first_and_last"), std::string::npos) << "conv1 and fc are in BF16: " << clipped.action;
  // A scale that follows each step's amax lags every rise: the rule and the history are named with their values.
  c.precision.fp8.scaling.rule = AmaxRule::MostRecent;
  c.precision.fp8.scaling.history_length = 1;
  const std::string lagging = expect_finding(diagnose(trained(c)), "fp8_saturation").action;
  expect_contains(lagging,
                  "the amax rule max (precision.fp8.amax_rule, here most-recent) and a longer amax history "
                  "(precision.fp8.amax_history_length, here 1) keeps the scale from lagging");
  c.precision.fp8.scaling = {};

  c.precision.fp8.scaling.margin = 12;
  const Finding flushed = expect_finding(diagnose(trained(c)), "fp8_underflow");
  expect_contains(flushed.evidence, "of nonzero values made zero");
  expect_contains(flushed.action,
                  "each power of two of the margin (precision.fp8.margin, here 12) moves the smallest "
                  "values further below FP8's: lower it");
  EXPECT_EQ(flushed.action.find("precision.fp8.formats"), std::string::npos) << flushed.action;
  // With the first and last layers in FP8 too, the one setting that takes layers out of it, where they are named.
  c.precision.fp8.first_and_last = true;
  RunEvidence all_in_fp8 = trained(c);
  for (LayerNumerics& n : all_in_fp8.layers)
    if (n.layer == "fc") n.fp8_input.underflow_fraction = 0.9;  // named, whatever the rest
  expect_contains(expect_finding(diagnose(all_in_fp8), "fp8_underflow").action,
                  "precision.fp8.first_and_last off, which keeps conv1 and fc in BF16");
  c.precision.fp8.first_and_last = false;

  // Gradients in E4M3 (2^17.8 of range under its max where E5M2 has 2^31.8): the action names the formats.
  c.precision.fp8.formats = Fp8Formats::E4M3;
  c.precision.fp8.scaling.margin = 6;
  const Finding e4m3 = expect_finding(diagnose(trained(c)), "fp8_underflow");
  expect_contains(e4m3.evidence, "output gradient (E4M3)");
  expect_contains(e4m3.action, "set precision.fp8.formats to hybrid");
}

TEST_F(Diagnosis, LayersWhoseChannelsMissTensorCoresAreNamedForGpuRuns) {
  RunEvidence run = fp16_with_clipping();
  EXPECT_EQ(find(diagnose(run), "tensor_core_ineligible"), nullptr);  // a CPU run has no tensor cores
  // The same records as a GPU run would store them (no GPU trains here): the stem's 3 input channels and the
  // classifier's 2 outputs are not multiples of 8; every other layer's 16, 32 and 64 are.
  run.run.device = DeviceChoice::cuda(0);
  const Finding f = expect_finding(diagnose(run), "tensor_core_ineligible");
  expect_contains(f.title, "2 layers");
  expect_contains(f.evidence, "conv1 (3 -> 16)");
  expect_contains(f.evidence, "fc (64 -> 2)");
}

TEST_F(Diagnosis, ATinyBatchSpendsItsStepOnFixedCosts) {
  SKIP_WHERE_TIMES_ARE_DISTORTED();
  TrainConfig c = base_config();
  c.batch_size = 2;
  c.image_size = 8;
  // One thread: two threads' convolutions wait at every barrier for a thread the machine took away, which on a
  // loaded machine inflated the compute and hid the fixed costs (a ctest run, 10 s for a test of 0.2).
  c.threads = 1;
  c.max_steps_per_epoch = 10;
  const RunEvidence run = trained(c);
  const Finding f = expect_finding(diagnose(run), "batch_too_small");
  expect_contains(f.evidence, "batch 2:");
  // In the ms `show` and the report give: the median steady step, split by the timed steps' shares.
  const std::vector<TimeRow> rows =
      time_rows({run.times, measure_speed(run.steps, run.run.batch_size, run.run.config.numerics_every)});
  double step_ms = 0, wait_ms = 0;
  for (const TimeRow& r : rows) {
    if (r.label == "step") step_ms = r.ms[0];
    if (r.label == "data wait") wait_ms = r.ms[0];
  }
  ASSERT_GT(step_ms, 0);
  char compute[64];
  std::snprintf(compute, sizeof compute,
                step_ms - wait_ms < 10 ? " of %.2f ms of compute per step" : " of %.1f ms of compute per step",
                step_ms - wait_ms);
  expect_contains(f.evidence, compute);
  EXPECT_EQ(find(diagnose(healthy()), "batch_too_small"), nullptr);
}

RunEvidence timed_run(int64_t id, const std::string& mode, double seconds);  // below: 60 steps of a run

TEST_F(Diagnosis, AgainstABaselineTheSpeedIsExplainedByClass) {
  // In the same precision there is no precision's speed-up to look for: a note, not AMP's advice.
  const Finding same = expect_finding(diagnose(healthy(), &healthy()), "speed_vs_baseline");
  EXPECT_EQ(same.severity, Severity::Note);
  expect_contains(same.title, "Same precision as the baseline (fp32): 1.00\u00d7");  // run_speed.h's figure
  expect_contains(same.action, "differ in neither precision nor work");
  // One mode set otherwise (FP8's first and last layers in FP8 too) is a difference in precision all the same.
  RunEvidence fp8 = timed_run(1, "amp-fp8", 0.1), all_fp8 = timed_run(2, "amp-fp8", 0.1);
  all_fp8.run.config.precision.fp8.first_and_last = true;
  const Finding set_otherwise = expect_finding(diagnose(all_fp8, &fp8), "speed_vs_baseline");
  expect_contains(set_otherwise.title, "Same precision mode as the baseline (amp-fp8), set otherwise: ");
  expect_contains(set_otherwise.action, "the runs differ in precision.fp8.first_and_last: ");
  // A setting the mode ignores is no difference.
  RunEvidence bf16 = timed_run(1, "amp-bf16", 0.1), bf16_fp8_flags = timed_run(2, "amp-bf16", 0.1);
  bf16_fp8_flags.run.config.precision.fp8.first_and_last = true;
  expect_contains(expect_finding(diagnose(bf16_fp8_flags, &bf16), "speed_vs_baseline").action,
                  "differ in neither precision nor work");
  const Finding f = expect_finding(diagnose(fp16_with_clipping(), &healthy()), "speed_vs_baseline");
  expect_contains(f.evidence, "steady-state training speed ");
  expect_contains(f.evidence, "images/s (interquartile range ");
  expect_contains(f.evidence, "(run " + std::to_string(fp16_with_clipping().run.id) + ", amp-fp16, against run");
  // The convolutions are named with their speed-up. Which class leads (the baseline's largest) is the sentence's
  // rule, tested on fixed times in test_time_comparison: these runs' times are measured, and on a loaded machine a
  // small class can lead (a sanitizer slows the engine's own kernels and not oneDNN's; an unlucky descheduling
  // made the optimizer lead once during a parallel ctest on a Zen 3).
  expect_contains(f.evidence, "by class of op: ");
  expect_contains(f.evidence, "convolutions ");
  expect_contains(f.evidence, "end to end");
}

TEST_F(Diagnosis, EachEpochsConfusionMatrixAddsUpToItsValidationAccuracy) {
  const RunEvidence& run = healthy();
  ASSERT_EQ(run.confusion.size(), run.epochs.size());
  for (size_t i = 0; i < run.epochs.size(); ++i) {
    const ConfusionMatrix& m = run.confusion[i];
    EXPECT_EQ(m.epoch, run.epochs[i].epoch);
    ASSERT_EQ(m.classes, 2);
    int64_t total = 0, diagonal = 0;
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t p = 0; p < 2; ++p) total += m.counts[t * 2 + p], diagonal += t == p ? m.counts[t * 2 + p] : 0;
    EXPECT_EQ(total, run.run.info.validation_images);
    // The diagonal is the top-1 count the loss kernel made on the device, bit for bit.
    EXPECT_EQ(static_cast<double>(diagonal) / static_cast<double>(total), run.epochs[i].validation_accuracy);
  }
}

// Constructed records of a quiet CPU run whose steady steps take `seconds` each.

// An FP32 run read against an AMP baseline is slower by AMP's speed-up: the advice says so, not that AMP failed.
TEST(DiagnosisOfSpeed, AnFp32RunAgainstAnAmpBaselineIsAmpsSpeedUpTheOtherWayRound) {
  const RunEvidence fp32 = timed_run(1, "fp32", 0.02), bf16 = timed_run(2, "amp-bf16", 0.01);
  const Finding f = expect_finding(diagnose(fp32, &bf16), "speed_vs_baseline");
  EXPECT_EQ(f.severity, Severity::Warning);
  expect_contains(f.title, "Slower than the baseline: 0.50\u00d7");
  expect_contains(f.action, "the baseline computes in a narrower format (amp-bf16) than this run (fp32)");
  EXPECT_EQ(f.action.find("16-bit arithmetic units"), std::string::npos) << f.action;
  // Runs that differ in more than precision: the headline gives the ratio first, as the evidence does.
  RunEvidence other = bf16;
  other.run.batch_size = 64;
  const Finding mixed = expect_finding(diagnose(other, &fp32), "speed_vs_baseline");
  expect_contains(mixed.title, "Speed-up 4.00\u00d7, not the precision's alone");
  const Finding slower = expect_finding(diagnose(fp32, &other), "speed_vs_baseline");
  expect_contains(slower.title, "Speed-up 0.25\u00d7 (4.00\u00d7 slower), not the precision's alone");
}

RunEvidence timed_run(int64_t id, const std::string& mode, double seconds) {
  RunEvidence e;
  e.run.id = id;
  e.run.device = DeviceChoice::cpu();
  e.run.batch_size = 32;
  e.run.config.precision = precision_preset(mode);
  double wall = 0;
  for (int64_t step = 0; step < 60; ++step)
    e.steps.push_back({.epoch = 1, .step = step, .wall_seconds = wall += seconds * (1 + 0.01 * (step % 3))});
  EpochTimes quiet;
  quiet.epoch = 1;
  quiet.load = {0.01, 0, 0};
  e.times = {quiet};
  return e;
}

// Accuracy against a baseline's is read against what chance in the validation images moves it by: 4.7 points over
// 300 images each is within it, over 10,000 beyond it, and still one seed's against one seed's.
TEST(DiagnosisAccuracy, ADifferenceIsReadAgainstTheValidationSetsSize) {
  const auto validated = [](int64_t id, const std::string& mode, double accuracy, int64_t images) {
    RunEvidence e = timed_run(id, mode, 0.1);
    e.run.info.validation_images = images;
    EpochReport epoch;
    epoch.epoch = 2;
    epoch.validation_accuracy = accuracy;
    e.epochs = {epoch};
    return e;
  };
  const RunEvidence fp32 = validated(1, "fp32", 0.71, 300), bf16 = validated(2, "amp-bf16", 0.6633, 300);
  const Finding within = expect_finding(diagnose(bf16, &fp32), "accuracy_vs_baseline");
  EXPECT_EQ(within.severity, Severity::Note);
  EXPECT_EQ(within.title, "Accuracy not distinguishable from the baseline's: 66.33% against 71.00%");
  // Agresti and Caffo's: one right and one wrong answer added to each run's 300, then 1.96 standard errors.
  const double ta = (0.6633 * 300 + 1) / 302, tb = (0.71 * 300 + 1) / 302;
  const double half = 100 * 1.96 * std::sqrt((ta * (1 - ta) + tb * (1 - tb)) / 302);
  char interval[96];
  std::snprintf(interval, sizeof interval, "%+.2f points, 95%% interval %+.2f to %+.2f", 100 * (0.6633 - 0.71),
                100 * (ta - tb) - half, 100 * (ta - tb) + half);
  expect_contains(within.evidence, std::string(interval) + " over 300 validation images");
  expect_contains(within.action, "validate on more images");

  const RunEvidence many_fp32 = validated(1, "fp32", 0.71, 10000), many_bf16 = validated(2, "amp-bf16", 0.6633, 10000);
  const Finding less = expect_finding(diagnose(many_bf16, &many_fp32), "accuracy_vs_baseline");
  EXPECT_EQ(less.severity, Severity::Warning);
  EXPECT_EQ(less.title, "Less accurate than the baseline: 66.33% against 71.00%");
  expect_contains(less.action, "seeds alone move accuracy too");
  for (const Finding& f : diagnose(many_bf16, &many_fp32))  // each one counted where "none of the N rules" is said
    EXPECT_NE(std::find(diagnosis_rules().begin(), diagnosis_rules().end(), f.rule), diagnosis_rules().end()) << f.rule;
  const Finding more = expect_finding(diagnose(many_fp32, &many_bf16), "accuracy_vs_baseline");
  EXPECT_EQ(more.severity, Severity::Note);
  EXPECT_EQ(more.title, "More accurate than the baseline: 71.00% against 66.33%");
  // Every image right against 95% of 100: within chance still, where the plain normal interval would shrink to
  // nothing at 100% and call it more accurate.
  const RunEvidence all = validated(2, "amp-bf16", 1.0, 100), most = validated(1, "fp32", 0.95, 100);
  EXPECT_EQ(expect_finding(diagnose(all, &most), "accuracy_vs_baseline").severity, Severity::Note);
  expect_contains(expect_finding(diagnose(all, &most), "accuracy_vs_baseline").title, "not distinguishable");
  // A run without validation images has no accuracy to set beside the baseline's, nor one validated on other images.
  EXPECT_EQ(find(diagnose(validated(3, "amp-bf16", 0.5, 0), &fp32), "accuracy_vs_baseline"), nullptr);
  RunEvidence elsewhere = bf16;
  elsewhere.run.dataset_fingerprint = "another dataset";
  EXPECT_EQ(find(diagnose(elsewhere, &fp32), "accuracy_vs_baseline"), nullptr);
}

// A baseline asked for, but a run too short to have a steady-state step: the explanation says so, with the steps
// each such run had, rather than drop the comparison without a word.
TEST(DiagnosisSpeed, ARunTooShortForASpeedSaysSoAgainstItsBaseline) {
  RunEvidence fp16 = timed_run(2, "amp-fp16", 0.1);
  fp16.steps.resize(4);
  const RunEvidence fp32 = timed_run(3, "fp32", 0.1);
  const Finding f = expect_finding(diagnose(fp16, &fp32), "speed_vs_baseline");
  EXPECT_EQ(f.title, "No speed to compare with the baseline");
  expect_contains(f.evidence, "run 2: 4 steps): too few steps past the first 5");
  EXPECT_EQ(f.evidence.find("run 3:"), std::string::npos) << "the baseline has a speed: " << f.evidence;
}

// An emulated format measured faster than FP32 (16-bit storage halves the memory traffic): the diagnosis says
// both without contradicting itself, and never calls the emulated format slower by design.
TEST(DiagnosisSpeed, AnEmulatedFormatMeasuredFasterIsNotAContradiction) {
  const RunEvidence fp32 = timed_run(1, "fp32", 0.100), fp16 = timed_run(2, "amp-fp16", 0.095);
  const std::vector<Finding> findings = diagnose(fp16, &fp32);
  const Finding emulated = expect_finding(findings, "fp16_emulated");
  EXPECT_EQ(emulated.title.find("slower"), std::string::npos) << emulated.title;
  const Finding speed = expect_finding(findings, "speed_vs_baseline");
  expect_contains(speed.title, "Faster than the baseline with an emulated format: 1.05\u00d7");
  expect_contains(speed.action, "memory traffic");
  EXPECT_EQ(speed.title.find("not distinguishable"), std::string::npos);
}

// amp-fp8 on the CPU is emulated, and slower than FP32 by its conversions: said as what the format does, not put down
// to the machine's other work, however busy it was.
TEST(DiagnosisSpeed, AnEmulatedFormatsSlowdownIsNotTheMachinesLoad) {
  RunEvidence fp32 = timed_run(1, "fp32", 0.100), fp8 = timed_run(2, "amp-fp8", 0.200);
  fp8.times[0].steps = 60;
  fp8.times[0].load = {0.56, 0, 0};
  const std::vector<Finding> findings = diagnose(fp8, &fp32);
  const Finding emulated = expect_finding(findings, "fp8_emulated");
  EXPECT_EQ(emulated.severity, Severity::Note);
  expect_contains(emulated.action, "FP8's numerics");
  const Finding speed = expect_finding(findings, "speed_vs_baseline");
  EXPECT_EQ(speed.severity, Severity::Note);
  expect_contains(speed.title,
                  "Slower than the baseline, as an emulated format can be: 0.50\u00d7 (2.00\u00d7 slower)");
  expect_contains(speed.evidence, "timings unreliable: the machine was 56% busy");
  EXPECT_EQ(speed.action.find("quiet machine"), std::string::npos) << speed.action;
  expect_contains(speed.action,
                  "slower it is whatever else the machine did, but by how much, these timings cannot say");
  // Against a 16-bit baseline too: FP8's conversions are its own, however fast the baseline's format is here.
  const RunEvidence bf16 = timed_run(4, "amp-bf16", 0.050);
  const Finding against_bf16 = expect_finding(diagnose(fp8, &bf16), "speed_vs_baseline");
  EXPECT_EQ(against_bf16.severity, Severity::Note);
  expect_contains(against_bf16.title, "Slower than the baseline, as an emulated format can be: 0.25\u00d7");
  // A speed within the noise of the baseline's is no slowdown to explain.
  RunEvidence level = timed_run(3, "amp-fp8", 0.100);
  EXPECT_EQ(expect_finding(diagnose(level, &fp32), "speed_vs_baseline").title.find("as an emulated format"),
            std::string::npos);
  // On a GPU nothing is emulated: a slowdown there is a finding of its own, and no FP8 note.
  fp8.run.device = fp32.run.device = DeviceChoice::cuda(0);
  EXPECT_EQ(find(diagnose(fp8, &fp32), "fp8_emulated"), nullptr);
  expect_contains(expect_finding(diagnose(fp8, &fp32), "speed_vs_baseline").title, "timings unreliable");
}

// Runs that a sweep here timed in alternation: the verdict is that figure, as `compare` shows it, and the trainings'
// own steady state stands beside it as evidence; a timing that left the baseline out changes nothing.
TEST(DiagnosisSpeed, ASweepsTimingInAlternationIsTheVerdictsFigure) {
  const RunEvidence fp32 = timed_run(1, "fp32", 0.100);
  RunEvidence fp16 = timed_run(2, "amp-fp16", 0.100);
  expect_contains(expect_finding(diagnose(fp16, &fp32), "speed_vs_baseline").title,
                  "No speed-up distinguishable from the noise");
  fp16.alternating = AlternatingSpeed{{1, 2},
                                      {{100, 100, 100, 100, 100, 100}, {160, 158, 162, 161, 159, 160}},
                                      20,
                                      "synthetic 16 px images, batch 8",
                                      {}};
  const std::string timed = speed_up_text(alternating_speed_up(*fp16.alternating, 2, 1));
  const Finding speed = expect_finding(diagnose(fp16, &fp32), "speed_vs_baseline");
  EXPECT_EQ(speed.title, "Faster than the baseline with an emulated format: " + timed);
  expect_contains(speed.evidence,
                  "timed in alternation after the sweep's trainings, 6 rounds of 20 steps on "
                  "synthetic 16 px images, batch 8: " +
                      timed +
                      "; during the trainings, "
                      "steady-state training speed ");
  // Trainings that shared the machine with other work: their speed-up is unreliable, the alternation's is not.
  RunEvidence busy_fp32 = fp32, busy_fp16 = fp16;
  for (RunEvidence* busy : {&busy_fp32, &busy_fp16}) {
    busy->times[0].steps = 60;
    busy->times[0].load = {0.6, 0, 0};
  }
  EXPECT_EQ(expect_finding(diagnose(busy_fp16, &busy_fp32), "speed_vs_baseline").title,
            "Faster than the baseline with an emulated format: " + timed);
  const std::string go_by = expect_finding(diagnose(busy_fp16, &busy_fp32), "timing_unreliable").action;
  expect_contains(go_by, "its sweep also timed it in alternation");
  EXPECT_EQ(go_by.find("quiet machine"), std::string::npos) << "a record older than its load says nothing of it";
  // An alternation that shared every turn with other work: its figure is that work's too, and no figure is to go by.
  busy_fp16.alternating->load = {0.45, 0, 0};
  const Finding loaded = expect_finding(diagnose(busy_fp16, &busy_fp32), "speed_vs_baseline");
  EXPECT_EQ(loaded.severity, Severity::Warning);
  EXPECT_EQ(loaded.title, "Speed-up " + speed_up_ratio_text(alternating_speed_up(*fp16.alternating, 2, 1)) +
                              ", timings unreliable: timed in alternation while the machine was 45% busy with other "
                              "work");
  expect_contains(loaded.evidence, "; while timed in alternation, 45% of the CPUs busy with other work");
  expect_contains(loaded.action, "ampwb sweep run");
  const Finding unreliable = expect_finding(diagnose(busy_fp16, &busy_fp32), "timing_unreliable");
  expect_contains(unreliable.action, "and so do its sweep's, timed in alternation while the machine was 45% busy");
  EXPECT_EQ(unreliable.action.find("the one to go by"), std::string::npos) << unreliable.action;
  // Where only the alternation shared the machine, the trainings' own figure stands, the alternation's beside it.
  RunEvidence quiet_trainings = fp16;
  quiet_trainings.alternating = busy_fp16.alternating;
  const Finding stands = expect_finding(diagnose(quiet_trainings, &fp32), "speed_vs_baseline");
  EXPECT_EQ(stands.title.find("unreliable"), std::string::npos) << stands.title;
  expect_contains(stands.title, "No speed-up distinguishable from the noise");
  expect_contains(stands.evidence,
                  "; timed in alternation while the machine was 45% busy with other work: the trainings' figure "
                  "stands; steady-state training speed ");
  busy_fp16.alternating.reset();
  // No speed-up, with the interval that makes it none: not a ratio that reads as one ("0.82× (1.2× slower)").
  const std::string none = expect_finding(diagnose(busy_fp16, &busy_fp32), "speed_vs_baseline").title;
  expect_contains(none, "No speed-up distinguishable from the noise: 1.00\u00d7 (interval ");
  expect_contains(none, "), timings unreliable: the machine was 60% busy");
  EXPECT_EQ(none.find("slower"), std::string::npos) << none;
  // Against a baseline of a narrower format, however busy the machine, the figure is that format's read backwards.
  expect_contains(expect_finding(diagnose(busy_fp32, &busy_fp16), "speed_vs_baseline").action,
                  "the baseline computes in a narrower format (amp-fp16) than this run (fp32): this is its speed-up "
                  "read the other way round");
  // Trainings too short for a steady-state step: the alternation's figure, and no empty speeds beside it.
  RunEvidence short_fp32 = fp32, short_fp16 = fp16;
  short_fp32.steps.resize(3);
  short_fp16.steps.resize(3);
  const Finding short_runs = expect_finding(diagnose(short_fp16, &short_fp32), "speed_vs_baseline");
  EXPECT_EQ(short_runs.title, "Faster than the baseline with an emulated format: " + timed);
  expect_contains(short_runs.evidence,
                  "; during the trainings, no steady-state training speed (run 2, amp-fp16, against run 1, fp32): "
                  "too few steps past the warm-up");
  EXPECT_EQ(short_runs.evidence.find(" - against -"), std::string::npos) << short_runs.evidence;
  fp16.alternating->runs = {2, 3};
  expect_contains(expect_finding(diagnose(fp16, &fp32), "speed_vs_baseline").title,
                  "No speed-up distinguishable from the noise");
}

// Step times so scattered that the interval holds large speed-ups both ways: the heading says the measurement cannot
// tell, not that there is no speed-up (which reads as the same speed).
TEST(DiagnosisSpeed, AnIntervalTooWideToTellIsSaidSo) {
  const RunEvidence fp32 = timed_run(1, "fp32", 0.100);
  RunEvidence scattered = timed_run(2, "amp-fp16", 0.100);
  double wall = 0;
  for (size_t i = 0; i < scattered.steps.size(); ++i)
    scattered.steps[i].wall_seconds = wall += 0.100 * (i % 2 ? 8.0 : 0.15);
  const Finding f = expect_finding(diagnose(scattered, &fp32), "speed_vs_baseline");
  expect_contains(f.title, "Speed-up not measured closely enough to tell: ");
  expect_contains(f.title, "(interval ");
  EXPECT_EQ(f.title.find("No speed-up"), std::string::npos) << f.title;
}

// A speed-up over a run of another model is not the precision's: the finding says so first, whatever it measured.
TEST(DiagnosisSpeed, ASpeedUpOverOtherWorkIsNotThePrecisions) {
  RunEvidence fp32 = timed_run(1, "fp32", 0.500), bf16 = timed_run(2, "amp-bf16", 0.100);
  fp32.run.depth = 18;
  bf16.run.depth = 20;
  const Finding speed = expect_finding(diagnose(bf16, &fp32), "speed_vs_baseline");
  EXPECT_EQ(speed.severity, Severity::Warning);
  expect_contains(speed.title,
                  "Speed-up 5.00\u00d7, not the precision's alone: other work (ResNet-20 against ResNet-18)");
  expect_contains(speed.action, "differ in precision alone on one machine");
  bf16.run.depth = 18;
  expect_contains(expect_finding(diagnose(bf16, &fp32), "speed_vs_baseline").title, "Faster than the baseline");
}

TEST(Confusion, ATieCountsAgainstTheLabelAsTopOneCountsIt) {
  Tensor logits = Tensor::zeros({4, 3}, DType::F32), labels = Tensor::zeros({4}, DType::I32);
  const float z[] = {1, 2, 0, /**/ 5, 5, 1, /**/ 0, 3, 3, /**/ 2, 1, 2};
  const int32_t y[] = {1, 0, 2, 2};
  std::copy(std::begin(z), std::end(z), logits.data_as<float>());
  std::copy(std::begin(y), std::end(y), labels.data_as<int32_t>());
  std::vector<int64_t> confusion;
  add_to_confusion(logits, labels, confusion);
  // Sample 0 right; 1 tied between 0 and 1 with label 0: counted as 1; 2 tied with label 2: counted as 1;
  // 3 tied between 0 and 2 with label 2: counted as 0.
  EXPECT_EQ(confusion, (std::vector<int64_t>{0, 1, 0, /**/ 0, 1, 0, /**/ 1, 1, 0}));
  EXPECT_EQ(count_topk_correct(logits, labels, 1), 1);
}

// A step whose logits became NaN answered nothing right: its accuracy is 0, not the 100% that comparisons with NaN,
// all false, made of "no other logit scores at least the label's".
TEST(Confusion, NaNLogitsAreNoCorrectAnswer) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor logits = Tensor::zeros({3, 3}, DType::F32), labels = Tensor::zeros({3}, DType::I32);
  const float z[] = {nan, nan, nan, /**/ 1, nan, 0, /**/ 0, 4, 1};
  const int32_t y[] = {0, 0, 1};
  std::copy(std::begin(z), std::end(z), logits.data_as<float>());
  std::copy(std::begin(y), std::end(y), labels.data_as<int32_t>());
  EXPECT_EQ(count_topk_correct(logits, labels, 1), 1) << "the third sample alone";
  EXPECT_EQ(count_topk_correct(logits, labels, 2), 2) << "the second's label, second to a NaN, is in its top 2";
  const std::unique_ptr<Backend> cpu = make_backend(DeviceChoice::cpu(), {1});
  Tensor dlogits = Tensor::zeros({3, 3}, DType::F32);
  cpu->softmax_cross_entropy(logits, labels, 0.0f, GradScale(1.0f), dlogits);
  EXPECT_EQ(cpu->read_scalars().correct, 1);
}

TEST(MachineLoad, AComparisonFlagsTheRunTrainedBesideABusyProcess) {
  TempDir dir("machine_load");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 2)).status, 0);  // run 1, on the machine as it is
  {
    const Spinners busy;
    ASSERT_EQ(ampwb(tiny_training(db, 2)).status, 0);  // run 2, beside a spinning process on every CPU
  }
  const RunStore store(db, RunStore::Mode::ReadOnly);
  auto load = [&](int64_t id) { return mean_epoch_times(store.epoch_times(id)).load; };
  ASSERT_TRUE(load(2).known());
  EXPECT_GE(load(2).other_cpu, kBusyMachine) << machine_load_text(load(2));
  const Result text = ampwb({"compare", "1", "2", "--db", db});
  // The first run is named too only where the machine's own other work was heavy then: measured, not controlled
  // here. Both busy are said together: "during runs 1 and 2".
  const bool first_busy = load(1).other_cpu >= kBusyMachine;
  const std::string during =
      first_busy ? "busy with other work during runs 1 and 2" : "busy with other work during run 2";
  expect_contains(unwrapped(text.output), during);
  EXPECT_EQ(unwrapped(text.output).find("during run 1"), std::string::npos) << text.output;
  const json j = json::parse(ampwb({"compare", "1", "2", "--json", "--db", db}).output);
  expect_contains(j.at("timing_warning").get<std::string>(), during);
  EXPECT_EQ(j.at("work_warning"), "") << "two trainings of one configuration on one machine do the same work";
  const Result explain = ampwb({"explain", "2", "1", "--db", db});
  expect_contains(explain.output, "Timings unreliable");
  expect_contains(explain.output, "busy with other work during run 2");
  const std::string report = dir.file("report.html");
  ASSERT_EQ(ampwb({"report", "1", "2", "--out", report, "--db", db}).status, 0);
  std::ifstream in(report);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  expect_contains(html, "<p class=\"warning\">timings unreliable: ");
}

// Explained alone, a low-precision run whose FP32 run of the same work is in the store names it as the baseline to
// explain its speed against: the one of its seed, not merely the latest.
TEST(Explain, ARunAloneNamesTheFp32RunToExplainItsSpeedAgainst) {
  TempDir dir("explain_alone");
  const std::string db = dir.file("runs.sqlite");
  std::vector<int64_t> ids;
  {
    RunStore store(db);
    RunInfo info;
    info.image_size = 16;
    for (const auto& [mode, seed] :
         std::vector<std::pair<std::string, uint64_t>>{{"fp32", 0}, {"amp-bf16", 0}, {"fp32", 1}, {"amp-bf16", 1}}) {
      TrainConfig c;
      c.name = mode + " " + std::to_string(seed);
      c.data_dir = "/data/stripes";
      c.precision = precision_preset(mode);
      c.seed = seed;
      ids.push_back(store.begin_run(c, info, ""));
      store.end_run(ids.back(), {RunStatus::Finished, "", ""}, {}, 1.0);
    }
  }
  const Result alone = ampwb({"explain", std::to_string(ids[1]), "--db", db});
  ASSERT_EQ(alone.status, 0) << alone.output;
  expect_contains(alone.output, "whether it is faster or less accurate than FP32: ampwb explain " +
                                    std::to_string(ids[1]) + " " + std::to_string(ids[0]) + " (run " +
                                    std::to_string(ids[0]) + ", 'fp32 0', is FP32");
  const Result fp32 = ampwb({"explain", std::to_string(ids[2]), "--db", db});
  EXPECT_EQ(fp32.output.find("than FP32: ampwb explain"), std::string::npos) << fp32.output;
  const Result against = ampwb({"explain", std::to_string(ids[3]), std::to_string(ids[2]), "--db", db});
  EXPECT_EQ(against.output.find("faster than FP32: ampwb"), std::string::npos) << against.output;
}

TEST_F(Diagnosis, AmpwbExplainPrintsTheFindingsAsTextAndJson) {
  const std::string run = std::to_string(fp16_with_clipping().run.id), base = std::to_string(healthy().run.id);
  const Result text = ampwb({"explain", run, base, "--db", db()});
  ASSERT_EQ(text.status, 0) << text.output;
  expect_contains(text.output, "baseline: run " + base);
  expect_contains(text.output, "[note] FP16 is emulated on this CPU");
  expect_contains(text.output, "   try:      ");
  const Result j = ampwb({"explain", run, "--json", "--db", db()});
  ASSERT_EQ(j.status, 0) << j.output;
  const json out = json::parse(j.output);
  std::set<std::string> rules;
  for (const json& f : out.at("findings")) rules.insert(f.at("rule").get<std::string>());
  EXPECT_TRUE(rules.count("fp16_emulated") && rules.count("clipping_order")) << j.output;
  const Result clean = ampwb({"explain", base, "--db", db()});
  if (!kTimesDistorted && !timed_beside_other_work(healthy())) expect_contains(clean.output, "no findings");
  const Result missing = ampwb({"explain", "999", "--db", db()});
  EXPECT_NE(missing.status, 0);
  expect_contains(missing.output, "999");
  const Result itself = ampwb({"explain", run, run, "--db", db()});
  EXPECT_EQ(itself.status, 1) << itself.output;
  expect_contains(itself.output, "run " + run + " is the run explained: its baseline must be another run");
}

}  // namespace
}  // namespace ampwb
