// What a training run reports while it runs: plain value types handed to a TrainObserver on the training thread.
// The run store records them; the UI copies them into queued signals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "amp/gradient_histogram.h"

namespace ampwb {

enum class RunStatus { Running, Finished, Failed, Cancelled, Interrupted };
const char* run_status_name(RunStatus s);  // "running", "finished", ...

struct RunInfo {
  std::string model_summary;
  std::string backend_description;  // device, library versions, ISA or GPU name
  std::string precision_summary;    // the resolved policy, e.g. "amp-fp16: conv/linear in f16, ..."
  std::string compute;              // what computes the low-precision ops here, e.g. "BF16: native on AMX tiles (...)"
  int image_size = 0;
  int64_t train_images = 0, validation_images = 0;
  std::vector<std::string> class_names;
  std::string dataset_layout;
  std::string dataset_fingerprint;  // stable across runs while the data is unchanged
  std::string dataset_report;       // the dataset report as JSON text (counts, skipped files and why)
  int64_t steps_per_epoch = 0;
  int first_epoch = 1;             // > 1 when resumed
  std::vector<std::string> notes;  // advice for the user, e.g. BF16 slower than FP32 on this CPU
};

struct StepReport {
  int epoch = 0;
  int64_t step = 0;    // global, 0-based
  float loss = 0;      // unscaled
  float accuracy = 0;  // top-1 on this batch
  float lr = 0;
  float loss_scale = 1;     // the scale used for this step
  bool skipped = false;     // non-finite gradients: the optimizer step was skipped
  float grad_norm = 0;      // L2 norm of the unscaled gradients (inf/NaN when skipped)
  double wall_seconds = 0;  // since the run started
};

struct EpochReport {
  int epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0;
  double validation_loss = 0, validation_accuracy = 0, validation_topk = 0;
  int topk = 2;
  double seconds = 0, images_per_second = 0;
  double data_wait_seconds = 0, compute_seconds = 0;
  int64_t skipped_steps = 0;
  double loss_scale = 1;  // at the end of the epoch
  size_t peak_bytes = 0;
};

struct CheckpointInfo {
  int epoch = 0;
  int64_t step = 0;
  std::string path;
};

struct RunEnd {
  RunStatus status = RunStatus::Finished;
  std::string reason;  // empty when finished normally
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const RunInfo&) {}
  virtual void on_step(const StepReport&) {}
  virtual void on_epoch(const EpochReport&) {}
  virtual void on_histogram(const GradientHistogram&) {}
  virtual void on_checkpoint(const CheckpointInfo&) {}
  virtual void on_end(const RunEnd&) {}
};

}  // namespace ampwb
