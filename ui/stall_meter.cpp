// StallMeter: lateness of a precise timer's ticks.
#include "stall_meter.h"

#include <algorithm>
#include <cmath>

namespace ampwb::ui {

StallMeter::StallMeter(int interval_ms, QObject* parent) : QObject(parent), interval_ms_(interval_ms) {
  timer_.setTimerType(Qt::PreciseTimer);
  timer_.setInterval(interval_ms);
  connect(&timer_, &QTimer::timeout, this, &StallMeter::tick);
}

void StallMeter::start() {
  lateness_ms_.clear();
  clock_.start();
  last_ns_ = clock_.nsecsElapsed();
  timer_.start();
}

void StallMeter::stop() { timer_.stop(); }

void StallMeter::tick() {
  const qint64 now = clock_.nsecsElapsed();
  const double gap_ms = static_cast<double>(now - last_ns_) / 1e6;
  last_ns_ = now;
  lateness_ms_.push_back(std::max(0.0, gap_ms - interval_ms_));
}

double StallMeter::percentile_ms(double p) const {
  if (lateness_ms_.empty()) return 0;
  std::vector<double> sorted = lateness_ms_;
  std::sort(sorted.begin(), sorted.end());
  const size_t index = std::min(sorted.size() - 1, static_cast<size_t>(std::ceil(p * sorted.size())) - (p > 0));
  return sorted[index];
}

double StallMeter::max_ms() const {
  return lateness_ms_.empty() ? 0 : *std::max_element(lateness_ms_.begin(), lateness_ms_.end());
}

}  // namespace ampwb::ui
