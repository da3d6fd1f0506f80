// End-to-end training on real PNG files written at test time: loss falls and accuracy rises, runs are
// reproducible, and the ampwb command line trains, benchmarks, refuses bad settings with clear messages and
// documents every flag and the devices it can train on in its help.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <thread>

#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "core/setting_error.h"
#include "data/loader.h"
#include "dist/make_communicator.h"
#include "facade/processes.h"
#include "image_folder_util.h"
#include "store/store_recorder.h"
#include "train/checkpoint.h"
#include "train/observer_list.h"
#include "train/precision_support.h"
#include "train/trainer.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;

class Recorder : public TrainObserver {
 public:
  void on_start(const RunInfo& info) override { this->info = info; }
  void on_step(const StepReport& r) override { losses.push_back(r.loss); }
  void on_epoch(const EpochReport& r) override { epochs.push_back(r); }
  RunInfo info;
  std::vector<float> losses;
  std::vector<EpochReport> epochs;
};

TrainConfig tiny_config(const fs::path& data) {
  TrainConfig c;
  c.data_dir = data.string();
  c.depth = 20;
  c.epochs = 5;
  c.batch_size = 8;
  c.lr = 0.05f;
  c.threads = 2;
  c.data.validation_fraction = 0.25;
  return c;
}

TEST(Training, LossFallsAndAccuracyRisesOnRealImages) {
  const fs::path data = make_stripes_folder("learn", 40, 16);
  Recorder rec;
  const EpochReport last = train(tiny_config(data), &rec);
  EXPECT_EQ(rec.info.image_size, 16);
  EXPECT_EQ(rec.info.train_images, 60);
  EXPECT_EQ(rec.info.validation_images, 20);
  EXPECT_EQ(rec.info.class_names, (std::vector<std::string>{"horizontal stripes", "vertical stripes"}));
  ASSERT_EQ(rec.epochs.size(), 5u);
  EXPECT_LT(rec.epochs.back().train_loss, 0.5 * rec.epochs.front().train_loss);
  EXPECT_GE(last.validation_accuracy, 0.9);
  EXPECT_GT(last.images_per_second, 0);
  EXPECT_GT(last.peak_bytes, 0u);
  fs::remove_all(data);
}

// amp-fp8 (E4M3 and E5M2 convolutions with delayed scaling, the rest in BF16) learns what FP32 learns here, and the
// run's settings keep its FP8 settings.
TEST(Training, AmpFp8LearnsOnRealImages) {
  const fs::path data = make_stripes_folder("learn_fp8", 40, 16);
  TrainConfig c = tiny_config(data);
  c.precision = precision_preset("amp-fp8");
  c.precision.fp8.scaling.history_length = 16;
  Recorder rec;
  const EpochReport last = train(c, &rec);
  ASSERT_EQ(rec.epochs.size(), 5u);
  EXPECT_LT(rec.epochs.back().train_loss, 0.5 * rec.epochs.front().train_loss);
  EXPECT_GE(last.validation_accuracy, 0.9);
  bool listed = false;
  for (const auto& [key, value] : config_settings(c))
    listed = listed || (key == "precision.fp8.amax_history_length" && value == "16");
  EXPECT_TRUE(listed) << "the settings list the FP8 amax history";
  fs::remove_all(data);
}

// amp-fp8 runs wherever Capabilities::fp8 is available (every CPU: emulated) and is refused with that format's
// reason elsewhere (a GPU without FP8 tensor cores).
TEST(Training, AmpFp8RunsOnTheCpuAndIsRefusedWhereFp8IsNotAvailable) {
  const Capabilities cpu = CpuBackend().capabilities();
  ASSERT_TRUE(cpu.fp8.available) << cpu.fp8.how;
  const ModeSupport here = mode_support(PrecisionMode::AmpFp8, cpu);
  EXPECT_TRUE(here.supported) << here.reason;
  EXPECT_EQ(here.compute, "FP8: " + cpu.fp8.how);
  // The note of the mode says what may stay in BF16; a run's says what its own settings keep there.
  const auto note_has = [](const ModeSupport& s, const std::string& part) {
    return s.notes.size() == 1 && s.notes[0].find(part) != std::string::npos;
  };
  // Batch norm computes in FP32 there, as in amp-bf16 (the layer numerics record it so).
  EXPECT_TRUE(note_has(here,
                       "by default the first convolution and the last linear layer compute in BF16, and the "
                       "other ops as in amp-bf16 (batch norm in FP32); BF16 here: " +
                           cpu.bf16.how));
  PrecisionConfig run = precision_preset(PrecisionMode::AmpFp8);
  EXPECT_TRUE(note_has(mode_support(run, cpu), "; its first convolution and last linear layer compute in BF16"));
  run.fp8.first_and_last = true;
  const ModeSupport all_fp8 = mode_support(run, cpu);
  EXPECT_TRUE(note_has(all_fp8,
                       "every convolution and linear layer computes in FP8, the first and last too, and the other "
                       "ops as in amp-bf16 (batch norm in FP32); BF16 here: " +
                           cpu.bf16.how));
  EXPECT_FALSE(note_has(all_fp8, "first convolution")) << all_fp8.notes[0];
  Capabilities gpu = cpu;
  gpu.device = Device::cuda(0);
  gpu.device_name = "an A100";
  gpu.fp8 = {false, false, "FP8 tensor cores need compute capability 8.9 (Ada) or 9.0 (Hopper)", 0, ""};
  const ModeSupport there = mode_support(PrecisionMode::AmpFp8, gpu);
  EXPECT_FALSE(there.supported);
  EXPECT_EQ(there.reason,
            "precision amp-fp8 cannot run on an A100: FP8 tensor cores need compute capability 8.9 (Ada) or 9.0 "
            "(Hopper)");
}

TEST(Training, SameSeedGivesBitIdenticalLossCurve) {
  const fs::path data = make_stripes_folder("repro", 12, 12);
  TrainConfig c = tiny_config(data);
  c.epochs = 2;
  Recorder a, b, other;
  train(c, &a);
  train(c, &b);
  c.seed = 1;
  train(c, &other);
  ASSERT_FALSE(a.losses.empty());
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_NE(a.losses, other.losses);
  fs::remove_all(data);
}

// --conv-algorithm reaches the CPU backend, and the run's record says what computed its convolutions.
TEST(Training, TheConvolutionAlgorithmIsRecordedWithTheRun) {
  const fs::path data = make_stripes_folder("conv-algorithm", 12, 12);
  TrainConfig c = tiny_config(data);
  c.epochs = 1;
  c.max_steps_per_epoch = 1;
  for (const auto& [algorithm, described] : {std::pair{ConvAlgorithm::Winograd, "by Winograd F(2x2,3x3))"},
                                             std::pair{ConvAlgorithm::Measured, "measured per shape"}}) {
    c.conv_algorithm = algorithm;
    Recorder rec;
    train(c, &rec);
    EXPECT_NE(rec.info.backend_description.find(described), std::string::npos) << rec.info.backend_description;
  }
  c.conv_algorithm = ConvAlgorithm::Direct;
  Recorder rec;
  train(c, &rec);
  EXPECT_EQ(rec.info.backend_description.find("Winograd"), std::string::npos) << rec.info.backend_description;
  fs::remove_all(data);
}

// Steps that never wait for the device (--host-sync deferred) train the same run as steps that wait, step
// for step and bit for bit, overflows and the loss scale's growth included; what differs is the host waits per step.
TEST(Training, DeferredStepsTrainTheSameRunWithoutWaitingForTheDevice) {
  class Steps : public TrainObserver {
   public:
    void on_start(const RunInfo& i) override { info = i; }
    void on_step(const StepReport& r) override { steps.push_back(r); }
    void on_epoch(const EpochReport& r) override { epochs.push_back(r); }
    void on_epoch_times(const EpochTimes& t) override { times.push_back(t); }
    RunInfo info;
    std::vector<StepReport> steps;
    std::vector<EpochReport> epochs;
    std::vector<EpochTimes> times;
  };
  const fs::path data = make_stripes_folder("deferred", 24, 12);
  TrainConfig c = tiny_config(data);
  c.epochs = 2;
  c.precision = precision_preset("amp-fp16");
  c.precision.loss_scale.init_scale = 1e30;  // overflows first, then backs off
  c.precision.loss_scale.growth_interval = 3;
  Steps waiting, deferred;
  c.host_sync = HostSync::EveryStep;
  train(c, &waiting);
  c.host_sync = HostSync::Deferred;
  train(c, &deferred);
  ASSERT_EQ(deferred.steps.size(), waiting.steps.size());
  int skipped = 0;
  for (size_t i = 0; i < waiting.steps.size(); ++i) {
    const StepReport& a = deferred.steps[i];
    const StepReport& b = waiting.steps[i];
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.loss, b.loss) << "step " << i;
    EXPECT_EQ(a.accuracy, b.accuracy) << "step " << i;
    EXPECT_EQ(a.loss_scale, b.loss_scale) << "step " << i;
    EXPECT_EQ(a.skipped, b.skipped) << "step " << i;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << i;
    skipped += b.skipped;
  }
  EXPECT_GT(skipped, 0) << "the run was meant to overflow";
  ASSERT_EQ(deferred.epochs.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(deferred.epochs[e].train_loss, waiting.epochs[e].train_loss);
    EXPECT_EQ(deferred.epochs[e].validation_loss, waiting.epochs[e].validation_loss);
    EXPECT_EQ(deferred.epochs[e].skipped_steps, waiting.epochs[e].skipped_steps);
    EXPECT_EQ(deferred.epochs[e].loss_scale, waiting.epochs[e].loss_scale);
  }
  // Each waiting step reads its numbers once. The deferred epoch waits twice: to collect the step before the last,
  // whose gradient histograms need the host, and in that probed step's own read.
  ASSERT_EQ(deferred.times.size(), 2u);
  ASSERT_EQ(waiting.times.size(), 2u);
  const double steps_per_epoch = static_cast<double>(deferred.info.steps_per_epoch);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(waiting.times[e].host_waits, 1.0);
    EXPECT_DOUBLE_EQ(deferred.times[e].host_waits, 2.0 / steps_per_epoch);
  }
  const auto noted = [](const RunInfo& i) {
    return std::any_of(i.notes.begin(), i.notes.end(),
                       [](const std::string& n) { return n.find("no step waits") != std::string::npos; });
  };
  EXPECT_TRUE(noted(deferred.info)) << "the run says its steps are read one step late";
  EXPECT_FALSE(noted(waiting.info));
  for (const EpochTimes& t : deferred.times) {
    EXPECT_EQ(t.replayed, 0.0) << "a CPU captures nothing";
    EXPECT_EQ(t.why_not_captured, "") << "and by default it is not asked to";
  }
  // Capture asked of the CPU's deferred steps: a CPU captures nothing, timed or not, and the run says why.
  Steps asked;
  c.cuda_graphs = CudaGraphs::On;
  train(c, &asked);
  ASSERT_EQ(asked.steps.size(), waiting.steps.size());
  EXPECT_EQ(asked.steps.back().loss, waiting.steps.back().loss);
  ASSERT_EQ(asked.times.size(), 2u);
  EXPECT_EQ(asked.times.back().replayed, 0.0);
  EXPECT_TRUE(std::any_of(asked.info.notes.begin(), asked.info.notes.end(), [](const std::string& n) {
    return n.find("captures no step on a CPU") != std::string::npos;
  })) << "the run says why nothing was captured";
  c.cuda_graphs = CudaGraphs::Auto;

  c.grad_clip_norm = 1.0f;  // needs the host at every step: refused before training, with the reason
  try {
    train(c, nullptr);
    ADD_FAILURE() << "--host-sync deferred with clipping was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("clipping"), std::string::npos) << e.what();
  }
  fs::remove_all(data);
}

TEST(Training, InvalidSettingsAreRefusedBeforeTraining) {
  TrainConfig c;
  c.data_dir = "/nonexistent/folder";
  EXPECT_THROW(
      {
        try {
          train(c);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  c.data_dir = fs::temp_directory_path().string();
  c.batch_size = 1;
  EXPECT_THROW(validate(c), Error);
  c.batch_size = 8;
  c.depth = 19;
  EXPECT_THROW(validate(c), Error);
  c.depth = 20;
  c.host_sync = HostSync::EveryStep;
  c.cuda_graphs = CudaGraphs::On;  // captured steps are deferred ones
  EXPECT_THROW(validate(c), Error);
  c.host_sync = HostSync::Auto;
  EXPECT_NO_THROW(validate(c));
  c.host_sync = HostSync::EveryStep;
  c.cuda_graphs = CudaGraphs::Auto;  // the default: captures where the steps are deferred on a GPU, else op by op
  EXPECT_NO_THROW(validate(c));
  // Numbers that would train into NaN, or reach the run store as null and lose the run's configuration.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Each refusal names its setting by key, in words that are no front end's (no flag, no field).
  struct Refusal {
    std::function<void(TrainConfig&)> change;
    std::string setting, message;
  };
  const std::vector<Refusal> refused = {
      {[](TrainConfig& t) { t.optimizer.momentum = 1.0f; }, "optimizer.momentum",
       "the momentum must be in [0, 1), got 1"},
      {[](TrainConfig& t) { t.optimizer.momentum = -0.1f; }, "optimizer.momentum", "the momentum must be in [0, 1)"},
      {[&](TrainConfig& t) { t.optimizer.momentum = nan; }, "optimizer.momentum", "the momentum must be in [0, 1)"},
      {[](TrainConfig& t) { t.optimizer.momentum = 0, t.optimizer.nesterov = true; }, "optimizer.nesterov",
       "Nesterov momentum needs a momentum above 0"},
      {[](TrainConfig& t) { t.optimizer.weight_decay = -1e30f; }, "optimizer.weight_decay",
       "the weight decay must be a finite number"},
      {[&](TrainConfig& t) { t.optimizer.weight_decay = nan; }, "optimizer.weight_decay",
       "the weight decay must be a finite number"},
      {[](TrainConfig& t) { t.optimizer.beta2 = 1.0f; }, "optimizer.beta2", "Adam's betas must be in [0, 1)"},
      {[](TrainConfig& t) { t.optimizer.eps = 0; }, "optimizer.eps", "Adam's eps must be positive"},
      {[&](TrainConfig& t) { t.grad_clip_norm = inf; }, "grad_clip_norm",
       "the gradient clipping norm must be a finite number"},
      {[&](TrainConfig& t) { t.precision.loss_scale.growth_factor = inf; }, "precision.loss_scale.growth_factor",
       "the loss scale's growth factor must be a finite"},
      {[&](TrainConfig& t) { t.precision.loss_scale.max_scale = inf; }, "precision.loss_scale.max_scale",
       "the loss scale's minimum and maximum must be finite"},
      {[](TrainConfig& t) { t.threads = kMaxThreads + 1; }, "threads",
       "the thread count must be 0 (every core) to 1024"},
      {[](TrainConfig& t) { t.data.loader_threads = kMaxLoaderThreads + 1; }, "data.loader_threads",
       "must be 0 (the training threads) to 256"},
      {[](TrainConfig& t) { t.epochs = 0; }, "epochs", "the number of epochs must be at least 1, got 0"},
      {[](TrainConfig& t) { t.data.validation_fraction = 1.5; }, "data.validation_fraction",
       "the validation fraction must be in [0, 1), got 1.5"},
      {[](TrainConfig& t) { t.precision.loss_scale.backoff_factor = 2; }, "precision.loss_scale.backoff_factor",
       "the loss scale's backoff factor must be in (0, 1), got 2"},
      {[](TrainConfig& t) { t.warmup_epochs = 9; }, "warmup_epochs",
       "the warm-up epochs must be in [0, epochs], got 9"},
      {[](TrainConfig& t) { t.host_sync = HostSync::EveryStep, t.cuda_graphs = CudaGraphs::On; }, "cuda_graphs",
       "CUDA graphs on captures deferred steps: it needs the host sync auto or deferred"},
  };
  const std::vector<std::pair<std::string, std::string>> settings = config_settings(c);
  for (const Refusal& r : refused) {
    TrainConfig bad = c;
    r.change(bad);
    try {
      validate(bad);
      ADD_FAILURE() << "accepted: " << r.message;
    } catch (const SettingError& e) {
      EXPECT_NE(std::string(e.what()).find(r.message), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << "a flag in the engine's words: " << e.what();
      EXPECT_EQ(e.setting(), r.setting) << e.what();
      EXPECT_TRUE(std::any_of(settings.begin(), settings.end(), [&](const auto& s) { return s.first == e.setting(); }))
          << e.setting() << " is no configuration key";
    }
  }
}

struct Result {
  int status;
  std::string output;
};

// `env_changes`: env's options before the program, "-u DISPLAY" say.
Result run_ampwb(const std::string& arguments, const std::string& env_changes = "") {
  const std::string command =
      (env_changes.empty() ? "" : "/usr/bin/env " + env_changes + " ") + AMPWB_BINARY + " " + arguments + " 2>&1";
  Result r{-1, ""};
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe)) r.output += buffer.data();
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(Cli, TrainPrintsEpochsAndJsonSummary) {
  const fs::path data = make_stripes_folder("cli", 10, 12);
  const Result text =
      run_ampwb("train --data '" + data.string() + "' --depth 20 --epochs 2 --batch-size 4 --threads 2");
  EXPECT_EQ(text.status, 0) << text.output;
  EXPECT_NE(text.output.find("epoch 2/2"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("img/s"), std::string::npos);
  const Result json = run_ampwb("train --data '" + data.string() + "' --depth 20 --epochs 1 --batch-size 4 --json");
  EXPECT_EQ(json.status, 0) << json.output;
  EXPECT_NE(json.output.find("\"final_validation_accuracy\""), std::string::npos) << json.output;
  EXPECT_NE(json.output.find("\"loss_scale\": null"), std::string::npos) << "FP32 scales nothing: " << json.output;
  EXPECT_EQ(json.output.find("\"loss_scale\": 1"), std::string::npos) << json.output;
  fs::remove_all(data);
}

// A static loss scale too large for FP16 is what the failure names, not the missing loss scaler it was before.
TEST(Cli, ARunFailedByAStaticScaleTooLargeNamesTheScale) {
  const fs::path data = make_stripes_folder("static_scale", 10, 12);
  const Result r = run_ampwb("train --data '" + data.string() +
                             "' --depth 20 --epochs 1 --batch-size 4 --threads 2 --precision amp-fp16 "
                             "--loss-scale static:1e8");
  fs::remove_all(data);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(" in amp-fp16 with a static loss scale of 1e+08, which does not come down when "
                          "gradients overflow: the run cannot recover (a smaller static scale,"),
            std::string::npos)
      << r.output;
}

TEST(Cli, TrainTellsWhatTheCpuMakesOfThePrecision) {
  const fs::path data = make_stripes_folder("cli-notes", 10, 12);
  const std::string train = "train --data '" + data.string() + "' --depth 20 --epochs 1 --batch-size 4 --threads 2";
  // FP32 needs no word on the CPU; two classes make a top-2 accuracy of 100% every epoch, so none is reported.
  const Result fp32 = run_ampwb(train + " --precision fp32");
  EXPECT_EQ(fp32.status, 0) << fp32.output;
  const std::string top2_note = "note:    top-2 accuracy is not reported: with 2 classes every image would count\n";
  EXPECT_NE(fp32.output.find(top2_note), std::string::npos) << fp32.output;
  EXPECT_EQ(fp32.output.find("note:", fp32.output.find("note:") + 1), std::string::npos) << fp32.output;
  EXPECT_NE(fp32.output.find("epoch 1/1"), std::string::npos) << fp32.output;
  EXPECT_EQ(fp32.output.find("top-"), fp32.output.find(top2_note) + 9) << fp32.output;  // only the note's
  const Result top1 = run_ampwb(train + " --precision fp32 --topk 1");
  EXPECT_EQ(top1.status, 0) << top1.output;
  EXPECT_EQ(top1.output.find("note:"), std::string::npos) << top1.output;
  EXPECT_NE(top1.output.find("%  top-1 "), std::string::npos) << top1.output;
  const Result fp16 = run_ampwb(train + " --precision amp-fp16");
  EXPECT_EQ(fp16.status, 0) << fp16.output;
  EXPECT_NE(fp16.output.find("note:    FP16 is emulated on the CPU"), std::string::npos) << fp16.output;
  const Result bf16 = run_ampwb(train + " --precision amp-bf16");
  EXPECT_EQ(bf16.status, 0) << bf16.output;
  // What computes BF16 is what oneDNN answers on this CPU (the child sees the same ONEDNN_MAX_CPU_ISA).
  const ComputeSupport expected = CpuBackend().capabilities().bf16;
  EXPECT_NE(bf16.output.find("compute: BF16: " + expected.how), std::string::npos) << bf16.output;
  // "run:     7, recorded in ...": the run's id, then what the store kept of it.
  const size_t at = bf16.output.find("run:     ") + 9;
  const Result shown = run_ampwb("show " + bf16.output.substr(at, bf16.output.find(',', at) - at));
  EXPECT_NE(shown.output.find("compute    BF16: " + expected.how), std::string::npos) << shown.output;
  EXPECT_EQ(bf16.output.find("note:    BF16 on this CPU") != std::string::npos,
            !expected.native || (expected.speed_vs_fp32 > 0 && expected.speed_vs_fp32 < 2))
      << bf16.output;
  const Result bench = run_ampwb(
      "bench --depth 20 --image-size 16 --batch-size 4 --steps 1 --warmup 0 --classes 4 --precision amp-bf16 --json");
  ASSERT_EQ(bench.status, 0) << bench.output;
  EXPECT_EQ(nlohmann::json::parse(bench.output)["compute"], "BF16: " + expected.how) << bench.output;
  // amp-fp8 with its settings: the CPU's emulation said, and the settings kept with the run.
  const Result fp8 = run_ampwb(train +
                               " --precision amp-fp8 --fp8-amax-history 8 --fp8-margin 1 --fp8-amax-rule most-recent"
                               " --fp8-first-last --fp8-formats e4m3");
  EXPECT_EQ(fp8.status, 0) << fp8.output;
  EXPECT_NE(fp8.output.find("note:    FP8 is emulated on the CPU"), std::string::npos) << fp8.output;
  const size_t fp8_at = fp8.output.find("run:     ") + 9;
  const Result fp8_shown = run_ampwb("show " + fp8.output.substr(fp8_at, fp8.output.find(',', fp8_at) - fp8_at));
  for (const char* setting : {"amax_history_length", "margin", "amax_rule", "formats", "first_and_last"})
    EXPECT_NE(fp8_shown.output.find(std::string("precision.fp8.") + setting), std::string::npos) << fp8_shown.output;
  EXPECT_NE(fp8_shown.output.find("most-recent"), std::string::npos) << fp8_shown.output;
  const size_t formats = fp8_shown.output.find("precision.fp8.formats");  // the setting's line of the table
  const std::string formats_line = fp8_shown.output.substr(formats, fp8_shown.output.find('\n', formats) - formats);
  EXPECT_NE(formats_line.find("e4m3"), std::string::npos) << fp8_shown.output;
  fs::remove_all(data);
}

TEST(Cli, BenchReportsThroughputAndMemoryAsOneLineOfValidJson) {
  const Result r =  // --json first: flags in any order
      run_ampwb("bench --json --depth 20 --image-size 16 --batch-size 4 --steps 010 --warmup 1 --classes 10");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "bench/ drivers read the last JSON line";
  const nlohmann::json j = nlohmann::json::parse(r.output);  // throws on invalid JSON (a bare nan, say)
  for (const char* key : {"images_per_second", "step_ms_median", "peak_bytes", "max_rss_bytes", "warmup_seconds"})
    EXPECT_TRUE(j[key].is_number()) << key << " in " << r.output;
  EXPECT_GT(j["warmup_seconds"].get<double>(), 0.0) << "the model is built and one step runs before the timed ones";
  // The steps' spread and the machine's other work beside the median: two benchmarks run apart meet other loads.
  EXPECT_LE(j["step_ms_q1"].get<double>(), j["step_ms_median"].get<double>());
  EXPECT_GE(j["step_ms_q3"].get<double>(), j["step_ms_median"].get<double>());
  EXPECT_GE(j["load"]["other_cpu"].get<double>(), 0.0) << "read from /proc/stat";
  const Result text = run_ampwb("bench --depth 20 --image-size 16 --batch-size 4 --steps 4 --warmup 1 --classes 10");
  ASSERT_EQ(text.status, 0) << text.output;
  EXPECT_NE(text.output.find("ms (interquartile range "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("\nload:    "), std::string::npos) << text.output;
  EXPECT_EQ(j["depth"], 20);
  EXPECT_EQ(j["steps"], 10) << "whole numbers in base 10, not octal";
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["framework"], "ampwb");
  EXPECT_EQ(j["host_sync"], "every-step") << "the CPU's default";
  EXPECT_EQ(j["host_waits_per_step"], 1.0) << "each step reads its numbers once";
  // Deferred steps (the GPU's default) wait for nothing; amp-fp16 keeps its loss scale on the device.
  const Result deferred = run_ampwb(
      "bench --json --depth 20 --image-size 16 --batch-size 4 --steps 5 --warmup 1 --classes 10 --precision amp-fp16 "
      "--host-sync deferred");
  ASSERT_EQ(deferred.status, 0) << deferred.output;
  const nlohmann::json d = nlohmann::json::parse(deferred.output);
  EXPECT_EQ(d["host_sync"], "deferred");
  EXPECT_EQ(d["host_waits_per_step"], 0.0);
  EXPECT_EQ(d["cuda_graphs"], "off");
  // Captured steps asked of the CPU: the steps run op by op, and the JSON says why.
  const Result graphs = run_ampwb(
      "bench --json --depth 20 --image-size 16 --batch-size 4 --steps 5 --warmup 1 --classes 10 --precision amp-fp16 "
      "--host-sync deferred --cuda-graphs on");
  ASSERT_EQ(graphs.status, 0) << graphs.output;
  const nlohmann::json g = nlohmann::json::parse(graphs.output);
  EXPECT_EQ(g["replayed_steps"], 0);
  EXPECT_NE(g["why_not_captured"].get<std::string>().find("nothing to capture"), std::string::npos) << graphs.output;
  const Result refused = run_ampwb("bench --depth 20 --image-size 16 --batch-size 4 --steps 1 --cuda-graphs on");
  EXPECT_EQ(refused.status, 1) << "on the CPU, auto waits at every step: nothing to capture";
  EXPECT_NE(refused.output.find("--cuda-graphs: CUDA graphs on captures deferred steps"), std::string::npos)
      << refused.output;
}

TEST(Cli, BadInputGetsAClearError) {
  Result r = run_ampwb("train --data /nonexistent/dir");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("'/nonexistent/dir' does not exist"), std::string::npos) << r.output;
  r = run_ampwb("train --data \"'/tmp'\"");  // quoted twice: the shell keeps the inner quotes
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("the folder '/tmp' does not exist: its quotes are part of the name given"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("without them, /tmp is a folder"), std::string::npos) << r.output;
  r = run_ampwb("train --data /tmp --depth 19");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unsupported depth 19"), std::string::npos) << r.output;
  // What the parser refuses is bad usage: exit status 2, the command and the flag named.
  r = run_ampwb("train --data /tmp --epoch 3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(
      r.output.find("ampwb train: error: unknown option --epoch; did you mean --epochs? (see ampwb train --help)"),
      std::string::npos)
      << r.output;
  r = run_ampwb("train --data /tmp --batch-size many");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--batch-size: expects a whole number, got 'many'"), std::string::npos) << r.output;
  r = run_ampwb("train --data /tmp --lr fast");
  EXPECT_NE(r.output.find("--lr: expects a number, got 'fast'"), std::string::npos) << r.output;
  r = run_ampwb("bench --precision fp12");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--precision: fp12 not in {fp32,tf32,amp-fp16,amp-bf16,fp16-o2,fp16-pure,amp-fp8}"),
            std::string::npos)
      << r.output;
  // The value meant, where one stands out: the one mode that holds the word, else the one a typo away.
  EXPECT_NE(r.output.find("amp-fp8}; did you mean fp32? (see ampwb bench --help)"), std::string::npos) << r.output;
  r = run_ampwb("train --data /tmp --precision BF16");
  EXPECT_NE(r.output.find("; did you mean amp-bf16?"), std::string::npos) << r.output;
  r = run_ampwb("train --data /tmp --precision fp16");  // amp-fp16, fp16-o2 or fp16-pure: none is named
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
  r = run_ampwb("train --data /tmp --loss-scale static:lots");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--loss-scale: must be off, static:S (S a number) or dynamic"), std::string::npos)
      << r.output;
  r = run_ampwb("train --data /tmp --loss-scale static:0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--loss-scale: static:S takes a positive, finite scale, got 'static:0'"), std::string::npos)
      << r.output;
  r = run_ampwb("train --data /tmp --no-checkpoint --checkpoint-dir /tmp/x");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("excludes"), std::string::npos) << r.output;  // CLI11: "--a excludes --b"
  r = run_ampwb("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'"), std::string::npos) << r.output;
  // Numbers a float cannot hold finitely never reach the run store (where they would read as null).
  for (const std::string flags : {"--grad-clip inf", "--momentum nan", "--momentum 1e39", "--growth-factor inf"}) {
    r = run_ampwb("train --data /tmp " + flags);
    EXPECT_EQ(r.status, 2) << flags << ": " << r.output;
    EXPECT_NE(r.output.find(": expects a finite number, got '"), std::string::npos) << flags << ": " << r.output;
  }
  // A word from a fixed set is checked by the parser too, naming the choices.
  for (const auto& [command, said] : std::vector<std::pair<std::string, std::string>>{
           {"train --data /tmp --host-sync sometimes", "--host-sync: 'sometimes' is not auto, every-step or deferred"},
           {"train --data /tmp --schedule linear", "--schedule: 'linear' is not cosine, step or constant"},
           {"train --data /tmp --optimizer rmsprop", "--optimizer: 'rmsprop' is not sgd, adam or adamw"},
           {"train --data /tmp --normalize none", "--normalize: 'none' is not dataset or imagenet"},
           {"bench --cuda-graphs maybe", "--cuda-graphs: 'maybe' is not auto, on or off"},
           {"bench --conv-algorithm 2", "--conv-algorithm: '2' is not auto, direct, winograd, measured or gemm"},
           {"train --data /tmp --conv-algorithm fft",
            "--conv-algorithm: 'fft' is not auto, direct, winograd, measured or gemm"}}) {
    r = run_ampwb(command);
    EXPECT_EQ(r.status, 2) << command << ": " << r.output;
    EXPECT_NE(r.output.find(said), std::string::npos) << command << ": " << r.output;
  }
  // The store is each command's flag: before the command it is said so, not taken for the workbench's.
  r = run_ampwb("--db /tmp/ampwb-nowhere.sqlite runs");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--db goes after the command: ampwb runs --db FILE"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists("/tmp/ampwb-nowhere.sqlite"));
}

TEST(Cli, EveryCommandsHelpComesFromTheParserAndNamesItsFlags) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"train",
       {"--data",
        "--val-fraction",
        "--max-train-images",
        "--max-val-images",
        "--augment",
        "--normalize",
        "--drop-last",
        "--cache-mb",
        "--depth",
        "--image-size",
        "--stem",
        "--epochs",
        "--batch-size",
        "--lr",
        "--schedule",
        "--warmup-epochs",
        "--optimizer",
        "--momentum",
        "--nesterov",
        "--weight-decay",
        "--label-smoothing",
        "--grad-clip",
        "--topk",
        "--seed",
        "--precision",
        "--loss-scale",
        "--master-weights",
        "--scaler-preset",
        "--init-scale",
        "--growth-factor",
        "--backoff-factor",
        "--growth-interval",
        "--hysteresis",
        "--min-scale",
        "--max-scale",
        "--name",
        "--device",
        "--threads",
        "--max-skipped",
        "--max-steps-per-epoch",
        "--numerics-every",
        "--checkpoint-dir",
        "--resume",
        "--no-checkpoint",
        "--keep-checkpoint",
        "--db",
        "--json"}},
      {"bench",
       {"--depth", "--image-size", "--batch-size", "--classes", "--precision", "--steps", "--warmup", "--device",
        "--threads", "--seed", "--json"}},
      {"devices", {"--json"}},
      {"help", {"COMMAND"}},
      {"runs", {"--status", "--tag", "--json", "--db"}},
      {"show", {"RUN", "--json", "--steps", "--db"}},
      {"compare", {"RUN", "--group-by", "--json", "--db"}},
      {"export", {"csv", "chart"}},
      {"export csv", {"RUN", "--out", "--all", "--overwrite", "--db"}},
      {"export chart",
       {"RUN", "--metric", "--out", "--width", "--height", "--smoothing", "--histogram", "--x-axis", "--db"}},
      {"delete", {"RUN", "--yes", "--db"}},
      {"rename", {"RUN", "NAME", "--db"}},
      {"tag", {"RUN", "TAG", "--remove", "--db"}},
      {"note", {"RUN", "TEXT", "--db"}},
      {"store", {"check", "backup", "recover", "copy"}},
      {"store check", {"--db"}},
      {"store backup", {"FILE", "--db"}},
      {"store recover", {"FILE", "--db"}},
  };  // dataset's: test_data_cli.cpp
  for (const auto& [command, flags] : commands) {
    const Result r = run_ampwb(command + " --help");
    EXPECT_EQ(r.status, 0) << command << ": " << r.output;
    EXPECT_NE(r.output.find("Usage: ampwb " + command), std::string::npos) << r.output;
    for (const std::string& flag : flags) EXPECT_NE(r.output.find(flag), std::string::npos) << command << " " << flag;
    EXPECT_EQ(run_ampwb("help " + command).output, r.output) << "ampwb help " << command;
  }
  // ampwb help: every command with every flag; ampwb --help: the commands.
  const Result all = run_ampwb("help");
  EXPECT_EQ(all.status, 0) << all.output;
  for (const char* part : {"train",
                           "--scaler-preset",
                           "--keep-checkpoint",
                           "bench",
                           "--classes",
                           "runs",
                           "show",
                           "--steps",
                           "compare",
                           "export",
                           "csv",
                           "chart",
                           "--metric",
                           "delete",
                           "rename",
                           "tag",
                           "--remove",
                           "note",
                           "store",
                           "check",
                           "backup",
                           "dataset",
                           "inspect",
                           "sample",
                           "bench-decode",
                           "bench-loader",
                           "--compute-ms",
                           "devices",
                           "help"})
    EXPECT_NE(all.output.find(part), std::string::npos) << part;
  const Result top = run_ampwb("--help");
  EXPECT_EQ(top.status, 0) << top.output;
  EXPECT_NE(top.output.find("Usage: ampwb"), std::string::npos) << top.output;
  EXPECT_EQ(top.output.find("--scaler-preset"), std::string::npos) << "a command's flags are in its own help";
  EXPECT_EQ(run_ampwb("--version").output, std::string("ampwb ") + AMPWB_VERSION + "\n");
  EXPECT_EQ(run_ampwb("help frobnicate").status, 2);
}

// Without a display, the workbench says so and what to do, where Qt would abort telling to reinstall it.
TEST(Cli, WithoutADisplayTheWorkbenchSaysSo) {
#ifndef AMPWB_HAVE_GUI
  GTEST_SKIP() << "this build's ampwb has no desktop workbench (AMPWB_BUILD_GUI=OFF)";
#endif
  const fs::path db = fs::temp_directory_path() / ("ampwb_no_display_" + std::to_string(::getpid()) + ".sqlite");
  const Result r = run_ampwb("--db '" + db.string() + "'", "-u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("ampwb: no display to open the workbench on"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(db)) << "nothing was made";
}

TEST(Cli, HelpListsTheDevicesThisMachineTrainsOnAndWhatEachRuns) {
  const Capabilities caps = CpuBackend().capabilities();
  const std::string cpu = "  cpu: " + caps.device_name + " (" + caps.isa + ", ";
  for (const char* command : {"help", "--help", "train --help", "bench --help", "devices"}) {
    const Result r = run_ampwb(command);
    EXPECT_EQ(r.status, 0) << command << ": " << r.output;
    EXPECT_NE(r.output.find(cpu), std::string::npos) << command << ": " << r.output;
    for (const PrecisionModeInfo& mode : kPrecisionModes) {
      const ModeSupport s = mode_support(mode.mode, caps);  // the trainer's own verdict
      const std::string says = s.supported ? s.compute : s.reason;
      if (!says.empty()) {
        EXPECT_NE(r.output.find(says), std::string::npos) << command << ", " << mode.name;
      }
      for (const std::string& note : s.notes)  // what to expect of its speed here, as a run is told at its start
        EXPECT_NE(r.output.find("      note: " + note + "\n"), std::string::npos) << command << ", " << mode.name;
    }
    EXPECT_NE(r.output.find("    not tf32: " + mode_support(PrecisionMode::Tf32, caps).reason), std::string::npos)
        << command << ": " << r.output;
    if (!gpu_absence_reason().empty()) {
      EXPECT_NE(r.output.find("(no CUDA GPU: " + gpu_absence_reason() + ")"), std::string::npos) << command;
    }
  }
  const Result r = run_ampwb("devices --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output);
  const nlohmann::json& devices = out["devices"];
  EXPECT_EQ(devices.size(), list_devices().size());
  EXPECT_EQ(out["gpu_absence_reason"], gpu_absence_reason());
  const nlohmann::json& c = devices.at(0);
  EXPECT_EQ(c["device"], "cpu");
  EXPECT_EQ(c["name"], caps.device_name);
  EXPECT_EQ(c["isa"], caps.isa);
  EXPECT_EQ(c["memory_bytes"], caps.memory_bytes);
  EXPECT_TRUE(c["usable"].get<bool>());
  EXPECT_TRUE(c["modes"]["fp32"]["supported"].get<bool>());
  EXPECT_FALSE(c["modes"]["tf32"]["supported"].get<bool>());
  EXPECT_EQ(c["modes"]["tf32"]["reason"], mode_support(PrecisionMode::Tf32, caps).reason);
  EXPECT_EQ(c["modes"]["amp-bf16"]["compute"], "BF16: " + caps.bf16.how);
}

// `ampwb devices` says what one run on many processes has here: the cores, MPI in the build and mpirun on PATH, NCCL
// and the GPUs, and the largest --processes, with the reason where it is one. Without mpirun on PATH, one, saying why.
TEST(Cli, DevicesSaysWhatTheMachineOffersForManyProcesses) {
  const ProcessOffer offer = process_offer();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(offer.cores, cores);
  EXPECT_EQ(offer.mpi_built, have_mpi());
  const Result text = run_ampwb("devices");
  ASSERT_EQ(text.status, 0) << text.output;
  EXPECT_NE(text.output.find("  cores: " + std::to_string(cores) + ", CUDA GPUs: " + std::to_string(offer.gpus)),
            std::string::npos)
      << text.output;
  const Result r = run_ampwb("devices --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json p = nlohmann::json::parse(r.output).at("processes");
  EXPECT_EQ(p["cores"], cores);
  EXPECT_EQ(p["gpus"], offer.gpus);
  EXPECT_EQ(p["mpi_built"], have_mpi());
  EXPECT_EQ(p["mpirun"], offer.mpirun);
  const bool many = have_mpi() && !offer.mpirun.empty() && cores > 1;
  EXPECT_EQ(p["max_cpu_processes"], many ? cores : 1);
  EXPECT_EQ(p["cpu_limit_reason"].get<std::string>().empty(), many) << p.dump();
  if (!offer.mpirun.empty()) {
    EXPECT_NE(text.output.find("mpirun: " + offer.mpirun), std::string::npos) << text.output;
    EXPECT_NE(p["mpirun_version"].get<std::string>().find("Open MPI"), std::string::npos) << p.dump();
    EXPECT_NE(text.output.find("--processes on the CPU: up to " + std::to_string(many ? cores : 1)), std::string::npos)
        << text.output;
  }

  const std::string path = std::getenv("PATH");
  ::setenv("PATH", "/nonexistent", 1);  // no mpirun to be found
  const Result without = run_ampwb("devices --json");
  ::setenv("PATH", path.c_str(), 1);
  ASSERT_EQ(without.status, 0) << without.output;
  const nlohmann::json q = nlohmann::json::parse(without.output).at("processes");
  EXPECT_EQ(q["mpirun"], "");
  EXPECT_EQ(q["max_cpu_processes"], 1);
  EXPECT_EQ(q["cpu_limit_reason"], have_mpi() ? "Open MPI's mpirun is not on PATH (Debian: openmpi-bin)"
                                              : "this build has no MPI (Open MPI's libopenmpi-dev), which starts the "
                                                "processes");
}

TEST(Cli, EveryInvalidSettingIsRefusedBeforeTrainingInWordsForTheUser) {
  const fs::path data = make_stripes_folder("cli-invalid", 10, 12);  // 2 classes, 16 training images
  const std::string train = "train --data '" + data.string() + "' --depth 20 --epochs 1 --batch-size 4 ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      // The engine's words about the setting, led by the flag that sets it; so also where the data refuses it.
      {"--epochs 0", "--epochs: the number of epochs must be at least 1, got 0"},
      {"--topk 3", "--topk: top-k 3 is more than the dataset's 2 classes"},
      {"--cache-mb -1", "--cache-mb: the image cache's size must not be negative"},
      {"--max-train-images -1", "--max-train-images: the training images' limit must not be negative"},
      {"--batch-size 100000000",
       "--batch-size: the batch size 100000000 is larger than the training split (16 images): choose 16 or fewer"},
      {"--name \"$(printf 'two\\nlines')\"", "a run name cannot hold control characters"},
      {"--momentum 1", "--momentum: the momentum must be in [0, 1), got 1"},
      {"--weight-decay -1", "--weight-decay: the weight decay must be a finite number, not negative, got -1"},
      {"--threads 100000", "--threads: the thread count must be 0 (every core) to 1024, got 100000"},
      {"--growth-factor 1 --precision amp-fp16", "--growth-factor: the loss scale's growth factor must be"},
      {"--precision amp-fp8 --fp8-margin 65", "--fp8-margin: the FP8 scaling margin must be between -64 and 64"},
      {"--precision amp-fp8 --fp8-amax-history 0", "--fp8-amax-history: the FP8 amax history must keep between 1"},
  };
  for (const auto& [flags, message] : cases) {
    const Result r = run_ampwb(train + flags);
    EXPECT_EQ(r.status, 1) << flags << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << flags << ": " << r.output;
    EXPECT_EQ(r.output.find(".cpp"), std::string::npos) << "no source paths: " << r.output;
    EXPECT_EQ(r.output.find("check failed"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("epoch 1/1"), std::string::npos) << "refused before any training: " << r.output;
  }
  // 0 is no size (a stored configuration's 0 means auto): refused as bad usage, pointing at auto.
  for (const char* zero : {"--image-size 0", "--image-size=-0", "--image-size 00"}) {
    const Result r = run_ampwb(train + zero);
    EXPECT_EQ(r.status, 2) << zero << ": " << r.output;
    EXPECT_NE(r.output.find("--image-size: 0 is no image size: give 8 to 1024 px, or auto"), std::string::npos)
        << r.output;
  }
  for (const char* size : {"--image-size=-32", "--image-size 7"}) {
    const Result r = run_ampwb(train + size);
    EXPECT_EQ(r.status, 1) << size << ": " << r.output;
    EXPECT_NE(r.output.find("--image-size: the image size must be between 8 and 1024"), std::string::npos) << r.output;
  }
  const Result automatic = run_ampwb(train + "--image-size auto");
  EXPECT_EQ(automatic.status, 0) << "as ampwb help documents it: " << automatic.output;
  EXPECT_NE(automatic.output.find("12 px"), std::string::npos) << "the data's own size: " << automatic.output;
  fs::remove_all(data);
}

TEST(Cli, TheDatasetBenchmarksRefuseSettingsOutOfRangeAsBadUsage) {
  const fs::path data = make_stripes_folder("cli-dataset-bench", 10, 12);
  const std::string loader = "dataset bench-loader '" + data.string() + "' ";
  const std::vector<std::string> lines = {"dataset bench-decode --count 0",
                                          "dataset bench-decode --repeat 0",
                                          loader + "--batch-size 0",
                                          loader + "--threads 0",
                                          loader + "--image-size 7",
                                          loader + "--epochs 0",
                                          loader + "--cache-mb -1",
                                          loader + "--compute-ms -1",
                                          loader + "--validation-fraction 1.5",
                                          loader + "--threads 257",
                                          "dataset inspect '" + data.string() + "' --validation-fraction 1"};
  for (const std::string& line : lines) {
    const Result r = run_ampwb(line);
    EXPECT_EQ(r.status, 2) << line << ": " << r.output;
    EXPECT_EQ(r.output.find(".cpp"), std::string::npos) << line << ": " << r.output;
  }
  // Generated images never go into a folder that holds something (a dataset's class folder, say).
  const Result r = run_ampwb("dataset bench-decode --count 2 --repeat 1 --dir '" + data.string() + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is not a new or empty folder"), std::string::npos) << r.output;
  fs::remove_all(data);
}

TEST(Cli, EveryInvalidBenchmarkSettingIsRefusedInWordsForTheUser) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--image-size 0", "--image-size: the image size must be between 8 and 1024, got 0"},
      {"--image-size 100000", "--image-size: the image size must be between 8 and 1024, got 100000"},
      {"--batch-size 1", "--batch-size: the batch size must be at least 2"},
      {"--steps 0", "--steps: the timed steps must be at least 1, got 0"},
      {"--classes 1", "--classes: the number of classes must be at least 2, got 1"},
      {"--depth 19", "--depth: unsupported depth 19"},
  };
  for (const auto& [flags, message] : cases) {
    const Result r = run_ampwb("bench --depth 20 --image-size 16 --batch-size 4 --steps 1 --warmup 0 " + flags);
    EXPECT_EQ(r.status, 1) << flags << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << flags << ": " << r.output;
    EXPECT_EQ(r.output.find(".cpp"), std::string::npos) << "no source paths: " << r.output;
  }
}

}  // namespace
}  // namespace ampwb

namespace ampwb {
namespace {

// Stops the trainer after a given global step, from inside the training thread (as the UI would, from its own).
class StopAt : public TrainObserver {
 public:
  StopAt(Trainer*& trainer, int64_t step) : trainer_(trainer), step_(step) {}
  void on_step(const StepReport& r) override {
    losses.push_back(r.loss);
    walls.push_back(r.wall_seconds);
    if (r.step == step_) trainer_->stop();
  }
  void on_checkpoint(const CheckpointInfo& c) override { checkpoints.push_back(c); }
  std::vector<float> losses;
  std::vector<double> walls;
  std::vector<CheckpointInfo> checkpoints;

 private:
  Trainer*& trainer_;
  int64_t step_;
};

// The user pauses at the second step of epoch 1 for two seconds: the epoch's time and speed, and the run's duration,
// leave the pause out, while its steps' wall clock goes on through it. The observer's own clock runs from the run's
// start to the epoch's end, a span that holds the whole epoch, so the epoch's time must be about the pause shorter than
// it, however slowly a busy machine trains.
class PauseOnce : public TrainObserver {
 public:
  static constexpr double kPauseSeconds = 2.0;
  explicit PauseOnce(Trainer*& trainer) : trainer_(trainer) {}
  ~PauseOnce() override {
    if (resumer_.joinable()) resumer_.join();
  }
  void on_start(const RunInfo&) override { started_ = Clock::now(); }
  void on_step(const StepReport& r) override {
    if (r.epoch == 1) last_wall_of_epoch1 = r.wall_seconds;
    if (r.epoch != 1 || r.step != 1) return;
    trainer_->pause();
    resumer_ = std::thread([this] {
      std::this_thread::sleep_for(std::chrono::duration<double>(kPauseSeconds));
      if (!store_path.empty()) {  // what every other reader of the store sees meanwhile
        const RunStore store(store_path, RunStore::Mode::ReadOnly);
        paused_in_store = store.runs().back().info.paused_since;
      }
      trainer_->resume();
    });
  }
  void on_epoch(const EpochReport& r) override {
    epochs.push_back(r);
    observed_seconds.push_back(std::chrono::duration<double>(Clock::now() - started_).count());
  }
  void on_end(const RunEnd&) override {
    ended_seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  }
  double last_wall_of_epoch1 = 0, ended_seconds = 0;
  std::string store_path, paused_in_store;
  std::vector<EpochReport> epochs;
  std::vector<double> observed_seconds;  // from on_start to each on_epoch

 private:
  using Clock = std::chrono::steady_clock;
  Trainer*& trainer_;
  std::thread resumer_;
  Clock::time_point started_;
};

TEST(Training, APauseIsNotTrainingTime) {
  const fs::path data = make_stripes_folder("pause", 16, 12);
  TrainConfig c = tiny_config(data);
  c.epochs = 1;
  Trainer* current = nullptr;
  PauseOnce observer(current);
  RunStore store((data / "runs.sqlite").string());
  observer.store_path = store.path();
  StoreRecorder recorder(store, c);
  ObserverList both({&recorder, &observer});  // the recorder's step first: nothing between pause and its wait
  Trainer trainer(c, &both);
  current = &trainer;
  ASSERT_EQ(trainer.run().status, RunStatus::Finished);
  // The store said the run paused while it was, and no longer once it went on.
  EXPECT_TRUE(observer.paused_in_store.starts_with("20")) << "'" << observer.paused_in_store << "'";
  EXPECT_TRUE(store.run(recorder.run_id()).info.paused_since.empty());
  // Nor is it the run's time: `show` says it "ran for" that long, the Compare tab's "total time".
  EXPECT_LE(store.run(recorder.run_id()).duration_seconds, observer.ended_seconds - PauseOnce::kPauseSeconds + 0.5)
      << "the run's duration counts the pause";
  ASSERT_EQ(observer.epochs.size(), 1u);
  ASSERT_GE(observer.last_wall_of_epoch1, PauseOnce::kPauseSeconds) << "the steps' wall clock left the pause out";
  // The trainer's pause begins when it next looks, a little after the resumer's two seconds began: half a second of
  // slack for that on a busy machine, while counting the pause would overshoot by two seconds.
  EXPECT_LE(observer.epochs[0].seconds, observer.observed_seconds[0] - PauseOnce::kPauseSeconds + 0.5)
      << "the epoch's time counts the pause";
  fs::remove_all(data);
}

TEST(Checkpoints, StopMidEpochThenResumeContinuesTheSameCurveBitForBit) {
  const fs::path data = make_stripes_folder("resume", 16, 12);
  const fs::path dir = fs::temp_directory_path() / ("ampwb_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  // amp-fp16 once more with deferred steps, stopped and resumed, against the whole run with steps that wait.
  for (const auto& [mode, host_sync] : std::vector<std::pair<std::string, HostSync>>{
           {"fp32", HostSync::EveryStep},
           {"amp-fp16", HostSync::EveryStep},
           {"amp-fp16", HostSync::Deferred},
           {"amp-fp8", HostSync::EveryStep},    // its FP8 scales' histories resume with it
           {"amp-fp8", HostSync::Deferred}}) {  // ... read from where the steps keep them
    TrainConfig c = tiny_config(data);
    c.epochs = 3;
    c.precision = precision_preset(mode);
    Recorder whole;
    train(c, &whole);
    c.host_sync = host_sync;

    c.checkpoint_dir = dir.string();
    Trainer* current = nullptr;
    // Stopped mid-epoch (epoch 2, steps 3-5): deferred steps report step 3 while step 4 runs, and stop before step 5.
    StopAt first(current, host_sync == HostSync::Deferred ? 3 : 4);
    Trainer part1(c, &first);
    current = &part1;
    const RunEnd stopped = part1.run();
    ASSERT_EQ(stopped.status, RunStatus::Cancelled);
    EXPECT_NE(stopped.reason.find("resumable from"), std::string::npos) << stopped.reason;
    ASSERT_FALSE(first.checkpoints.empty());

    c.resume_from = first.checkpoints.back().path;
    StopAt second(current, -1);
    Trainer part2(c, &second);
    current = &part2;
    const RunEnd finished = part2.run();
    ASSERT_EQ(finished.status, RunStatus::Finished) << finished.reason;
    std::vector<float> joined = first.losses;
    joined.insert(joined.end(), second.losses.begin(), second.losses.end());
    EXPECT_EQ(joined, whole.losses) << mode << " " << choice_name(host_sync);
    // The wall-clock axis goes on from the checkpoint: the resumed steps come after the first process's.
    ASSERT_FALSE(second.walls.empty());
    EXPECT_GT(second.walls.front(), first.walls.back()) << mode;
    EXPECT_TRUE(std::is_sorted(second.walls.begin(), second.walls.end())) << mode;
    ASSERT_FALSE(part2.epochs().empty());
    EXPECT_EQ(part2.epochs().front().epoch, 2) << "the interrupted epoch is completed, not restarted";
    EXPECT_EQ(part2.epochs().back().validation_accuracy, whole.epochs.back().validation_accuracy);
    fs::remove_all(dir);
  }
  fs::remove_all(data);
}

TEST(Checkpoints, DamagedFilesAreRefusedAndAFailedSaveKeepsTheOldOne) {
  const fs::path dir = fs::temp_directory_path() / ("ampwb_ckpt_io_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "c.ampwb").string();
  Checkpoint c;
  c.meta = {{"epoch", 2}};
  c.tensors.emplace_back("w", tensor_from_floats({1.5f, -2.0f, 3.25f}, {3}));
  save_checkpoint(path, c);
  const Checkpoint back = load_checkpoint(path);
  EXPECT_EQ(back.meta.at("epoch"), 2);
  EXPECT_EQ(to_float_vector(back.tensor("w")), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_THROW(back.tensor("missing"), Error);

  fs::resize_file(path, fs::file_size(path) - 4);
  EXPECT_THROW(load_checkpoint(path), Error);
  { std::ofstream(dir / "text.ampwb") << "not a checkpoint"; }
  EXPECT_THROW(load_checkpoint((dir / "text.ampwb").string()), Error);

  save_checkpoint(path, c);
  if (::geteuid() != 0) {  // root ignores permissions
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    c.meta["epoch"] = 3;
    EXPECT_THROW(save_checkpoint(path, c), Error);
    fs::permissions(dir, fs::perms::owner_all);
    EXPECT_EQ(load_checkpoint(path).meta.at("epoch"), 2) << "the old checkpoint survives a failed save";
  }
  fs::remove_all(dir);
}

// Flips one byte of a file at `offset` from its end.
void flip_byte(const fs::path& file, std::uintmax_t from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(fs::file_size(file) - from_end));
  char byte = 0;
  f.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x10);
  f.seekp(static_cast<std::streamoff>(fs::file_size(file) - from_end));
  f.write(&byte, 1);
}

TEST(Checkpoints, AFlippedByteIsRefusedByNameAndThePreviousCheckpointIsUsed) {
  const fs::path dir = fs::temp_directory_path() / ("ampwb_ckpt_crc_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "c.ampwb").string();
  Checkpoint c;
  c.meta = {{"epoch", 1}};
  c.tensors.emplace_back("w", tensor_from_floats(std::vector<float>(1000, 0.5f), {1000}));
  save_checkpoint(path, c);
  c.meta["epoch"] = 2;
  save_checkpoint(path, c);
  EXPECT_TRUE(fs::exists(previous_checkpoint_path(path))) << "the checkpoint it replaced stays beside it";
  EXPECT_EQ(load_checkpoint(previous_checkpoint_path(path)).meta.at("epoch"), 1);

  flip_byte(path, 100);  // inside the tensor's bytes
  try {
    load_checkpoint(path);
    FAIL() << "a damaged tensor loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + path + "' is damaged: tensor w fails its checksum"), std::string::npos)
        << e.what();
  }
  std::string note;
  EXPECT_EQ(load_checkpoint_or_previous(path, &note).meta.at("epoch"), 1);
  EXPECT_NE(note.find("resuming from the previous checkpoint"), std::string::npos) << note;

  save_checkpoint(path, c);  // whole again; now damage its header (the JSON sits right after 16 bytes)
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('#');
  }
  EXPECT_THROW(load_checkpoint(path), Error);
  flip_byte(previous_checkpoint_path(path), 10);
  EXPECT_THROW(load_checkpoint_or_previous(path, &note), Error) << "both damaged: nothing to resume from";
  fs::remove_all(dir);
}

// A resumed run's observer: the notes it started with, and a stop after its first step where `at_once`.
struct Notes : StopAt {
  Notes(Trainer*& trainer, bool at_once) : StopAt(trainer, -1), trainer_(trainer), at_once_(at_once) {}
  std::vector<std::string> notes;
  void on_start(const RunInfo& info) override { notes = info.notes; }
  void on_step(const StepReport& r) override {
    StopAt::on_step(r);
    if (at_once_) trainer_->stop();
  }
  Trainer*& trainer_;
  bool at_once_;
};

TEST(Checkpoints, ResumeFromADamagedCheckpointFallsBackToThePreviousOneAndSaysSo) {
  const fs::path data = make_stripes_folder("resume_crc", 16, 12);
  const fs::path dir = fs::temp_directory_path() / ("ampwb_ckpt_resume_crc_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  TrainConfig c = tiny_config(data);
  c.epochs = 3;
  c.checkpoint_dir = dir.string();
  Trainer* current = nullptr;
  StopAt first(current, 7);  // into epoch 3: checkpoints of epochs 1 and 2 exist
  Trainer part1(c, &first);
  current = &part1;
  ASSERT_EQ(part1.run().status, RunStatus::Cancelled);
  const std::string path = first.checkpoints.back().path;
  flip_byte(path, 64);
  c.resume_from = path;
  Notes second(current, false);
  Trainer part2(c, &second);
  current = &part2;
  const RunEnd end = part2.run();
  ASSERT_EQ(end.status, RunStatus::Finished) << end.reason;
  EXPECT_TRUE(std::any_of(second.notes.begin(), second.notes.end(), [](const std::string& n) {
    return n.find("fails its checksum") != std::string::npos;
  })) << nlohmann::json(second.notes).dump();
  fs::remove_all(dir);
  fs::remove_all(data);
}

// A resumed run whose images changed since its checkpoint (here one rewritten at its size, as a script that
// regenerates the data does) goes on, and says so: the store's fingerprint, of paths and sizes, cannot see it.
TEST(Checkpoints, AResumeOnImagesChangedSinceTheCheckpointSaysSo) {
  const fs::path data = make_stripes_folder("resume_changed", 16, 12);
  const fs::path dir = fs::temp_directory_path() / ("ampwb_ckpt_resume_changed_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  TrainConfig c = tiny_config(data);
  c.epochs = 3;
  c.checkpoint_dir = dir.string();
  Trainer* current = nullptr;
  StopAt first(current, 3);
  Trainer part1(c, &first);
  current = &part1;
  ASSERT_EQ(part1.run().status, RunStatus::Cancelled);
  c.resume_from = first.checkpoints.back().path;
  const auto changed_said = [](const Notes& n) {
    return std::any_of(n.notes.begin(), n.notes.end(), [](const std::string& note) {
      return note.starts_with("the dataset's images changed since the checkpoint");
    });
  };
  Notes unchanged(current, true);  // its checkpoint is the next part's
  Trainer part2(c, &unchanged);
  current = &part2;
  ASSERT_EQ(part2.run().status, RunStatus::Cancelled);
  EXPECT_FALSE(changed_said(unchanged)) << nlohmann::json(unchanged.notes).dump();

  fs::path image;
  for (const auto& e : fs::recursive_directory_iterator(data))
    if (e.is_regular_file()) image = e.path();
  const std::string bytes = [&] {
    std::ifstream in(image, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  fs::last_write_time(image, fs::last_write_time(image) + std::chrono::hours(1));  // rewritten: its time moves on
  ASSERT_EQ(fs::file_size(image), bytes.size());
  c.resume_from = unchanged.checkpoints.back().path;
  Notes changed(current, false);
  Trainer part3(c, &changed);
  current = &part3;
  ASSERT_EQ(part3.run().status, RunStatus::Finished);
  EXPECT_TRUE(changed_said(changed)) << nlohmann::json(changed.notes).dump();
  fs::remove_all(dir);
  fs::remove_all(data);
}

}  // namespace
}  // namespace ampwb
