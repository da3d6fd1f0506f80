// What a training run reports while it runs: plain value types handed to a TrainObserver on the training thread,
// each with its field list (train/record_fields.h). The run store records them; the UI copies them into queued
// signals; JSON, CSV and the store's columns are made from the field lists.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "amp/gradient_histogram.h"
#include "dist/launch.h"
#include "train/record_fields.h"
#include "train/run_details.h"

namespace ampwb {

enum class RunStatus { Running, Finished, Failed, Cancelled, Interrupted };
const char* run_status_name(RunStatus s);   // as stored: "running", "finished", "cancelled", ...
const char* run_status_words(RunStatus s);  // as people read it: a cancelled run is "stopped", as its button says
// "stopped by the user at epoch 3 …", "failed: out of memory": the status and why, its word said once.
std::string run_end_words(RunStatus s, const std::string& reason);

struct RunInfo {
  std::string model_summary;
  std::string backend_description;  // device, library versions, ISA or GPU name
  std::string precision_summary;    // the resolved policy, e.g. "amp-fp16: conv/linear in f16, ..."
  std::string compute;              // what computes the low-precision ops here, e.g. "BF16: native on AMX tiles (...)"
  int image_size = 0;
  int64_t train_images = 0, validation_images = 0;
  std::vector<std::string> class_names;
  std::string dataset_layout;
  int64_t steps_per_epoch = 0;
  int first_epoch = 1;             // > 1 when resumed
  std::vector<std::string> notes;  // advice for the user, e.g. BF16 slower than FP32 on this CPU
  // The run's memory estimate against what was available (train/memory_estimate.h): printed, not stored (not in
  // the field list), since it describes this machine at this moment.
  std::string memory;
  int64_t first_step = 0;  // global: > 0 when resumed, where the checkpoint left off (within first_epoch or before it)
  // The processes training the run together (data-parallel: each takes its shard of every batch) and what started
  // them; the batch size is each one's.
  int world_size = 1;
  Launcher launcher = Launcher::Single;
  // The file of the run's final weights, kept when it finished (store/final_weights.h); empty when none was kept.
  std::string final_weights;
  // While the user has paused the running run: since when (UTC, ISO 8601), for every reader of its store to say
  // (RunStore::set_paused); empty otherwise.
  std::string paused_since;
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
  double wall_seconds = 0;  // since the run started; a resumed run's goes on from its checkpoint's (the time
                            // between the processes left out)
};

struct EpochReport {
  int epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0;
  double validation_loss = 0, validation_accuracy = 0, validation_topk = 0;
  int topk = 2;  // 0: top-k not reported (k covers every class: every image would count), validation_topk NaN
  double seconds = 0, images_per_second = 0;
  double data_wait_seconds = 0, compute_seconds = 0;
  int64_t skipped_steps = 0;
  double loss_scale = 1;  // at the end of the epoch
  size_t peak_bytes = 0;
};

// Validation under way at the end of an epoch: reported before its first batch and after each, so that a long
// validation says how far it has come. Not recorded (the epoch's report holds the result), so it has no field list.
struct ValidationProgress {
  int epoch = 0;
  int64_t images_done = 0, images = 0;  // of this validation: images == RunInfo::validation_images
  double seconds = 0;                   // since this validation began
};

// --- the field lists: keys as the run store has always kept them (its columns, its info JSON) ---

template <class R, class V>
requires same_record<R, RunInfo>
void fields(R& i, V&& v) {
  v("model", i.model_summary);
  v("backend", i.backend_description);
  v("precision", i.precision_summary);
  v("compute", i.compute);
  v("image_size", i.image_size);
  v("train_images", i.train_images);
  v("validation_images", i.validation_images);
  v("classes", i.class_names);
  v("layout", i.dataset_layout);
  v("steps_per_epoch", i.steps_per_epoch);
  v("first_epoch", i.first_epoch);
  v("notes", i.notes);
  v("first_step", i.first_step);  // absent before 2026-12-01: 0
  v("world_size", i.world_size);  // absent before 2026-12-02: one process
  v("launcher", i.launcher);
  v("final_weights", i.final_weights);  // absent before 2026-12-02: none kept
  v("paused_since", i.paused_since);    // absent: not paused
}

template <class R, class V>
requires same_record<R, StepReport>
void fields(R& s, V&& v) {
  v("epoch", s.epoch);
  v("step", s.step);
  v("loss", s.loss);
  v("accuracy", s.accuracy);
  v({"lr", "learning_rate"}, s.lr);
  v("loss_scale", s.loss_scale);
  v("skipped", s.skipped);
  v("grad_norm", s.grad_norm);
  v("wall_seconds", s.wall_seconds);
}

template <class R, class V>
requires same_record<R, EpochReport>
void fields(R& e, V&& v) {
  v("epoch", e.epoch);
  v("train_loss", e.train_loss);
  v("train_accuracy", e.train_accuracy);
  v("validation_loss", e.validation_loss);
  v("validation_accuracy", e.validation_accuracy);
  v({"validation_topk", "validation_topk_accuracy"}, e.validation_topk);
  v("topk", e.topk);
  v("seconds", e.seconds);
  v("images_per_second", e.images_per_second);
  v("data_wait_seconds", e.data_wait_seconds);
  v("compute_seconds", e.compute_seconds);
  v("skipped_steps", e.skipped_steps);
  v("loss_scale", e.loss_scale);
  v("peak_bytes", e.peak_bytes);
}

// JSON from the field lists (train/records_json.cpp); reading refuses a value that does not fit by name.
void to_json(nlohmann::json& j, const RunInfo& info);
void from_json(const nlohmann::json& j, RunInfo& info);
void to_json(nlohmann::json& j, const StepReport& step);
void from_json(const nlohmann::json& j, StepReport& step);
void to_json(nlohmann::json& j, const EpochReport& epoch);
void from_json(const nlohmann::json& j, EpochReport& epoch);
void to_json(nlohmann::json& j, const RunStatus& status);    // its name, "finished"
void from_json(const nlohmann::json& j, RunStatus& status);  // an unknown name throws ampwb::Error
RunStatus parse_run_status(const std::string& name);         // likewise

struct CheckpointInfo {
  int resume_epoch = 0;  // the epoch a resume trains next: one past the last for a checkpoint written at the end
  int64_t step = 0;
  std::string path;
};

struct RunEnd {
  RunEnd() = default;
  RunEnd(RunStatus status, std::string reason, std::string setting = {})
      : status(status), reason(std::move(reason)), setting(std::move(setting)) {}
  RunStatus status = RunStatus::Finished;
  std::string reason;   // empty when finished normally
  std::string setting;  // when a setting was refused: its key (core/setting_error.h), for the front end to name it
};

struct ModelWeights;  // train/model_weights.h

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const RunInfo&) {}
  virtual void on_step(const StepReport&) {}
  virtual void on_epoch(const EpochReport&) {}
  virtual void on_validation(const ValidationProgress&) {}  // before the epoch's on_epoch
  virtual void on_histogram(const GradientHistogram&) {}
  virtual void on_layer_numerics(const std::vector<LayerNumerics>&) {}  // every probed layer of one step
  virtual void on_overflow(const OverflowReport&) {}                    // with each skipped step
  virtual void on_epoch_times(const EpochTimes&) {}                     // before the epoch's on_epoch
  virtual void on_confusion(const ConfusionMatrix&) {}                  // likewise
  // Once, after the last epoch of a finished run in a low-precision mode (train/divergence_step.h).
  virtual void on_divergence(const PrecisionDivergence&) {}
  virtual void on_checkpoint(const CheckpointInfo&) {}
  // Once, when the run has finished its last epoch, before anything else touches the model: its trained network and
  // preprocessing (train/model_weights.h), for the store to keep (rank 0 only).
  virtual void on_final_weights(const ModelWeights&) {}
  // Something the run met on the way that its record should say (images that vanished mid-run): one more of
  // RunInfo's notes.
  virtual void on_note(const std::string&) {}
  // The user paused the run (between two steps), and after the pause how long it lasted, which the run's time
  // trained (its epochs', its duration) leaves out; its steps' wall clock goes on through it.
  virtual void on_paused() {}
  virtual void on_resumed(double /*paused_seconds*/) {}
  virtual void on_end(const RunEnd&) {}
};

}  // namespace ampwb
