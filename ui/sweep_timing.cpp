// SweepTiming: the benchmarks on a worker thread; progress and the result come back as queued signals.
#include "sweep_timing.h"

#include <QMetaObject>

namespace ampwb::ui {

SweepTiming::SweepTiming(const RunStore& store, std::vector<int64_t> runs, const AlternatingOptions& options,
                         QObject* parent)
    : QObject(parent) {
  std::vector<BenchConfig> configs;
  std::vector<QString> names;
  for (int64_t id : runs) {
    const RunRecord r = store.run(id);
    configs.push_back(bench_config_of(r.config, r.info.image_size, static_cast<int>(r.info.class_names.size())));
    names.push_back(QString::fromStdString(r.name));
  }
  worker_ = std::thread([this, runs = std::move(runs), configs, names, options]() {
    AlternatingSpeed timed;
    QString error;
    try {
      timed = time_runs_in_alternation(
          runs, configs, options,
          [&](int round, int config) {
            const QString what = tr("round %1/%2: %3").arg(round + 1).arg(options.rounds).arg(names[config]);
            QMetaObject::invokeMethod(
                this, [this, what] { Q_EMIT progress(what); }, Qt::QueuedConnection);
          },
          &cancel_);
    } catch (const std::exception& e) {
      error = QString::fromUtf8(e.what());
    }
    if (closing_) return;
    QMetaObject::invokeMethod(
        this, [this, timed, error] { Q_EMIT finished(timed, error); }, Qt::QueuedConnection);
  });
}

void SweepTiming::stop() { cancel_ = true; }

SweepTiming::~SweepTiming() {
  closing_ = true;
  cancel_ = true;
  if (worker_.joinable()) worker_.join();
}

}  // namespace ampwb::ui
