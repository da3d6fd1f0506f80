// A whole-number field (epochs, batch size, seed, ...) that never changes what was typed. QSpinBox dropped the
// characters it could not take as they were typed ("-5x" became 5) and clamped what was out of range (a batch of
// 99999999 became the maximum); this box keeps the text, marks it (field_problem.h) and says why, with the range,
// while the value stays the last one it could take. The panel holding it refuses to train meanwhile.
#pragma once

#include <QSpinBox>
#include <optional>

#include "kept_text.h"

namespace ampwb::ui {

class WholeNumberBox : public QSpinBox {
  Q_OBJECT
 public:
  WholeNumberBox(int minimum, int maximum, QWidget* parent = nullptr);

  // Shown for the minimum and typed for it ("all", "auto (the data's)"). Drawn by the box itself, instead of
  // QSpinBox's special value text, which would replace text the box cannot take whenever the value is the minimum.
  void set_minimum_text(const QString& text);
  // Shown after the number (" px"); optional when typing.
  void set_unit(const QString& unit);

  // Why the text in the box is not a value it takes, with the range it takes; empty when it is one.
  QString problem() const { return problem_; }

  QString textFromValue(int value) const override;
  int valueFromText(const QString& text) const override;
  // Every text is let through (nothing typed is dropped); problem() says which ones are values.
  QValidator::State validate(QString& text, int& pos) const override;

 Q_SIGNALS:
  void problem_changed(const QString& problem);

 private:
  std::optional<int> parse(const QString& text, QString* problem) const;
  void check_text(const QString& text);

  QString minimum_text_, unit_, problem_;
  mutable KeptText<int> kept_;  // valueFromText is const in Qt's interface
};

}  // namespace ampwb::ui
