// What the run store keeps about a run, as value types with their field lists (train/record_fields.h): the run's
// row, with its configuration and run information typed (parsed once, by the store), and the summary every view
// (runs list, show, compare, CSV export, the GUI) derives from its epochs through one function, so they never
// disagree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/device_choice.h"
#include "train/config.h"
#include "train/events.h"
#include "train/record_fields.h"

namespace ampwb {

struct RunRecord {
  int64_t id = 0;
  std::string name;
  std::string created, updated, ended;  // ISO 8601 UTC ("2026-11-21T17:16:10Z"); ended is empty while running
  RunStatus status = RunStatus::Running;
  std::string end_reason;  // why it failed, was cancelled or interrupted; empty when finished
  // The main knobs, copied out of the configuration so that lists and queries need no JSON (the precision mode and
  // the optimizer are the configuration's own, written through to their columns).
  int depth = 0;
  int batch_size = 0;
  double lr = 0;
  int epochs = 0;      // planned
  int image_size = 0;  // as trained (the resolved size, not "auto")
  uint64_t seed = 0;
  std::string dataset_path, dataset_fingerprint;
  DeviceChoice device;  // the device that ran: cpu or cuda:N, never auto
  std::string backend;  // the backend's description: library versions, CPU ISA or GPU name
  std::string ampwb_version;
  std::string versions;  // ampwb, SQLite and compiler versions of the recording build
  std::string host;
  int64_t pid = 0;              // of the recording process
  double duration_seconds = 0;  // wall time recorded so far
  std::string notes;
  std::vector<std::string> tags;

  TrainConfig config;  // the full configuration (defaults where an older version stored less)
  RunInfo info;        // model summary, image counts, classes, steps per epoch (empty for rows of schema 1)
  // Why the stored configuration or run information could not be read (a damaged or hand-edited row); empty when
  // they were. The row is still listed; its unreadable parts keep their defaults.
  std::string unreadable;

  // The precision mode's name, e.g. "amp-fp16".
  std::string precision_name() const { return mode_name(config.precision.mode); }
  // The images of one step in all: each of the processes that trained it together took batch_size.
  int64_t global_batch_size() const { return int64_t{batch_size} * std::max(info.world_size, 1); }
};

// A running run its user has paused (RunInfo::paused_since).
bool is_paused(const RunRecord& run);
// Its status as people read it (run_status_words), or "paused" for a paused run.
std::string run_state_words(const RunRecord& run);
// Whether an epoch's top-k accuracy says anything (train/topk.h): runs recorded before the engine left out a k that
// covers every class hold 100% there.
bool topk_reported(const RunRecord& run, const EpochReport& epoch);

// The run's configuration as config_settings lists it, the image size asked for as the data's own (stored as 0) said
// with the size it came to: "auto (28 px)".
std::vector<std::pair<std::string, std::string>> run_settings(const RunRecord& run);

// What a run measured, over its completed epochs. A value it never measured is NaN (no completed epoch; validation
// without validation images), so that tables show "-", JSON null and CSV "nan", and means leave it out.
struct RunSummary {
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  int epochs_completed = 0;
  double best_validation_accuracy = kNone;
  int best_epoch = 0;  // 0 when no epoch measured validation
  double final_validation_accuracy = kNone, final_validation_loss = kNone, final_train_loss = kNone;
  double total_seconds = 0;               // the run's wall time (RunRecord::duration_seconds)
  double mean_epoch_seconds = kNone;      // training and evaluation
  double mean_images_per_second = kNone;  // training throughput over the epochs: images / time training them
  int64_t skipped_steps = 0;
  double final_loss_scale = kNone;
  size_t peak_bytes = 0;  // the largest epoch peak
};

RunSummary summarize(const RunRecord& run, const std::vector<EpochReport>& epochs);

// --- the field lists: keys are the store's column names (and the CLI's JSON keys) ---

// The row's own columns; config and info are stored as JSON text beside them (config_json, info_json).
template <class R, class V>
requires same_record<R, RunRecord>
void fields(R& r, V&& v) {
  v({"id", "run_id"}, r.id);
  v("name", r.name);
  v("created", r.created);
  v("updated", r.updated);
  v("ended", r.ended);
  v("status", r.status);
  v("end_reason", r.end_reason);
  v("depth", r.depth);
  v("precision", r.config.precision.mode);  // the configuration's; read back before it, kept if it is unreadable
  v("batch_size", r.batch_size);
  v({"lr", "learning_rate"}, r.lr);
  v("optimizer", r.config.optimizer.kind);
  v({"epochs", "epochs_planned"}, r.epochs);
  v({"image_size", "image_size_pixels"}, r.image_size);
  v("seed", r.seed);
  v("dataset_path", r.dataset_path);
  v("dataset_fingerprint", r.dataset_fingerprint);
  v("device", r.device);
  v("backend", r.backend);
  v("ampwb_version", r.ampwb_version);
  v("versions", r.versions);
  v("host", r.host);
  v("pid", r.pid);
  v("duration_seconds", r.duration_seconds);
  v("notes", r.notes);
  v("tags", r.tags);
}

template <class R, class V>
requires same_record<R, RunSummary>
void fields(R& s, V&& v) {
  v("epochs_completed", s.epochs_completed);
  v("best_validation_accuracy", s.best_validation_accuracy);
  v("best_epoch", s.best_epoch);
  v("final_validation_accuracy", s.final_validation_accuracy);
  v("final_validation_loss", s.final_validation_loss);
  v("final_train_loss", s.final_train_loss);
  v("total_seconds", s.total_seconds);
  v("mean_epoch_seconds", s.mean_epoch_seconds);
  v("mean_images_per_second", s.mean_images_per_second);
  v("skipped_steps", s.skipped_steps);
  v("final_loss_scale", s.final_loss_scale);
  v("peak_bytes", s.peak_bytes);
}

// JSON from the field lists: the row's columns only (not config and info, which have their own).
void to_json(nlohmann::json& j, const RunRecord& r);
void to_json(nlohmann::json& j, const RunSummary& s);

}  // namespace ampwb
