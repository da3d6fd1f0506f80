// The table from a setting's key to its flag, filled as the flags are declared (setting_flags.h).
#include "setting_flags.h"

#include <map>
#include <stdexcept>

namespace ampwb::cli {
namespace {

std::map<std::string, std::string>& flags_by_setting() {
  static std::map<std::string, std::string> flags;
  return flags;
}

}  // namespace

CLI::Option* names_setting(CLI::Option* option, const std::string& key) {
  const std::string flag = option->get_name();
  const auto [at, added] = flags_by_setting().emplace(key, flag);
  // Two spellings of one setting would make the error name the flag of another command than the one given.
  if (!added && at->second != flag)
    throw std::logic_error("the setting " + key + " is set by both " + at->second + " and " + flag);
  return option;
}

std::string flag_of_setting(const std::string& key) {
  const auto at = flags_by_setting().find(key);
  return at == flags_by_setting().end() ? std::string() : at->second;
}

std::string said_with_flag(const std::string& key, const std::string& message) {
  const std::string flag = flag_of_setting(key);
  return flag.empty() ? message : flag + ": " + message;
}

}  // namespace ampwb::cli
