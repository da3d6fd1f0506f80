// The red frame and the tooltip of a field that cannot take its text (field_problem.h).
#include "field_problem.h"

#include <QLocale>
#include <QVariant>
#include <QWidget>
#include <cmath>

#include "plain_text.h"

namespace ampwb::ui {

void mark_field_problem(QWidget* field, const QString& problem) {
  const bool marked = !field->property("fieldProblem").toString().isEmpty();
  if (!marked && problem.isEmpty()) return;
  if (!marked) {
    field->setProperty("usualToolTip", field->toolTip());  // the field's own explanation, for later
    // Its height as it was: the border's style sheet would change it, moving the fields below under the pointer.
    field->setFixedHeight(field->sizeHint().height());
  }
  field->setProperty("fieldProblem", problem);
  if (problem.isEmpty()) {
    field->setToolTip(field->property("usualToolTip").toString());
    field->setStyleSheet(QString());
    field->setMinimumHeight(0);
    field->setMaximumHeight(QWIDGETSIZE_MAX);
  } else {
    field->setToolTip(plain_tooltip(problem));
    field->setStyleSheet(QStringLiteral("border: 2px solid #c0392b; border-radius: 2px;"));
  }
}

bool update_field_problem(QWidget* field, QString& current, const QString& problem) {
  mark_field_problem(field, problem);
  if (problem == current) return false;
  current = problem;
  return true;
}

QString range_number_text(double value) {
  const QLocale english(QLocale::English);
  // A whole number in digits, grouped ("2,147,483,647", a seed's largest), as long as it stays readable so.
  if (value == std::floor(value) && std::fabs(value) < 1e15) return english.toString(static_cast<qlonglong>(value));
  QString text = QString::number(value, 'g', 7);
  return text.replace(QStringLiteral("e-0"), QStringLiteral("e-"))
      .replace(QStringLiteral("e+0"), QStringLiteral("e"))
      .replace(QStringLiteral("e+"), QStringLiteral("e"));
}

}  // namespace ampwb::ui
