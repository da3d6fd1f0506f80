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
    throw StoreError(
        "the run store is a PostgreSQL database: PostgreSQL run stores are not supported yet by this build (use an "
        "SQLite file's path)");
  return parsed.text;
}

}  // namespace ampwb
