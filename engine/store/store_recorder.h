// Records a training run into the run store as it happens: a TrainObserver for the Trainer.
//
// Cost: on_step only appends to a buffer; steps reach the database in one transaction every `batch_steps` steps
// or `batch_seconds` seconds, and with each epoch, which is committed at once. What an epoch reports before its end
// (histograms, probed layers, its confusion matrix and time breakdown) waits for it likewise and goes in its
// transaction, or with the next batch of steps when one comes first. Commits survive a killed process
// without an fsync; to survive a power cut as well, epochs are fsynced at most every `sync_seconds` (an fsync costs
// milliseconds, which tiny epochs would feel) and the run's end always. docs/benchmarks.md ("Run store") has the
// measured cost against step time.
//
// Failures: a store write that fails (disk full, file made read-only, a database server gone past the retries)
// throws from the callback, so the Trainer ends the run with the store's message instead of training on unrecorded;
// everything committed before stays. Such a run is recorded interrupted, not failed (recorded_end): its training was
// sound, and its checkpoint resumes it. on_end never throws: if the end cannot be written, error() says why, and the
// run shows as interrupted the next time the store is opened.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "store/run_store.h"
#include "train/config.h"
#include "train/events.h"

namespace ampwb {

struct StoreRecorderOptions {
  size_t batch_steps = 200;    // steps per transaction at most
  double batch_seconds = 1.0;  // and at least one transaction this often
  double sync_seconds = 10.0;  // an epoch commit is fsynced when the last fsync is older than this
  // A finished run's final weights are kept beside the store (store/final_weights.h); else they are not written.
  bool keep_final_weights = true;
};

class StoreRecorder : public TrainObserver {
 public:
  // Records a run of `config` (its row is created on on_start). `store` must outlive the recorder and be used by
  // no other thread while the run goes on. With `continue_run` (a run resumed from a checkpoint) the stored run
  // is continued instead: its epochs from RunInfo::first_epoch on and its steps from the first step reported on
  // are replaced by what the resumed run reports; throws at once when that run does not exist.
  StoreRecorder(RunStore& store, TrainConfig config, StoreRecorderOptions options = {}, int64_t continue_run = 0);
  ~StoreRecorder() override;  // a run still open is given up (it shows as interrupted)
  StoreRecorder(const StoreRecorder&) = delete;
  StoreRecorder& operator=(const StoreRecorder&) = delete;

  void on_start(const RunInfo& info) override;
  void on_step(const StepReport& step) override;
  void on_epoch(const EpochReport& epoch) override;
  void on_histogram(const GradientHistogram& histogram) override;
  void on_layer_numerics(const std::vector<LayerNumerics>& layers) override;
  void on_overflow(const OverflowReport& overflow) override;
  void on_epoch_times(const EpochTimes& times) override;
  void on_confusion(const ConfusionMatrix& confusion) override;
  void on_divergence(const PrecisionDivergence& divergence) override;
  void on_checkpoint(const CheckpointInfo& checkpoint) override;
  void on_final_weights(const ModelWeights& weights) override;
  void on_note(const std::string& note) override;
  void on_paused() override;
  void on_resumed(double paused_seconds) override;
  void on_end(const RunEnd& end) override;

  int64_t run_id() const { return run_id_; }           // 0 before on_start
  const std::string& error() const { return error_; }  // the first store failure; empty when all was recorded
  // The run's end as recorded: one the store's failure ended is interrupted, with the store's reason.
  RunEnd recorded_end(const RunEnd& end) const;

 private:
  using Clock = std::chrono::steady_clock;
  void flush_steps();
  void flush_details();
  double duration() const;
  template <class F>
  void guarded(F&& f);

  RunStore* store_;
  TrainConfig config_;
  StoreRecorderOptions options_;
  int64_t run_id_ = 0;
  int64_t continue_run_ = 0;  // the stored run being continued, 0 for a new run
  bool forget_later_steps_ = false;
  double duration_before_ = 0;  // wall time of the run before it was continued
  Clock::time_point started_;
  double paused_seconds_ = 0;  // the user's pauses since started_: not the run's time
  Clock::time_point last_flush_, last_sync_;
  std::vector<StepReport> pending_;
  RunStore::EpochDetails details_;  // reported since the last commit, for the next one
  bool ended_ = false;
  std::string error_;
};

}  // namespace ampwb
