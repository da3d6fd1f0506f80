// A live table's columns kept wide enough for their cells as the cells change, without undoing the widths a user
// chose. A status read every 2 s grows in place ("queued" becoming "cancelled"), and a column sized once for the first
// reading cut it to "cancel...". No column sized so is wider than 40 characters.
#pragma once

#include <vector>

class QTableView;

namespace ampwb::ui {

class ColumnWidths {
 public:
  // Every column to its contents and header: for a list shown for the first time.
  void fit(QTableView& table);
  // After cells changed: widens a column whose cells grew since the last call and no longer fit; never narrows.
  void widen_grown(QTableView& table);
  // fit() for a new list or the first (an empty one too: its headers are then whole), widen_grown() for the same list
  // read again.
  void follow(QTableView& table, bool new_list) { new_list || last_.empty() ? fit(table) : widen_grown(table); }

 private:
  std::vector<int> last_;  // each column's cells' width (sizeHintForColumn) at the last call
};

}  // namespace ampwb::ui
