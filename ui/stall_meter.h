// Measures how responsive the event loop of the thread it lives on is: a timer asks to fire every `interval_ms`;
// how late each tick arrives is the time the loop was busy (a stall). Used by the responsiveness test and by
// the screenshot scenario; the figure is in docs/ui-responsiveness.md.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>
#include <vector>

namespace ampwb::ui {

class StallMeter : public QObject {
  Q_OBJECT
 public:
  explicit StallMeter(int interval_ms = 5, QObject* parent = nullptr);
  void start();
  void stop();

  size_t ticks() const { return lateness_ms_.size(); }
  double percentile_ms(double p) const;  // lateness below which p (0..1) of the ticks arrived
  double max_ms() const;

 private:
  void tick();
  int interval_ms_;
  QTimer timer_;
  QElapsedTimer clock_;
  qint64 last_ns_ = 0;
  std::vector<double> lateness_ms_;
};

}  // namespace ampwb::ui
