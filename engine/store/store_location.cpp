// Telling a run store's path from a database server's URI, and refusing the URIs this build cannot use.
#include "store/store_location.h"

#include <cctype>

#include "store/sqlite.h"

namespace ampwb {
namespace {

constexpr const char* kKnownSchemes = "postgresql:// or postgres:// (PostgreSQL)";

// The scheme of a `scheme://` URI, lower-cased (schemes are case-insensitive); empty when `text` is not one.
std::string uri_scheme(const std::string& text) {
  const size_t end = text.find("://");
  if (end == std::string::npos || end == 0 || !std::isalpha(static_cast<unsigned char>(text[0]))) return {};
  std::string scheme;
  for (size_t i = 0; i < end; ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if (!std::isalnum(ch) && ch != '+' && ch != '-' && ch != '.') return {};  // a '/' before "://": a path
    scheme += static_cast<char>(std::tolower(ch));
  }
  return scheme;
}

}  // namespace

StoreLocation parse_store_location(const std::string& location) {
  if (location.empty()) throw StoreError("the run store path is empty");
  const std::string scheme = uri_scheme(location);
  if (scheme.empty()) return {StoreLocation::Kind::SqliteFile, location};
  if (scheme == "postgresql" || scheme == "postgres") return {StoreLocation::Kind::PostgreSql, location};
  // Only the scheme is said: a URI may hold a password.
  throw StoreError("the run store's URI names the scheme '" + scheme +
                   "', which this build does not know: a run store is an SQLite file's path, or a URI of " +
                   kKnownSchemes);
}

std::string sqlite_store_file(const std::string& location) {
  const StoreLocation parsed = parse_store_location(location);
  if (parsed.kind == StoreLocation::Kind::PostgreSql)
    throw StoreError("the run store '" + location_without_password(location) +
                     "' is a PostgreSQL database, not an SQLite file");
  return parsed.text;
}

bool is_database_server(const std::string& location) {
  return parse_store_location(location).kind != StoreLocation::Kind::SqliteFile;
}

std::string location_without_password(const std::string& location) {
  std::string out = location;
  const size_t scheme_end = out.find("://");
  if (scheme_end != std::string::npos) {
    const size_t authority = scheme_end + 3;
    const size_t authority_end = out.find_first_of("/?", authority);
    const size_t at = out.rfind('@', authority_end == std::string::npos ? out.size() : authority_end);
    if (at != std::string::npos && at >= authority) {
      const size_t colon = out.find(':', authority);
      if (colon != std::string::npos && colon < at) out.erase(colon, at - colon);
    }
  }
  // A password= parameter, in a URI's query or a key=value string.
  for (size_t at = out.find("password="); at != std::string::npos; at = out.find("password=", at)) {
    const bool starts_a_key = at == 0 || out[at - 1] == '?' || out[at - 1] == '&' || out[at - 1] == ' ';
    if (!starts_a_key) {
      ++at;
      continue;
    }
    size_t end = out.find_first_of("& ", at);
    if (end == std::string::npos) end = out.size();
    out.erase(at + 9, end - at - 9);
    out.insert(at + 9, "***");
    at += 12;
  }
  return out;
}

std::string location_for_other_processes(const std::string& location) {
  if (!is_database_server(location)) return location;  // a file's name is a name, whatever it holds
  std::string out = location_without_password(location);
  // Each "password=***" key left by location_without_password, and the separator before it (or after, first).
  for (size_t at = out.find("password=***"); at != std::string::npos; at = out.find("password=***", at)) {
    const bool starts_a_key = at == 0 || out[at - 1] == '?' || out[at - 1] == '&' || out[at - 1] == ' ';
    if (!starts_a_key) {
      ++at;
      continue;
    }
    size_t from = at, to = at + 12;
    if (at > 0 && (out[at - 1] == '&' || out[at - 1] == ' '))
      --from;  // "...&password=***": the '&' goes with it
    else if (to < out.size() && (out[to] == '&' || out[to] == ' '))
      ++to;  // "?password=***&sslmode=...": the '&' after it goes, the '?' stays
    out.erase(from, to - from);
    at = from;
  }
  if (out.ends_with('?')) out.pop_back();
  return out;
}

}  // namespace ampwb
