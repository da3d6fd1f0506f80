// ampwb: the AMP Workbench executable. With no command (or only the GUI's own options) it opens the desktop
// workbench; otherwise one CLI11 parser, to which each command file adds its subcommands, reads the whole line and
// the chosen subcommand runs. Bad usage exits 2 with the reason on stderr, a command that fails exits 1. Headless
// subcommands never need a display.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/setting_error.h"
#include "setting_flags.h"

namespace ampwb::cli {

#ifdef AMPWB_HAVE_GUI
// The desktop workbench (gui_main.cpp).
bool is_gui_invocation(const std::vector<std::string>& tokens);
int gui_main(int argc, char** argv);
#else
// A headless build (AMPWB_BUILD_GUI=OFF): no command opens nothing; `export chart` says why it cannot run.
bool is_gui_invocation(const std::vector<std::string>& tokens) { return tokens.empty(); }
int export_chart_command(const ExportChartOptions&) {
  throw Error("ampwb export chart needs the desktop workbench's charts: this build has none (AMPWB_BUILD_GUI=OFF)");
}
#endif

namespace {

constexpr int kUsageError = 2;

const char* const kFooter =
    "With no command, ampwb opens the desktop workbench (GUI): ampwb [--db FILE].\n"
    "RUN is a run id or a unique run name. The run store is --db FILE (an SQLite file, or a PostgreSQL\n"
    "store shared by many machines: postgresql://host/database, docs/cluster.md), else $AMPWB_DB, else\n"
    "$XDG_DATA_HOME/ampwb/runs.sqlite (~/.local/share/ampwb/runs.sqlite).\n"
    "Exit status: 0 done; 1 the command failed, or refused what it was given (a setting's value the engine\n"
    "refuses, an unknown run); 2 the command line could not be parsed (an unknown command or flag, a value not\n"
    "of its flag's type or choices); 129, 130, 141 or 143 a training stopped by SIGHUP (its terminal closed),\n"
    "SIGINT, SIGPIPE (its output's reader went away) or SIGTERM.\n";

// The subcommands `app` defines, chosen or not.
std::vector<const CLI::App*> subcommands_of(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

// "a", "a or b", "a, b or c".
std::string alternatives(const std::vector<const CLI::App*>& apps) {
  std::string out;
  for (size_t i = 0; i < apps.size(); ++i)
    out += (i == 0 ? "" : i + 1 == apps.size() ? " or " : ", ") + apps[i]->get_name();
  return out;
}

// " RUN [BASELINE]": the operands a command takes, in order, those it can go without in brackets.
std::string operands_of(const CLI::App& command) {
  std::string out;
  for (const CLI::Option* o : command.get_options([](const CLI::Option* o) { return o->get_positional(); })) {
    const std::string many = o->get_items_expected_max() > 1 ? "..." : "";
    out += " " + (o->get_required() ? o->get_name() + many : "[" + o->get_name() + many + "]");
  }
  return out;
}

// The subcommands chosen on the line, outermost first: {export, csv}; empty when none was.
std::vector<const CLI::App*> chosen(const CLI::App& app) {
  std::vector<const CLI::App*> chain;
  for (const CLI::App* at = &app; !at->get_subcommands().empty();) chain.push_back(at = at->get_subcommands().front());
  return chain;
}

// "ampwb export csv".
std::string command_name(const std::vector<const CLI::App*>& chain) {
  std::string name = "ampwb";
  for (const CLI::App* sub : chain) name += " " + sub->get_name();
  return name;
}

// Edits (insertions, deletions, substitutions) that make `a` into `b`.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "max-val-images" -> {"max", "val", "images"}.
std::vector<std::string> words_of(const std::string& name) {
  std::vector<std::string> words;
  for (size_t from = 0; from <= name.size();) {
    const size_t end = std::min(name.find('-', from), name.size());
    words.push_back(name.substr(from, end - from));
    from = end + 1;
  }
  return words;
}

// The option of `app` that `given` (an unknown "--name") most likely meant: one a typo or two away, or one whose
// words each begin the other's (--max-validation-images for --max-val-images); for a letter ("-o", as other tools
// spell --out), the one option taking a value that begins with it, else the one flag; "" where none or several do.
std::string meant_option(const CLI::App& app, const std::string& given) {
  const bool letter = given.size() == 2 && given[0] == '-' && given[1] != '-';
  if (!given.starts_with("--") && !letter) return "";
  const std::string name = given.substr(letter ? 1 : 2);
  std::vector<std::string> close, flags;
  for (const CLI::Option* option : app.get_options())
    for (const std::string& known : option->get_lnames()) {
      if (letter) {  // one taking a value, as "-o FILE" does elsewhere; else a flag ("-r" for --remove)
        if (known.starts_with(name)) (option->get_expected_min() > 0 ? close : flags).push_back("--" + known);
        continue;
      }
      const std::vector<std::string> a = words_of(name), b = words_of(known);
      bool abbreviated = a.size() == b.size();
      for (size_t i = 0; abbreviated && i < a.size(); ++i)
        abbreviated = !a[i].empty() && !b[i].empty() && (a[i].starts_with(b[i]) || b[i].starts_with(a[i]));
      if (abbreviated || edit_distance(name, known) <= 2) close.push_back("--" + known);
    }
  if (close.empty()) close = flags;
  return close.size() == 1 ? close.front() : "";
}

// CLI11's refusal of a value outside a list ("--precision: bf16 not in {fp32,...,amp-bf16,...}"), with the value it
// most likely meant: the one that holds it ("amp-bf16"), else the one a typo or two away.
std::string with_meant_value(const std::string& message) {
  static const std::regex member(R"(: (\S+) not in \{([^}]*)\})");
  std::smatch m;
  if (!std::regex_search(message, m, member)) return message;
  const std::string given = CLI::detail::to_lower(m[1].str());  // BF16 meant amp-bf16 too
  std::vector<std::string> holding, close;
  std::stringstream values(m[2].str());
  for (std::string value; std::getline(values, value, ',');) {
    if (CLI::detail::to_lower(value).find(given) != std::string::npos) holding.push_back(value);
    if (edit_distance(given, CLI::detail::to_lower(value)) <= 2) close.push_back(value);
  }
  const std::vector<std::string>& meant = holding.empty() ? close : holding;
  return meant.size() == 1 ? message + "; did you mean " + meant.front() + "?" : message;
}

// What is wrong with the line, in words: CLI11's own message, except for an argument nothing took (an unknown
// option, command or surplus operand) and a missing command, which CLI11 words generically. An unknown option comes
// before a missing one, which is often the option misspelt ("--outt x" for "--out x").
std::string usage_problem(const CLI::App& app, const CLI::ParseError& e) {
  std::vector<const CLI::App*> chain = chosen(app);
  chain.insert(chain.begin(), &app);
  const CLI::App& last = *chain.back();
  const bool needs_command = !subcommands_of(last).empty();
  const bool left_over = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;  // get_name() is the command's
  const bool missing = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
  if (!left_over && !missing) return with_meant_value(e.what());
  for (auto at = chain.rbegin(); at != chain.rend(); ++at) {  // the innermost command that was left an argument
    const std::vector<std::string> left = (*at)->remaining();
    if (left.empty()) continue;
    const std::string& word = left.front();
    if (word == "--" && left.size() > 1)  // "note 2 -- -x --db F": the words after -- were all taken as values
      return "every word after -- is a value, and '" + left[1] + "' is one too many" +
             (left[1].starts_with("-") ? ": options go before --" : " (quote a value that holds spaces)");
    if (word.starts_with("-")) {
      const std::string option = word.substr(0, word.find('='));
      const std::string meant = meant_option(**at, option);
      if (!meant.empty()) return "unknown option " + option + "; did you mean " + meant + "?";
      // "--baseline 3" for the operand BASELINE, "--runs 1 2" for RUN...: the values alone, in their place.
      for (const CLI::Option* operand : (*at)->get_options([](const CLI::Option* o) { return o->get_positional(); }))
        if (const std::string name = CLI::detail::to_lower(operand->get_name());
            option == "--" + name || option == "--" + name + "s")
          return "unknown option " + option + ": " + operand->get_name() + " is given without a flag (" +
                 command_name(chosen(app)) + operands_of(**at) + ")";
      // A name or tag that begins with '-' reads as an option unless -- ends the options before it.
      const bool operand =
          word[1] != '-' && !(*at)->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
      return "unknown option " + option +
             (operand ? "; a value that begins with '-' goes last, after -- (... -- " + word + ")" : "");
    }
    if (!left_over && !needs_command) break;  // a missing option or operand, said by CLI11
    if (*at == &last && needs_command) {
      std::string meant;
      for (const CLI::App* sub : subcommands_of(last))
        if (edit_distance(word, sub->get_name()) <= 2) meant = meant.empty() ? sub->get_name() : "-";
      return "unknown command '" + word + "'" + (meant.empty() || meant == "-" ? "" : "; did you mean " + meant + "?") +
             " (expected " + alternatives(subcommands_of(last)) + ")";
    }
    return "unexpected argument '" + word + "'";
  }
  if (needs_command) return "needs a command: " + alternatives(subcommands_of(last));
  return e.what();
}

// CLI11's help layout, except that the whole help (ampwb help, AppFormatMode::All) expands the commands within
// commands too (export csv, dataset inspect, ...), so that it lists every flag.
class Formatter : public CLI::Formatter {
 public:
  std::string make_expanded(const CLI::App* sub) const override {
    std::string text = sub->get_display_name(true) + "\n" + make_description(sub) + make_positionals(sub) +
                       make_groups(sub, CLI::AppFormatMode::Sub) + make_subcommands(sub, CLI::AppFormatMode::All);
    while (text.find("\n\n") != std::string::npos) text = CLI::detail::find_and_replace(text, "\n\n", "\n");
    text.pop_back();                                                  // the final newline
    return CLI::detail::find_and_replace(text, "\n", "\n  ") + "\n";  // indented under the command's name
  }
};

// ampwb help [COMMAND...]: every command with every flag (and the devices), or one command's help.
int print_help(const CLI::App& app, const std::vector<std::string>& topic) {
  const CLI::App* at = &app;
  std::string name = "ampwb";
  for (const std::string& word : topic) {
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : subcommands_of(*at))
      if (sub->get_name() == word) next = sub;
    if (!next) {
      std::fprintf(stderr, "ampwb help: error: no command '%s' in %s (see ampwb help)\n", word.c_str(), name.c_str());
      return kUsageError;
    }
    name += " " + word;
    at = next;
  }
  const auto mode = topic.empty() ? CLI::AppFormatMode::All : CLI::AppFormatMode::Normal;
  std::printf("%s", at->get_formatter()->make_help(at, name, mode).c_str());
  return 0;
}

// The whole command line: every subcommand, its options and its help.
void build_parser(CLI::App& app, Invocation& invocation) {
  // Flags in any order, a repeated option's last value wins (scripts append overrides, as quickstart.sh does), and
  // the help shows each option's default.
  app.option_defaults()->always_capture_default()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto formatter = std::make_shared<Formatter>();
  formatter->column_width(34);
  app.formatter(formatter);
  app.set_version_flag("--version", "ampwb " AMPWB_VERSION);
  // One command per line, at each level: an operand named like a command (a run called "train") stays an operand.
  app.require_subcommand(1);

  add_train_command(app, invocation);
  add_bench_command(app, invocation);
  add_run_commands(app, invocation);
  add_explain_command(app, invocation);
  add_report_command(app, invocation);
  add_predict_command(app, invocation);
  add_store_commands(app, invocation);
  add_export_model_command(app, invocation);
  add_sweep_command(app, invocation);
  add_dataset_commands(app, invocation);
  add_devices_command(app, invocation);
  auto topic = std::make_shared<std::vector<std::string>>();
  CLI::App* help = app.add_subcommand("help", "every command with every flag, or one command's: ampwb help [COMMAND]");
  help->add_option("COMMAND", *topic, "a command, e.g. train or export csv")->type_name("")->default_str("");
  help->callback([&app, &invocation, topic] { invocation.run = [&app, topic] { return print_help(app, *topic); }; });
  app.footer([] { return kFooter + ("\n" + devices_help()); });
}

bool is_command(const CLI::App& app, const std::string& word) {
  try {
    return app.get_subcommand(word) != nullptr;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

}  // namespace
}  // namespace ampwb::cli

int main(int argc, char** argv) {
  using namespace ampwb::cli;
  CLI::App app("AMP Workbench " AMPWB_VERSION ": mixed-precision training experiments", "ampwb");
  Invocation invocation;
  build_parser(app, invocation);

  const std::vector<std::string> tokens(argv + 1, argv + argc);
  // `ampwb --db FILE runs`: --db is each command's flag. Said so, instead of opening the workbench.
  if (!tokens.empty() && (tokens[0] == "--db" || tokens[0].rfind("--db=", 0) == 0)) {
    const size_t next = tokens[0] == "--db" ? 2 : 1;
    if (next < tokens.size() && is_command(app, tokens[next])) {
      std::fprintf(stderr, "ampwb: --db goes after the command: ampwb %s --db FILE ...\n", tokens[next].c_str());
      return kUsageError;
    }
  }
  if (is_gui_invocation(tokens)) {
#ifdef AMPWB_HAVE_GUI
    return gui_main(argc, argv);
#else
    std::printf("%s", app.help().c_str());
    std::fprintf(stderr,
                 "\nthis ampwb was built without the desktop workbench (AMPWB_BUILD_GUI=OFF): give a command\n");
    return kUsageError;
#endif
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    const std::string name = command_name(chosen(app));
    std::fprintf(stderr, "%s: error: %s (see %s --help)\n", name.c_str(), usage_problem(app, e).c_str(), name.c_str());
    return kUsageError;
  }
  try {
    return invocation.run();
  } catch (const ampwb::SettingError& e) {  // the engine names the setting; the CLI says it as the flag
    std::fprintf(stderr, "%s: error: %s\n", command_name(chosen(app)).c_str(),
                 said_with_flag(e.setting(), e.what()).c_str());
    return 1;
  } catch (const ampwb::cli::UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", command_name(chosen(app)).c_str(), e.what());
    return kUsageError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", command_name(chosen(app)).c_str(), e.what());
    return 1;
  }
}
