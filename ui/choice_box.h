// A combo box for a setting with a fixed set of values, filled from its table (core/choices.h): each value's title
// as the text, its name as the item data and its help as the tooltip, so the GUI spells no value itself.
#pragma once

#include <QComboBox>
#include <QString>

#include "core/choices.h"

namespace ampwb {

template <ChoiceEnum E>
void add_choices(QComboBox* box) {
  for (const Choice<E>& row : ChoiceTable<E>::rows) {
    box->addItem(QString::fromUtf8(row.title), QString::fromUtf8(row.name));
    box->setItemData(box->count() - 1, QString::fromUtf8(row.help), Qt::ToolTipRole);
  }
}

// The value the box shows (every item is one of the table's, so it always parses).
template <ChoiceEnum E>
E chosen_choice(const QComboBox* box) {
  return parse_choice<E>(box->currentData().toString().toStdString()).value_or(ChoiceTable<E>::rows.front().value);
}

template <ChoiceEnum E>
void select_choice(QComboBox* box, E value) {
  const int i = box->findData(QString::fromUtf8(choice_name(value)));
  if (i >= 0) box->setCurrentIndex(i);
}

}  // namespace ampwb
