// One training run driven from the UI, after the Qt Mandelbrot example's render thread: the Trainer runs on its
// own std::thread; its events are recorded into the run store (StoreRecorder, on the training thread) and copied
// into an EventQueue, which a ~40 ms QTimer on the UI thread drains into value-type EventBatch signals. The UI
// thread never waits on the trainer, except when destroying a session whose run is still going.
// A run on many processes is `ampwb train --processes N` in a child process (docs/distributed.md): its events come
// as JSON lines on the child's stdout (--events-json), are replayed into the same EventQueue and delivered alike.
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>
#include <memory>

#include "event_queue.h"
#include "train/config.h"
#include "train/events.h"

namespace ampwb::ui {

class TrainingSession : public QObject {
  Q_OBJECT
 public:
  static constexpr int kDrainIntervalMs = 40;

  // `db_path`: the run store every run is recorded into (the session opens its own connection per run).
  explicit TrainingSession(QString db_path, QObject* parent = nullptr);
  ~TrainingSession() override;  // a run still going is cancelled and waited for

  // Starts a run. `continue_run` (a stored run id) continues that run from config.resume_from, recording into
  // the same row. Throws ampwb::Error (invalid settings, unusable store) before anything starts.
  void start(const TrainConfig& config, int64_t continue_run = 0);
  // Starts a new run on `processes` (> 1) processes of one mpirun, recorded by its rank 0 into the same store. Pause
  // does nothing there; stop signals the processes as Ctrl-C would (a checkpoint when the run has its folder).
  // Throws ampwb::Error (invalid settings, the child not started) before anything starts.
  // `continue_run`: a stored run trained by as many processes, resumed from its checkpoint (its stored configuration).
  void start_processes(const TrainConfig& config, int processes, int64_t continue_run = 0);
  // The ampwb the child runs: this program by default (QCoreApplication::applicationFilePath); tests name the CLI.
  void set_executable(QString path) { executable_ = std::move(path); }
  // Whether the runs started from now on keep their final weights when they finish (store/final_weights.h).
  void set_keep_final_weights(bool keep) { keep_final_weights_ = keep; }
  void pause();
  void resume();
  void stop();    // after the current step; saves a checkpoint when the run has a checkpoint folder
  void cancel();  // as soon as possible, no checkpoint
  // Blocks until the run has ended and its last events were delivered (closing the window, tests).
  void wait();

  bool running() const { return static_cast<bool>(run_) || static_cast<bool>(child_); }
  bool in_child() const { return static_cast<bool>(child_); }  // a run on many processes: cannot be paused
  bool paused() const;
  int64_t run_id() const { return run_id_; }
  const TrainConfig& config() const { return config_; }
  const QString& db_path() const { return db_path_; }

 Q_SIGNALS:
  void events(const ampwb::ui::EventBatch& batch);  // at most every kDrainIntervalMs
  // After the last events: how it ended and, when the store failed, why (empty when all was recorded).
  void finished(qint64 run_id, const ampwb::RunEnd& end, const QString& store_error);

 private:
  void drain();
  void read_child_output();
  void child_ended();
  struct Run;  // the store connection, recorder, queue and trainer of the current run
  struct Child;  // the child process of a run on many processes, its queue and what it said on stderr
  std::unique_ptr<Child> child_;
  QString executable_;
  bool keep_final_weights_ = true;
  QString db_path_;
  QTimer timer_;
  std::unique_ptr<Run> run_;
  TrainConfig config_;
  int64_t run_id_ = 0;
};

}  // namespace ampwb::ui

Q_DECLARE_METATYPE(ampwb::ui::EventBatch)
Q_DECLARE_METATYPE(ampwb::RunEnd)
