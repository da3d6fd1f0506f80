// Everything that defines a training run, as one value type with a JSON form (the run store keeps it, the CLI and
// the UI fill it). Defaults are the engine-foundation recipe; validate() refuses bad settings by name.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "amp/precision.h"
#include "models/resnet.h"
#include "optim/optimizer.h"

namespace ampwb {

struct DataConfig {
  double validation_fraction = 0.2;
  int64_t max_train_images = 0;           // 0 = all
  bool augment = false;                   // random crop and horizontal flip for training
  std::string normalization = "dataset";  // dataset (statistics computed once) or imagenet
  bool drop_last = false;
  int64_t cache_budget_mb = 2048;
  int loader_threads = 0;  // 0 = the training threads
};

struct TrainConfig {
  std::string name;
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
  float grad_clip_norm = 0.0f;  // 0 = no clipping; applied to unscaled gradients
  int topk = 2;                 // the seed articles report top-2
  uint64_t seed = 0;
  std::string device = "cpu";
  int threads = 0;
  PrecisionConfig precision;
  DataConfig data;
  int64_t max_steps_per_epoch = 0;        // 0 = the whole epoch (tests use small numbers)
  int64_t max_consecutive_skipped = 100;  // a run that skips this many steps in a row is stopped
  std::string checkpoint_dir;             // empty = no checkpoints
  std::string resume_from;                // a checkpoint file to continue from (not part of the run's identity)
};

// Refuses invalid settings before any work starts, naming the setting.
void validate(const TrainConfig& config);
// The settings that depend on the data (top-k within the class count, a batch no larger than the training split);
// throws ampwb::Error with a message for the user.
void validate_for_data(const TrainConfig& c, int64_t classes, int64_t train_images);

void to_json(nlohmann::json& j, const TrainConfig& c);
void from_json(const nlohmann::json& j, TrainConfig& c);

}  // namespace ampwb
