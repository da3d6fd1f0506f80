// CompareModel: results and settings of several runs, side by side.
#include "compare_model.h"

#include <QBrush>
#include <QFont>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "run_progress.h"
#include "run_series.h"

namespace ampwb::ui {
namespace {

void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) flatten(value, prefix.empty() ? key : prefix + "." + key, out);
  } else {
    out[prefix] = j.is_string() ? j.get<std::string>() : j.dump();
  }
}

QString percent(double v) { return QStringLiteral("%1 %").arg(100 * v, 0, 'f', 2); }

const EpochReport* at(const std::vector<EpochReport>& epochs, int epoch) {
  for (const EpochReport& e : epochs)
    if (e.epoch == epoch) return &e;
  return nullptr;
}

}  // namespace

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::set_runs(std::vector<RunRecord> records, std::vector<std::vector<EpochReport>> epochs,
                            std::vector<std::vector<GradientHistogram>> histograms) {
  records_ = std::move(records);
  epochs_ = std::move(epochs);
  histograms_ = std::move(histograms);
  histograms_.resize(records_.size());
  summaries_.clear();
  for (size_t i = 0; i < records_.size(); ++i) summaries_.push_back(summarize(records_[i], epochs_[i]));
  baseline_ = 0;
  rebuild();
}

void CompareModel::set_baseline(int index) {
  baseline_ = std::clamp(index, 0, std::max(0, static_cast<int>(records_.size()) - 1));
  rebuild();
}

void CompareModel::set_at_epoch(int epoch) {
  at_epoch_ = std::max(0, epoch);
  rebuild();
}

void CompareModel::set_differences_only(bool on) {
  differences_only_ = on;
  rebuild();
}

int CompareModel::at_epoch() const {
  if (at_epoch_ > 0) return at_epoch_;
  int common = 0;
  for (size_t i = 0; i < summaries_.size(); ++i)
    common = i == 0 ? summaries_[i].epochs_completed : std::min(common, summaries_[i].epochs_completed);
  return std::max(1, common);
}

double CompareModel::speedup(int run) const {
  if (records_.empty()) return 0;
  const double base = summaries_[static_cast<size_t>(baseline_)].mean_images_per_second;
  return base > 0 ? summaries_[static_cast<size_t>(run)].mean_images_per_second / base : 0;
}

void CompareModel::rebuild() {
  beginResetModel();
  rows_.clear();
  const size_t n = records_.size();
  auto add = [&](const QString& label, auto cell, bool setting = false) {
    Row row{label, {}, setting, false};
    for (size_t i = 0; i < n; ++i) row.values << cell(i);
    row.differs =
        std::any_of(row.values.begin(), row.values.end(), [&](const QString& v) { return v != row.values[0]; });
    rows_.push_back(std::move(row));
  };
  const int epoch = at_epoch();
  add(tr("best validation accuracy"), [&](size_t i) {
    const RunSummary& s = summaries_[i];
    return s.epochs_completed ? tr("%1 (epoch %2)").arg(percent(s.best_validation_accuracy)).arg(s.best_epoch)
                              : QStringLiteral("–");
  });
  add(tr("final validation accuracy"), [&](size_t i) {
    return summaries_[i].epochs_completed ? percent(summaries_[i].final_validation_accuracy) : QStringLiteral("–");
  });
  add(tr("validation accuracy at epoch %1").arg(epoch), [&](size_t i) {
    const EpochReport* e = at(epochs_[i], epoch);
    return e ? percent(e->validation_accuracy) : QStringLiteral("–");
  });
  add(tr("validation top-k at epoch %1").arg(epoch), [&](size_t i) {
    const EpochReport* e = at(epochs_[i], epoch);
    return e ? QStringLiteral("%1 (top-%2)").arg(percent(e->validation_topk)).arg(e->topk) : QStringLiteral("–");
  });
  add(tr("final validation loss"), [&](size_t i) {
    return summaries_[i].epochs_completed ? QString::number(summaries_[i].final_validation_loss, 'f', 4)
                                          : QStringLiteral("–");
  });
  add(tr("final training loss"), [&](size_t i) {
    return summaries_[i].epochs_completed ? QString::number(summaries_[i].final_train_loss, 'f', 4)
                                          : QStringLiteral("–");
  });
  add(tr("total time"), [&](size_t i) { return QString::fromStdString(format_duration(summaries_[i].total_seconds)); });
  add(tr("mean epoch time"),
      [&](size_t i) { return QString::fromStdString(format_duration(summaries_[i].mean_epoch_seconds)); });
  add(tr("training images/s"), [&](size_t i) { return QString::number(summaries_[i].mean_images_per_second, 'f', 1); });
  add(n ? tr("speed-up vs %1").arg(QString::fromStdString(run_label(records_[static_cast<size_t>(baseline_)])))
        : tr("speed-up"),
      [&](size_t i) {
        const double s = speedup(static_cast<int>(i));
        return s > 0 ? QStringLiteral("%1×").arg(s, 0, 'f', 2) : QStringLiteral("–");
      });
  // What FP16 storage would lose of the last gradients each run recorded (the histogram chart's fractions).
  for (const char* kind : {"weight", "activation"}) {
    auto last = [&](size_t i) -> const GradientHistogram* {
      const GradientHistogram* found = nullptr;
      for (const GradientHistogram& h : histograms_[i])
        if (h.kind == kind && (!found || h.epoch >= found->epoch)) found = &h;
      return found;
    };
    add(tr("FP16 underflow, %1 gradients (last epoch)").arg(kind), [&](size_t i) {
      const GradientHistogram* h = last(i);
      return h ? QStringLiteral("%1 %").arg(100 * h->underflow_fraction, 0, 'g', 3) : QStringLiteral("–");
    });
    add(tr("FP16 overflow, %1 gradients (last epoch)").arg(kind), [&](size_t i) {
      const GradientHistogram* h = last(i);
      return h ? QStringLiteral("%1 %").arg(100 * h->overflow_fraction, 0, 'g', 3) : QStringLiteral("–");
    });
  }
  add(tr("status"), [&](size_t i) { return QString::fromUtf8(run_status_name(records_[i].status)); });
  add(tr("epochs"),
      [&](size_t i) { return QStringLiteral("%1/%2").arg(summaries_[i].epochs_completed).arg(records_[i].epochs); });
  add(tr("skipped steps"), [&](size_t i) { return QString::number(summaries_[i].skipped_steps); });
  add(tr("final loss scale"), [&](size_t i) {
    return summaries_[i].epochs_completed ? QString::number(summaries_[i].final_loss_scale, 'g', 8)
                                          : QStringLiteral("–");
  });
  add(tr("peak memory"),
      [&](size_t i) { return QStringLiteral("%1 MiB").arg(summaries_[i].peak_bytes / 1048576.0, 0, 'f', 1); });

  // Every setting of the stored configuration, plus where it ran and on what data.
  std::vector<std::map<std::string, std::string>> configs(n);
  std::map<std::string, bool> keys;
  for (size_t i = 0; i < n; ++i) {
    try {
      flatten(nlohmann::json::parse(records_[i].config_json), "", configs[i]);
    } catch (const std::exception&) {
    }
    configs[i].erase("name");
    configs[i]["(backend)"] = records_[i].backend;
    configs[i]["(dataset fingerprint)"] = records_[i].dataset_fingerprint;
    for (const auto& [k, v] : configs[i]) keys[k] = true;
  }
  for (const auto& [key, unused] : keys)
    add(
        QString::fromStdString(key),
        [&](size_t i) {
          const auto found = configs[i].find(key);
          return found == configs[i].end() ? QStringLiteral("(unset)") : QString::fromStdString(found->second);
        },
        true);

  shown_.clear();
  for (const Row& r : rows_)
    if (!differences_only_ || r.differs) shown_.push_back(r);
  endResetModel();
}

QStringList CompareModel::row_labels() const {
  QStringList labels;
  for (const Row& r : shown_) labels << r.label;
  return labels;
}

QString CompareModel::value(const QString& row_label, int run) const {
  for (const Row& r : shown_)
    if (r.label == row_label) return r.values.value(run);
  return {};
}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(shown_.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(records_.size()) + 1;
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const Row& row = shown_[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole || role == Qt::ToolTipRole)
    return index.column() == 0 ? row.label : row.values.value(index.column() - 1);
  if (role == Qt::FontRole && (row.differs || !row.setting)) {
    QFont f;
    f.setBold(row.differs && index.column() > 0);
    return f;
  }
  return {};
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  if (section == 0) return tr("run");
  const RunRecord& r = records_[static_cast<size_t>(section - 1)];
  return QString::fromStdString(run_label(r)) + (section - 1 == baseline_ ? tr(" (baseline)") : QString());
}

}  // namespace ampwb::ui
