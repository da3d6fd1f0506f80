// The shared command-line plumbing: --db, the run store path, JSON output and printable text.
#include "cli.h"

#include <cstdio>

#include "store/run_store.h"
#include "store/store_location.h"

namespace ampwb::cli {

CLI::Option* add_db_option(CLI::App* app, std::string& db) {
  return app->add_option("--db", db, "the run store (default: $AMPWB_DB, else $XDG_DATA_HOME/ampwb/runs.sqlite)")
      ->type_name("FILE");
}

// Checked here, not only where the store opens: some commands look at the file first (`runs` lists no store as empty).
std::string store_path(const std::string& db) {
  return parse_store_location(db.empty() ? RunStore::default_path() : db).text;
}

namespace {
template <class Json>
void print(const Json& j, bool one_line) {
  const std::string text = j.dump(one_line ? -1 : 2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
}
}  // namespace

void print_json(const nlohmann::json& j, bool one_line) { print(j, one_line); }
void print_json(const nlohmann::ordered_json& j, bool one_line) { print(j, one_line); }

std::string printable(const std::string& text) {
  std::string out;
  for (const unsigned char ch : text) {
    if (ch == '\n')
      out += "\\n";
    else if (ch == '\t')
      out += "\\t";
    else if (ch < 0x20 || ch == 0x7f)
      out += "\\x" + std::string(1, "0123456789abcdef"[ch >> 4]) + "0123456789abcdef"[ch & 15];
    else
      out += static_cast<char>(ch);
  }
  return out;
}

}  // namespace ampwb::cli
