// How a field shows that it holds text it cannot take: a red frame, and why (with the range it takes) as its
// tooltip. The text stays as typed, so the user sees what was wrong instead of a value silently put in its place.
#pragma once

#include <QString>

class QWidget;

namespace ampwb::ui {

// Marks `field` with `problem`, or, when `problem` is empty, gives it back its own frame and tooltip.
void mark_field_problem(QWidget* field, const QString& problem);

// Marks `field` with `problem` and stores it in `current`; true when it differs from what `current` held.
bool update_field_problem(QWidget* field, QString& current, const QString& problem);

// "1 to 10,000": numbers of a range as the messages write them.
QString range_number_text(double value);

}  // namespace ampwb::ui
