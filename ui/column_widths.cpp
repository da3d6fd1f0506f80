#include "column_widths.h"

#include <QTableView>

namespace ampwb::ui {

void ColumnWidths::fit() {
  table_->resizeColumnsToContents();
  last_ = contents();
}

void ColumnWidths::widen_grown() {
  std::vector<int> now = contents();
  for (size_t c = 0; c < now.size() && c < last_.size(); ++c) {
    const int column = static_cast<int>(c);
    if (now[c] > last_[c] && table_->columnWidth(column) < now[c]) table_->resizeColumnToContents(column);
  }
  last_ = std::move(now);
}

std::vector<int> ColumnWidths::contents() const {
  const QAbstractItemView* view = table_;  // where sizeHintForColumn is public
  std::vector<int> widths;
  for (int c = 0; table_->model() && c < table_->model()->columnCount(); ++c)
    widths.push_back(view->sizeHintForColumn(c));
  return widths;
}

}  // namespace ampwb::ui
