// A run's final weights beside the store: where they go, how the run records them, and why a run has none.
#include "store/final_weights.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "store/store_location.h"

namespace ampwb {
namespace fs = std::filesystem;

namespace {
std::string run_words(const RunRecord& r) { return "run " + std::to_string(r.id) + " ('" + r.name + "')"; }
}  // namespace

// Beside the checkpoints (run_store.cpp's checkpoints_folder): the store's folder, or the user's data folder for a
// database server, which on a cluster is the shared home.
std::string final_weights_folder(const std::string& store_path) {
  if (!is_database_server(store_path)) return (fs::absolute(store_path).parent_path() / "weights").string();
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg && *xdg == '/') return (fs::path(xdg) / "ampwb" / "weights").string();
  const char* home = std::getenv("HOME");
  if (home && *home) return (fs::path(home) / ".local" / "share" / "ampwb" / "weights").string();
  throw Error("no place for the final weights of a run in a PostgreSQL store: HOME is not set");
}

namespace {
// How a store's weights files are named: after the store, its file's name ("runs.sqlite-run-3-...") or its server and
// database ("postgresql-db.example.org-ampwb-run-3-..."), so that a copy of the store (cp, a database restored from
// a dump) owns none of the files its runs name.
std::string weights_name_start(const std::string& store_path) {
  if (!is_database_server(store_path)) return fs::path(store_path).filename().string() + "-run-";
  std::string name = location_without_password(store_path);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '-';
  return name + "-run-";
}

// Weights named before files were named after their store ("run-3-2026-..."): any store of the folder, or a copy of
// it, may name one.
bool named_by_no_store(const std::string& file_name) {
  static const std::regex unnamed(R"(run-\d+-\d{4}-\d\d-\d\dT.*\.weights)");
  return std::regex_match(file_name, unnamed);
}
}  // namespace

std::string new_final_weights_path(const std::string& store_path, int64_t run) {
  std::string stamp = utc_now_iso8601();
  std::replace(stamp.begin(), stamp.end(), ':', '-');
  return (fs::path(final_weights_folder(store_path)) / (weights_name_start(store_path) + std::to_string(run) + "-" +
                                                        stamp + "-" + std::to_string(::getpid()) + ".weights"))
      .string();
}

bool owns_final_weights(const std::string& store_path, const RunRecord& run) {
  if (!has_final_weights(run)) return false;
  const fs::path file(run.info.final_weights);
  std::error_code in, of;  // the folders compared as the file system resolves them (a link to the store's folder)
  const fs::path folder = fs::weakly_canonical(file.parent_path(), in),
                 own = fs::weakly_canonical(final_weights_folder(store_path), of);
  if (in || of || folder != own) return false;
  const std::string name = file.filename().string();
  return name.starts_with(weights_name_start(store_path)) && !named_by_no_store(name);
}

bool has_final_weights(const RunRecord& run) { return !run.info.final_weights.empty(); }

std::string final_weights_state(const RunRecord& run) {
  if (!has_final_weights(run)) return {};
  std::error_code ec;
  return fs::exists(run.info.final_weights, ec) ? "yes" : "missing";
}

std::string final_weights_refusal(const RunStore& store, int64_t run) { return final_weights_refusal(store.run(run)); }

std::string final_weights_refusal(const RunRecord& r) {
  if (r.status == RunStatus::Running)
    return run_words(r) + " is still running: a run keeps its final weights when it finishes";
  if (r.status != RunStatus::Finished)
    return run_words(r) + " did not finish (" + run_status_words(r.status) +
           (r.end_reason.empty() ? std::string() : ": " + r.end_reason) + "): only a finished run has final weights";
  if (!has_final_weights(r)) {
    if (std::find(r.info.notes.begin(), r.info.notes.end(), kFinalWeightsNotKeptNote) != r.info.notes.end())
      return run_words(r) + " has no final weights: they were not kept, as its settings asked";
    for (const std::string& note : r.info.notes)
      if (note.starts_with(kFinalWeightsNotWrittenNote)) return run_words(r) + " has no final weights: " + note;
    return run_words(r) + " has no final weights: it finished before the workbench kept them";
  }
  std::error_code ec;
  if (!fs::exists(r.info.final_weights, ec))
    return "the final weights of " + run_words(r) + ", '" + r.info.final_weights + "', are missing";
  return {};
}

ModelWeights load_final_weights(const RunStore& store, int64_t run) {
  const std::string refusal = final_weights_refusal(store, run);
  if (!refusal.empty()) throw Error(refusal);
  const RunRecord r = store.run(run);
  ModelWeights w;
  try {
    w = read_model_weights(r.info.final_weights);
  } catch (const Error& e) {
    throw Error("the final weights of " + run_words(r) + " cannot be used: " + e.what());
  }
  w.provenance.run = r.id;
  w.provenance.run_name = r.name;
  return w;
}

std::string keep_final_weights(RunStore& store, int64_t run, const ModelWeights& weights) {
  const std::string path = new_final_weights_path(store.path(), run);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec)
    throw Error("cannot make the folder for final weights '" + fs::path(path).parent_path().string() +
                "': " + ec.message());
  ModelWeights kept = weights;
  kept.provenance.run = run;
  save_model_weights(path, kept);
  try {
    store.set_final_weights(run, path);
  } catch (...) {
    fs::remove(path, ec);  // a file no run records is only disk space
    throw;
  }
  return path;
}

bool own_final_weights(RunStore& store, int64_t run) {
  const RunRecord r = store.run(run);
  std::error_code ec;
  if (!has_final_weights(r) || !fs::exists(r.info.final_weights, ec)) return false;
  const std::string path = new_final_weights_path(store.path(), run);
  const auto refuse = [&](const std::string& why) {
    return Error("cannot give " + run_words(r) + " final weights of its own beside the store: " + why);
  };
  if (fs::create_directories(fs::path(path).parent_path(), ec); ec)
    throw refuse("cannot make the folder '" + fs::path(path).parent_path().string() + "': " + ec.message());
  if (fs::exists(path, ec)) throw refuse("'" + path + "' exists already");  // never linked over, never removed
  if (!fs::copy_file(r.info.final_weights, path, ec)) {
    std::error_code ignored;
    fs::remove(path, ignored);  // what the failed copy wrote: the path was free before it
    throw refuse("copying '" + r.info.final_weights + "' to '" + path + "' failed: " + ec.message());
  }
  try {
    store.set_final_weights(run, path);
  } catch (...) {
    fs::remove(path, ec);
    throw;
  }
  return true;
}

void remove_final_weights(const std::string& store_path, const RunRecord& run) {
  if (!owns_final_weights(store_path, run)) return;
  std::error_code ignored;
  fs::remove(run.info.final_weights, ignored);
}

void RunStore::set_final_weights(int64_t run, const std::string& path) {
  require_writable("record the final weights of a run");
  SqlTransaction t(*db_);  // read-modify-write of the run information, atomic against other writers
  edit_info(run, [&](nlohmann::json& info) { info["final_weights"] = path; });
  t.commit();
}

}  // namespace ampwb
