// Recording a run into the run store.
#include "store/store_recorder.h"

#include <sqlite3.h>

#include <chrono>
#include <thread>

#include "store/dataset_fingerprint.h"
#include "store/final_weights.h"
#include "store/sqlite.h"

namespace ampwb {

StoreRecorder::StoreRecorder(RunStore& store, TrainConfig config, StoreRecorderOptions options, int64_t continue_run)
    : store_(&store), config_(effective_config(std::move(config))), options_(options), continue_run_(continue_run) {
  pending_.reserve(options_.batch_steps);
  if (continue_run_ != 0) duration_before_ = store.run(continue_run_).duration_seconds;  // throws when absent
}

StoreRecorder::~StoreRecorder() {
  if (run_id_ == 0 || ended_) return;
  try {
    store_->abandon_run(run_id_);
  } catch (const StoreError&) {  // a lost connection let go of the run with itself
  }
}

namespace {
// Another process may hold the store's write lock for longer than SQLite's busy timeout (deleting a run of millions
// of steps takes seconds): a write is tried again this many timeouts before the run fails for it.
constexpr int kBusyRetries = 11;

// A PostgreSQL store's dropped connection is the same: the write is made again once the connection is (postgres.h).
bool is_busy(const StoreError& e) { return e.sqlite_code() == SQLITE_BUSY || e.connection_lost(); }
}  // namespace

// Keeps the first failure for error(), and lets it end the run. f is one transaction: a busy store ran none of it,
// so it is run again.
template <class F>
void StoreRecorder::guarded(F&& f) {
  for (int attempt = 0;; ++attempt) {
    try {
      if (run_id_ != 0 && !store_->connection().owns_run(run_id_))
        throw StoreError("run " + std::to_string(run_id_) + " is recorded by another process now");
      f();
      return;
    } catch (const StoreError& e) {
      if (is_busy(e) && attempt < kBusyRetries) {
        // A lost connection is made again at once where the server is there; a server restarting takes seconds.
        if (e.connection_lost() && attempt > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
        continue;
      }
      if (error_.empty()) error_ = e.what();
      throw;
    } catch (const std::exception& e) {
      if (error_.empty()) error_ = e.what();
      throw;
    }
  }
}

double StoreRecorder::duration() const {
  return duration_before_ + std::chrono::duration<double>(Clock::now() - started_).count() - paused_seconds_;
}

void StoreRecorder::on_start(const RunInfo& info) {
  guarded([&] {
    started_ = Clock::now();
    if (continue_run_ != 0) {
      store_->reopen_run(continue_run_, info, config_);
      run_id_ = continue_run_;
      forget_later_steps_ = true;
    } else {
      run_id_ = store_->begin_run(config_, info, dataset_fingerprint(config_.data_dir));
    }
    last_flush_ = last_sync_ = Clock::now();  // nothing is pending yet: the batch's time starts with the run's row
  });
}

void StoreRecorder::on_step(const StepReport& step) {
  if (run_id_ == 0) return;
  if (forget_later_steps_) {
    guarded([&] { store_->forget_steps_from(run_id_, step.step); });
    forget_later_steps_ = false;
  }
  pending_.push_back(step);
  const Clock::time_point now = Clock::now();
  if (pending_.size() < options_.batch_steps &&
      std::chrono::duration<double>(now - last_flush_).count() < options_.batch_seconds)
    return;
  guarded([&] {
    try {
      flush_steps();
    } catch (const StoreError& e) {
      if (!is_busy(e)) throw;
      last_flush_ = now;  // the steps wait for the next batch, or for the epoch's end, which waits longer
    }
  });
}

// The details that wait, each written on its own, as a batch of steps goes (see on_epoch): they never wait
// longer than the steps reported before them.
void StoreRecorder::flush_details() {
  for (const GradientHistogram& h : details_.histograms) store_->add_histogram(run_id_, h);
  details_.histograms.clear();  // each only once written: a failed write is tried again with the next batch
  while (!details_.layer_numerics.empty()) {
    store_->add_layer_numerics(run_id_, details_.layer_numerics.front());
    details_.layer_numerics.erase(details_.layer_numerics.begin());
  }
  for (const ConfusionMatrix& c : details_.confusions) store_->add_confusion(run_id_, c);
  details_.confusions.clear();
  for (const EpochTimes& t : details_.times) store_->add_epoch_times(run_id_, t);
  details_.times.clear();
}

void StoreRecorder::flush_steps() {
  if (!details_.empty()) flush_details();
  store_->add_steps(run_id_, pending_, duration());
  pending_.clear();  // only once committed: a failed batch is retried with the next one
  last_flush_ = Clock::now();
}

void StoreRecorder::on_epoch(const EpochReport& epoch) {
  if (run_id_ == 0) return;
  guarded([&] {
    const Clock::time_point now = Clock::now();
    const bool sync = std::chrono::duration<double>(now - last_sync_).count() >= options_.sync_seconds;
    store_->add_epoch(run_id_, epoch, pending_, duration(), sync, details_);
    pending_.clear();
    details_ = {};
    last_flush_ = Clock::now();
    if (sync) last_sync_ = last_flush_;
  });
}

void StoreRecorder::on_histogram(const GradientHistogram& histogram) {
  if (run_id_ != 0) details_.histograms.push_back(histogram);
}

void StoreRecorder::on_layer_numerics(const std::vector<LayerNumerics>& layers) {
  if (run_id_ != 0 && !layers.empty()) details_.layer_numerics.push_back(layers);
}

void StoreRecorder::on_overflow(const OverflowReport& overflow) {
  if (run_id_ == 0) return;
  guarded([&] { store_->add_overflow(run_id_, overflow); });
}

void StoreRecorder::on_epoch_times(const EpochTimes& times) {
  if (run_id_ != 0) details_.times.push_back(times);
}

void StoreRecorder::on_confusion(const ConfusionMatrix& confusion) {
  if (run_id_ != 0) details_.confusions.push_back(confusion);
}

void StoreRecorder::on_divergence(const PrecisionDivergence& divergence) {
  if (run_id_ == 0) return;
  guarded([&] { store_->add_divergence(run_id_, divergence); });
}

void StoreRecorder::on_checkpoint(const CheckpointInfo& checkpoint) {
  if (run_id_ == 0) return;
  guarded([&] { store_->add_checkpoint(run_id_, checkpoint); });
}

void StoreRecorder::on_final_weights(const ModelWeights& weights) {
  if (run_id_ == 0) return;
  if (options_.keep_final_weights)
    guarded([&] {
      try {
        keep_final_weights(*store_, run_id_, weights);
      } catch (const StoreError&) {
        throw;
      } catch (const Error& e) {  // the file, on a full disk say: the run's results stand without it
        store_->add_note(run_id_, std::string(kFinalWeightsNotWrittenNote) + ": " + e.what());
      }
    });
  else  // said, so that a refusal to predict with the run can say why it has none
    guarded([&] { store_->add_note(run_id_, kFinalWeightsNotKeptNote); });
}

void StoreRecorder::on_note(const std::string& note) {
  if (run_id_ == 0) return;
  guarded([&] { store_->add_note(run_id_, note); });
}

// A pause written for other readers to see: a store out of reach then only leaves them saying "running", so it
// never ends the run as a failed write of its records would.
void StoreRecorder::on_paused() {
  if (run_id_ == 0) return;
  try {
    store_->set_paused(run_id_, true);
  } catch (const StoreError&) {
  }
}

void StoreRecorder::on_resumed(double paused_seconds) {
  paused_seconds_ += paused_seconds;
  if (run_id_ == 0) return;
  try {
    store_->set_paused(run_id_, false);
  } catch (const StoreError&) {
  }
}

RunEnd StoreRecorder::recorded_end(const RunEnd& end) const {
  // Only a recorded run the store's failure ended: not one that failed on its own before its end could not be
  // written, nor one whose record never began.
  if (run_id_ == 0 || error_.empty() || end.status != RunStatus::Failed || end.reason != error_) return end;
  return RunEnd(RunStatus::Interrupted, "the run store could not record it: " + error_);
}

void StoreRecorder::on_end(const RunEnd& end) {
  if (run_id_ == 0 || ended_) return;
  ended_ = true;
  try {
    guarded([&] {
      flush_details();  // an epoch cut short: what it reported before its end
      store_->end_run(run_id_, recorded_end(end), pending_, duration());
    });
    pending_.clear();
  } catch (const std::exception&) {
    // error() holds the message; without an end row the next open marks the run interrupted.
    try {
      store_->abandon_run(run_id_);
    } catch (const StoreError&) {  // a lost connection let go of the run with itself
    }
  }
}

}  // namespace ampwb
