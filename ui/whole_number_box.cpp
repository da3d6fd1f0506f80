// A whole-number field that keeps what was typed (whole_number_box.h).
#include "whole_number_box.h"

#include <QLineEdit>
#include <QLocale>

#include "field_problem.h"

namespace ampwb::ui {

WholeNumberBox::WholeNumberBox(int minimum, int maximum, QWidget* parent) : QSpinBox(parent) {
  setRange(minimum, maximum);
  connect(lineEdit(), &QLineEdit::textChanged, this, &WholeNumberBox::check_text);
  // Set by the program or stepped, the text is replaced with the edit's signals blocked: checked once more then.
  connect(this, &QSpinBox::valueChanged, this, [this] { check_text(lineEdit()->displayText()); });
}

void WholeNumberBox::set_minimum_text(const QString& text) {
  minimum_text_ = text;
  setRange(minimum(), maximum());  // forgets the size hint, which holds the widest text
  lineEdit()->setText(textFromValue(value()));
}

void WholeNumberBox::set_unit(const QString& unit) {
  unit_ = unit;
  setRange(minimum(), maximum());
  lineEdit()->setText(textFromValue(value()));
}

std::optional<int> WholeNumberBox::parse(const QString& text, QString* problem) const {
  QString t = text.trimmed();
  if (!minimum_text_.isEmpty() && t.compare(minimum_text_, Qt::CaseInsensitive) == 0) return minimum();
  if (!unit_.trimmed().isEmpty() && t.endsWith(unit_.trimmed())) t = t.chopped(unit_.trimmed().size()).trimmed();
  const QString range = tr("it takes %1%2 to %3")
                            .arg(range_number_text(minimum()))
                            .arg(minimum_text_.isEmpty() ? QString() : tr(" (%1)").arg(minimum_text_))
                            .arg(range_number_text(maximum()));
  bool ok = false;
  qlonglong number = QLocale::c().toLongLong(t, &ok);
  if (!ok) number = locale().toLongLong(t, &ok);
  if (!ok) {
    *problem = t.isEmpty() ? tr("empty; %1").arg(range) : tr("“%1” is not a whole number; %2").arg(t, range);
    return std::nullopt;
  }
  if (number < minimum() || number > maximum()) {
    *problem = tr("%1 is out of range; %2").arg(t, range);
    return std::nullopt;
  }
  problem->clear();
  return static_cast<int>(number);
}

QString WholeNumberBox::textFromValue(int value) const {
  if (const std::optional<QString> kept = kept_.for_value(value, lineEdit()->displayText())) return *kept;
  if (!minimum_text_.isEmpty() && value == minimum()) return minimum_text_;
  return QSpinBox::textFromValue(value) + unit_;
}

int WholeNumberBox::valueFromText(const QString& text) const {
  QString problem;
  if (const std::optional<int> number = parse(text, &problem)) {
    kept_.forget();
    return *number;
  }
  return kept_.keep(text, value());
}

QValidator::State WholeNumberBox::validate(QString&, int&) const { return QValidator::Acceptable; }

void WholeNumberBox::check_text(const QString& text) {
  QString problem;
  parse(text, &problem);
  if (update_field_problem(this, problem_, problem)) Q_EMIT problem_changed(problem_);
}

}  // namespace ampwb::ui
