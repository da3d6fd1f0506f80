// The shared command-line plumbing: --db, the run store path, JSON output and printable text.
#include "cli.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "store/run_store.h"
#include "store/store_filesystem.h"
#include "store/store_location.h"

namespace ampwb::cli {

CLI::Option* add_db_option(CLI::App* app, std::string& db) {
  return app
      ->add_option("--db", db,
                   "the run store: an SQLite file, or postgresql://host/database (default: $AMPWB_DB, else "
                   "$XDG_DATA_HOME/ampwb/runs.sqlite)")
      ->type_name("FILE")
      // `--db "$DB"` with DB unset would otherwise record into the default store.
      ->check(CLI::Validator(
          [](std::string& path) {
            return path.empty() ? std::string("an empty path: name the run store (FILE or postgresql://host/database)")
                                : std::string();
          },
          "", "not empty"));
}

CLI::Option* add_overwrite_flag(CLI::App* app, bool& overwrite) {
  return app->add_flag("--overwrite", overwrite, "replace the --out file where it exists already");
}

void check_out_file(const std::string& out, bool overwrite) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!overwrite && fs::exists(out, ec))
    throw Error("'" + out + "' exists already: name another --out, or add --overwrite to replace it");
  fs::path folder = fs::path(out).parent_path();
  while (!folder.empty() && !fs::exists(folder, ec)) folder = folder.parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, ec))
    throw Error("cannot write '" + out + "': '" + folder.string() + "' is a file, not a folder");
  if (::access(folder.c_str(), W_OK) != 0)
    throw Error("cannot write '" + out + "': the folder '" + folder.string() + "': " + std::strerror(errno));
}

void make_out_folder(const std::string& out) {
  const std::filesystem::path folder = std::filesystem::path(out).parent_path();
  if (std::error_code ec; !folder.empty() && !std::filesystem::create_directories(folder, ec) && ec)
    throw Error("cannot make the folder '" + folder.string() + "': " + ec.message());
}

namespace {
// A Slurm job often runs on another node than the one its user works on: an SQLite store on a network filesystem is
// then open on two machines at once, which can corrupt it (store/store_filesystem.h). Said once a process.
void warn_of_a_job_on_a_shared_sqlite_file(const StoreLocation& location) {
  static bool said = false;
  const char* job = std::getenv("SLURM_JOB_ID");
  if (said || !job || location.kind != StoreLocation::Kind::SqliteFile) return;
  const std::optional<MountedFilesystem> mount = filesystem_of(location.text);
  if (!mount || !mount->network) return;
  said = true;
  std::fprintf(stderr,
               "ampwb: warning: the run store '%s' is an SQLite file on %s, a network filesystem, and this runs in "
               "Slurm job %s: while it is open here, no process on another machine (the workbench on a login node, "
               "a job on another node) may open it, or the store can be corrupted; a cluster's runs record into "
               "PostgreSQL (docs/cluster.md)\n",
               location.text.c_str(), mount->type.c_str(), job);
}
}  // namespace

// Checked here, not only where the store opens: some commands look at the file first (`runs` lists no store as empty).
RunStore open_for_reading(const std::string& path, const char* command) {
  std::error_code ec;
  if (!is_database_server(path) && std::filesystem::is_regular_file(path, ec) &&
      std::filesystem::file_size(path, ec) == 0)
    return RunStore(path, RunStore::Mode::ReadOnly);  // says "an empty file, not yet a run store"
  try {
    return RunStore(path, RunStore::Mode::Existing);
  } catch (const StoreError& e) {
    if (!e.damaged() || is_database_server(path)) throw;
    std::fprintf(stderr,
                 "ampwb %s: warning: %s\nampwb %s: reading it as it is: the records on its damaged pages are missing "
                 "or refused\n",
                 command, e.what(), command);
    return RunStore(path, RunStore::Mode::ReadOnly);
  }
}

std::vector<int64_t> resolve_runs(const RunStore& store, const std::vector<std::string>& runs, const char* command) {
  std::vector<std::string> left_out;
  const std::vector<int64_t> ids = store.resolve_each(runs, &left_out);
  if (!left_out.empty()) {
    std::string list;
    for (const std::string& point : left_out) list += (list.empty() ? "" : ", ") + point;
    std::fprintf(stderr, "ampwb %s: note: left out, having no run: %s\n", command, list.c_str());
  }
  return ids;
}

std::string store_path(const std::string& db) {
  const StoreLocation location = parse_store_location(db.empty() ? RunStore::default_path() : db);
  warn_of_a_job_on_a_shared_sqlite_file(location);
  return location.text;
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
