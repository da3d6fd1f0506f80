// What the run store keeps about a run, as value types: the run's row, and the summary every view (runs list,
// show, compare, CSV export, the GUI) derives from its epochs through one function, so they never disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "train/events.h"

namespace ampwb {

struct RunRecord {
  int64_t id = 0;
  std::string name;
  std::string created, updated, ended;  // ISO 8601 UTC ("2026-11-21T17:16:10Z"); ended is empty while running
  RunStatus status = RunStatus::Running;
  std::string end_reason;   // why it failed, was cancelled or interrupted; empty when finished
  std::string config_json;  // the full TrainConfig (see train/config.h to_json)
  // The main knobs, copied out of the configuration so that lists and queries need not parse JSON.
  int depth = 0;
  std::string precision;  // the precision mode, e.g. "amp-fp16"
  int batch_size = 0;
  double lr = 0;
  std::string optimizer;
  int epochs = 0;      // planned
  int image_size = 0;  // as trained (the resolved size, not "auto")
  uint64_t seed = 0;
  std::string dataset_path, dataset_fingerprint;
  std::string device;   // "cpu", "cuda", ...
  std::string backend;  // the backend's description: library versions, CPU ISA or GPU name
  std::string ampwb_version;
  std::string versions;  // ampwb, SQLite and compiler versions of the recording build
  std::string host;
  int64_t pid = 0;              // of the recording process
  std::string info_json;        // the RunInfo: model summary, image counts, classes, steps per epoch
  double duration_seconds = 0;  // wall time recorded so far
  std::string notes;
  std::vector<std::string> tags;
};

struct RunSummary {
  int epochs_completed = 0;
  double best_validation_accuracy = 0;
  int best_epoch = 0;  // 0 when no epoch completed
  double final_validation_accuracy = 0, final_validation_loss = 0, final_train_loss = 0;
  double total_seconds = 0;           // the run's wall time (RunRecord::duration_seconds)
  double mean_epoch_seconds = 0;      // training and evaluation
  double mean_images_per_second = 0;  // training throughput, mean over epochs
  int64_t skipped_steps = 0;
  double final_loss_scale = 0;  // 0 when no epoch completed
  size_t peak_bytes = 0;        // the largest epoch peak
};

RunSummary summarize(const RunRecord& run, const std::vector<EpochReport>& epochs);

}  // namespace ampwb
