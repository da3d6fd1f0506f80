// CompareModel: the engine's comparison of several runs (analysis/run_compare.h) as a table model.
#include "compare_model.h"

#include <QFont>
#include <algorithm>

#include "plain_text.h"
#include "run_series.h"

namespace ampwb::ui {

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::set_runs(std::vector<ComparedRun> runs) {
  runs_ = std::move(runs);
  options_.baseline = 0;
  rebuild();
}

void CompareModel::set_baseline(int index) {
  options_.baseline = static_cast<size_t>(std::clamp(index, 0, std::max(0, static_cast<int>(runs_.size()) - 1)));
  rebuild();
}

void CompareModel::set_at_epoch(int epoch) {
  options_.at_epoch = std::max(0, epoch);
  rebuild();
}

void CompareModel::set_differences_only(bool on) {
  differences_only_ = on;
  rebuild();
}

SpeedUp CompareModel::speedup(int run) const {
  return run >= 0 && static_cast<size_t>(run) < comparison_.speedups.size()
             ? comparison_.speedups[static_cast<size_t>(run)]
             : SpeedUp{};
}

void CompareModel::rebuild() {
  beginResetModel();
  comparison_ = compare_runs(runs_, options_);
  shown_.clear();
  // A single run differs from nothing: filtered, its table would show no row at all, as if it had no data.
  const bool filtered = differences_only_ && runs_.size() > 1;
  for (const CompareRow& r : comparison_.rows)
    if (!filtered || r.differs) shown_.push_back(&r);
  endResetModel();
}

QStringList CompareModel::row_labels() const {
  QStringList labels;
  for (const CompareRow* r : shown_) labels << QString::fromStdString(r->label);
  return labels;
}

QString CompareModel::value(const QString& row_label, int run) const {
  const std::string label = row_label.toStdString();
  for (const CompareRow* r : shown_)
    if (r->label == label && run >= 0 && static_cast<size_t>(run) < r->values.size())
      return QString::fromStdString(r->values[static_cast<size_t>(run)]);
  return {};
}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(shown_.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(runs_.size()) + 1;
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const CompareRow& row = *shown_[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
    const size_t run = static_cast<size_t>(index.column() - 1);
    const QString text = index.column() == 0       ? QString::fromStdString(row.label)
                         : run < row.values.size() ? QString::fromStdString(row.values[run])
                                                   : QString();
    // A speed's interquartile range on a line of its own: on one line, four runs' speeds at 1366 px were cut
    // mid-number ("1742.5 images/s (IQR 1692.3–1777…"). The tooltip and value() keep the one line.
    if (role == Qt::DisplayRole) return QString(text).replace(QStringLiteral(" (IQR "), QStringLiteral("\n(IQR "));
    // Values hold paths: never rendered as HTML. How a row's numbers were measured goes with each of them.
    return plain_tooltip(row.note.empty() ? text : text + "\n\n" + QString::fromStdString(row.note));
  }
  if (role == Qt::FontRole && (row.differs || !row.setting)) {
    QFont f;
    f.setBold(row.differs && index.column() > 0);
    return f;
  }
  return {};
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || (role != Qt::DisplayRole && role != Qt::ToolTipRole)) return {};
  if (section == 0) return role == Qt::DisplayRole ? tr("run") : QVariant();
  const RunRecord& r = runs_[static_cast<size_t>(section - 1)].record;
  const QString label =
      QString::fromStdString(run_label(r)) + (section - 1 == baseline() ? tr(" (baseline)") : QString());
  // A run's column is narrower than a long name: the tooltip shows it whole.
  return role == Qt::DisplayRole ? label : plain_tooltip(label);
}

}  // namespace ampwb::ui
