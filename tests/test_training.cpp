// End-to-end training on real PNG files written at test time: loss falls and accuracy rises, runs are
// reproducible, and the ampwb command line trains, benchmarks and refuses bad settings with clear messages.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/rng.h"
#include "train/trainer.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;

// Two classes any model can separate: horizontal and vertical stripes, random phase and noise.
fs::path make_stripes_folder(const std::string& name, int per_class, int size) {
  const fs::path root = fs::temp_directory_path() / ("ampwb_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(root);
  Rng rng(5);
  for (const char* cls : {"horizontal stripes", "vertical stripes"}) {
    fs::create_directories(root / cls);
    for (int i = 0; i < per_class; ++i) {
      cv::Mat img(size, size, CV_8UC3);
      const int phase = static_cast<int>(rng.below(4));
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x) {
          const int coord = cls[0] == 'h' ? y : x;
          const int base = ((coord + phase) / 2) % 2 ? 200 : 50;
          for (int c = 0; c < 3; ++c)
            img.at<cv::Vec3b>(y, x)[c] = static_cast<uint8_t>(std::clamp(base + static_cast<int>(rng.normal() * 30), 0, 255));
        }
      cv::imwrite((root / cls / (std::to_string(i) + ".png")).string(), img);
    }
  }
  return root;
}

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
  c.validation_fraction = 0.25;
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
  const Result text = run_ampwb("train --data '" + data.string() + "' --depth 20 --epochs 2 --batch-size 4 --threads 2");
  EXPECT_EQ(text.status, 0) << text.output;
  EXPECT_NE(text.output.find("epoch 2/2"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("img/s"), std::string::npos);
  const Result json = run_ampwb("train --data '" + data.string() + "' --depth 20 --epochs 1 --batch-size 4 --json");
  EXPECT_EQ(json.status, 0) << json.output;
  EXPECT_NE(json.output.find("\"final_validation_accuracy\""), std::string::npos) << json.output;
  fs::remove_all(data);
}

TEST(Cli, BenchReportsThroughputAndMemoryAsJson) {
  const Result r = run_ampwb("bench --depth 20 --image-size 16 --batch-size 4 --steps 2 --warmup 1 --classes 10 --json");
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
