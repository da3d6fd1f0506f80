// Scientific notation in a spin box that keeps what was typed (wide_number_box.h).
#include "wide_number_box.h"

#include <QLineEdit>
#include <QLocale>
#include <QRegularExpression>
#include <cmath>

#include "field_problem.h"

namespace ampwb::ui {
namespace {

// The C locale's form (1e-3, 0.001), or the user's locale's (0,001).
std::optional<double> parse_number(const QString& text, const QLocale& locale) {
  const QString point = QRegularExpression::escape(locale.decimalPoint());
  static const QString digits = "(\\d+(\\.|%1)?\\d*|(\\.|%1)\\d+)";
  const QRegularExpression whole("^[+-]?" + digits.arg(point) + "([eE][+-]?\\d+)?$");
  if (!whole.match(text).hasMatch()) return std::nullopt;
  bool ok = false;
  double value = QLocale::c().toDouble(text, &ok);
  if (!ok) value = locale.toDouble(text, &ok);
  return ok && std::isfinite(value) ? std::optional<double>(value) : std::nullopt;
}

bool same_number(double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b)); }

}  // namespace

WideNumberBox::WideNumberBox(double minimum, double maximum, double step, QWidget* parent) : QDoubleSpinBox(parent) {
  setDecimals(15);  // QDoubleSpinBox rounds every value to its decimals: 1e-15 keeps what a float holds
  setRange(minimum, maximum);
  setSingleStep(step);
  connect(lineEdit(), &QLineEdit::textChanged, this, &WideNumberBox::check_text);
  // Set by the program or stepped, the text is replaced with the edit's signals blocked: checked once more then.
  connect(this, &QDoubleSpinBox::valueChanged, this, [this] { check_text(lineEdit()->displayText()); });
}

void WideNumberBox::set_minimum_text(const QString& text) {
  minimum_text_ = text;
  setRange(minimum(), maximum());  // forgets the size hint, which holds the widest text
  lineEdit()->setText(textFromValue(value()));
}

std::optional<double> WideNumberBox::parse(const QString& text, QString* problem) const {
  const QString t = text.trimmed();
  if (!minimum_text_.isEmpty() && t.compare(minimum_text_, Qt::CaseInsensitive) == 0) return minimum();
  const QString range = tr("it takes %1%2 to %3, written 1e-3 or 0.001")
                            .arg(range_number_text(minimum()))
                            .arg(minimum_text_.isEmpty() ? QString() : tr(" (%1)").arg(minimum_text_))
                            .arg(range_number_text(maximum()));
  const std::optional<double> number = parse_number(t, locale());
  if (!number) {
    *problem = t.isEmpty() ? tr("empty; %1").arg(range) : tr("“%1” is not a number; %2").arg(t, range);
    return std::nullopt;
  }
  if (*number < minimum() || *number > maximum()) {
    *problem = tr("%1 is out of range; %2").arg(t, range);
    return std::nullopt;
  }
  problem->clear();
  return number;
}

QString WideNumberBox::textFromValue(double value) const {
  const QString shown = lineEdit()->displayText();
  if (const std::optional<QString> kept = kept_.for_value(value, shown)) return *kept;
  if (!minimum_text_.isEmpty() && value == minimum()) return minimum_text_;
  QString problem;
  if (const std::optional<double> typed = parse(shown, &problem); typed && same_number(*typed, value)) return shown;
  QString text = QString::number(value, 'g', 7);  // a float's digits
  text.replace(QRegularExpression("e([+-])0*(\\d)"), "e\\1\\2").replace("e+", "e");
  return text;
}

double WideNumberBox::valueFromText(const QString& text) const {
  QString problem;
  if (const std::optional<double> number = parse(text, &problem)) {
    kept_.forget();
    return *number;
  }
  return kept_.keep(text, value());
}

QValidator::State WideNumberBox::validate(QString&, int&) const { return QValidator::Acceptable; }

void WideNumberBox::check_text(const QString& text) {
  QString problem;
  parse(text, &problem);
  if (update_field_problem(this, problem_, problem)) Q_EMIT problem_changed(problem_);
}

}  // namespace ampwb::ui
