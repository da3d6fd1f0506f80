// Recording into the run store: a run's row (begun, or reopened to resume it), its steps, epochs, histograms, the
// details that explain it, checkpoints, and its end; each write one short transaction.
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "core/float_decimal.h"
#include "store/record_sql.h"
#include "store/run_store.h"

namespace ampwb {
namespace {

std::string host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
}

// Whether two backend descriptions name one device. A CPU's names its model ("cpu (AMD EPYC, oneDNN ..."), where
// runs recorded before it did (or on a CPU whose model /proc does not give) start "cpu (oneDNN": the rest decides.
bool same_device(const std::string& a, const std::string& b) {
  if (a == b) return true;
  const std::string unnamed = "cpu (oneDNN ";
  const auto without_model = [](const std::string& d) {
    const size_t at = d.find(", oneDNN ");
    return d.rfind("cpu (", 0) == 0 && at != std::string::npos ? "cpu (" + d.substr(at + 2) : d;
  };
  return (a.rfind(unnamed, 0) == 0 || b.rfind(unnamed, 0) == 0) && without_model(a) == without_model(b);
}

// The device that ran, from a backend description such as "cpu (AMD EPYC, oneDNN 2.6.3, avx512_core, 2 threads)"
// or "cuda:0 (NVIDIA H200, ...)"; the one asked for where the description does not say (a test's backend).
DeviceChoice device_of(const std::string& backend, DeviceChoice asked) {
  const std::optional<DeviceChoice> ran = DeviceChoice::parse(backend.substr(0, backend.find_first_of(" (")));
  if (ran && ran->kind != DeviceChoice::Kind::Auto) return *ran;
  return asked.kind == DeviceChoice::Kind::Auto ? DeviceChoice::cpu() : asked;
}

// The synchronous level for durable commits (a run's end, some epochs): SQLite's WAL with NORMAL already survives
// a killed process; FULL also survives a power cut, for the price of an fsync (a few ms; see StoreRecorderOptions).
// PostgreSQL's commits are durable already (synchronous_commit is the server's setting).
class DurableCommits {
 public:
  explicit DurableCommits(SqlConnection& db) : db_(db.dialect() == SqlConnection::Dialect::Sqlite ? &db : nullptr) {
    if (db_) db_->exec("PRAGMA synchronous = FULL");
  }
  ~DurableCommits() {
    try {
      if (db_) db_->exec("PRAGMA synchronous = NORMAL");
    } catch (const StoreError&) {
      // Only the speed of later step batches depends on it.
    }
  }

 private:
  SqlConnection* db_;
};

// The writes of the records that may go with an epoch (RunStore::EpochDetails), inside the caller's transaction
// where there is one: run_deferred, so that a database server gets them with the commit.
void insert_histogram(SqlConnection& db, int64_t run, const GradientHistogram& h) {
  SqlStatement insert(db, db.replace_into("histograms",
                                          "run_id, epoch, kind, loss_scale, min_log2, max_log2, bins_json, zeros, "
                                          "nonfinite, total, underflow_fraction, overflow_fraction",
                                          "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?", "run_id, epoch, kind", 1));
  insert.bind(1, run)
      .bind(2, h.epoch)
      .bind(3, h.kind)
      .bind(4, h.loss_scale)
      .bind(5, h.min_log2)
      .bind(6, h.max_log2)
      .bind(7, nlohmann::json(h.counts).dump())
      .bind(8, h.zeros)
      .bind(9, h.nonfinite)
      .bind(10, h.total)
      .bind(11, h.underflow_fraction)
      .bind(12, h.overflow_fraction);
  insert.run_deferred();
}

void insert_layer_numerics(SqlConnection& db, int64_t run, const std::vector<LayerNumerics>& layers) {
  // One statement for every layer, for the round trips a database server takes for each (see insert_steps).
  SqlStatement insert(db, "INSERT INTO run_details(run_id, kind, epoch, step, body_json) VALUES " +
                              value_rows("?, 'layer_numerics', ?, ?, ?", static_cast<int>(layers.size())));
  for (size_t i = 0; i < layers.size(); ++i) {
    const int first = static_cast<int>(4 * i) + 1;
    insert.bind(first, run).bind(first + 1, layers[i].epoch).bind(first + 2, layers[i].step);
    insert.bind(first + 3, nlohmann::json(layers[i]).dump());
  }
  insert.run_deferred();
}

void insert_detail_row(SqlConnection& db, int64_t run, const char* kind, int epoch, int64_t step,
                       const std::string& json) {
  SqlStatement insert(db, "INSERT INTO run_details(run_id, kind, epoch, step, body_json) VALUES (?, ?, ?, ?, ?)");
  insert.bind(1, run).bind(2, std::string(kind)).bind(3, epoch).bind(4, step).bind(5, json).run_deferred();
}

// One record an epoch: an epoch reported again (resumed) replaces it.
void replace_detail_rows(SqlConnection& db, int64_t run, const char* kind, int epoch, const std::string& json) {
  SqlStatement replace(db, "DELETE FROM run_details WHERE run_id = ? AND kind = ? AND epoch = ?");
  replace.bind(1, run).bind(2, std::string(kind)).bind(3, epoch).run_deferred();
  insert_detail_row(db, run, kind, epoch, 0, json);
}

}  // namespace

int64_t RunStore::begin_run(const TrainConfig& config, const RunInfo& info, const std::string& dataset_fingerprint) {
  require_writable("record a run");
  if (!config.name.empty()) check_run_name(config.name);
  const nlohmann::json config_json = config, info_json = info;
  const std::string now = utc_now_iso8601();
  const std::string versions =
      std::string("ampwb " AMPWB_VERSION ", ") + db_->database_version() + ", g++ " __VERSION__;
  SqlTransaction t(*db_);
  // Checked again inside the transaction: two runs started at once with one name cannot both take it.
  if (!config.name.empty()) check_new_name(config.name);
  SqlStatement insert(*db_,
                      "INSERT INTO runs(name, created, updated, status, config_json, depth, precision, batch_size, "
                      "lr, optimizer, epochs, image_size, seed, dataset_path, dataset_fingerprint, device, backend, "
                      "ampwb_version, versions, host, pid, info_json) "
                      "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
  insert.bind(1, config.name)
      .bind(2, now)
      .bind(3, now)
      .bind(4, config_json.dump())
      .bind(5, config.depth)
      .bind(6, mode_name(config.precision.mode))
      .bind(7, config.batch_size)
      .bind(8, float_as_decimal(config.lr))
      .bind(9, choice_name(config.optimizer.kind))
      .bind(10, config.epochs)
      .bind(11, info.image_size > 0 ? info.image_size : config.image_size)
      .bind(12, static_cast<int64_t>(config.seed))  // the same 64 bits; read_run casts back
      .bind(13, config.data_dir)
      .bind(14, dataset_fingerprint)
      .bind(15, device_of(info.backend_description, config.device).name())
      .bind(16, info.backend_description)
      .bind(17, AMPWB_VERSION)
      .bind(18, versions)
      .bind(19, host_name())
      .bind(20, static_cast<int64_t>(::getpid()))
      .bind(21, info_json.dump());
  if (!insert.step()) throw StoreError("run store '" + path() + "': a new run's row has no id");
  const int64_t id = insert.int64(0);
  insert.reset();
  if (config.name.empty()) {  // resnet20-fp32-7; a suffix where a user chose that name for another run
    const std::string base =
        "resnet" + std::to_string(config.depth) + "-" + mode_name(config.precision.mode) + "-" + std::to_string(id);
    SqlStatement taken(*db_, "SELECT 1 FROM runs WHERE name = ? AND id != ?");
    std::string name = base;
    for (int suffix = 2; taken.bind(1, name).bind(2, id).step(); ++suffix) {
      taken.reset();
      name = base + "-" + std::to_string(suffix);
    }
    SqlStatement rename(*db_, "UPDATE runs SET name = ? WHERE id = ?");
    rename.bind(1, name).bind(2, id).run();
  }
  // Locked before the row becomes visible, so no other process can see it running without an owner.
  db_->own_run(id);
  try {
    t.commit();
  } catch (...) {
    db_->disown_run(id);
    throw;
  }
  owned_.insert(id);
  return id;
}

void RunStore::reopen_run(int64_t run_id, const RunInfo& info, const TrainConfig& config) {
  require_writable("resume a run");
  const RunRecord r = run(run_id);
  if (recording(run_id)) throw StoreError("run " + std::to_string(run_id) + " is being recorded by another process");
  db_->own_run(run_id);
  try {
    reopen_owned(r, info, config);
  } catch (...) {
    db_->disown_run(run_id);
    throw;
  }
  owned_.insert(run_id);
}

void RunStore::reopen_owned(const RunRecord& run, const RunInfo& info, const TrainConfig& config) {
  const int64_t run_id = run.id;
  SqlTransaction t(*db_);
  SqlStatement reopen(*db_,
                      "UPDATE runs SET status = 'running', ended = NULL, end_reason = '', updated = ?, host = ?, "
                      "pid = ?, config_json = ?, dataset_path = ? WHERE id = ?");
  reopen.bind(1, utc_now_iso8601())
      .bind(2, host_name())
      .bind(3, static_cast<int64_t>(::getpid()))
      .bind(4, nlohmann::json(config).dump())
      .bind(5, config.data_dir)
      .bind(6, run_id);
  reopen.run_deferred();
  // What this process adds (a damaged checkpoint passed over, say). Resumed with other threads or on another machine,
  // its epoch times change where it resumed: the run says so, and describes the device its later epochs run on.
  std::vector<std::string> notes = info.notes;
  const std::string& before = run.info.backend_description;
  const bool described_otherwise = !before.empty() && before != info.backend_description;
  if (described_otherwise && !same_device(before, info.backend_description))
    notes.push_back("resumed at epoch " + std::to_string(info.first_epoch) + " on " + info.backend_description +
                    ", after running on " + before + ": its epoch times from epoch " +
                    std::to_string(info.first_epoch) + " on are that device's");
  if (described_otherwise) {  // the device as it is described now, a change or the same one named more fully
    SqlStatement backend(*db_, "UPDATE runs SET backend = ? WHERE id = ?");
    backend.bind(1, info.backend_description).bind(2, run_id).run_deferred();
  }
  append_notes(run_id, notes, false, described_otherwise ? info.backend_description : std::string());
  // A pause its last process never ended (killed while paused) is over: this one trains.
  edit_info(run_id, [](nlohmann::json& i) { i.erase("paused_since"); });
  // An epoch's own records go with it; a step's (layer numerics, overflows) go with the steps reported again
  // (forget_steps_from): a run resumed within an epoch keeps those of the epoch's steps before its checkpoint.
  for (const char* epoch_records : {"epochs WHERE", "histograms WHERE",
                                    "run_details WHERE kind IN ('epoch_times', 'confusion', 'divergence') AND"}) {
    SqlStatement forget(*db_, std::string("DELETE FROM ") + epoch_records + " run_id = ? AND epoch >= ?");
    forget.bind(1, run_id).bind(2, info.first_epoch).run_deferred();
  }
  t.commit();
}

void RunStore::forget_steps_from(int64_t run, int64_t first_step) {
  require_writable("forget steps");
  SqlTransaction t(*db_);
  for (const char* table : {"steps", "run_details"}) {
    SqlStatement forget(*db_, std::string("DELETE FROM ") + table + " WHERE run_id = ? AND step >= ?");
    forget.bind(1, run).bind(2, first_step).run_deferred();
  }
  t.commit();
}

// Many rows a statement: a database server answers every statement with a round trip, which one row at a time made
// PostgreSQL's share of a small model's step several per cent. A step reported twice in one batch keeps its last
// report, as one row at a time did.
void RunStore::insert_steps(int64_t run, const std::vector<StepReport>& steps) {
  std::vector<const StepReport*> rows;
  std::unordered_map<int64_t, size_t> row_of_step;
  for (const StepReport& s : steps) {
    const auto [at, fresh] = row_of_step.emplace(s.step, rows.size());
    if (fresh)
      rows.push_back(&s);
    else
      rows[at->second] = &s;
  }
  constexpr size_t kRowsPerStatement = 256;  // 2,560 parameters, well under either database's limit
  for (size_t from = 0; from < rows.size(); from += kRowsPerStatement) {
    const size_t count = std::min(kRowsPerStatement, rows.size() - from);
    SqlStatement insert(*db_, db_->replace_into("steps", "run_id, " + column_names<StepReport>(),
                                                "?, " + column_parameters<StepReport>(), "run_id, step",
                                                static_cast<int>(count)));
    int parameter = 1;
    for (size_t i = 0; i < count; ++i)
      parameter = bind_columns(insert.bind(parameter, run), parameter + 1, *rows[from + i]);
    insert.run_deferred();
  }
}

void RunStore::touch(int64_t run, double duration_seconds) {
  SqlStatement update(*db_, "UPDATE runs SET updated = ?, duration_seconds = ? WHERE id = ?");
  update.bind(1, utc_now_iso8601()).bind(2, duration_seconds).bind(3, run).run_deferred();
}

void RunStore::add_steps(int64_t run, const std::vector<StepReport>& steps, double duration_seconds) {
  require_writable("record steps");
  SqlTransaction t(*db_);
  insert_steps(run, steps);
  touch(run, duration_seconds);
  t.commit();
}

void RunStore::add_epoch(int64_t run, const EpochReport& e, const std::vector<StepReport>& steps,
                         double duration_seconds, bool sync, const EpochDetails& details) {
  require_writable("record an epoch");
  std::optional<DurableCommits> durable;
  if (sync) durable.emplace(*db_);
  SqlTransaction t(*db_);
  insert_steps(run, steps);
  for (const GradientHistogram& h : details.histograms) insert_histogram(*db_, run, h);
  for (const std::vector<LayerNumerics>& layers : details.layer_numerics)
    if (!layers.empty()) insert_layer_numerics(*db_, run, layers);
  for (const ConfusionMatrix& c : details.confusions)
    replace_detail_rows(*db_, run, "confusion", c.epoch, nlohmann::json(c).dump());
  for (const EpochTimes& times : details.times)
    replace_detail_rows(*db_, run, "epoch_times", times.epoch, nlohmann::json(times).dump());
  SqlStatement insert(*db_, db_->replace_into("epochs", "run_id, " + column_names<EpochReport>(),
                                              "?, " + column_parameters<EpochReport>(), "run_id, epoch", 1));
  bind_columns(insert.bind(1, run), 2, e);
  insert.run_deferred();
  touch(run, duration_seconds);
  t.commit();
}

void RunStore::add_histogram(int64_t run, const GradientHistogram& h) {
  require_writable("record a histogram");
  insert_histogram(*db_, run, h);
}

void RunStore::insert_detail(int64_t run, const char* kind, int epoch, int64_t step, const std::string& json) {
  insert_detail_row(*db_, run, kind, epoch, step, json);
}

void RunStore::add_layer_numerics(int64_t run, const std::vector<LayerNumerics>& layers) {
  require_writable("record layer numerics");
  if (!layers.empty()) insert_layer_numerics(*db_, run, layers);
}

void RunStore::add_overflow(int64_t run, const OverflowReport& o) {
  require_writable("record an overflow");
  insert_detail(run, "overflow", o.epoch, o.step, nlohmann::json(o).dump());
}

void RunStore::replace_epoch_detail(int64_t run, const char* kind, int epoch, const std::string& json) {
  SqlTransaction t(*db_);
  replace_detail_rows(*db_, run, kind, epoch, json);
  t.commit();
}

void RunStore::add_epoch_times(int64_t run, const EpochTimes& times) {
  require_writable("record a time breakdown");
  replace_epoch_detail(run, "epoch_times", times.epoch, nlohmann::json(times).dump());
}

void RunStore::add_confusion(int64_t run, const ConfusionMatrix& confusion) {
  require_writable("record a confusion matrix");
  replace_epoch_detail(run, "confusion", confusion.epoch, nlohmann::json(confusion).dump());
}

void RunStore::add_divergence(int64_t run, const PrecisionDivergence& divergence) {
  require_writable("record a precision divergence");
  replace_epoch_detail(run, "divergence", divergence.epoch, nlohmann::json(divergence).dump());
}

void RunStore::add_alternating_speed(const AlternatingSpeed& speed) {
  require_writable("record speeds timed in alternation");
  SqlTransaction t(*db_);
  const std::string json = nlohmann::json(speed).dump();
  for (int64_t run : speed.runs) {
    SqlStatement replace(*db_, "DELETE FROM run_details WHERE run_id = ? AND kind = 'alternating_speed'");
    replace.bind(1, run).run_deferred();
    insert_detail(run, "alternating_speed", 0, 0, json);
  }
  t.commit();
}

void RunStore::add_checkpoint(int64_t run, const CheckpointInfo& c) {
  require_writable("record a checkpoint");
  // A checkpoint written to the path of an earlier one replaced it: only the newest row may point at the file.
  SqlTransaction t(*db_);
  SqlStatement replaced(*db_, "DELETE FROM checkpoints WHERE run_id = ? AND path = ?");
  replaced.bind(1, run).bind(2, c.path).run_deferred();
  SqlStatement insert(*db_, "INSERT INTO checkpoints(run_id, epoch, step, path, created) VALUES (?, ?, ?, ?, ?)");
  insert.bind(1, run).bind(2, c.resume_epoch).bind(3, c.step).bind(4, c.path).bind(5, utc_now_iso8601()).run_deferred();
  t.commit();
}

void RunStore::add_note(int64_t run, const std::string& note) {
  require_writable("add a note to a run");
  SqlTransaction t(*db_);  // read-modify-write of the run information, atomic against other writers
  append_notes(run, {note}, true);
  t.commit();
}

void RunStore::edit_info(int64_t run, const std::function<void(nlohmann::json&)>& change) {
  SqlStatement read(*db_, "SELECT info_json FROM runs WHERE id = ?");
  if (!read.bind(1, run).step())
    throw StoreError("no run " + std::to_string(run) + " in the run store '" + path() + "'");
  nlohmann::json info = nlohmann::json::parse(read.text(0), nullptr, false);
  read.reset();
  if (!info.is_object())
    throw StoreError("run store '" + path() + "': run " + std::to_string(run) + "'s information is not JSON");
  change(info);
  SqlStatement write(*db_, "UPDATE runs SET info_json = ? WHERE id = ?");
  write.bind(1, info.dump()).bind(2, run).run_deferred();
}

void RunStore::append_notes(int64_t run, const std::vector<std::string>& notes, bool again,
                            const std::string& backend_description) {
  edit_info(run, [&](nlohmann::json& info) {
    nlohmann::json& kept = info["notes"];
    for (const std::string& note : notes)
      if (again || std::find(kept.begin(), kept.end(), note) == kept.end()) kept.push_back(note);
    if (!backend_description.empty()) info["backend"] = backend_description;
  });
}

void RunStore::set_paused(int64_t run, bool paused) {
  require_writable(paused ? "record a pause" : "record the end of a pause");
  SqlTransaction t(*db_);
  SqlStatement status(*db_, "SELECT status FROM runs WHERE id = ?");
  if (!status.bind(1, run).step() || status.text(0) != "running") return;
  status.reset();
  edit_info(run, [&](nlohmann::json& info) {
    if (paused)
      info["paused_since"] = utc_now_iso8601();
    else
      info.erase("paused_since");
  });
  SqlStatement touched(*db_, "UPDATE runs SET updated = ? WHERE id = ?");  // other windows look for changed rows
  touched.bind(1, utc_now_iso8601()).bind(2, run).run_deferred();
  t.commit();
}

void RunStore::end_run(int64_t run, const RunEnd& end, const std::vector<StepReport>& steps, double duration_seconds) {
  require_writable("record the end of a run");
  {
    DurableCommits durable(*db_);
    SqlTransaction t(*db_);
    insert_steps(run, steps);
    const std::string now = utc_now_iso8601();
    SqlStatement update(*db_,
                        "UPDATE runs SET status = ?, end_reason = ?, ended = ?, updated = ?, duration_seconds = ? "
                        "WHERE id = ?");
    update.bind(1, run_status_name(end.status))
        .bind(2, end.reason)
        .bind(3, now)
        .bind(4, now)
        .bind(5, duration_seconds)
        .bind(6, run)
        .run_deferred();
    t.commit();
  }
  abandon_run(run);  // the row now says how it ended: give up ownership
}

void RunStore::abandon_run(int64_t run) {
  if (!owned_.erase(run)) return;
  db_->disown_run(run);
}

}  // namespace ampwb
