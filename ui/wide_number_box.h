// A number field over many orders of magnitude (learning rate, weight decay, loss scales), typed and shown as people
// write such numbers: 1e-3, 0.001 or 65536, never rounded to a fixed count of decimals. QDoubleSpinBox alone refuses
// the 'e', so a learning rate typed as 1e-3 became 1.000000, a thousand times too large, without a word.
#pragma once

#include <QDoubleSpinBox>

namespace ampwb::ui {

class WideNumberBox : public QDoubleSpinBox {
 public:
  WideNumberBox(double minimum, double maximum, double step, QWidget* parent = nullptr);

  // What was typed while it still denotes the value ("1e-3"), else the shortest form that reads back as it.
  QString textFromValue(double value) const override;
  double valueFromText(const QString& text) const override;
  // Acceptable: a whole number in range; Intermediate: on the way to one, or out of range; Invalid: anything else.
  QValidator::State validate(QString& text, int& pos) const override;

 private:
  mutable QString typed_;
};

}  // namespace ampwb::ui
