// What a number box (whole_number_box.h, wide_number_box.h) keeps of text it could not take: the text, shown as
// typed while the value it held then stays, so nothing typed is rewritten into a value the user did not write.
#pragma once

#include <QString>
#include <optional>

namespace ampwb::ui {

template <typename Value>
class KeptText {
 public:
  // The kept text, when `value` is the one held as it was typed and the box still shows it.
  std::optional<QString> for_value(Value value, const QString& shown) const {
    if (text_ && value == held_ && shown == *text_) return text_;
    return std::nullopt;
  }
  // Keeps `text` beside the value `held` meanwhile; returns that value, which stays the box's.
  Value keep(const QString& text, Value held) {
    text_ = text;
    held_ = held;
    return held;
  }
  void forget() { text_.reset(); }

 private:
  std::optional<QString> text_;
  Value held_{};
};

}  // namespace ampwb::ui
