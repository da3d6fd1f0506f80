// What every ampwb subcommand shares on top of CLI11: how a parsed subcommand hands its work to main, number
// options refused by name when malformed, the --db option, and JSON output (nlohmann: NaN and infinity print as
// null, so every --json output parses).
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "core/choices.h"
#include "core/device_choice.h"
#include "core/error.h"
#include "store/run_store.h"

namespace ampwb::cli {

// What the command line asks for once parsed: the chosen subcommand's callback sets `run`, and main calls it after
// CLI11 has read and checked every argument, so no work starts on a line that is refused.
struct Invocation {
  std::function<int()> run;
};

// Makes `command(*options)` the invocation's work when `sub` is the subcommand chosen. The options live as long as
// the parser (the callback holds them).
template <class Options>
void run_on_parse(CLI::App* sub, Invocation& invocation, std::shared_ptr<Options> options,
                  int (*command)(const Options&)) {
  sub->callback([&invocation, options, command] { invocation.run = [options, command] { return command(*options); }; });
}

// A check for a number of type T, in words that name the flag: "--epochs: expects a whole number, got 'many'".
// Whole numbers are read in base 10 only (CLI11 alone would read "010" as octal, refuse "08") and passed on in that
// form, so it goes on an option as a transform (Option::check would keep the text as it was given).
template <class T>
CLI::Validator number_of() {
  static_assert(std::is_arithmetic_v<T>);
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if constexpr (std::is_integral_v<T>) {
          using Wide = std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>;
          Wide value{};
          const char* end = text.data() + text.size();
          const auto [stop, error] = std::from_chars(text.data(), end, value);
          if (text.empty() || stop != end || error == std::errc::invalid_argument)
            return std::string(std::is_signed_v<T> ? "expects a whole number"
                                                   : "expects a whole number of at least 0") +
                   ", got '" + text + "'";
          if (error == std::errc::result_out_of_range || value < static_cast<Wide>(std::numeric_limits<T>::min()) ||
              value > static_cast<Wide>(std::numeric_limits<T>::max()))
            return "'" + text + "' is out of range";
          text = std::to_string(value);
        } else {
          char* stop = nullptr;
          const double value = std::strtod(text.c_str(), &stop);
          if (text.empty() || stop != text.c_str() + text.size()) return "expects a number, got '" + text + "'";
          // inf, nan and what T cannot hold would reach the run store as null and lose the run's configuration.
          if (!std::isfinite(value) || std::fabs(value) > static_cast<double>(std::numeric_limits<T>::max()))
            return "expects a finite number, got '" + text + "'";
        }
        return std::string();
      },
      "");
}

// Adds `name` bound to `value` with number_of<T>; the help shows value's current content as the default.
template <class T>
CLI::Option* add_number(CLI::App* app, const std::string& name, T& value, const std::string& help) {
  return app->add_option(name, value, help)->transform(number_of<T>());
}

// Adds `name` bound to the choice `value` (core/choices.h): it takes the table's names, lists them in the help with
// what each does, and refuses any other word naming the choices ("--host-sync: 'sometimes' is not auto, every-step
// or deferred").
template <ChoiceEnum E>
CLI::Option* add_choice(CLI::App* app, const std::string& name, E& value, const std::string& help) {
  std::string described = help, names;
  for (const Choice<E>& row : ChoiceTable<E>::rows) {
    described += std::string(names.empty() ? ". " : "; ") + row.name + ": " + row.help;
    names += std::string(names.empty() ? "" : "|") + row.name;
  }
  return app
      ->add_option_function<std::string>(
          name, [&value](const std::string& text) { value = *parse_choice<E>(text); }, described)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return parse_choice<E>(text) ? std::string() : "'" + text + "' is not " + choice_names<E>();
          },
          ""))
      ->type_name(names)
      ->default_str(choice_name(value));
}

// Adds `name` bound to the named value `value` (core/device_choice.h), refusing a word it does not take ("--device:
// 'tpu' is not cpu, cuda, cuda:N or auto").
template <NamedValue T>
CLI::Option* add_named_value(CLI::App* app, const std::string& name, T& value, const std::string& help) {
  return app
      ->add_option_function<std::string>(
          name, [&value](const std::string& text) { value = *T::parse(text); }, help)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return T::parse(text) ? std::string() : "'" + text + "' is not " + T::names;
          },
          ""))
      ->type_name("DEVICE")
      ->default_str(value.name());
}

// A value not of its flag's type or choices, found after the command line was parsed (a sweep's point read through
// train's flags): `ampwb` exits with 2 for it, as for the command line's own.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Adds --db FILE: the run store.
CLI::Option* add_db_option(CLI::App* app, std::string& db);

// Adds --overwrite, for a command that writes the file --out names: without it, a file already there is refused
// (check_out_file), as the workbench asks before it replaces one.
CLI::Option* add_overwrite_flag(CLI::App* app, bool& overwrite);
// Throws, before any work, where the file `out` could not be written: it exists and `overwrite` is false (a model,
// report or chart written earlier is not lost to a command line run again), a file stands where a folder of its
// path should be, or the folder it goes into (or the nearest one above a missing one) is not writable.
void check_out_file(const std::string& out, bool overwrite);
// Makes the missing folders of `out`'s path, once its content is ready: a command that fails makes none.
void make_out_folder(const std::string& out);
// The run store file: `db` (from --db), else $AMPWB_DB, else the XDG data folder (RunStore::default_path). A URI
// this build cannot open is refused (store/store_location.h).
std::string store_path(const std::string& db);
// The run store at `path` (store_path) for a command that only reads it: opened as writers open it, so that it is
// brought to this build's schema and its abandoned runs are marked, except that a damaged SQLite store, which
// writers refuse, is read as it is, with a warning on stderr naming the damage and the way out; an empty file is
// read as one (no store yet), not made a store.
RunStore open_for_reading(const std::string& path, const char* command);
// The runs RUN arguments name (RunStore::resolve_each); a sweep's points left out for want of a run are said on
// stderr, "ampwb COMMAND: note: ...", so that a comparison of fewer runs than points does not pass for the sweep.
std::vector<int64_t> resolve_runs(const RunStore& store, const std::vector<std::string>& runs, const char* command);

// Prints `j` and a newline on stdout: indented by 2, or on one line for line-oriented readers (bench drivers).
// NaN and infinity print as null; invalid UTF-8 (a name stored by an older version) as U+FFFD.
void print_json(const nlohmann::json& j, bool one_line = false);
void print_json(const nlohmann::ordered_json& j, bool one_line = false);
// Epochs or steps of a run without loss scaling (which record a scale of 1) with loss_scale null: the run scaled
// nothing, as the tables' "-" and the CSV files' nan say.
inline void without_loss_scale(nlohmann::json& rows) {
  for (nlohmann::json& row : rows) row["loss_scale"] = nullptr;
}

// Text for a table or a line of the terminal: control characters as escapes (\n, \t, \x1b).
std::string printable(const std::string& text);

}  // namespace ampwb::cli
