// Several observers behind one: every event handed to each in order. The one place a new TrainObserver callback
// must be passed on (the CLI's recorder and console, the GUI's recorder and event queue).
#pragma once

#include <vector>

#include "train/events.h"

namespace ampwb {

class ObserverList : public TrainObserver {
 public:
  explicit ObserverList(std::vector<TrainObserver*> observers) : observers_(std::move(observers)) {}

  void on_start(const RunInfo& e) override { each(&TrainObserver::on_start, e); }
  void on_step(const StepReport& e) override { each(&TrainObserver::on_step, e); }
  void on_epoch(const EpochReport& e) override { each(&TrainObserver::on_epoch, e); }
  void on_validation(const ValidationProgress& e) override { each(&TrainObserver::on_validation, e); }
  void on_histogram(const GradientHistogram& e) override { each(&TrainObserver::on_histogram, e); }
  void on_layer_numerics(const std::vector<LayerNumerics>& e) override { each(&TrainObserver::on_layer_numerics, e); }
  void on_overflow(const OverflowReport& e) override { each(&TrainObserver::on_overflow, e); }
  void on_epoch_times(const EpochTimes& e) override { each(&TrainObserver::on_epoch_times, e); }
  void on_confusion(const ConfusionMatrix& e) override { each(&TrainObserver::on_confusion, e); }
  void on_divergence(const PrecisionDivergence& e) override { each(&TrainObserver::on_divergence, e); }
  void on_checkpoint(const CheckpointInfo& e) override { each(&TrainObserver::on_checkpoint, e); }
  void on_final_weights(const ModelWeights& e) override { each(&TrainObserver::on_final_weights, e); }
  void on_note(const std::string& e) override { each(&TrainObserver::on_note, e); }
  void on_paused() override {
    for (TrainObserver* o : observers_) o->on_paused();
  }
  void on_resumed(double seconds) override {
    for (TrainObserver* o : observers_) o->on_resumed(seconds);
  }
  void on_end(const RunEnd& e) override { each(&TrainObserver::on_end, e); }

 protected:
  template <class Event>
  void each(void (TrainObserver::*handler)(const Event&), const Event& e) {
    for (TrainObserver* o : observers_) (o->*handler)(e);
  }
  std::vector<TrainObserver*> observers_;
};

}  // namespace ampwb
