// TrainingSession: the trainer on its thread, the store recorder and the event queue behind one observer, and the
// UI-side timer that drains the queue.
#include "training_session.h"

#include <signal.h>

#include <QCoreApplication>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryFile>

#include "store/run_store.h"
#include "store/store_recorder.h"
#include "train/event_lines.h"
#include "train/observer_list.h"
#include "train/trainer.h"

namespace ampwb::ui {
namespace {

// The recorder first (a drawn epoch is a stored epoch), then the queue; the stored run's id is handed to the
// queue as soon as the recorder has created the row.
class RecordAndQueue : public ObserverList {
 public:
  RecordAndQueue(StoreRecorder& recorder, EventQueue& queue)
      : ObserverList({&recorder, &queue}), recorder_(recorder), queue_(queue) {}
  void on_start(const RunInfo& e) override {
    recorder_.on_start(e);
    queue_.set_run_id(recorder_.run_id());
    queue_.on_start(e);
  }

 private:
  StoreRecorder& recorder_;
  EventQueue& queue_;
};

}  // namespace

// Declaration order is destruction order reversed: the trainer (and its thread) goes first, the store last.
struct TrainingSession::Run {
  Run(const std::string& db, const TrainConfig& config, int64_t continue_run, bool keep_final_weights)
      : store(db, RunStore::Mode::Create),
        recorder(store, config, {.keep_final_weights = keep_final_weights}, continue_run),
        observer(recorder, queue),
        trainer(config, &observer) {}
  RunStore store;
  StoreRecorder recorder;
  EventQueue queue;
  RecordAndQueue observer;
  Trainer trainer;
};

// A run on many processes: `ampwb train --processes N --events-json` and what it has said so far. The QProcess is
// deleted later, since a Child ends inside the process's own finished signal.
struct TrainingSession::Child {
  explicit Child(QObject* parent) : process(new QProcess(parent)) {}
  ~Child() {
    process->disconnect();
    process->deleteLater();
  }
  QProcess* process;
  QTemporaryFile config_file;  // the configuration the child reads (--config), kept while it runs
  EventQueue queue;
  QByteArray output;          // stdout not yet a whole line
  QString errors;             // stderr, as it came
  std::optional<RunEnd> end;  // the run's end event, held until the processes have exited
  pid_t rank0 = 0;            // the process that writes the events, once the run has started
  bool exited = false;
};

namespace {

// What the child said went wrong, in its own words: its "ampwb train: error: ..." lines without the prefix (mpirun's
// own banner around them left out), else its last line, else its exit.
QString child_failure(const QString& errors, int exit_code) {
  static const QRegularExpression ours(QStringLiteral("^ampwb train: (?:(rank \\d+): )?error: (.*)$"),
                                       QRegularExpression::MultilineOption);
  QStringList reasons;
  for (auto it = ours.globalMatch(errors); it.hasNext();) {
    const QRegularExpressionMatch m = it.next();
    reasons << (m.captured(1).isEmpty() ? m.captured(2) : m.captured(1) + ": " + m.captured(2));
  }
  if (!reasons.isEmpty()) return reasons.join(QStringLiteral("; "));
  const QStringList lines = errors.split('\n', Qt::SkipEmptyParts);
  for (auto line = lines.rbegin(); line != lines.rend(); ++line)
    if (!line->trimmed().isEmpty() && !line->trimmed().startsWith('-')) return line->trimmed();
  return QCoreApplication::translate("TrainingSession", "the training processes ended with exit status %1")
      .arg(exit_code);
}

}  // namespace

TrainingSession::TrainingSession(QString db_path, QObject* parent) : QObject(parent), db_path_(std::move(db_path)) {
  qRegisterMetaType<EventBatch>();
  qRegisterMetaType<RunEnd>();
  timer_.setInterval(kDrainIntervalMs);
  connect(&timer_, &QTimer::timeout, this, &TrainingSession::drain);
}

TrainingSession::~TrainingSession() {
  timer_.stop();
  if (child_ && !child_->exited) {  // passed to mpirun, which stops its ranks
    child_->process->disconnect(this);  // its end reaches no one now: the window may be half destroyed
    ::kill(static_cast<pid_t>(child_->process->processId()), SIGTERM);
    if (!child_->process->waitForFinished(30000)) child_->process->kill();
  }
  child_.reset();
  if (run_) run_->trainer.cancel();
  run_.reset();  // ~Trainer waits for its thread
}

void TrainingSession::start(const TrainConfig& config, int64_t continue_run) {
  if (run_) throw Error("a run is already in progress");
  if (config.resume_from.empty()) validate(config);
  run_ = std::make_unique<Run>(db_path_.toStdString(), config, continue_run, keep_final_weights_);
  config_ = config;
  run_id_ = continue_run;
  run_->trainer.start();
  timer_.start();
}

void TrainingSession::start_processes(const TrainConfig& config, int processes, int64_t continue_run) {
  if (running()) throw Error("a run is already in progress");
  if (continue_run == 0) validate(config);  // its settings' problems named here, their fields marked, as in-process
  child_ = std::make_unique<Child>(this);
  Child& child = *child_;
  if (!child.config_file.open() ||
      child.config_file.write(QByteArray::fromStdString(config_to_json_text(config))) < 0 ||
      !child.config_file.flush()) {
    const QString why = child.config_file.errorString();
    child_.reset();
    throw Error("the run's configuration could not be written for its processes: " + why.toStdString());
  }
  QStringList args = {QStringLiteral("train"),
                      QStringLiteral("--processes"),
                      QString::number(processes),
                      QStringLiteral("--db"),
                      db_path_,
                      QStringLiteral("--events-json")};
  if (continue_run != 0)
    args << QStringLiteral("--resume") << QString::number(continue_run);
  else
    args << QStringLiteral("--config") << child.config_file.fileName();
  if (continue_run == 0 && config.checkpoint_dir.empty()) args << QStringLiteral("--no-checkpoint");
  if (continue_run == 0 && !keep_final_weights_) args << QStringLiteral("--no-keep-weights");
  // Without it, --processes gives each process its share of the cores; the setup's own number stands over that.
  if (continue_run == 0 && config.threads > 0) args << QStringLiteral("--threads") << QString::number(config.threads);
  connect(child.process, &QProcess::readyReadStandardOutput, this, &TrainingSession::read_child_output);
  connect(child.process, &QProcess::readyReadStandardError, this,
          [this] { child_->errors += QString::fromLocal8Bit(child_->process->readAllStandardError()); });
  connect(child.process, &QProcess::finished, this, &TrainingSession::child_ended);
  child.process->start(executable_.isEmpty() ? QCoreApplication::applicationFilePath() : executable_, args);
  if (!child.process->waitForStarted(10000)) {
    const QString why = child.process->errorString();
    child_.reset();
    throw Error("the training processes could not be started: " + why.toStdString());
  }
  config_ = config;
  run_id_ = continue_run;
  timer_.start();
}

void TrainingSession::read_child_output() {
  if (!child_) return;
  child_->output += child_->process->readAllStandardOutput();
  for (qsizetype newline; (newline = child_->output.indexOf('\n')) >= 0;) {
    const std::string line = child_->output.left(newline).toStdString();
    child_->output.remove(0, newline + 1);
    try {
      const EventLinesStart start = replay_event_line(line, child_->queue);
      if (start.run_id != 0) child_->queue.set_run_id(start.run_id);
      if (start.pid != 0) child_->rank0 = static_cast<pid_t>(start.pid);
    } catch (const std::exception& e) {
      child_->errors += QString::fromUtf8(e.what()) + '\n';
    }
  }
}

void TrainingSession::child_ended() {
  if (!child_ || child_->exited) return;
  read_child_output();
  child_->errors += QString::fromLocal8Bit(child_->process->readAllStandardError());
  child_->exited = true;
  drain();
}

void TrainingSession::pause() {
  if (run_) run_->trainer.pause();
}

void TrainingSession::resume() {
  if (run_) run_->trainer.resume();
}

void TrainingSession::stop() {
  if (run_) run_->trainer.stop();
  // Rank 0 stops, and every rank with it after the same step. Before the run has started, the signal goes to the
  // child `ampwb train --processes`, which passes it to mpirun: it stops the ranks with SIGTERM.
  if (child_ && !child_->exited)
    ::kill(child_->rank0 ? child_->rank0 : static_cast<pid_t>(child_->process->processId()),
           child_->rank0 ? SIGINT : SIGTERM);
}

void TrainingSession::cancel() {
  if (run_) run_->trainer.cancel();
  if (child_ && !child_->exited) ::kill(static_cast<pid_t>(child_->process->processId()), SIGTERM);
}

bool TrainingSession::paused() const { return run_ && run_->trainer.paused(); }

void TrainingSession::wait() {
  if (child_) {
    child_->process->waitForFinished(-1);
    child_ended();  // where the finished signal has not come yet
    return;
  }
  if (!run_) return;
  run_->trainer.wait();
  drain();
}

void TrainingSession::drain() {
  if (child_) {
    EventBatch batch = child_->queue.take();
    if (batch.run_id != 0) run_id_ = batch.run_id;
    if (batch.ended) child_->end = *batch.ended;  // delivered once the processes have exited
    batch.ended.reset();
    if (!batch.empty()) Q_EMIT events(batch);
    if (!child_->exited) return;
    timer_.stop();
    const int exit_code = child_->process->exitCode();
    RunEnd end =
        child_->end.value_or(RunEnd{RunStatus::Failed, child_failure(child_->errors, exit_code).toStdString(), {}});
    // Processes that ended without reporting an end (a rank killed) leave their run as the store marks it once no
    // process holds it: interrupted, resumable from its last checkpoint, not failed. mpirun has ended, and its
    // ranks with it, so a row still running is such a run (a server may hold a killed backend's lock a moment).
    if (!child_->end && run_id_ != 0) {
      try {
        const RunStatus stored = RunStore(db_path_.toStdString(), RunStore::Mode::Existing).run(run_id_).status;
        if (stored == RunStatus::Interrupted || stored == RunStatus::Running) end.status = RunStatus::Interrupted;
      } catch (const std::exception&) {  // the store out of reach: failed, as far as this window can tell
      }
    }
    static const QRegularExpression unrecorded(QStringLiteral("the run was not (?:fully )?recorded: (.*)$"),
                                               QRegularExpression::MultilineOption);
    const QString store_error = unrecorded.match(child_->errors).captured(1);
    child_.reset();
    EventBatch last;
    last.ended = end;
    Q_EMIT events(last);
    Q_EMIT finished(run_id_, end, store_error);
    return;
  }
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
