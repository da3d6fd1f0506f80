// TrainingSession: the trainer on its thread, the store recorder and the event queue behind one observer, and the
// UI-side timer that drains the queue.
#include "training_session.h"

#include "store/run_store.h"
#include "store/store_recorder.h"
#include "train/trainer.h"

namespace ampwb::ui {
namespace {

// The recorder first (a drawn epoch is a stored epoch), then the queue; the stored run's id is handed to the
// queue as soon as the recorder has created the row.
class RecordAndQueue : public TrainObserver {
 public:
  RecordAndQueue(StoreRecorder& recorder, EventQueue& queue) : recorder_(recorder), queue_(queue) {}
  void on_start(const RunInfo& e) override {
    recorder_.on_start(e);
    queue_.set_run_id(recorder_.run_id());
    queue_.on_start(e);
  }
  void on_step(const StepReport& e) override {
    recorder_.on_step(e);
    queue_.on_step(e);
  }
  void on_epoch(const EpochReport& e) override {
    recorder_.on_epoch(e);
    queue_.on_epoch(e);
  }
  void on_histogram(const GradientHistogram& e) override {
    recorder_.on_histogram(e);
    queue_.on_histogram(e);
  }
  void on_layer_numerics(const std::vector<LayerNumerics>& e) override {
    recorder_.on_layer_numerics(e);
    queue_.on_layer_numerics(e);
  }
  void on_checkpoint(const CheckpointInfo& e) override {
    recorder_.on_checkpoint(e);
    queue_.on_checkpoint(e);
  }
  void on_end(const RunEnd& e) override {
    recorder_.on_end(e);  // never throws
    queue_.on_end(e);
  }

 private:
  StoreRecorder& recorder_;
  EventQueue& queue_;
};

}  // namespace

// Declaration order is destruction order reversed: the trainer (and its thread) goes first, the store last.
struct TrainingSession::Run {
  Run(const std::string& db, const TrainConfig& config, int64_t continue_run)
      : store(db, RunStore::Mode::Create),
        recorder(store, config, {}, continue_run),
        observer(recorder, queue),
        trainer(config, &observer) {}
  RunStore store;
  StoreRecorder recorder;
  EventQueue queue;
  RecordAndQueue observer;
  Trainer trainer;
};

TrainingSession::TrainingSession(QString db_path, QObject* parent) : QObject(parent), db_path_(std::move(db_path)) {
  qRegisterMetaType<EventBatch>();
  qRegisterMetaType<RunEnd>();
  timer_.setInterval(kDrainIntervalMs);
  connect(&timer_, &QTimer::timeout, this, &TrainingSession::drain);
}

TrainingSession::~TrainingSession() {
  timer_.stop();
  if (run_) run_->trainer.cancel();
  run_.reset();  // ~Trainer waits for its thread
}

void TrainingSession::start(const TrainConfig& config, int64_t continue_run) {
  if (run_) throw Error("a run is already in progress");
  if (config.resume_from.empty()) validate(config);
  run_ = std::make_unique<Run>(db_path_.toStdString(), config, continue_run);
  config_ = config;
  run_id_ = continue_run;
  run_->trainer.start();
  timer_.start();
}

void TrainingSession::pause() {
  if (run_) run_->trainer.pause();
}

void TrainingSession::resume() {
  if (run_) run_->trainer.resume();
}

void TrainingSession::stop() {
  if (run_) run_->trainer.stop();
}

void TrainingSession::cancel() {
  if (run_) run_->trainer.cancel();
}

bool TrainingSession::paused() const { return run_ && run_->trainer.paused(); }

void TrainingSession::wait() {
  if (!run_) return;
  run_->trainer.wait();
  drain();
}

void TrainingSession::drain() {
  if (!run_) return;
  EventBatch batch = run_->queue.take();
  if (batch.run_id != 0) run_id_ = batch.run_id;
  const bool ended = batch.ended.has_value();
  if (!batch.empty()) Q_EMIT events(batch);
  if (!ended) return;
  // on_end is the trainer's last act: joining its thread now is immediate.
  timer_.stop();
  const RunEnd end = *batch.ended;
  run_->trainer.wait();
  const QString store_error = QString::fromStdString(run_->recorder.error());
  run_.reset();
  Q_EMIT finished(run_id_, end, store_error);
}

}  // namespace ampwb::ui
