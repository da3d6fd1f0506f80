// A setting that takes one of a fixed set of values, as one table beside its enum: each value's name (the CLI's, the
// store's and the JSON's spelling), its title (the GUI's) and one sentence of help. The CLI parses and lists names
// from it, the GUI fills its lists from it, and the run store and JSON write and read names through it
// (train/record_json.h), so a value is spelled in one place.
//
//   enum class HostSync : uint8_t { Auto, EveryStep, Deferred };
//   template <> struct ChoiceTable<HostSync> {
//     static constexpr const char* what = "host sync";
//     static constexpr std::array<Choice<HostSync>, 3> rows = {{{HostSync::Auto, "auto", "auto", "..."}, ...}};
//   };
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ampwb {

template <class E>
struct Choice {
  E value;
  const char* name;   // "every-step"
  const char* title;  // "every step"
  const char* help;   // one sentence
};

template <class E>
struct ChoiceTable;  // specialised beside each enum: `what` (the setting in words) and `rows`

template <class E>
concept ChoiceEnum = requires {
  ChoiceTable<E>::rows;
  ChoiceTable<E>::what;
};

template <ChoiceEnum E>
const Choice<E>& choice_row(E value) {
  for (const Choice<E>& row : ChoiceTable<E>::rows)
    if (row.value == value) return row;
  return ChoiceTable<E>::rows.front();  // unreachable for a value of the enum: every value has its row (tested)
}

template <ChoiceEnum E>
const char* choice_name(E value) {
  return choice_row(value).name;
}

template <ChoiceEnum E>
std::optional<E> parse_choice(std::string_view name) {
  for (const Choice<E>& row : ChoiceTable<E>::rows)
    if (name == row.name) return row.value;
  return std::nullopt;
}

// "auto, every-step or deferred": the names, for messages and help.
template <ChoiceEnum E>
std::string choice_names() {
  std::string out;
  const auto& rows = ChoiceTable<E>::rows;
  for (size_t i = 0; i < rows.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == rows.size() ? " or " : ", ") + rows[i].name;
  return out;
}

}  // namespace ampwb
