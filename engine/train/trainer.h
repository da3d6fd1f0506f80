// The training loop: a ResNet on an image folder, one epoch after another, evaluated every epoch. Observers receive
// plain value-type reports (the run store and the UI build on them).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "data/image_folder.h"
#include "models/resnet.h"
#include "nn/loss.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace ampwb {

struct TrainConfig {
  std::string data_dir;
  int depth = 18;
  int epochs = 3;
  int batch_size = 64;
  int image_size = 0;  // 0 = the shorter side of the data's first image, at most 224
  Stem stem = Stem::Auto;
  float lr = 0.05f;
  std::string schedule = "cosine";
  int warmup_epochs = 0;
  OptimizerConfig optimizer;
  float label_smoothing = 0.0f;
  int topk = 2;  // the seed articles report top-2
  uint64_t seed = 0;
  std::string device = "cpu";
  int threads = 0;
  double validation_fraction = 0.2;
  int64_t max_train_images = 0;
  int64_t max_steps_per_epoch = 0;  // 0 = the whole epoch (tests use small numbers)
};

// Refuses invalid settings before any work starts, naming the setting.
void validate(const TrainConfig& config);

struct RunInfo {
  std::string model_summary;
  std::string backend_description;
  int image_size = 0;
  int64_t train_images = 0, validation_images = 0;
  std::vector<std::string> class_names;
  std::string dataset_layout;
};

struct StepReport {
  int epoch = 0;
  int64_t step = 0;  // global, 0-based
  float loss = 0, accuracy = 0, lr = 0;
};

struct EpochReport {
  int epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0;
  double validation_loss = 0, validation_accuracy = 0, validation_topk = 0;
  double seconds = 0, images_per_second = 0, data_wait_seconds = 0;
  size_t peak_bytes = 0;
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const RunInfo&) {}
  virtual void on_step(const StepReport&) {}
  virtual void on_epoch(const EpochReport&) {}
};

struct StepResult {
  float loss = 0;
  int64_t correct = 0;
};

// One optimisation step on a batch: forward, loss, backward, update.
StepResult train_step(ResNet& model, SoftmaxCrossEntropy& loss, Optimizer& optimizer, const Tensor& images,
                      const Tensor& labels, float lr);

struct Evaluation {
  double loss = 0, accuracy = 0, topk_accuracy = 0;
};
Evaluation evaluate(ResNet& model, Backend& backend, ImageBatcher& data, int batch_size, int topk);

// Trains as configured; returns the last epoch's report.
EpochReport train(const TrainConfig& config, TrainObserver* observer = nullptr);

}  // namespace ampwb
