// Reading and editing the run store: runs as typed records (their configuration and run information parsed here,
// once), resolving ids and names, epochs, steps, histograms and checkpoints; renaming, notes, tags, deleting.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

#include "store/final_weights.h"
#include "store/record_sql.h"
#include "store/run_store.h"
#include "store/sweep_record.h"

namespace ampwb {
namespace {

// The row's columns (RunRecord's field list), then its configuration and run information as JSON text.
std::string run_columns() { return column_names<RunRecord>() + ", config_json, info_json"; }

RunRecord read_run(const SqlStatement& q) {
  RunRecord r;
  const int c = read_columns(q, 0, r, &r.unreadable);
  try {
    // Read over the precision mode its column holds: a configuration stored without one keeps that.
    r.config = config_from_json_text(q.text(c), r.config);
  } catch (const std::exception& e) {
    r.unreadable += (r.unreadable.empty() ? "" : "; ") + std::string(e.what());
  }
  try {
    const nlohmann::json info = nlohmann::json::parse(q.text(c + 1), nullptr, false);
    if (info.is_discarded()) throw Error("the stored run information is not JSON");
    r.info = info.get<RunInfo>();
  } catch (const std::exception& e) {
    r.unreadable += (r.unreadable.empty() ? "" : "; ") + std::string(e.what());
  }
  return r;
}

// A run's rows of `table` (epochs, steps) as records, in the order of column `order`.
template <Record R>
std::vector<R> rows_of(SqlConnection& db, const std::string& table, const std::string& order, int64_t run) {
  std::vector<R> out;
  SqlStatement q(db, "SELECT " + column_names<R>() + " FROM " + table + " WHERE run_id = ? ORDER BY " + order);
  q.bind(1, run);
  while (q.step()) read_columns(q, 0, out.emplace_back());
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The row of `table` whose id `digits` (all_digits) spells; none when there is none, an id too large included.
std::optional<int64_t> existing_id(SqlConnection& db, const char* table, const std::string& digits) {
  int64_t id = 0;
  if (std::from_chars(digits.data(), digits.data() + digits.size(), id).ec != std::errc()) return std::nullopt;
  SqlStatement q(db, std::string("SELECT id FROM ") + table + " WHERE id = ?");
  q.bind(1, id);
  return q.step() ? std::optional<int64_t>(id) : std::nullopt;
}

}  // namespace

void check_run_name(const std::string& name) {
  if (name.empty()) throw Error("a run name cannot be empty");
  if (all_digits(name)) throw Error("a run name cannot be a number ('" + name + "' would read as a run id)");
  if (name.starts_with("sweep:") && all_digits(name.substr(6)))
    throw Error("a run name cannot be sweep:N ('" + name + "' would read as the runs of sweep " + name.substr(6) + ")");
  if (name.front() == ' ' || name.back() == ' ')  // tables would show it as another name, which then finds nothing
    throw Error("a run name cannot begin or end with a space ('" + name + "')");
  for (const unsigned char ch : name)
    if (ch < 0x20 || ch == 0x7f)  // a newline or tab would break every table, CSV file and report it is printed in
      throw Error("a run name cannot hold control characters (newlines, tabs, ...)");
}

std::vector<RunRecord> RunStore::runs() const {
  std::vector<RunRecord> out;
  SqlStatement q(*db_, "SELECT " + run_columns() + " FROM runs ORDER BY id");
  while (q.step()) out.push_back(read_run(q));
  for (RunRecord& r : out) report_abandoned(r);
  return out;
}

RunRecord RunStore::run(int64_t id) const {
  std::optional<RunRecord> r = find_run(id);
  if (!r) throw StoreError("no run " + std::to_string(id) + " in the run store '" + path() + "'");
  return std::move(*r);
}

std::optional<RunRecord> RunStore::find_run(int64_t id) const {
  SqlStatement q(*db_, "SELECT " + run_columns() + " FROM runs WHERE id = ?");
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  RunRecord r = read_run(q);
  report_abandoned(r);
  return r;
}

void RunStore::report_abandoned(RunRecord& r) const {
  // A store opened read-only, or busy or full when opened, gets here with abandoned runs (a writable one marked
  // them on open).
  if (r.status == RunStatus::Running && !recording(r.id)) {
    r.status = RunStatus::Interrupted;
    r.end_reason = "the recording process ended without reporting an end (not yet marked in the store)";
  }
}

int64_t RunStore::resolve(const std::string& id_or_name) const {
  if (all_digits(id_or_name)) {
    if (const std::optional<int64_t> id = existing_id(*db_, "runs", id_or_name)) return *id;
    throw StoreError("no run " + id_or_name + " in the run store '" + path() + "'");
  }
  SqlStatement q(*db_, "SELECT id FROM runs WHERE name = ? ORDER BY id");
  q.bind(1, id_or_name);
  std::vector<int64_t> ids;
  while (q.step()) ids.push_back(q.int64(0));
  if (ids.empty() && id_or_name.size() > 1 && id_or_name[0] == '-' && all_digits(id_or_name.substr(1)))
    throw StoreError("no run " + id_or_name + " in the run store '" + path() + "': run ids count from 1");
  if (ids.empty()) {
    // The runs a user most likely meant: names that hold what was given, spaces, case and punctuation aside
    // ("amp-bf16" for the workbench's "amp-bf16 · seed 0"). Other scripts' letters count as letters.
    auto letters = [](const std::string& text) {
      static const std::string middle_dot = "\u00b7";  // the workbench's separator
      std::string out;
      for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (text.compare(i, middle_dot.size(), middle_dot) == 0)
          ++i;
        else if (c >= 0x80)  // a byte of another script's letter, as it is
          out += static_cast<char>(c);
        else if (std::isalnum(c))
          out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      }
      return out;
    };
    std::string meant;
    int close = 0;
    const std::string given = letters(id_or_name);
    if (!given.empty()) {
      SqlStatement all(*db_, "SELECT id, name FROM runs ORDER BY id");
      while (all.step())
        if (letters(all.text(1)).find(given) != std::string::npos && ++close <= 3)
          meant += (meant.empty() ? "" : " or ") + ("run " + std::to_string(all.int64(0)) + " (" + all.text(1) + ")");
    }
    const std::string hint = close == 0   ? "ampwb runs lists them"
                             : close <= 3 ? "did you mean " + meant + "?"
                                          : std::to_string(close) + " runs' names hold '" + given +
                                                "', case and punctuation aside: ampwb runs lists them";
    throw StoreError("no run named '" + id_or_name + "' in the run store '" + path() + "' (" + hint + ")");
  }
  if (ids.size() > 1) {
    std::string list;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) list += ", ";
      list += std::to_string(ids[i]);
    }
    throw StoreError(std::to_string(ids.size()) + " runs are named '" + id_or_name + "' (ids " + list +
                     "): give an id");
  }
  return ids[0];
}

std::vector<int64_t> RunStore::resolve_each(const std::vector<std::string>& ids_or_names,
                                            std::vector<std::string>* left_out) const {
  std::vector<int64_t> ids;
  std::vector<std::string> given;  // what named each of ids
  for (const std::string& text : ids_or_names) {
    std::vector<int64_t> named;
    if (const std::string sweep = text.substr(0, 6) == "sweep:" ? text.substr(6) : ""; all_digits(sweep)) {
      const std::optional<int64_t> id = existing_id(*db_, "sweeps", sweep);
      if (!id) throw StoreError("no sweep " + sweep + " in the run store '" + path() + "' (ampwb sweeps lists them)");
      SqlStatement q(*db_,
                     "SELECT run_id, idx, state, settings_json FROM sweep_points WHERE sweep_id = ? ORDER BY idx");
      q.bind(1, *id);
      while (q.step()) {
        if (!q.is_null(0)) {
          named.push_back(q.int64(0));
          continue;
        }
        const std::string state = q.text(2);
        // Only a finished point surely had a run; a failed one that kept why had none.
        const int64_t lost = lost_run(q.text(3));
        const bool kept_why = nlohmann::json::parse(q.text(3), nullptr, false).contains("failure");
        const std::string why = lost != 0 ? "its run " + std::to_string(lost) + " lost to the store's damage"
                                : state == "finished"  ? "its run deleted"
                                : state == "failed"    ? (kept_why ? "failed before its run began" : "failed, no run")
                                : state == "cancelled" ? "cancelled, no run"
                                                       : "not run yet";
        if (left_out)
          left_out->push_back("sweep " + sweep + " point " + std::to_string(q.int64(1) + 1) + " (" + why + ")");
      }
      if (named.empty()) throw Error("sweep " + sweep + " has no runs (ampwb sweep status " + sweep + " says why)");
    } else {
      named.push_back(resolve(text));
    }
    for (const int64_t id : named) {
      const auto same = std::find(ids.begin(), ids.end(), id);
      if (same != ids.end())
        throw Error("run " + std::to_string(id) + " is given twice ('" + given[same - ids.begin()] + "' and '" + text +
                    "')");
      ids.push_back(id);
      given.push_back(text);
    }
  }
  return ids;
}

std::vector<EpochReport> RunStore::epochs(int64_t run) const {
  return rows_of<EpochReport>(*db_, "epochs", "epoch", run);
}

std::vector<StepReport> RunStore::steps(int64_t run) const { return rows_of<StepReport>(*db_, "steps", "step", run); }

template <class R>
std::vector<R> RunStore::details(int64_t run, const char* kind) const {
  std::vector<R> out;
  SqlStatement q(*db_, "SELECT body_json FROM run_details WHERE run_id = ? AND kind = ? ORDER BY epoch, step, rowid");
  q.bind(1, run).bind(2, std::string(kind));
  while (q.step()) {
    const nlohmann::json body = nlohmann::json::parse(q.text(0), nullptr, false);
    if (!body.is_object())
      throw StoreError("run store '" + path() + "': damaged " + kind + " record for run " + std::to_string(run));
    try {
      out.push_back(body.get<R>());
    } catch (const std::exception& e) {
      throw StoreError("run store '" + path() + "': run " + std::to_string(run) + ": " + e.what());
    }
  }
  return out;
}

std::vector<LayerNumerics> RunStore::layer_numerics(int64_t run) const {
  return details<LayerNumerics>(run, "layer_numerics");
}
std::vector<OverflowReport> RunStore::overflows(int64_t run) const { return details<OverflowReport>(run, "overflow"); }
std::vector<EpochTimes> RunStore::epoch_times(int64_t run) const { return details<EpochTimes>(run, "epoch_times"); }
std::vector<ConfusionMatrix> RunStore::confusion_matrices(int64_t run) const {
  return details<ConfusionMatrix>(run, "confusion");
}
std::optional<PrecisionDivergence> RunStore::divergence(int64_t run) const {
  std::vector<PrecisionDivergence> measured = details<PrecisionDivergence>(run, "divergence");
  if (measured.empty()) return std::nullopt;
  return std::move(measured.back());  // the last epoch's
}

std::optional<AlternatingSpeed> RunStore::alternating_speed(int64_t run) const {
  std::vector<AlternatingSpeed> timed = details<AlternatingSpeed>(run, "alternating_speed");
  if (timed.empty()) return std::nullopt;
  return std::move(timed.back());
}

std::vector<GradientHistogram> RunStore::histograms(int64_t run) const {
  std::vector<GradientHistogram> out;
  SqlStatement q(*db_,
                 "SELECT epoch, kind, min_log2, max_log2, bins_json, zeros, nonfinite, total, underflow_fraction, "
                 "overflow_fraction, loss_scale FROM histograms WHERE run_id = ? ORDER BY epoch, kind");
  q.bind(1, run);
  while (q.step()) {
    GradientHistogram h;
    h.epoch = static_cast<int>(q.int64(0));
    h.kind = q.text(1);
    h.min_log2 = static_cast<int>(q.int64(2));
    h.max_log2 = static_cast<int>(q.int64(3));
    const nlohmann::json bins = nlohmann::json::parse(q.text(4), nullptr, false);
    if (!bins.is_array())
      throw StoreError("run store '" + path() + "': damaged histogram bins for run " + std::to_string(run));
    h.counts = bins.get<std::vector<int64_t>>();
    h.zeros = q.int64(5);
    h.nonfinite = q.int64(6);
    h.total = q.int64(7);
    h.underflow_fraction = q.real(8);
    h.overflow_fraction = q.real(9);
    h.loss_scale = q.real(10);
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<CheckpointInfo> RunStore::checkpoints(int64_t run) const {
  std::vector<CheckpointInfo> out;
  SqlStatement q(*db_, "SELECT epoch, step, path FROM checkpoints WHERE run_id = ? ORDER BY step, id");
  q.bind(1, run);
  while (q.step()) out.push_back({static_cast<int>(q.int64(0)), q.int64(1), q.text(2)});
  return out;
}

bool RunStore::recording(int64_t run) const { return owned_.count(run) > 0 || db_->recorded_elsewhere(run); }

RunStore::ChangeMarker RunStore::change_marker() const {
  ChangeMarker m;
  SqlStatement q(*db_,
                 "SELECT COUNT(*), COALESCE(MAX(id), 0), COALESCE(MAX(COALESCE(updated, created)), ''), "
                 "COALESCE(SUM(duration_seconds), 0), "
                 "COALESCE(SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END), 0), "
                 "COALESCE(SUM(LENGTH(name) + LENGTH(notes) + LENGTH(tags)), 0) FROM runs");
  if (q.step()) {
    m.runs = q.int64(0);
    m.largest_id = q.int64(1);
    m.latest_update = q.text(2);
    m.recorded_seconds = q.real(3);
    m.running = q.int64(4);
    m.edited_chars = q.int64(5);
  }
  if (m.running > 0) {  // a killed process leaves its run `running`: only its lost lock tells
    std::vector<int64_t> live;
    SqlStatement r(*db_, "SELECT id FROM runs WHERE status = 'running'");
    while (r.step()) live.push_back(r.int64(0));
    for (const int64_t run : live) m.abandoned += recording(run) ? 0 : 1;
  }
  return m;
}

// --- editing ---

void RunStore::check_new_name(const std::string& name, int64_t run) const {
  check_run_name(name);
  SqlStatement q(*db_, "SELECT id FROM runs WHERE name = ? AND id != ? ORDER BY id LIMIT 1");
  q.bind(1, name).bind(2, run);
  if (q.step())
    throw Error("run " + std::to_string(q.int64(0)) + " is already named '" + name +
                "': a name picks out one run, as an id does, so choose another");
}

void RunStore::rename(int64_t run_id, const std::string& name, const std::optional<std::string>& were) {
  require_writable("rename a run");
  SqlTransaction t(*db_);  // no other run takes the name between the check and the write
  check_new_name(name, run_id);
  set_text(run_id, "name", name, were);
  t.commit();
}

void RunStore::set_notes(int64_t run_id, const std::string& notes, const std::optional<std::string>& were) {
  require_writable("change the notes of a run");
  SqlTransaction t(*db_);  // what a refusal names is what the refused write found
  set_text(run_id, "notes", notes, were);
  t.commit();
}

void RunStore::set_text(int64_t run_id, const std::string& column, const std::string& value,
                        const std::optional<std::string>& were) {
  SqlStatement update(*db_,
                      "UPDATE runs SET " + column + " = ? WHERE id = ?" + (were ? " AND " + column + " = ?" : ""));
  update.bind(1, value).bind(2, run_id);
  if (were) update.bind(3, *were);
  update.run();
  if (db_->changes() > 0) return;
  SqlStatement now(*db_, "SELECT " + column + " FROM runs WHERE id = ?");
  if (!now.bind(1, run_id).step())
    throw StoreError("no run " + std::to_string(run_id) + " in the run store '" + path() + "'");
  const std::string current = now.text(0);
  if (current == value) return;  // changed elsewhere to the same
  const std::string run = "run " + std::to_string(run_id);
  throw EditConflict(
      column == "name"
          ? run + " was renamed '" + current + "' by another window or process meanwhile"
          : "the notes of " + run + " were changed by another window or process meanwhile; they now read:\n" + current,
      current);
}

void RunStore::set_tags(int64_t run_id, const std::vector<std::string>& tags) {
  SqlStatement update(*db_, "UPDATE runs SET tags = ? WHERE id = ?");
  update.bind(1, nlohmann::json(tags).dump()).bind(2, run_id).run();
}

std::string tag_problem(const std::string& tag) {
  if (tag.empty()) return "a tag cannot be empty";
  const auto control = [](unsigned char c) { return c < 0x20 || c == 0x7f; };
  if (std::any_of(tag.begin(), tag.end(), control)) return "a tag cannot hold a line break or a tab";
  if (tag.front() == ' ' || tag.back() == ' ') return "a tag cannot begin or end with a space: '" + tag + "'";
  if (tag.front() == '-')
    return "a tag cannot begin with '-', which the Tag dialog reads as \"remove the tag\": '" + tag + "'";
  if (tag.find_first_of(",;") != std::string::npos)
    return "a tag cannot hold ',' or ';', which separate tags in lists and CSV files: '" + tag +
           "' (tag the run once for each)";
  return "";
}

bool same_tag(const std::string& a, const std::string& b) {
  const auto lower = [](unsigned char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [&](unsigned char x, unsigned char y) { return lower(x) == lower(y); });
}

bool RunStore::add_tag(int64_t run_id, const std::string& tag) {
  require_writable("tag a run");
  if (const std::string problem = tag_problem(tag); !problem.empty()) throw Error(problem);
  SqlTransaction t(*db_);  // read-modify-write of the tag list, atomic against other writers
  std::vector<std::string> tags = run(run_id).tags;
  if (std::any_of(tags.begin(), tags.end(), [&](const std::string& had) { return same_tag(had, tag); })) return false;
  tags.push_back(tag);
  set_tags(run_id, tags);
  t.commit();
  return true;
}

std::string RunStore::remove_tag(int64_t run_id, const std::string& tag) {
  require_writable("untag a run");
  SqlTransaction t(*db_);
  std::vector<std::string> tags = run(run_id).tags;
  const auto it = std::find_if(tags.begin(), tags.end(), [&](const std::string& had) { return same_tag(had, tag); });
  if (it == tags.end()) throw Error("run " + std::to_string(run_id) + " has no tag '" + tag + "'");
  const std::string removed = *it;
  tags.erase(it);
  set_tags(run_id, tags);
  t.commit();
  return removed;
}

std::string RunStore::removal_refusal(const RunRecord& r) const {
  if (r.status != RunStatus::Running || !recording(r.id)) return {};
  return "run " + std::to_string(r.id) + " ('" + r.name + "') is still training (process " + std::to_string(r.pid) +
         " on " + r.host + "): stop it first, with Stop in the window that trains it or Ctrl-C where ampwb train runs";
}

void RunStore::remove(int64_t run_id) {
  require_writable("delete a run");
  const RunRecord r = run(run_id);
  if (const std::string why = removal_refusal(r); !why.empty()) throw StoreError(why);
  SqlTransaction t(*db_);
  for (const char* table : {"steps", "epochs", "histograms", "run_details", "checkpoints"}) {
    SqlStatement del(*db_, std::string("DELETE FROM ") + table + " WHERE run_id = ?");
    del.bind(1, run_id).run();
  }
  SqlStatement del(*db_, "DELETE FROM runs WHERE id = ?");
  del.bind(1, run_id).run();
  t.commit();
  remove_final_weights(path(), r);
}
}  // namespace ampwb
