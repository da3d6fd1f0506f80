// The run summary every view shares, and the JSON of a run's row and summary.
#include "store/run_record.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "train/record_json.h"
#include "train/topk.h"

namespace ampwb {

std::vector<std::pair<std::string, std::string>> run_settings(const RunRecord& run) {
  std::vector<std::pair<std::string, std::string>> settings = config_settings(run.config);
  for (auto& [key, value] : settings)
    if (key == "image_size" && value == "0")
      value = run.image_size > 0 ? "auto (" + std::to_string(run.image_size) + " px)" : "auto";
  return settings;
}

bool is_paused(const RunRecord& run) { return run.status == RunStatus::Running && !run.info.paused_since.empty(); }

std::string run_state_words(const RunRecord& run) { return is_paused(run) ? "paused" : run_status_words(run.status); }

bool topk_reported(const RunRecord& run, const EpochReport& epoch) {
  return topk_meaningful(epoch.topk, static_cast<int64_t>(run.info.class_names.size()));
}

RunSummary summarize(const RunRecord& run, const std::vector<EpochReport>& epochs) {
  RunSummary s;
  s.total_seconds = run.duration_seconds;
  s.epochs_completed = static_cast<int>(epochs.size());
  if (epochs.empty()) return s;
  double seconds = 0, seconds_per_image = 0;
  int timed = 0;
  for (const EpochReport& e : epochs) {
    // An epoch without validation images measured none (NaN): best_epoch stays 0 if none did.
    if (std::isfinite(e.validation_accuracy) &&
        (s.best_epoch == 0 || e.validation_accuracy > s.best_validation_accuracy)) {
      s.best_validation_accuracy = e.validation_accuracy;
      s.best_epoch = e.epoch;
    }
    seconds += e.seconds;
    if (e.images_per_second > 0) seconds_per_image += 1 / e.images_per_second, ++timed;
    s.skipped_steps += e.skipped_steps;
    s.peak_bytes = std::max(s.peak_bytes, e.peak_bytes);
  }
  const EpochReport& last = epochs.back();
  s.final_validation_accuracy = last.validation_accuracy;
  s.final_validation_loss = last.validation_loss;
  s.final_train_loss = last.train_loss;
  // A run without loss scaling has no scale (its steps record 1): none, as every view says.
  if (run.config.precision.scales_loss()) s.final_loss_scale = last.loss_scale;
  s.mean_epoch_seconds = seconds / static_cast<double>(epochs.size());
  // The harmonic mean: the images trained over the time training them, as the epochs hold as many images each. An
  // arithmetic mean would let a fast epoch outweigh a slow one (119 and 902 images/s made 510, for 210).
  if (timed > 0) s.mean_images_per_second = timed / seconds_per_image;
  return s;
}

void to_json(nlohmann::json& j, const RunRecord& r) { write_fields(j, r); }
void to_json(nlohmann::json& j, const RunSummary& s) { write_fields(j, s); }

}  // namespace ampwb
