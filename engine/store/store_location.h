// Where a run store lives, as a user names it (`ampwb --db`, $AMPWB_DB, the workbench's store): a plain path is an
// SQLite file; a `scheme://` URI names a database server. Every front end opens its store through this, so a
// location the store cannot use is refused with the same words everywhere, before anything is created.
#pragma once

#include <string>

namespace ampwb {

struct StoreLocation {
  enum class Kind {
    SqliteFile,  // text: the file's path, as given
    PostgreSql,  // text: the libpq connection URI, as given (postgresql:// or postgres://)
  };
  Kind kind = Kind::SqliteFile;
  std::string text;
};

// Reads `location`: a URI with a scheme this build knows, else a path. Only `scheme://` makes a URI (RFC 3986: a
// letter, then letters, digits, '+', '-' or '.'), so a path holding a ':' stays a path. Throws StoreError naming
// the scheme and the ones it knows for any other scheme, and for an empty location.
StoreLocation parse_store_location(const std::string& location);

// The SQLite file at `location`; throws StoreError when `location` is not an SQLite file (a PostgreSQL URI, an
// unknown scheme).
std::string sqlite_store_file(const std::string& location);

// Whether `location` names a database server (a PostgreSQL URI) rather than a file; throws as parse_store_location.
bool is_database_server(const std::string& location);

// `location` without a password (a URI's user-info password, a password= parameter's value): what messages and a
// run's settings show. Passwords belong in ~/.pgpass or PGPASSFILE, which libpq reads itself.
std::string location_without_password(const std::string& location);
// `location` with no password at all (a password= parameter left out whole): what other processes are handed to
// connect with, such as a Slurm job's script, which others may read; they find the password in ~/.pgpass.
std::string location_for_other_processes(const std::string& location);

}  // namespace ampwb
