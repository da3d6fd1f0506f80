// SweepPointsModel: a sweep's points, one row each.
#include "sweep_points_model.h"

#include <QBrush>
#include <QColor>
#include <QPalette>
#include <cmath>

#include "analysis/report_text.h"
#include "plain_text.h"

namespace ampwb::ui {
namespace {

// After the varying settings: point, <settings>, state, run, final validation accuracy, updated.
enum Trailing { State, Run, FinalAccuracy, Updated, TrailingCount };

QColor state_colour(SweepPointState state) {
  switch (state) {
    case SweepPointState::Finished:
      return QColor(0x1b, 0x7f, 0x3b);
    case SweepPointState::Failed:
      return QColor(0xc0, 0x1c, 0x28);
    case SweepPointState::Running:
      return QColor(0x1a, 0x5f, 0xb4);
    case SweepPointState::Requeued:
      return QColor(0xb5, 0x6a, 0x00);
    default:
      return {};
  }
}

}  // namespace

SweepPointsModel::SweepPointsModel(QObject* parent) : QAbstractTableModel(parent) {}

void SweepPointsModel::set_results(const SweepResults& results) {
  const bool same_rows = results.sweep.id == results_.sweep.id && results.points.size() == results_.points.size() &&
                         results.dimensions == results_.dimensions;
  if (!same_rows) beginResetModel();
  results_ = results;
  if (!same_rows) {
    endResetModel();
  } else if (rowCount() > 0) {
    Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
  }
}

int SweepPointsModel::column_of(const QString& header) const {
  for (int c = 0; c < columnCount(); ++c)
    if (headerData(c, Qt::Horizontal, Qt::DisplayRole).toString() == header) return c;
  return -1;
}

int SweepPointsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(results_.points.size());
}

int SweepPointsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 1 + dimensions() + TrailingCount;
}

QVariant SweepPointsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const SweepPointResult& r = results_.points[static_cast<size_t>(index.row())];
  if (role == kRunRole) return QVariant::fromValue<qlonglong>(r.point.run_id);
  const int column = index.column();
  if (column == 0) {
    if (role == Qt::DisplayRole) return r.point.index + 1;
    if (role == kSortRole) return r.point.index;
    return {};
  }
  if (column <= dimensions()) {
    if (role != Qt::DisplayRole && role != kSortRole && role != Qt::ToolTipRole) return {};
    const std::string& setting = results_.dimensions[static_cast<size_t>(column - 1)];
    for (const auto& [name, value] : r.values)
      if (name == setting) {
        bool number = false;
        const double v = QString::fromStdString(value).toDouble(&number);
        return role == kSortRole && number ? QVariant(v) : QVariant(QString::fromStdString(value));
      }
    return {};
  }
  switch (column - 1 - dimensions()) {
    case State:
      if (role == Qt::DisplayRole || role == kSortRole) return QString::fromUtf8(sweep_point_state_name(r.point.state));
      if (role == Qt::ForegroundRole && state_colour(r.point.state).isValid())
        return QBrush(state_colour(r.point.state));
      if (role == Qt::ToolTipRole && !r.end_reason.empty())  // why its run ended so, as ampwb sweep status says
        return plain_tooltip(QString::fromStdString(r.end_reason));
      return {};
    case Run:
      // A finished point always had a run: without one, it was deleted since (the store unlinks it).
      if (r.point.state == SweepPointState::Finished && r.point.run_id == 0) {
        if (role == Qt::DisplayRole) return tr("deleted");
        if (role == Qt::ForegroundRole) return QBrush(QPalette().color(QPalette::Disabled, QPalette::Text));
        if (role == Qt::ToolTipRole) return tr("Its run was deleted from the run store, and its results with it");
      }
      if (role == Qt::DisplayRole) return r.point.run_id ? QVariant(QString::number(r.point.run_id)) : QVariant();
      if (role == kSortRole) return QVariant::fromValue<qlonglong>(r.point.run_id);
      return {};
    case FinalAccuracy: {
      // A run that stopped early shows where it got to, as `ampwb sweep status` does, told apart from a final one
      // and sorted below them.
      const double a = r.summary.final_validation_accuracy;
      if (!r.has_run || !std::isfinite(a)) return role == kSortRole ? QVariant(-1.0) : QVariant();
      const bool final = r.run_status == RunStatus::Finished;  // whatever the point's state (a cancel came late)
      if (role == Qt::DisplayRole) return QString::fromStdString(fixed_text(100 * a, 2));  // printf's rounding
      if (role == kSortRole) return final ? 100 * a : -1.0;
      if (final) return {};
      if (role == Qt::ForegroundRole) return QBrush(QPalette().color(QPalette::Disabled, QPalette::Text));
      if (role == Qt::ToolTipRole)
        return (r.run_status == RunStatus::Running
                    ? tr("After %1 of %2 epochs: its run is training still")
                    : tr("After %1 of %2 epochs: its run did not finish, so this is not a final accuracy"))
            .arg(r.summary.epochs_completed)
            .arg(r.epochs_planned);
      return {};
    }
    case Updated:
      if (role == Qt::DisplayRole || role == kSortRole) return QString::fromStdString(r.point.updated);
      return {};
    default:
      return {};
  }
}

QVariant SweepPointsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  if (section == 0) return tr("point");
  if (section <= dimensions()) return QString::fromStdString(results_.dimensions[static_cast<size_t>(section - 1)]);
  switch (section - 1 - dimensions()) {
    case State:
      return tr("state");
    case Run:
      return tr("run");
    case FinalAccuracy:
      return tr("final val. acc. (%)");
    case Updated:
      return tr("updated (UTC)");
    default:
      return {};
  }
}

}  // namespace ampwb::ui
