// A record's columns in the run store, from its field list (train/record_fields.h): the column names for a
// statement, a record's values bound to an INSERT's parameters, and a row read back into a record. Column names are
// the fields' keys. Nested records are not columns (TrainConfig and RunInfo are stored as JSON text).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/choices.h"
#include "core/device_choice.h"
#include "core/error.h"
#include "store/sql_connection.h"
#include "train/record_fields.h"

namespace ampwb {

// "epoch, step, loss, ..." for `SELECT` and `INSERT`.
template <Record R>
const std::string& column_names() {
  static const R record;
  static const std::string names = [] {
    std::string out;
    fields(record, [&](Field f, const auto&) { out += (out.empty() ? "" : ", ") + std::string(f.key); });
    return out;
  }();
  return names;
}

// "?, ?, ..." as many as the record has columns.
template <Record R>
const std::string& column_parameters() {
  static const R record;
  static const std::string parameters = [] {
    std::string out;
    fields(record, [&](Field, const auto&) { out += out.empty() ? "?" : ", ?"; });
    return out;
  }();
  return parameters;
}

// Binds every field, from parameter `first` (1-based) on; returns the next parameter's index. Booleans as 0 or 1,
// unsigned 64-bit values as the same 64 bits, NaN as NULL, enums and named values by name, lists of text as a JSON
// array.
template <Record R>
int bind_columns(SqlStatement& q, int first, const R& record) {
  int i = first;
  fields(record, [&](Field, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, bool>)
      q.bind(i++, v ? int64_t{1} : int64_t{0});
    else if constexpr (std::is_integral_v<T>)
      q.bind(i++, static_cast<int64_t>(v));
    else if constexpr (std::is_floating_point_v<T>)
      q.bind(i++, static_cast<double>(v));
    else if constexpr (std::is_same_v<T, std::string>)
      q.bind(i++, v);
    else if constexpr (std::is_same_v<T, std::vector<std::string>>)
      q.bind(i++, nlohmann::json(v).dump());
    else if constexpr (ChoiceEnum<T>)
      q.bind(i++, std::string(choice_name(v)));
    else if constexpr (NamedValue<T>)
      q.bind(i++, v.name());
    else
      q.bind(i++, nlohmann::json(v).template get<std::string>());  // an enum: its name
  });
  return i;
}

// Reads every field from column `first` (0-based) on; returns the next column's index. A NULL real reads as NaN
// (how SQLite keeps a NaN), a NULL text as ""; a damaged list of text as empty. An unknown name throws, or where
// `problems` is given, keeps the field's default and is said there, so that one odd row never hides the others.
template <Record R>
int read_columns(const SqlStatement& q, int first, R& record, std::string* problems = nullptr) {
  auto refuse = [problems](const std::string& problem) {
    if (!problems) throw Error(problem);
    *problems += (problems->empty() ? "" : "; ") + problem;
  };
  int c = first;
  fields(record, [&](Field, auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, bool>) {
      v = q.int64(c++) != 0;
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(q.int64(c++));
    } else if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(q.real_or_nan(c++));
    } else if constexpr (std::is_same_v<T, std::string>) {
      v = q.text(c++);
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      const nlohmann::json list = nlohmann::json::parse(q.text(c++), nullptr, false);
      v.clear();
      if (list.is_array())
        for (const auto& item : list)
          if (item.is_string()) v.push_back(item.template get<std::string>());
    } else if constexpr (ChoiceEnum<T>) {
      const std::string name = q.text(c++);
      if (const std::optional<T> value = parse_choice<T>(name))
        v = *value;
      else
        refuse("the stored " + std::string(ChoiceTable<T>::what) + " '" + name + "' is not " + choice_names<T>());
    } else if constexpr (NamedValue<T>) {
      const std::string name = q.text(c++);
      if (const std::optional<T> value = T::parse(name))
        v = *value;
      else
        refuse("the stored " + std::string(T::what) + " '" + name + "' is not " + T::names);
    } else {  // an enum with its own from_json, which refuses an unknown name
      try {
        v = nlohmann::json(q.text(c++)).template get<T>();
      } catch (const Error& e) {
        refuse(e.what());
      }
    }
  });
  return c;
}

}  // namespace ampwb
