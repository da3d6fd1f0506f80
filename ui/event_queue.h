// The hand-over between the training thread and the UI: a TrainObserver that copies every event into a
// mutex-protected queue, and the value-type batch the UI takes out of it on its timer (PlotJuggler-style: the
// producer never waits on the UI, the UI never waits on the producer). Plain C++: no Qt types.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "train/events.h"
#include "train/run_details.h"

namespace ampwb::ui {

// Everything reported since the last take(), in arrival order within each kind.
struct EventBatch {
  std::optional<RunInfo> started;
  int64_t run_id = 0;  // the stored run, once the recorder has created it (0 = not known yet)
  std::vector<StepReport> steps;
  std::vector<EpochReport> epochs;
  std::vector<ValidationProgress> validations;  // an epoch's validation under way, batch after batch
  std::vector<GradientHistogram> histograms;
  std::vector<LayerNumerics> layer_numerics;  // the probed steps' layers, step after step
  std::vector<OverflowReport> overflows;      // the skipped steps' forensics (the scale-collapse alarm)
  std::vector<EpochTimes> times;              // each epoch's time breakdown and the machine's load
  std::vector<CheckpointInfo> checkpoints;
  std::optional<PrecisionDivergence> divergence;  // at the end of a finished low-precision run
  std::optional<RunEnd> ended;
  double paused_seconds = 0;  // the user's pauses that ended since the last batch: before this batch's steps

  bool empty() const { return validations.empty() && paused_seconds == 0 && nothing_but_progress(); }
  // Validation progress alone, or nothing: what no chart draws.
  bool nothing_but_progress() const {
    return !started && run_id == 0 && steps.empty() && epochs.empty() && histograms.empty() && layer_numerics.empty() &&
           overflows.empty() && times.empty() && checkpoints.empty() && !divergence && !ended;
  }
};

class EventQueue : public TrainObserver {
 public:
  void on_start(const RunInfo& info) override;
  void on_step(const StepReport& step) override;
  void on_epoch(const EpochReport& epoch) override;
  void on_validation(const ValidationProgress& validation) override;
  void on_histogram(const GradientHistogram& histogram) override;
  void on_layer_numerics(const std::vector<LayerNumerics>& layers) override;
  void on_overflow(const OverflowReport& overflow) override;
  void on_epoch_times(const EpochTimes& times) override;
  void on_checkpoint(const CheckpointInfo& checkpoint) override;
  void on_divergence(const PrecisionDivergence& divergence) override;
  void on_resumed(double paused_seconds) override;
  void on_end(const RunEnd& end) override;
  void set_run_id(int64_t id);

  // Moves out what has arrived; cheap (a swap under the lock), so the training thread is held for microseconds.
  EventBatch take();

 private:
  std::mutex mutex_;
  EventBatch pending_;
};

}  // namespace ampwb::ui
