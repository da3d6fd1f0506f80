// The strip above the live charts: Train, Pause/Resume and Stop, a progress bar with the ETA, a status line, and
// the run's notes (e.g. BF16's limited gain on a CPU without AMX; FP16 emulated on the CPU).
#pragma once

#include <QWidget>

#include "train/events.h"
#include "train/run_progress.h"

class QLabel;
class QProgressBar;
class QPushButton;

namespace ampwb::ui {

class RunControls : public QWidget {
  Q_OBJECT
 public:
  explicit RunControls(QWidget* parent = nullptr);

  enum class State { Idle, Preparing, Training, Paused, Stopping };
  void set_state(State state);
  // Train stays disabled, saying why in its tooltip (and in the status line until a run has used it), while `why` is
  // not empty (a dataset that cannot be trained on).
  void set_train_blocked(const QString& why);
  State state() const { return state_; }

  void set_status(const QString& text);
  // Why a run did not start ("Not started: …"): said until what Train waits for changes, often the fix (the dataset
  // chosen again), so that the line never keeps a problem that is gone.
  void set_refusal(const QString& text);
  void set_notes(const std::vector<std::string>& notes);
  // The warning banner (the loss scale's collapse); hidden when empty.
  void set_alarm(const QString& text);
  QLabel* alarm() const { return alarm_; }
  // Progress from the live run: "epoch 2/5 · step 120/469 · 43 % · ETA 3 min 10 s"; while an epoch's validation
  // runs, "epoch 2/5 · validating 3,200/10,000 · 25 s left · 40 %".
  void show_progress(const RunProgress& progress);
  void clear_progress();

  QPushButton* train_button() const { return train_; }
  QPushButton* pause_button() const { return pause_; }
  QPushButton* stop_button() const { return stop_; }

 Q_SIGNALS:
  void train_clicked();
  void pause_clicked();  // pause or resume, by state
  void stop_clicked();

 private:
  State state_ = State::Idle;
  QString blocked_;
  bool status_told_ = false;  // set_status has been called: the line no longer follows the block
  QPushButton* train_ = nullptr;
  QPushButton* pause_ = nullptr;
  QPushButton* stop_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* eta_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* notes_ = nullptr;
  QLabel* alarm_ = nullptr;
};

}  // namespace ampwb::ui
