// A run's events as lines of JSON, one event a line: what `ampwb train --events-json` prints so that another
// process (the GUI, following a run on many processes it started) sees the run as an observer of it would. The
// writer is a TrainObserver; the reader replays each line into a TrainObserver. Histograms and per-layer numerics
// are left out (they are recorded in the run store): the lines carry what live progress and charts need.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "train/events.h"

namespace ampwb {

class EventLineWriter : public TrainObserver {
 public:
  // `run_id`: the stored run's id, asked when the run starts (0 where it has none).
  EventLineWriter(std::FILE* out, std::function<int64_t()> run_id) : out_(out), run_id_(std::move(run_id)) {}

  void on_start(const RunInfo& info) override;
  void on_step(const StepReport& step) override;
  void on_epoch(const EpochReport& epoch) override;
  void on_validation(const ValidationProgress& validation) override;
  void on_overflow(const OverflowReport& overflow) override;
  void on_epoch_times(const EpochTimes& times) override;
  void on_checkpoint(const CheckpointInfo& checkpoint) override;
  void on_note(const std::string& note) override;
  void on_end(const RunEnd& end) override;

 private:
  void write(const std::string& line);
  std::FILE* out_;
  std::function<int64_t()> run_id_;
};

// What the start line says beside the RunInfo: the stored run and the process that writes the lines (rank 0 under
// mpirun: a signal to it stops every rank after the same step, with a checkpoint).
struct EventLinesStart {
  int64_t run_id = 0;
  int64_t pid = 0;
};

// Replays one line of EventLineWriter's into `observer`. Returns the start line's EventLinesStart (zeros for any other
// line); a line that is no event (other output) is ignored. Throws ampwb::Error for an event it cannot read.
EventLinesStart replay_event_line(const std::string& line, TrainObserver& observer);

}  // namespace ampwb
