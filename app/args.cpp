// Flag parsing.
#include "args.h"

#include <cstdio>
#include <stdexcept>

#include "core/error.h"

namespace ampwb::cli {

Args::Args(const std::vector<std::string>& tokens) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (!t.starts_with("--")) {
      positional_.push_back(t);
      continue;
    }
    const size_t eq = t.find('=');
    if (eq != std::string::npos) {
      values_[t.substr(2, eq - 2)] = t.substr(eq + 1);
    } else if (i + 1 < tokens.size() && !tokens[i + 1].starts_with("--")) {
      values_[t.substr(2)] = tokens[++i];
    } else {
      values_[t.substr(2)] = "";  // a boolean flag
    }
  }
}

std::string Args::text(const std::string& name, const std::string& fallback) {
  read_.insert(name);
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  if (it->second.empty()) throw Error("--" + name + " needs a value");
  return it->second;
}

long long Args::integer64(const std::string& name, long long fallback) {
  const std::string v = text(name, "");
  if (v.empty()) return fallback;
  size_t used = 0;
  long long parsed = 0;
  try {
    parsed = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size()) throw Error("--" + name + " expects a whole number, got '" + v + "'");
  return parsed;
}

int Args::integer(const std::string& name, int fallback) {
  const long long v = integer64(name, fallback);
  if (v < -2147483647LL || v > 2147483647LL) throw Error("--" + name + " is out of range");
  return static_cast<int>(v);
}

double Args::number(const std::string& name, double fallback) {
  const std::string v = text(name, "");
  if (v.empty()) return fallback;
  size_t used = 0;
  double parsed = 0;
  try {
    parsed = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size()) throw Error("--" + name + " expects a number, got '" + v + "'");
  return parsed;
}

bool Args::flag(const std::string& name) {
  read_.insert(name);
  auto it = values_.find(name);
  if (it == values_.end()) return false;
  if (it->second.empty() || it->second == "true" || it->second == "on" || it->second == "1") return true;
  if (it->second == "false" || it->second == "off" || it->second == "0") return false;
  throw Error("--" + name + " is a switch; it takes no value (got '" + it->second + "')");
}

void Args::reject_unknown() const {
  for (const auto& [name, value] : values_)
    if (!read_.count(name)) throw Error("unknown option --" + name + " (see ampwb help)");
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace ampwb::cli
