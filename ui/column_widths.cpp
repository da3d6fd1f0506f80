#include "column_widths.h"

#include <QTableView>
#include <algorithm>

namespace ampwb::ui {
namespace {

std::vector<int> cell_widths(const QTableView& table) {
  const QAbstractItemView& view = table;  // where sizeHintForColumn is public
  std::vector<int> widths;
  for (int c = 0; table.model() && c < table.model()->columnCount(); ++c) widths.push_back(view.sizeHintForColumn(c));
  return widths;
}

// A column sized to its cells is at most this wide: a 200-character run name must not push the other columns out of
// sight. Its cells end in "…", whole in their tooltips; the user may still widen it.
int widest_column(const QTableView& table) { return 40 * table.fontMetrics().averageCharWidth(); }

void resize_to_contents(QTableView& table, int column) {
  table.resizeColumnToContents(column);
  table.setColumnWidth(column, std::min(table.columnWidth(column), widest_column(table)));
}

}  // namespace

void ColumnWidths::fit(QTableView& table) {
  for (int c = 0; table.model() && c < table.model()->columnCount(); ++c) resize_to_contents(table, c);
  last_ = cell_widths(table);
}

void ColumnWidths::widen_grown(QTableView& table) {
  std::vector<int> now = cell_widths(table);
  for (size_t c = 0; c < now.size() && c < last_.size(); ++c) {
    const int column = static_cast<int>(c);
    if (now[c] > last_[c] && table.columnWidth(column) < std::min(now[c], widest_column(table)))
      resize_to_contents(table, column);
  }
  last_ = std::move(now);
}

}  // namespace ampwb::ui
