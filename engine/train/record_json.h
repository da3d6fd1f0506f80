// JSON and text from a record's field list (train/record_fields.h): the one to_json/from_json every record uses,
// and the one way a field's value is written for people. Included by the .cpp files that define a record's
// to_json/from_json (nlohmann finds those by argument-dependent lookup).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/choices.h"
#include "core/device_choice.h"
#include "core/error.h"
#include "core/float_decimal.h"
#include "train/record_fields.h"

namespace ampwb {

// The record as a JSON object, nested records as nested objects, keys in field-list order of appearance.
template <Record R>
void write_fields(nlohmann::json& j, const R& record) {
  j = nlohmann::json::object();
  fields(record, [&](Field f, const auto& member) {
    if constexpr (Record<std::decay_t<decltype(member)>>)
      write_fields(j[f.key], member);
    else if constexpr (ChoiceEnum<std::decay_t<decltype(member)>>)
      j[f.key] = choice_name(member);
    else if constexpr (NamedValue<std::decay_t<decltype(member)>>)
      j[f.key] = member.name();
    else if constexpr (std::is_same_v<std::decay_t<decltype(member)>, float>)
      j[f.key] = float_as_decimal(member);  // 0.9, not 0.8999999761581421
    else
      j[f.key] = member;
  });
}

// One value read from stored JSON, refused by name (`path`, e.g. "optimizer.momentum") when it does not fit the
// field: an integer field takes only an integer in range (nlohmann converts 7e30 to int by a cast whose result is
// undefined: found by scripts/fuzz.sh, fuzz_store_record), a float field only a number a float holds.
template <class T>
void read_value(const nlohmann::json& v, const std::string& path, const char* what, T& field) {
  auto refuse = [&](const char* expected) {
    throw Error(std::string("the stored ") + what + "'s " + path + " is not " + expected + ": " + v.dump());
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) refuse("true or false");
  } else if constexpr (std::is_integral_v<T>) {
    const bool fits = v.is_number_integer() &&
                      (v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max())
                                              : v.get<int64_t>() >= int64_t(std::numeric_limits<T>::min()) &&
                                                    v.get<int64_t>() <= int64_t(std::numeric_limits<T>::max()));
    if (!fits) refuse("a whole number in range");
  } else if constexpr (std::is_floating_point_v<T>) {
    const bool fits = v.is_number() && (!std::is_same_v<T, float> || !(std::fabs(v.get<double>()) > 3.4e38));
    if (!fits) refuse("a number in range");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) refuse("text");
  } else if constexpr (ChoiceEnum<T>) {
    const std::optional<T> value = v.is_string() ? parse_choice<T>(v.get<std::string>()) : std::nullopt;
    if (!value) refuse(("one of " + choice_names<T>()).c_str());
    field = *value;
    return;
  } else if constexpr (NamedValue<T>) {
    const std::optional<T> value = v.is_string() ? T::parse(v.get<std::string>()) : std::nullopt;
    if (!value) refuse(T::names);
    field = *value;
  } else if constexpr (std::is_enum_v<T>) {
    if (!v.is_string()) refuse("a name");
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!v.is_array()) refuse("a list");
    for (const auto& item : v)
      if (!item.is_string()) refuse("a list of text");
  }
  if constexpr (!NamedValue<T>) v.get_to(field);  // enums: their from_json, which refuses an unknown name
}

// Fills the record from a JSON object. Missing keys keep the record's values (its defaults: what older versions
// stored still loads); a value that does not fit is refused by name. `what` names the record in messages
// ("configuration": "the stored configuration's depth is not ...").
template <Record R>
void read_fields(const nlohmann::json& j, R& record, const char* what, const std::string& prefix = "") {
  if (!j.is_object()) return;
  fields(record, [&](Field f, auto& member) {
    const auto found = j.find(f.key);
    if (found == j.end()) return;
    if constexpr (Record<std::decay_t<decltype(member)>>)
      read_fields(*found, member, what, prefix + f.key + ".");
    else
      read_value(*found, prefix + f.key, what, member);
  });
}

// A value as people read it, the same in every table, comparison and export: a float in its shortest form (0.05,
// not the 0.05000000074505806 of its double), a double in its shortest exact form, nan, inf and -inf, true and
// false, an enum by its name.
template <class T>
std::string field_text(const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(value);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    char buf[64];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    std::string out;
    for (const std::string& item : value) out += (out.empty() ? "" : ";") + item;
    return out;
  } else if constexpr (ChoiceEnum<T>) {
    return choice_name(value);
  } else if constexpr (NamedValue<T>) {
    return value.name();
  } else {
    return nlohmann::json(value).template get<std::string>();  // an enum: its name
  }
}

// Every field as (dotted key, text): "precision.loss_scale.kind" -> "dynamic". The rows of a comparison.
template <Record R>
void flat_fields(const R& record, std::vector<std::pair<std::string, std::string>>& out,
                 const std::string& prefix = "") {
  fields(record, [&](Field f, const auto& member) {
    if constexpr (Record<std::decay_t<decltype(member)>>)
      flat_fields(member, out, prefix + f.key + ".");
    else
      out.emplace_back(prefix + f.key, field_text(member));
  });
}

}  // namespace ampwb
