// The commands that export or change stored runs, and look after the store itself: export csv|chart, delete,
// rename, tag, note, store check|backup|recover|copy. Every one but store copy (which names both stores) takes --db.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/csv_export.h"
#include "analysis/report_text.h"
#include "commands.h"
#include "core/error.h"
#include "core/shell_word.h"
#include "store/final_weights.h"
#include "store/run_store.h"
#include "store/store_copy.h"
#include "store/store_filesystem.h"
#include "store/store_location.h"
#include "store/store_recover.h"

namespace ampwb::cli {
namespace {

// Stores are opened Existing: a missing file is an error, a write-protected one is read, not changed.
RunStore open_existing(const std::string& db) { return RunStore(store_path(db), RunStore::Mode::Existing); }

struct ExportCsvOptions {
  std::vector<std::string> runs;
  std::string out, db;
  bool all = false, overwrite = false;
};

int export_csv_command(const ExportCsvOptions& options) {
  if (options.out == "-")  // as other tools read it, standard output: no place for several files
    throw Error(
        "--out -: export csv writes several files (steps, epochs and summaries), so it takes a folder, not "
        "standard output");
  RunStore store = open_for_reading(store_path(options.db), "export csv");
  std::vector<int64_t> ids;
  if (options.all) {
    for (const RunRecord& r : store.runs()) ids.push_back(r.id);
  } else {
    ids = resolve_runs(store, options.runs, "export csv");
  }
  // A file where the folder should be, or a folder not writable, said as for every export, before any file is written.
  check_out_file((std::filesystem::path(options.out) / "runs-summary.csv").string(), true);
  // Files of this export already there are another export's figures: replaced only when asked, as a chart or report.
  std::vector<std::string> there;
  std::error_code ec;
  for (const std::string& file : csv_export_files(ids, options.out))
    if (std::filesystem::exists(file, ec)) there.push_back(std::filesystem::path(file).filename().string());
  if (!there.empty() && !options.overwrite) {
    std::string named = there[0];
    for (size_t i = 1; i < std::min<size_t>(there.size(), 3); ++i)
      named += (i + 1 == there.size() ? " and " : ", ") + there[i];
    if (there.size() > 3) named += " and " + std::to_string(there.size() - 3) + " more";
    throw Error("'" + options.out + "' holds " + named +
                " already, which this export would replace: name another --out, or add --overwrite to replace them");
  }
  const std::vector<int64_t> earlier = runs_exported_before(options.out, ids);
  for (const std::string& file : export_csv(store, ids, options.out)) std::printf("%s\n", file.c_str());
  if (!earlier.empty())
    std::fprintf(stderr,
                 "note: %s also holds the files of an earlier export of %s; runs-summary.csv and runs-long.csv "
                 "list only the %zu run%s exported now\n",
                 options.out.c_str(), runs_phrase(earlier).c_str(), ids.size(), ids.size() == 1 ? "" : "s");
  return 0;
}

// A run (RUN) and, for rename, tag and note, one more word (NAME, TAG, TEXT).
struct EditOptions {
  std::string run, value, db;
  bool remove = false;  // tag --remove
  bool yes = false;     // delete --yes
};

// Asked on a terminal only: a script's `ampwb delete` is already its author's decision. On standard error, which
// stays on the terminal where the output is redirected.
bool confirmed_on_terminal(const std::string& question) {
  if (::isatty(STDIN_FILENO) != 1) return true;
  std::fprintf(stderr, "%s [y/N] ", question.c_str());
  std::fflush(stderr);
  std::string answer;
  if (!std::getline(std::cin, answer)) {
    std::fputc('\n', stderr);  // Ctrl-D: the reply starts a line of its own
    return false;
  }
  std::erase_if(answer, [](unsigned char c) { return std::isspace(c); });
  std::transform(answer.begin(), answer.end(), answer.begin(), [](unsigned char c) { return std::tolower(c); });
  return answer == "y" || answer == "yes";
}

int delete_command(const EditOptions& options) {
  RunStore store = open_existing(options.db);
  const RunRecord r = store.run(store.resolve(options.run));
  const std::vector<CheckpointInfo> checkpoints = store.checkpoints(r.id);
  const bool had_weights = final_weights_state(r) == "yes", owns_weights = owns_final_weights(store.path(), r);
  // What would refuse the deletion refuses it before the question, not after a yes.
  store.require_writable("delete a run");
  if (const std::string why = store.removal_refusal(r); !why.empty()) throw Error(why);
  if (!options.yes && !confirmed_on_terminal("delete run " + std::to_string(r.id) + " (" + printable(r.name) +
                                             "), everything recorded about it" +
                                             (had_weights && owns_weights ? " and its final weights" : "") +
                                             "? This cannot be undone.")) {
    std::printf("nothing deleted\n");
    return 1;
  }
  store.remove(r.id);
  std::printf("deleted run %lld (%s)\n", static_cast<long long>(r.id), printable(r.name).c_str());
  if (had_weights && !owns_weights)
    std::printf(
        "  its final weights file stays, as another store may name it too (a copy of this one, or this one under "
        "another name): remove it by hand if none does: %s\n",
        r.info.final_weights.c_str());
  else if (had_weights && !std::filesystem::exists(r.info.final_weights))
    std::printf("  and its final weights: %s\n", r.info.final_weights.c_str());
  std::error_code ec;
  std::set<std::string> named;                 // a row an epoch, most with the same file
  for (const CheckpointInfo& c : checkpoints)  // a finished run's were removed with their folder
    if (named.insert(c.path).second && std::filesystem::exists(c.path, ec))
      std::printf(
          "  its checkpoint file stays on disk, though no run resumes from it now (remove it to free the "
          "space): %s\n",
          c.path.c_str());
  return 0;
}

int rename_command(const EditOptions& options) {
  RunStore store = open_existing(options.db);
  const int64_t id = store.resolve(options.run);
  store.rename(id, options.value);
  std::printf("run %lld is now named '%s'\n", static_cast<long long>(id), options.value.c_str());
  return 0;
}

int tag_command(const EditOptions& options) {
  RunStore store = open_existing(options.db);
  const int64_t id = store.resolve(options.run);
  if (options.remove) {
    const std::string removed = store.remove_tag(id, options.value);
    std::printf("run %lld: removed tag '%s'\n", static_cast<long long>(id), removed.c_str());
  } else if (store.add_tag(id, options.value)) {
    std::printf("run %lld: added tag '%s'\n", static_cast<long long>(id), options.value.c_str());
  } else {  // as the run has it, whatever case was given
    const std::vector<std::string> tags = store.run(id).tags;
    const auto had =
        std::find_if(tags.begin(), tags.end(), [&](const std::string& t) { return same_tag(t, options.value); });
    std::printf("run %lld: has the tag '%s' already\n", static_cast<long long>(id),
                had != tags.end() ? had->c_str() : options.value.c_str());
  }
  return 0;
}

int note_command(const EditOptions& options) {
  RunStore store = open_existing(options.db);
  const int64_t id = store.resolve(options.run);
  store.set_notes(id, options.value);
  std::printf("run %lld: notes set\n", static_cast<long long>(id));
  return 0;
}

struct StoreOptions {
  std::string file, db;  // file: backup's destination
};

// Runs whose row still says running though no process records them (killed, or their node lost): not damage, but
// worth knowing on a shared store. They read as interrupted, and the next open for writing marks them so; a read
// of the store tells them by their missing end time (a marked run has one).
void print_abandoned_runs(const std::string& path) {
  std::vector<RunRecord> abandoned;
  for (RunRecord& r : RunStore(path, RunStore::Mode::ReadOnly).runs())
    if (r.status == RunStatus::Interrupted && r.ended.empty()) abandoned.push_back(std::move(r));
  if (abandoned.empty()) return;
  std::printf(
      "%zu run%s marked running whose recording process is gone (the next ampwb that records into the store "
      "marks %s interrupted):\n",
      abandoned.size(), abandoned.size() == 1 ? "" : "s", abandoned.size() == 1 ? "it" : "them");
  for (const RunRecord& r : abandoned)
    std::printf("  run %lld (%s), last recorded %s on %s, pid %lld\n", static_cast<long long>(r.id),
                printable(r.name).c_str(), r.updated.c_str(), r.host.c_str(), static_cast<long long>(r.pid));
}

// Runs whose final weights file is gone (removed by hand, or by a store that shared it): the store is whole, but
// predict and export model cannot load them.
void print_missing_weights(const std::string& path) {
  std::vector<RunRecord> missing;
  for (RunRecord& r : RunStore(path, RunStore::Mode::ReadOnly).runs())
    if (final_weights_state(r) == "missing") missing.push_back(std::move(r));
  if (missing.empty()) return;
  std::printf(missing.size() == 1
                  ? "%zu run's final weights file is gone (ampwb predict and export model cannot load it):\n"
                  : "%zu runs' final weights files are gone (ampwb predict and export model cannot load them):\n",
              missing.size());
  for (const RunRecord& r : missing)
    std::printf("  run %lld (%s): %s\n", static_cast<long long>(r.id), printable(r.name).c_str(),
                r.info.final_weights.c_str());
}

// Where an SQLite store lies on a network filesystem, what keeps it whole there (store/store_filesystem.h).
void print_network_filesystem(const std::string& path) {
  if (is_database_server(path)) return;
  const std::optional<MountedFilesystem> mount = filesystem_of(path);
  if (!mount || !mount->network) return;
  std::printf(
      "it lies on %s (%s), a network filesystem: keep every process that opens it on one machine at a time; "
      "runs from several machines record into PostgreSQL (docs/cluster.md)\n",
      mount->mount_point.c_str(), mount->type.c_str());
}

int store_check_command(const StoreOptions& options) {
  const std::string path = store_path(options.db);
  std::error_code ec;
  if (!is_database_server(path) && !std::filesystem::is_regular_file(path, ec))
    throw Error("no run store at '" + path + "'");
  std::string problems;
  try {
    problems = RunStore(path, RunStore::Mode::ReadOnly).integrity_check();
  } catch (const StoreError& e) {
    // SQLite's own header check, not a read of ours: a descriptor of the file opened and closed beside SQLite's
    // would drop its locks (store/sqlite_locks.h). Anything else is not a damaged store but no store at all.
    if (e.not_a_database()) throw Error("'" + path + "' " + not_sqlite_words(path));
    if (!e.damaged()) throw;  // a newer schema, another program's database, a locked file: said as they are
    const std::string cut_short = is_database_server(path) ? "" : cut_short_words(path);
    problems = cut_short.empty() ? e.what() : cut_short + ": SQLite reads none of it";
  }
  if (problems == "ok") {
    if (is_database_server(path))
      std::printf("the run store '%s' is whole (PostgreSQL, schema version %d: every row read, none without its run)\n",
                  location_without_password(path).c_str(), RunStore::kSchemaVersion);
    else
      std::printf("the run store '%s' is whole (SQLite integrity_check: ok)\n", path.c_str());
    print_network_filesystem(path);
    print_abandoned_runs(path);
    print_missing_weights(path);
    return 0;
  }
  std::printf("the run store '%s' is damaged:\n", location_without_password(path).c_str());
  size_t at = 0;
  for (int line = 0; at < problems.size(); ++line) {  // SQLite lists every cell: the first 20 lines say enough
    const size_t end = std::min(problems.find('\n', at), problems.size());
    if (line == 20) {
      std::printf("  ... and more\n");
      break;
    }
    std::printf("  %s\n", problems.substr(at, end - at).c_str());
    at = end + 1;
  }
  print_network_filesystem(path);
  if (is_database_server(path)) {
    std::printf(
        "keep a copy (ampwb store backup --db %s FILE): it takes every run with its records and leaves the rows "
        "without a run behind; ampwb store copy FILE into an empty database makes a whole store of it\n",
        shell_quoted(location_without_password(path)).c_str());
    return 1;
  }
  std::printf(
      "keep a copy (ampwb store backup --db %s FILE), then recover what is readable into a new store (ampwb "
      "store recover --db %s NEW.sqlite)\n",
      shell_quoted(path).c_str(), shell_quoted(path).c_str());
  return 1;
}

// Paces progress lines of long work: one is due at most once a second, the first a second after the start.
class OnceASecond {
 public:
  // The seconds since the start when a line is due, else none.
  std::optional<double> due() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(1)) return std::nullopt;
    last_ = now;
    return std::chrono::duration<double>(now - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
};

int store_recover_command(const StoreOptions& options) {
  const std::string path = store_path(options.db);
  if (is_database_server(path))
    throw Error(
        "ampwb store recover reads a damaged SQLite file; a PostgreSQL store is the server's to repair, "
        "and ampwb store backup copies every run it can read");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error("no run store at '" + path + "'");
  std::printf("recovering what is readable of '%s' into '%s'\n", path.c_str(), options.file.c_str());
  std::fflush(stdout);
  // Progress on stderr for a long recovery, at most once a second (a short one prints none).
  const StoreRecoverResult r =
      recover_store(path, options.file, [pace = OnceASecond()](const StoreRecoverProgress& p) mutable {
        if (const std::optional<double> seconds = pace.due())
          std::fprintf(stderr, "  %s: %lld rows read (%.0f s)\n", p.table.c_str(), static_cast<long long>(p.rows),
                       *seconds);
      });
  std::printf("recovered %d run%s (%lld rows) into '%s'\n", r.runs, r.runs == 1 ? "" : "s",
              static_cast<long long>(r.rows), options.file.c_str());
  const auto rows = [](int64_t n) { return std::to_string(n) + (n == 1 ? " row" : " rows"); };
  if (!r.cut_short.empty()) std::printf("%s: the rows of its missing pages are lost\n", r.cut_short.c_str());
  if (r.lost.empty() && r.garbled.empty() && r.orphans.empty() && r.unlinked.empty())
    std::printf("every row was read: nothing was lost\n");
  if (!r.lost.empty()) std::printf("could not be read:\n");
  for (const LostRows& l : r.lost) std::printf("  %s: %s\n", l.table.c_str(), l.words.c_str());
  if (!r.garbled.empty()) std::printf("read garbled (a repeated key or a value out of place), left out:\n");
  for (const auto& [table, n] : r.garbled) std::printf("  %s: %s\n", table.c_str(), rows(n).c_str());
  if (!r.orphans.empty() || !r.unlinked.empty()) std::printf("read, but their run or sweep was lost:\n");
  for (const auto& [table, n] : r.orphans) std::printf("  %s: %s left out\n", table.c_str(), rows(n).c_str());
  for (const auto& [table, n] : r.unlinked)
    std::printf("  %s: %s kept, no longer linked to a run\n", table.c_str(), rows(n).c_str());
  if (r.runs == 0) {
    std::printf("no run could be read: the new store holds none\n");
    return 1;
  }
  if (!r.incomplete_runs.empty())
    std::printf("runs whose records may have gaps have a note saying so (ampwb show RUN)\n");
  for (const std::string& why : r.weights_shared)
    std::printf("still naming the damaged store's weights file (deleting the run there takes them): %s\n", why.c_str());
  std::printf(
      "look at it with ampwb runs --db %s. To use it in the damaged store's place, first move the damaged file "
      "away together with its -wal and -shm files (SQLite would apply an old -wal to the new file); keep them until "
      "you are sure\n",
      shell_quoted(options.file).c_str());
  return 0;
}

// "run 4 ('fp16-a')", "runs 4 ('fp16-a') and 7 ('bf16')": the source's runs a copy left out, recording.
std::string recording_runs_text(const std::vector<StoreCopyResult::SourceRun>& runs) {
  std::string text = runs.size() == 1 ? "run " : "runs ";
  for (size_t i = 0; i < runs.size(); ++i)
    text += std::string(i == 0                 ? ""
                        : i + 1 == runs.size() ? " and "
                                               : ", ") +
            std::to_string(runs[i].id) + " ('" + printable(runs[i].name) + "')";
  return text;
}

// What a copy did, in one line: "copied 3 runs (1,234 records); 2 already there".
std::string copy_summary(const StoreCopyResult& r) {
  const auto runs = [](int n) { return std::to_string(n) + (n == 1 ? " run" : " runs"); };
  std::string line = "copied " + runs(r.copied) + " (" + std::to_string(r.records) + " records written)";
  if (r.updated) line += ", updated " + runs(r.updated) + " the destination had in an older state";
  line += "; " + std::to_string(r.already_there) + " already there";
  if (r.annotations_brought)
    line += " (" + std::to_string(r.annotations_brought) + " of them renamed, tagged or noted since: brought)";
  if (r.interrupted) line += "; " + runs(r.interrupted) + " whose recording process was gone copied as interrupted";
  for (const StoreCopyResult::NameReplaced& n : r.renamed)
    line += "; run " + std::to_string(n.run) + " there is named '" + n.now + "': another run there had the name '" +
            n.was + "'";
  if (r.annotations_kept)
    line += "; " + runs(r.annotations_kept) + " updated kept " + (r.annotations_kept == 1 ? "its" : "their") +
            " notes and tags there, the source's added";
  for (const StoreCopyResult::NameReplaced& n : r.names_replaced)
    line +=
        "; run " + std::to_string(n.run) + " there, named '" + n.was + "', is named '" + n.now + "' as in the source";
  if (r.sweeps) line += "; " + std::to_string(r.sweeps) + (r.sweeps == 1 ? " sweep" : " sweeps") + " copied";
  if (!r.still_recording.empty())
    line += "; " + recording_runs_text(r.still_recording) + " still recording, not copied: copy again once " +
            (r.still_recording.size() == 1 ? "it ends" : "they end");
  return line;
}

// Progress on stderr for a long copy, at most once a second (a short one prints none).
std::function<void(const StoreCopyProgress&)> copy_progress() {
  return [pace = OnceASecond()](const StoreCopyProgress& p) mutable {
    if (const std::optional<double> seconds = pace.due())
      std::fprintf(stderr, "  run %zu of %zu (%lld records written, %.0f s)\n", p.run, p.runs,
                   static_cast<long long>(p.records), *seconds);
  };
}

struct StoreCopyOptions {
  std::string source, destination;
};

int store_copy_command(const StoreCopyOptions& options) {
  const StoreCopyResult result = copy_store(options.source, options.destination, copy_progress());
  std::printf("%s, from '%s' into '%s'\n", copy_summary(result).c_str(),
              location_without_password(options.source).c_str(),
              location_without_password(options.destination).c_str());
  // Each store numbers its own runs: where a copied run's id changed, "run 2" means another run there.
  if (!result.renumbered.empty()) {
    std::string ids;
    for (size_t i = 0; i < result.renumbered.size(); ++i)  // every one: a script may need any of them
      ids += (i ? ", " : "") + std::string("run ") + std::to_string(result.renumbered[i].first) + " is run " +
             std::to_string(result.renumbered[i].second) + " there";
    std::printf("run ids differ in the destination (each store numbers its own runs): %s\n", ids.c_str());
  }
  return 0;
}

// A PostgreSQL store is backed up as a copy into a new SQLite file, not with pg_dump: one backup format for both
// stores, a file any ampwb opens as it is (ampwb runs --db FILE) and restores with ampwb store copy FILE URI, and no
// PostgreSQL client tools of the server's version needed on the machine; the copy reads one snapshot, so the file
// is consistent while runs record (a run still recording is left out, and said so).
int backup_database_server(const std::string& location, const std::string& file) {
  std::error_code ec;
  if (std::filesystem::exists(file, ec)) throw Error("'" + file + "' exists: a backup never overwrites a file");
  StoreCopyResult result;
  try {
    result = copy_store(location, file, copy_progress());
  } catch (...) {  // no half-made backup left behind to be mistaken for a whole one
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file + suffix, ec);
    throw;
  }
  std::printf(
      "backed up the run store '%s' (%d runs, %lld records) to '%s', an SQLite run store (restore it with "
      "ampwb store copy '%s' URI)\n",
      location_without_password(location).c_str(), result.copied, static_cast<long long>(result.records), file.c_str(),
      file.c_str());
  if (!result.still_recording.empty())
    std::printf("%s still recording %s left out: back up again once %s\n",
                recording_runs_text(result.still_recording).c_str(),
                result.still_recording.size() == 1 ? "was" : "were",
                result.still_recording.size() == 1 ? "it ends" : "they end");
  return 0;
}

// An SQLite store's file and its write-ahead log, if any, byte for byte: what is left of a store SQLite cannot read.
void copy_store_files(const std::string& store, const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char* suffix : {"", "-wal"})  // a log left beside the copy would be read into it
    if (fs::exists(file + suffix, ec)) throw Error("'" + file + suffix + "' exists: a backup never overwrites a file");
  std::vector<std::string> written;
  for (const char* suffix : {"", "-wal"}) {
    if (*suffix && !fs::exists(store + suffix, ec)) continue;
    if (!fs::copy_file(store + suffix, file + suffix, ec)) {
      for (const std::string& w : written) fs::remove(w, ec);
      throw Error("cannot copy '" + store + suffix + "' to '" + file + suffix + "': " + ec.message());
    }
    written.push_back(file + suffix);
  }
}

int store_backup_command(const StoreOptions& options) {
  const std::string path = store_path(options.db);
  // A missing folder is made, as `store copy` and the exports make it: once the store has opened, so that a
  // mistyped --db leaves no empty folder behind.
  const auto make_folder = [&] {
    const std::filesystem::path folder = std::filesystem::absolute(options.file).parent_path();
    if (std::error_code ec; !std::filesystem::create_directories(folder, ec) && ec)
      throw Error("cannot write the backup '" + options.file + "': cannot make the folder '" + folder.string() +
                  "': " + ec.message());
  };
  if (is_database_server(path)) {
    make_folder();
    return backup_database_server(path, options.file);
  }
  std::optional<RunStore> opened;
  try {
    opened.emplace(path, RunStore::Mode::ReadOnly);
    make_folder();
    opened->backup_to(options.file);
  } catch (const StoreError& e) {
    if (!e.damaged()) throw;
    make_folder();
    // Too damaged for SQLite to copy page by page (where it lists its tables): the files themselves are the copy to
    // keep, as the damage message asks, before a recovery is tried.
    copy_store_files(path, options.file);
    std::printf(
        "backed up the damaged run store '%s' to '%s' file for file, as SQLite cannot read it page by page (its "
        "runs name the store's final weights files, which stay the store's); ampwb store check says what is "
        "damaged\n",
        path.c_str(), options.file.c_str());
    return 0;
  }
  const RunStore& store = *opened;
  size_t runs = 0;
  try {
    runs = store.runs().size();
  } catch (const StoreError& e) {
    if (!e.damaged()) throw;
    // The copy is the store page for page, what a recovery should start from: kept, and said to be damaged too.
    std::printf(
        "backed up the damaged run store '%s' to '%s', as it is: its runs cannot be listed (%s); ampwb store "
        "check says what is damaged\n",
        path.c_str(), options.file.c_str(), e.what());
    return 0;
  }
  // The backup's runs get weights files of their own: deleting a run from the store or from its backup leaves the
  // other's weights whole. Where that cannot be done the backup is kept all the same, and the user told.
  int weights = 0;
  try {
    const std::vector<RunRecord> recorded = RunStore(options.file, RunStore::Mode::ReadOnly).runs();
    if (std::any_of(recorded.begin(), recorded.end(), has_final_weights)) {
      RunStore backup(options.file, RunStore::Mode::Existing);
      for (const RunRecord& r : recorded) weights += own_final_weights(backup, r.id) ? 1 : 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "ampwb store backup: warning: some of the backup's runs still name the store's final weights files, "
                 "so deleting such a run from one store takes the other's weights too: %s\n",
                 e.what());
  }
  std::printf("backed up the run store '%s' (%zu runs) to '%s'", path.c_str(), runs, options.file.c_str());
  if (weights > 0)
    std::printf(", with the final weights of %d run%s in its folder's weights/", weights, weights == 1 ? "" : "s");
  std::printf("\n");
  return 0;
}

// Adds `name` RUN [WORD], taking --db; `value_name` names the second operand (none when empty).
CLI::App* add_edit_command(CLI::App& app, Invocation& invocation, const std::string& name, const std::string& help,
                           const std::string& value_name, const std::string& value_help,
                           int (*command)(const EditOptions&), std::shared_ptr<EditOptions> options) {
  CLI::App* edit = app.add_subcommand(name, help);
  edit->add_option("RUN", options->run, "a run id or a unique run name")->type_name("")->required();
  if (!value_name.empty()) edit->add_option(value_name, options->value, value_help)->type_name("")->required();
  add_db_option(edit, options->db);
  run_on_parse(edit, invocation, options, command);
  return edit;
}

void add_export_commands(CLI::App& app, Invocation& invocation) {
  CLI::App* export_cmd =
      app.add_subcommand("export", "stored runs as CSV files or a chart image, or a run's trained model");
  export_cmd->require_subcommand(1);

  auto csv_options = std::make_shared<ExportCsvOptions>();
  CLI::App* csv = export_cmd->add_subcommand("csv", "per-step, per-epoch, summary and long-form CSV of runs");
  CLI::Option* all = csv->add_flag("--all", csv_options->all, "every stored run");
  csv->add_option("RUN", csv_options->runs, "run ids or unique run names, or sweep:N for a sweep's runs")
      ->type_name("")
      ->default_str("")
      ->excludes(all);
  csv->add_option("--out", csv_options->out, "the folder for the files (made when missing)")
      ->type_name("DIR")
      ->required();
  csv->add_flag("--overwrite", csv_options->overwrite, "replace the files of this export that --out holds already");
  add_db_option(csv, csv_options->db);
  csv->callback([&invocation, csv_options] {
    if (csv_options->runs.empty() && !csv_options->all) throw CLI::RequiredError("RUN... or --all");
    invocation.run = [csv_options] { return export_csv_command(*csv_options); };
  });

  auto chart_options = std::make_shared<ExportChartOptions>();
  CLI::App* chart = export_cmd->add_subcommand(
      "chart", "a chart of runs as PNG, SVG or PDF, drawn without a display (the GUI's chart)");
  chart->add_option("RUN", chart_options->runs, "run ids or unique run names, or sweep:N for a sweep's runs")
      ->type_name("")
      ->default_str("")
      ->required();
  chart->add_option("--metric", chart_options->metric, "the chart")
      ->type_name("loss|accuracy|loss-scale|epoch-time|data-wait|histogram|fp8-scaling")
      ->check(CLI::IsMember({"loss", "accuracy", "loss-scale", "epoch-time", "data-wait", "histogram", "fp8-scaling"}))
      ->required();
  chart
      ->add_option("--fp8-tensor", chart_options->fp8_tensor,
                   "the tensor of the fp8-scaling chart (default: the first FP8 tensor)")
      ->type_name("LAYER:input|weight|output_grad");
  chart->add_option("--out", chart_options->out, "the image file; its extension picks the format")
      ->type_name("FILE.png|.svg|.pdf")
      ->required();
  add_overwrite_flag(chart, chart_options->overwrite);
  add_number(chart, "--width", chart_options->width, "px, 100 to 10000")->check(CLI::Range(100, 10000).description(""));
  add_number(chart, "--height", chart_options->height, "px, 100 to 10000")
      ->check(CLI::Range(100, 10000).description(""));
  add_number(chart, "--smoothing", chart_options->smoothing, "exponential smoothing of step curves, in [0, 1)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            const double value = std::strtod(text.c_str(), nullptr);
            return value >= 0 && value < 1 ? std::string() : "must be in [0, 1), got " + text;
          },
          ""));
  chart
      ->add_option("--histogram", chart_options->histogram,
                   "with --metric histogram: the weight or activation gradients")
      ->type_name("weight|activation")
      ->check(CLI::IsMember({"weight", "activation"}));
  chart
      ->add_option("--x-axis", chart_options->x_axis,
                   "what the curves are drawn against: step, epoch or wall (wall-clock seconds; per-epoch charts "
                   "read step as epoch)")
      ->check(CLI::IsMember({"step", "epoch", "wall"}))
      ->type_name("AXIS");
  chart
      ->add_option("--group-by", chart_options->group_by,
                   "draw each group's mean ± std on the loss and accuracy charts: a configuration key (as ampwb "
                   "show lists them: precision.mode, batch_size, lr, ...), all-but-seed, or none (default: "
                   "all-but-seed where the runs differ only by seed)")
      ->type_name("KEY");
  add_db_option(chart, chart_options->db);
  run_on_parse(chart, invocation, chart_options, export_chart_command);
}

}  // namespace

void add_store_commands(CLI::App& app, Invocation& invocation) {
  add_export_commands(app, invocation);
  auto delete_options = std::make_shared<EditOptions>();
  add_edit_command(app, invocation, "delete",
                   "delete a run, all its records and its final weights (its checkpoint files stay); asks first "
                   "on a terminal",
                   "", "", delete_command, delete_options)
      ->add_flag("--yes", delete_options->yes, "do not ask");
  add_edit_command(app, invocation, "rename", "rename a run", "NAME", "the new name", rename_command,
                   std::make_shared<EditOptions>());
  auto tag_options = std::make_shared<EditOptions>();
  add_edit_command(app, invocation, "tag", "tag a run (or, with --remove, untag it)", "TAG", "the tag", tag_command,
                   tag_options)
      ->add_flag("--remove", tag_options->remove, "remove the tag instead");
  add_edit_command(app, invocation, "note", "set a run's notes", "TEXT", "the notes (replacing any)", note_command,
                   std::make_shared<EditOptions>());

  CLI::App* store = app.add_subcommand("store", "look after the run store itself");
  store->require_subcommand(1);
  auto check_options = std::make_shared<StoreOptions>();
  CLI::App* check = store->add_subcommand(
      "check", "the run store's integrity check (SQLite's; PostgreSQL: every row read) and runs left running");
  add_db_option(check, check_options->db);
  run_on_parse(check, invocation, check_options, store_check_command);
  auto backup_options = std::make_shared<StoreOptions>();
  CLI::App* backup = store->add_subcommand("backup", "a consistent copy of the run store, safe while runs record");
  backup->add_option("FILE", backup_options->file, "the copy (never overwritten)")->type_name("")->required();
  add_db_option(backup, backup_options->db);
  run_on_parse(backup, invocation, backup_options, store_backup_command);
  auto recover_options = std::make_shared<StoreOptions>();
  CLI::App* recover = store->add_subcommand(
      "recover",
      "what is readable of a damaged SQLite run store, written into a new store (the damaged one only read)");
  recover->add_option("FILE", recover_options->file, "the new store (never overwritten)")->type_name("")->required();
  add_db_option(recover, recover_options->db);
  run_on_parse(recover, invocation, recover_options, store_recover_command);
  auto copy_options = std::make_shared<StoreCopyOptions>();
  CLI::App* copy = store->add_subcommand(
      "copy",
      "copy every run with all its records from one store into another (SQLite file or PostgreSQL URI, either "
      "way); copying again adds nothing twice");
  copy->add_option("SRC", copy_options->source, "the store copied from (only read)")->type_name("")->required();
  copy->add_option("DST", copy_options->destination, "the store copied into (an SQLite file is made when missing)")
      ->type_name("")
      ->required();
  run_on_parse(copy, invocation, copy_options, store_copy_command);
}

}  // namespace ampwb::cli
