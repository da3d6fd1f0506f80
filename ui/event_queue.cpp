// EventQueue: the training thread appends under a mutex, the UI swaps the batch out.
#include "event_queue.h"

#include <utility>

namespace ampwb::ui {

void EventQueue::on_start(const RunInfo& info) {
  std::lock_guard lock(mutex_);
  pending_.started = info;
}

void EventQueue::on_step(const StepReport& step) {
  std::lock_guard lock(mutex_);
  pending_.steps.push_back(step);
}

void EventQueue::on_epoch(const EpochReport& epoch) {
  std::lock_guard lock(mutex_);
  pending_.epochs.push_back(epoch);
}

void EventQueue::on_epoch_times(const EpochTimes& times) {
  std::lock_guard lock(mutex_);
  pending_.times.push_back(times);
}

void EventQueue::on_validation(const ValidationProgress& validation) {
  std::lock_guard lock(mutex_);
  pending_.validations.push_back(validation);
}

void EventQueue::on_histogram(const GradientHistogram& histogram) {
  std::lock_guard lock(mutex_);
  pending_.histograms.push_back(histogram);
}

void EventQueue::on_layer_numerics(const std::vector<LayerNumerics>& layers) {
  std::lock_guard lock(mutex_);
  pending_.layer_numerics.insert(pending_.layer_numerics.end(), layers.begin(), layers.end());
}

void EventQueue::on_overflow(const OverflowReport& overflow) {
  std::lock_guard lock(mutex_);
  pending_.overflows.push_back(overflow);
}

void EventQueue::on_checkpoint(const CheckpointInfo& checkpoint) {
  std::lock_guard lock(mutex_);
  pending_.checkpoints.push_back(checkpoint);
}

void EventQueue::on_divergence(const PrecisionDivergence& divergence) {
  std::lock_guard lock(mutex_);
  pending_.divergence = divergence;
}

void EventQueue::on_resumed(double paused_seconds) {
  std::lock_guard lock(mutex_);
  pending_.paused_seconds += paused_seconds;
}

void EventQueue::on_end(const RunEnd& end) {
  std::lock_guard lock(mutex_);
  pending_.ended = end;
}

void EventQueue::set_run_id(int64_t id) {
  std::lock_guard lock(mutex_);
  pending_.run_id = id;
}

EventBatch EventQueue::take() {
  EventBatch out;
  std::lock_guard lock(mutex_);
  std::swap(out, pending_);
  return out;
}

}  // namespace ampwb::ui
