// A number field over many orders of magnitude (learning rate, weight decay, loss scales) or with a few decimals
// (momentum, fractions), typed and shown as people write such numbers: 1e-3, 0.001 or 65536, never rounded to a fixed
// count of decimals. QDoubleSpinBox alone refused the 'e', so a learning rate typed as 1e-3 became 1.000000, a
// thousand times too large, without a word. Like WholeNumberBox, it never changes what was typed: text that is no
// number or out of range stays, marked and explained with the range, while the value stays the last one it took.
#pragma once

#include <QDoubleSpinBox>
#include <optional>

#include "kept_text.h"

namespace ampwb::ui {

class WideNumberBox : public QDoubleSpinBox {
  Q_OBJECT
 public:
  WideNumberBox(double minimum, double maximum, double step, QWidget* parent = nullptr);

  // Shown for the minimum and typed for it ("none", "off"); drawn by the box itself (see WholeNumberBox).
  void set_minimum_text(const QString& text);

  // Why the text in the box is not a value it takes, with the range it takes; empty when it is one.
  QString problem() const { return problem_; }

  // What was typed while it still denotes the value ("1e-3"), else the shortest form that reads back as it.
  QString textFromValue(double value) const override;
  double valueFromText(const QString& text) const override;
  // Every text is let through (nothing typed is dropped); problem() says which ones are values.
  QValidator::State validate(QString& text, int& pos) const override;

 Q_SIGNALS:
  void problem_changed(const QString& problem);

 private:
  std::optional<double> parse(const QString& text, QString* problem) const;
  void check_text(const QString& text);

  QString minimum_text_, problem_;
  mutable KeptText<double> kept_;  // valueFromText is const in Qt's interface
};

}  // namespace ampwb::ui
