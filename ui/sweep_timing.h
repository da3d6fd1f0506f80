// A finished sweep's configurations timed in alternation (train/alternating_benchmark.h) on a worker thread, the
// way benchmarks are timed, so that its speed-up does not depend on what else the machine did while each run
// trained. The result goes into the store with each run (RunStore::add_alternating_speed); the comparison shows it.
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "store/run_store.h"
#include "train/alternating_benchmark.h"

namespace ampwb::ui {

class SweepTiming : public QObject {
  Q_OBJECT
 public:
  // Starts timing the runs (finished runs of one sweep, from `store`).
  SweepTiming(const RunStore& store, std::vector<int64_t> runs, const AlternatingOptions& options = {},
              QObject* parent = nullptr);
  ~SweepTiming() override;  // stops between two configurations' turns, and waits
  void stop();              // stops between two turns; finished() still comes, with the rounds done

 Q_SIGNALS:
  void progress(const QString& what);  // "round 2/6: amp-bf16 · seed 0"
  // Done: the record to store, or what went wrong (empty when nothing did).
  void finished(const AlternatingSpeed& timed, const QString& error);

 private:
  std::atomic<bool> cancel_{false};
  std::atomic<bool> closing_{false};  // the destructor runs: nothing more is signalled
  std::thread worker_;
};

}  // namespace ampwb::ui
