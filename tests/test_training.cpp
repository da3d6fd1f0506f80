// End-to-end training on real PNG files written at test time: loss falls and accuracy rises, runs are
// reproducible, and the ampwb command line trains, benchmarks and refuses bad settings with clear messages.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "image_folder_util.h"
#include "train/checkpoint.h"
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
}

struct Result {
  int status;
  std::string output;
};

Result run_ampwb(const std::string& arguments) {
  const std::string command = std::string(AMPWB_BINARY) + " " + arguments + " 2>&1";
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
  fs::remove_all(data);
}

TEST(Cli, TrainTellsWhatTheCpuMakesOfThePrecision) {
  const fs::path data = make_stripes_folder("cli-notes", 10, 12);
  const std::string train = "train --data '" + data.string() + "' --depth 20 --epochs 1 --batch-size 4 --threads 2";
  const Result fp32 = run_ampwb(train + " --precision fp32");
  EXPECT_EQ(fp32.status, 0) << fp32.output;
  EXPECT_EQ(fp32.output.find("note:"), std::string::npos) << fp32.output;
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
  EXPECT_EQ(bench.status, 0) << bench.output;
  EXPECT_NE(bench.output.find("\"compute\": \"BF16: " + expected.how), std::string::npos) << bench.output;
  fs::remove_all(data);
}

TEST(Cli, BenchReportsThroughputAndMemoryAsJson) {
  const Result r =
      run_ampwb("bench --depth 20 --image-size 16 --batch-size 4 --steps 2 --warmup 1 --classes 10 --json");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* key : {"\"images_per_second\"", "\"step_ms_median\"", "\"peak_bytes\"", "\"max_rss_bytes\""})
    EXPECT_NE(r.output.find(key), std::string::npos) << key << " in " << r.output;
}

TEST(Cli, BadInputGetsAClearError) {
  Result r = run_ampwb("train --data /nonexistent/dir");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("'/nonexistent/dir' does not exist"), std::string::npos) << r.output;
  r = run_ampwb("train --data /tmp --depth 19");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unsupported depth 19"), std::string::npos) << r.output;
  r = run_ampwb("train --data /tmp --epoch 3");
  EXPECT_NE(r.output.find("unknown option --epoch"), std::string::npos) << r.output;
  r = run_ampwb("train --data /tmp --batch-size many");
  EXPECT_NE(r.output.find("--batch-size expects a whole number"), std::string::npos) << r.output;
  r = run_ampwb("bench --precision fp8");
  EXPECT_EQ(r.status, 1);
  r = run_ampwb("frobnicate");
  EXPECT_EQ(r.status, 2);
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
    if (r.step == step_) trainer_->stop();
  }
  void on_checkpoint(const CheckpointInfo& c) override { checkpoints.push_back(c); }
  std::vector<float> losses;
  std::vector<CheckpointInfo> checkpoints;

 private:
  Trainer*& trainer_;
  int64_t step_;
};

TEST(Checkpoints, StopMidEpochThenResumeContinuesTheSameCurveBitForBit) {
  const fs::path data = make_stripes_folder("resume", 16, 12);
  const fs::path dir = fs::temp_directory_path() / ("ampwb_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const std::string mode : {"fp32", "amp-fp16"}) {
    TrainConfig c = tiny_config(data);
    c.epochs = 3;
    c.precision = precision_preset(mode);
    Recorder whole;
    train(c, &whole);

    c.checkpoint_dir = dir.string();
    Trainer* current = nullptr;
    StopAt first(current, 4);  // epoch 2, step 1 of 3: mid-epoch
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
    EXPECT_EQ(joined, whole.losses) << mode;
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

}  // namespace
}  // namespace ampwb
