// A live table's columns kept wide enough for their cells as the cells change, without undoing the widths a user
// chose. A status read every 2 s grows in place ("queued" becoming "cancelled"), and a column sized once for the first
// reading cut it to "cancel...".
#pragma once

#include <vector>

class QTableView;

namespace ampwb::ui {

class ColumnWidths {
 public:
  explicit ColumnWidths(QTableView* table) : table_(table) {}

  // Every column to its contents and header: for a list shown for the first time.
  void fit();
  // After cells changed: widens a column whose contents grew since the last call and no longer fit; never narrows.
  void widen_grown();

 private:
  std::vector<int> contents() const;  // each column's cells' width, as resizeColumnToContents measures them

  QTableView* table_;
  std::vector<int> last_;  // contents() at the last call
};

}  // namespace ampwb::ui
