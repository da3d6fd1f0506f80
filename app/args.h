// Command-line flags: "--name value", "--name=value" and boolean "--name". Every flag a command reads is
// recorded, so a misspelt flag is refused with its name instead of being ignored.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace ampwb::cli {

class Args {
 public:
  Args(const std::vector<std::string>& tokens);

  std::string text(const std::string& name, const std::string& fallback);
  int integer(const std::string& name, int fallback);
  long long integer64(const std::string& name, long long fallback);
  double number(const std::string& name, double fallback);
  bool flag(const std::string& name);  // present without a value, or =true/=false
  const std::vector<std::string>& positional() const { return positional_; }

  // Throws naming the first flag no command read.
  void reject_unknown() const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> read_;
  std::vector<std::string> positional_;
};

// A JSON string literal (quotes and escapes).
std::string json_string(const std::string& text);

}  // namespace ampwb::cli
