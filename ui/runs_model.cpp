// RunsModel: the run store's runs and their summaries as a table.
#include "runs_model.h"

#include <QBrush>
#include <QColor>
#include <QDateTime>
#include <QFileInfo>
#include <QLocale>
#include <cmath>
#include <unordered_map>

#include "analysis/report_text.h"
#include "plain_text.h"
#include "store/final_weights.h"
#include "store/run_resume.h"

namespace ampwb::ui {
namespace {

QColor status_color(RunStatus s) {
  switch (s) {
    case RunStatus::Finished:
      return QColor(0, 140, 90);
    case RunStatus::Failed:
      return QColor(200, 40, 40);
    case RunStatus::Interrupted:
      return QColor(200, 120, 0);
    case RunStatus::Cancelled:
      return QColor(130, 130, 130);
    case RunStatus::Running:
      return QColor(0, 114, 178);
  }
  return {};
}

QString local_time(const std::string& iso) {
  const QDateTime t = QDateTime::fromString(QString::fromStdString(iso), Qt::ISODate);
  return t.isValid() ? QLocale().toString(t.toLocalTime(), QLocale::ShortFormat) : QString::fromStdString(iso);
}

// NaN (not measured) alike too.
bool same_number(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Whether the table shows the two rows of one run alike: what data() reads, and what may change after a run is
// recorded (edits, its progress, its end, its final weights).
bool same_display(const RunsModel::Row& a, const RunsModel::Row& b) {
  const RunRecord &x = a.record, &y = b.record;
  return x.name == y.name && x.status == y.status && x.end_reason == y.end_reason && x.updated == y.updated &&
         x.duration_seconds == y.duration_seconds && x.notes == y.notes && x.tags == y.tags &&
         x.info.final_weights == y.info.final_weights && x.info.validation_images == y.info.validation_images &&
         x.epochs == y.epochs && a.resume_refusal == b.resume_refusal && a.weights == b.weights &&
         a.summary.epochs_completed == b.summary.epochs_completed &&
         same_number(a.summary.best_validation_accuracy, b.summary.best_validation_accuracy) &&
         a.summary.total_seconds == b.summary.total_seconds;
}

}  // namespace

RunsModel::RunsModel(QObject* parent) : QAbstractTableModel(parent) {}

std::vector<RunsModel::Row> RunsModel::read_rows(const RunStore& store, const std::vector<Row>& previous) {
  std::unordered_map<int64_t, const Row*> before;
  for (const Row& row : previous) before.emplace(row.record.id, &row);
  std::vector<Row> rows;
  for (RunRecord& r : store.runs()) {
    const auto was = before.find(r.id);
    if (was != before.end()) {
      const RunRecord& p = was->second->record;
      if (p.updated == r.updated && p.duration_seconds == r.duration_seconds && p.status == r.status) {
        std::string weights = final_weights_state(r);
        rows.push_back({std::move(r), was->second->summary, was->second->resume_refusal, std::move(weights)});
        continue;
      }
    }
    RunSummary s = summarize(r, store.epochs(r.id));
    std::string refusal = resume_refusal(store, r);
    std::string weights = final_weights_state(r);
    rows.push_back({std::move(r), s, std::move(refusal), std::move(weights)});
  }
  return rows;
}

void RunsModel::reload(const RunStore& store) { set_rows(read_rows(store)); }

void RunsModel::set_rows(std::vector<Row> rows) {
  std::unordered_map<int64_t, size_t> index_of;
  for (size_t i = 0; i < rows.size(); ++i) index_of.emplace(rows[i].record.id, i);
  for (int i = rowCount() - 1; i >= 0; --i)  // runs deleted, from the end so that the rows before keep their place
    if (!index_of.count(rows_[static_cast<size_t>(i)].record.id)) {
      beginRemoveRows({}, i, i);
      rows_.erase(rows_.begin() + i);
      endRemoveRows();
    }
  std::vector<bool> placed(rows.size(), false);
  for (size_t i = 0; i < rows_.size(); ++i) {
    const size_t j = index_of.at(rows_[i].record.id);
    placed[j] = true;
    if (same_display(rows_[i], rows[j])) {
      rows_[i] = std::move(rows[j]);  // the full record may still differ (a setting the table does not show)
      continue;
    }
    rows_[i] = std::move(rows[j]);
    const int row = static_cast<int>(i);
    Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
  }
  std::vector<Row> fresh;
  for (size_t j = 0; j < rows.size(); ++j)
    if (!placed[j]) fresh.push_back(std::move(rows[j]));
  if (!fresh.empty()) {
    beginInsertRows({}, rowCount(), rowCount() + static_cast<int>(fresh.size()) - 1);
    for (Row& row : fresh) rows_.push_back(std::move(row));
    endInsertRows();
  }
}

int64_t RunsModel::run_id(int row) const { return rows_.at(static_cast<size_t>(row)).record.id; }

int RunsModel::row_of(int64_t id) const {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].record.id == id) return static_cast<int>(i);
  return -1;
}

void RunsModel::set_live_pause(int64_t run_id, bool paused) {
  const int64_t before = live_run_;
  live_run_ = run_id;
  live_paused_ = paused;
  for (int64_t id : {before, run_id})
    if (const int row = id ? row_of(id) : -1; row >= 0) Q_EMIT dataChanged(index(row, Status), index(row, Status));
}

int RunsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int RunsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RunsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const Row& row = rows_[static_cast<size_t>(index.row())];
  const RunRecord& r = row.record;
  const RunSummary& s = row.summary;
  if (role == kIdRole) return QVariant::fromValue<qlonglong>(r.id);
  if (role == Qt::ForegroundRole && index.column() == Status) return QBrush(status_color(r.status));
  if (role == Qt::TextAlignmentRole) {
    switch (index.column()) {
      case Id:
      case Depth:
      case BestAccuracy:
      case Time:
        return int(Qt::AlignRight | Qt::AlignVCenter);
      default:
        return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    QString tip = QStringLiteral("%1\n%2\n%3")
                      .arg(QString::fromStdString(r.name), QString::fromStdString(r.dataset_path),
                           QString::fromStdString(r.backend));
    if (r.info.world_size > 1)
      tip += "\n" + tr("%1 processes, started by %2: %3 images a step in all (%4 each)")
                        .arg(r.info.world_size)
                        .arg(QString::fromUtf8(choice_name(r.info.launcher)))
                        .arg(r.global_batch_size())
                        .arg(r.batch_size);
    if (!r.end_reason.empty()) tip += "\n" + QString::fromStdString(r.end_reason);
    if (!r.notes.empty()) tip += "\nnotes: " + QString::fromStdString(r.notes);
    for (const std::string& note : r.info.notes) tip += "\n" + tr("note: %1").arg(QString::fromStdString(note));
    if (has_final_weights(r))
      tip += "\n" + (row.weights == "missing" ? tr("final weights (missing): %1") : tr("final weights: %1"))
                        .arg(QString::fromStdString(r.info.final_weights));
    return plain_tooltip(tip);  // a path or notes that look like HTML are still shown as written
  }
  if (role == kFilterRole) {
    const QString shown = data(index, Qt::DisplayRole).toString();
    if (index.column() == Status) return shown + " " + QString::fromUtf8(run_status_name(r.status));
    if (index.column() == Name) return shown + "\n" + QString::fromStdString(r.notes);  // shown in its tooltip
    return shown;
  }
  const bool sort = role == kSortRole;
  if (role != Qt::DisplayRole && !sort) return {};
  switch (index.column()) {
    case Id:
      return QVariant::fromValue<qlonglong>(r.id);
    case Name:
      return QString::fromStdString(r.name);
    case Date:
      return sort ? QString::fromStdString(r.created) : local_time(r.created);
    case Dataset: {
      const QString path = QString::fromStdString(r.dataset_path);
      return sort ? path : QFileInfo(path).fileName();
    }
    case Depth:
      return r.depth;
    case Precision:
      return QString::fromStdString(r.precision_name());
    case Device:
      // "cpu × 2": a run on two processes, each on the device named.
      return r.info.world_size > 1
                 ? QStringLiteral("%1 × %2").arg(QString::fromStdString(r.device.name())).arg(r.info.world_size)
                 : QString::fromStdString(r.device.name());
    case Status: {
      if (sort) return QString::fromUtf8(run_status_words(r.status));
      // A run the user stopped is "stopped" (the store's word is "cancelled"), and says when it can go on.
      // Paused or resumed here (said at once), or in another window (as its store says).
      const bool paused = r.status == RunStatus::Running && (r.id == live_run_ ? live_paused_ : is_paused(r));
      QString text = paused ? tr("paused") : QString::fromUtf8(run_status_words(r.status));
      QStringList details;
      if (row.resume_refusal.empty()) details << tr("resumable");
      if (s.epochs_completed < r.epochs && r.status != RunStatus::Finished)
        details << QStringLiteral("%1/%2").arg(s.epochs_completed).arg(r.epochs);
      if (!details.isEmpty()) text += " (" + details.join(", ") + ")";
      return text;
    }
    case BestAccuracy: {
      const bool measured = s.epochs_completed && r.info.validation_images > 0;  // none without validation images
      if (sort) return measured ? s.best_validation_accuracy : -1.0;
      return measured ? QString::fromStdString(percent_text(s.best_validation_accuracy)) : "–";  // as `ampwb runs`
    }
    case Time:  // as `ampwb runs` says it
      return sort ? QVariant(s.total_seconds) : QVariant(QString::fromStdString(duration_text(s.total_seconds)));
    case Weights:
      return row.weights == "yes" ? tr("yes") : row.weights == "missing" ? tr("missing") : QString();
    case Tags: {
      QStringList tags;
      for (const std::string& t : r.tags) tags << QString::fromStdString(t);
      return tags.join(", ");
    }
  }
  return {};
}

QVariant RunsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Id:
      return tr("ID");
    case Name:
      return tr("Name");
    case Date:
      return tr("Date");
    case Dataset:
      return tr("Dataset");
    case Depth:
      return tr("Depth");
    case Precision:
      return tr("Precision");
    case Device:
      return tr("Device");
    case Status:
      return tr("Status");
    case BestAccuracy:
      return tr("Best val. acc.");
    case Time:
      return tr("Time");
    case Weights:
      return tr("Weights");
    case Tags:
      return tr("Tags");
  }
  return {};
}

}  // namespace ampwb::ui
