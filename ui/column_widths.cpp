#include "column_widths.h"

#include <QTableView>

namespace ampwb::ui {
namespace {

std::vector<int> cell_widths(const QTableView& table) {
  const QAbstractItemView& view = table;  // where sizeHintForColumn is public
  std::vector<int> widths;
  for (int c = 0; table.model() && c < table.model()->columnCount(); ++c) widths.push_back(view.sizeHintForColumn(c));
  return widths;
}

}  // namespace

void ColumnWidths::fit(QTableView& table) {
  table.resizeColumnsToContents();
  last_ = cell_widths(table);
}

void ColumnWidths::widen_grown(QTableView& table) {
  std::vector<int> now = cell_widths(table);
  for (size_t c = 0; c < now.size() && c < last_.size(); ++c) {
    const int column = static_cast<int>(c);
    if (now[c] > last_[c] && table.columnWidth(column) < now[c]) table.resizeColumnToContents(column);
  }
  last_ = std::move(now);
}

}  // namespace ampwb::ui
