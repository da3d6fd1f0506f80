// Scientific notation in a spin box (wide_number_box.h).
#include "wide_number_box.h"

#include <QLocale>
#include <QRegularExpression>
#include <optional>

namespace ampwb::ui {
namespace {

// The C locale's form (1e-3, 0.001), or the user's locale's (0,001).
std::optional<double> parse(const QString& text, const QLocale& locale) {
  bool ok = false;
  double value = QLocale::c().toDouble(text, &ok);
  if (!ok) value = locale.toDouble(text, &ok);
  return ok ? std::optional<double>(value) : std::nullopt;
}

}  // namespace

WideNumberBox::WideNumberBox(double minimum, double maximum, double step, QWidget* parent) : QDoubleSpinBox(parent) {
  setDecimals(15);  // QDoubleSpinBox rounds every value to its decimals: 1e-15 keeps what a float holds
  setRange(minimum, maximum);
  setSingleStep(step);
}

QString WideNumberBox::textFromValue(double value) const {
  if (!typed_.isEmpty() && parse(typed_, locale()) == value) return typed_;
  QString text = QString::number(value, 'g', 7);  // a float's digits
  text.replace(QRegularExpression("e([+-])0*(\\d)"), "e\\1\\2").replace("e+", "e");
  return text;
}

double WideNumberBox::valueFromText(const QString& text) const {
  const QString t = text.trimmed();
  if (!specialValueText().isEmpty() && t == specialValueText()) return minimum();
  const std::optional<double> value = parse(t, locale());
  if (!value) return this->value();
  typed_ = t;
  return *value;
}

QValidator::State WideNumberBox::validate(QString& text, int&) const {
  const QString t = text.trimmed();
  if (!specialValueText().isEmpty() && t == specialValueText()) return QValidator::Acceptable;
  if (t.isEmpty()) return QValidator::Intermediate;
  const QString point = QRegularExpression::escape(locale().decimalPoint());
  static const QString digits = "(\\d+(\\.|%1)?\\d*|(\\.|%1)\\d+)";
  const QRegularExpression whole("^[+-]?" + digits.arg(point) + "([eE][+-]?\\d+)?$");
  const QRegularExpression partial("^[+-]?(\\d*(\\.|" + point + ")?\\d*)([eE][+-]?\\d*)?$");
  if (whole.match(t).hasMatch()) {
    const std::optional<double> value = parse(t, locale());
    return value && *value >= minimum() && *value <= maximum() ? QValidator::Acceptable : QValidator::Intermediate;
  }
  return partial.match(t).hasMatch() ? QValidator::Intermediate : QValidator::Invalid;
}

}  // namespace ampwb::ui
