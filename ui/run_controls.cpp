// RunControls: buttons that follow the run's state, progress with ETA, status and notes.
#include "run_controls.h"

#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QStyle>

#include "plain_text.h"
#include "text_lines_area.h"

namespace ampwb::ui {

RunControls::RunControls(QWidget* parent) : QWidget(parent) {
  setObjectName("runControls");
  train_ = new QPushButton(style()->standardIcon(QStyle::SP_MediaPlay), tr("Train"));
  train_->setObjectName("trainButton");
  train_->setDefault(true);
  pause_ = new QPushButton(style()->standardIcon(QStyle::SP_MediaPause), tr("Pause"));
  pause_->setObjectName("pauseButton");
  stop_ = new QPushButton(style()->standardIcon(QStyle::SP_MediaStop), tr("Stop"));
  stop_->setObjectName("stopButton");
  stop_->setToolTip(tr("Stop after the current step; with checkpoints on, the run can be resumed later"));
  progress_ = new QProgressBar;
  progress_->setObjectName("progress");
  progress_->setRange(0, 1000);
  progress_->setTextVisible(true);
  eta_ = new QLabel;
  eta_->setObjectName("eta");
  eta_->setFixedWidth(eta_->fontMetrics().horizontalAdvance("ETA 99 min 59 s  ") + 8);  // no relayout as it changes
  status_ = new QLabel;
  status_->setObjectName("statusLine");
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_->setTextFormat(Qt::PlainText);  // errors quote run names and paths: user text, never HTML
  status_->setWordWrap(true);
  status_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  notes_ = new QLabel;
  notes_->setObjectName("runNotes");
  notes_->setTextFormat(Qt::PlainText);  // notes quote the dataset path
  notes_->setWordWrap(true);
  notes_->setAlignment(Qt::AlignLeft | Qt::AlignTop);

  alarm_ = new QLabel;
  alarm_->setObjectName("scaleCollapseAlarm");
  alarm_->setWordWrap(true);
  alarm_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // Dark text on amber in either theme: a warning has to stand out from the status line.
  alarm_->setStyleSheet("QLabel { background: #ffcc4d; color: #3a2a00; border: 1px solid #b38600; padding: 4px; }");
  alarm_->setVisible(false);

  auto* layout = new QGridLayout(this);
  layout->setContentsMargins(6, 6, 6, 0);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(train_);
  buttons->addWidget(pause_);
  buttons->addWidget(stop_);
  layout->addLayout(buttons, 0, 0);
  layout->addWidget(progress_, 0, 1);
  layout->addWidget(eta_, 0, 2);
  // Two lines each, scrolling beyond: a longer status or note never re-lays out and redraws every chart.
  layout->addWidget(text_lines_area(status_, 2), 1, 0, 1, 3);
  layout->addWidget(text_lines_area(notes_, 2), 2, 0, 1, 3);
  layout->addWidget(alarm_, 3, 0, 1, 3);
  layout->setColumnStretch(1, 1);

  connect(train_, &QPushButton::clicked, this, &RunControls::train_clicked);
  connect(pause_, &QPushButton::clicked, this, &RunControls::pause_clicked);
  connect(stop_, &QPushButton::clicked, this, &RunControls::stop_clicked);
  set_state(State::Idle);
}

void RunControls::set_state(State state) {
  state_ = state;
  const bool active = state != State::Idle;
  train_->setEnabled(!active && blocked_.isEmpty());
  pause_->setEnabled(state == State::Training || state == State::Paused);
  stop_->setEnabled(state == State::Preparing || state == State::Training || state == State::Paused);
  const bool paused = state == State::Paused;
  pause_->setText(paused ? tr("Resume") : tr("Pause"));
  pause_->setIcon(style()->standardIcon(paused ? QStyle::SP_MediaPlay : QStyle::SP_MediaPause));
  if (state == State::Idle) eta_->clear();  // a finished or stopped run has nothing left to estimate
  if (paused) eta_->setText(tr("ETA: paused"));  // not the ETA frozen; Resume's next step brings it back
  if (state == State::Preparing) {
    progress_->setRange(0, 0);  // busy: opening the dataset and building the model has no step count yet
  } else {
    progress_->setRange(0, 1000);
  }
}

void RunControls::set_train_blocked(const QString& why) {
  blocked_ = why;
  train_->setToolTip(plain_tooltip(why));
  set_state(state_);
  // Until a run says something, the status line says what Train waits for, or that it waits for nothing.
  if (!status_told_) {
    status_->setText(why.isEmpty() ? tr("Ready: click Train.") : why + '.');
    status_->setToolTip(QString());  // a refusal's, replaced
  }
}

void RunControls::set_status(const QString& text) {
  status_told_ = true;
  status_->setText(text);
  status_->setToolTip(plain_tooltip(text));  // the label shows two lines; the tooltip all of it
}

void RunControls::set_refusal(const QString& text) {
  set_status(text);
  status_told_ = false;  // the next set_train_blocked replaces it
}

void RunControls::set_notes(const std::vector<std::string>& notes) {
  QStringList lines;
  for (const std::string& n : notes) {
    const QString note = QString::fromStdString(n);
    lines << tr("Note: %1").arg(note.endsWith('.') ? note : note + '.');  // in a row, each ends its sentence
  }
  notes_->setText(lines.join(' '));
  notes_->setToolTip(plain_tooltip(lines.join('\n')));
}

void RunControls::set_alarm(const QString& text) {
  alarm_->setText(text.isEmpty() ? QString() : QStringLiteral("⚠ ") + text);
  alarm_->setToolTip(text);
  // Shown once per run at most: the one re-layout of the charts it causes is worth it.
  if (alarm_->isHidden() == text.isEmpty()) return;
  alarm_->setVisible(!text.isEmpty());
}

void RunControls::show_progress(const RunProgress& p) {
  if (!p.started()) return;
  progress_->setValue(static_cast<int>(p.fraction() * 1000));
  if (p.validating()) {
    // A validation can outlast the epoch's steps: the bar says so, with the time it needs still ("4.0 s more"),
    // worded apart from the run's ETA beside it.
    const QLocale locale;
    const double left = p.validation_eta_seconds();
    progress_->setFormat(
        tr("epoch %1/%2 · validating %3/%4%5 · %p%")
            .arg(p.current_epoch())
            .arg(p.epochs())
            .arg(locale.toString(static_cast<qlonglong>(p.validated_images())),
                 locale.toString(static_cast<qlonglong>(p.validation_images())),
                 left < 0 ? QString() : tr(", %1 more").arg(QString::fromStdString(time_left_text(left)))));
  } else {
    progress_->setFormat(tr("epoch %1/%2 · step %3/%4 · %p%")
                             .arg(p.current_epoch())
                             .arg(p.epochs())
                             .arg(p.step_in_epoch())
                             .arg(p.steps_per_epoch()));
  }
  if (state_ == State::Paused) return;  // the step that ends as Pause is clicked says nothing of the time left
  const double eta = p.eta_seconds();
  eta_->setText(eta < 0 ? tr("ETA: estimating…") : tr("ETA %1").arg(QString::fromStdString(time_left_text(eta))));
}

void RunControls::clear_progress() {
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setFormat("%p%");
  eta_->clear();
}

}  // namespace ampwb::ui
