// The field-list facility: each record (TrainConfig, RunInfo, StepReport, EpochReport, RunRecord, RunSummary) lists
// its fields once, as `fields(record, visitor)` next to the record, and every form of it (JSON, the store's
// columns, CSV columns, comparison rows) is made by visiting that list, so a new field is added in one place.
//
//   template <class R, class V> requires same_record<R, StepReport>   // R: the record, const or not
//   void fields(R& s, V&& v) { v("epoch", s.epoch); v({"lr", "learning_rate"}, s.lr); ... }
//
// A visitor is called as v(Field, member&): member is the record's own (const when the record is). A member that
// is itself a record (TrainConfig::optimizer) is visited as one field; visitors recurse into it (see Record).
#pragma once

#include <concepts>
#include <type_traits>

namespace ampwb {

// A field's names: `key` in JSON, in the run store and in comparisons; `column` in CSV files when it differs
// (CSV column names carry units: "learning_rate", "image_size_pixels").
struct Field {
  constexpr Field(const char* key, const char* column = nullptr) : key(key), column(column ? column : key) {}
  const char* key;
  const char* column;
};

// R is the record T, const or not: the one template serves readers and writers.
template <class R, class T>
concept same_record = std::same_as<std::remove_const_t<R>, T>;

namespace detail {
struct IgnoreField {
  template <class M>
  void operator()(Field, M&) const {}
};
}  // namespace detail

// A type with a field list.
template <class T>
concept Record = requires(T& record, detail::IgnoreField v) {
  fields(record, v);
};

}  // namespace ampwb
