// The run store: every training run, its configuration and everything it reported, in one SQLite file that the
// GUI and any number of CLI processes share, or in a PostgreSQL database that processes on many machines share
// (postgres.h). Both keep the same records and schema versions, through one connection interface
// (sql_connection.h); what follows says how the SQLite file does it, and PostgreSQL's differences are at the end.
//
// Sharing: WAL mode (readers never block the writer) and a 5 s busy timeout; every write is one short
// BEGIN IMMEDIATE transaction, so concurrent writers queue instead of failing with "database is locked".
//
// Crash safety: SQLite's WAL keeps the file consistent whatever happens to the process, and every completed epoch
// is its own committed transaction. A recording process holds an flock on its run's lock file (see run_lock.h)
// from the moment the row appears until the row says how the run ended; opening the store read-write turns every
// `running` run whose lock is free into `interrupted` (re-checked inside one write transaction, so a run that ends
// while the store opens is never mislabelled). A read-only store reports such runs as interrupted without writing.
// A write that fails (full disk, file made read-only) throws StoreError naming the file; its transaction rolls back
// and everything committed before stays.
//
// Refusal: a file that is not SQLite, or an SQLite file without this store's marker (application_id "AMPW" and an
// `ampwb_meta` table), or of a newer schema, is refused with a message naming it, before anything is written to it.
//
// Schema: PRAGMA user_version is the schema version. A new file is created by running every migration from
// version 0, so the upgrade path of old files is the path every file takes.
//
// Threads: one RunStore (one SQLite connection) is used by one thread at a time; open one per thread.
//
// PostgreSQL: write transactions queue behind one advisory lock (as SQLite's BEGIN IMMEDIATE queues writers); a
// recording process holds a session advisory lock on its run instead of a lock file, which the server drops when
// the process's connection ends (killed, crashed, or its node gone, once TCP keepalive notices); the schema version
// is ampwb_meta's 'schema_version'. The store's tables are made in an empty database; one holding other tables is
// refused. `store check` reads every row and finds rows no run owns; a backup is pg_dump's (backup_to refuses).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "store/run_record.h"
#include "store/sql_connection.h"
#include "store/sqlite.h"
#include "train/config.h"
#include "train/events.h"

namespace ampwb {

// A run's name or notes that another window or process changed since the caller read them (RunStore::rename and
// set_notes with `were`): current() is what the run holds now.
class EditConflict : public StoreError {
 public:
  EditConflict(const std::string& message, std::string current) : StoreError(message), current_(std::move(current)) {}
  const std::string& current() const { return current_; }

 private:
  std::string current_;
};

// Why a run whose recording process is gone without recording its end is interrupted: the process cannot say.
inline constexpr const char* kAbandonedRunReason =
    "the recording process ended without reporting an end (killed, crashed or powered off, or it could no longer "
    "write to the run store: a full disk, a server out of reach)";

class RunStore {
 public:
  static constexpr int kSchemaVersion = 6;
  static constexpr int32_t kApplicationId = 0x414d5057;  // "AMPW"

  enum class Mode {
    Create,    // read-write; creates the file (and its folder) when missing; refuses a read-only file
    Existing,  // the file must exist; read-write where possible, else read-only (see read_only())
    ReadOnly,  // never writes (no migration, no recovery)
  };

  // $AMPWB_DB, else $XDG_DATA_HOME/ampwb/runs.sqlite, else ~/.local/share/ampwb/runs.sqlite.
  static std::string default_path();

  // `location`: an SQLite file's path, or a PostgreSQL URI (store_location.h; postgres.h) where this build has
  // libpq; any other URI is refused, naming what this build opens. A PostgreSQL store's Mode::Create makes the
  // store's tables in an empty database; the database itself is the server administrator's.
  explicit RunStore(const std::string& location, Mode mode = Mode::Create);
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  // The SQLite file's path, or the PostgreSQL URI without its password: what messages and a run's settings show.
  const std::string& path() const { return db_->name(); }
  bool is_postgresql() const { return db_->dialect() == SqlConnection::Dialect::PostgreSql; }
  bool read_only() const { return read_only_; }
  // Throws StoreError "cannot <what>: the run store '<path>' is read-only" where it is.
  void require_writable(const char* what) const;
  // The store's connection, for the records kept beside runs in the same database (sweep_record.h).
  SqlConnection& connection() const { return *db_; }
  int found_schema_version() const { return found_version_; }       // before migration; 0 for a new file
  int interrupted_on_open() const { return interrupted_on_open_; }  // runs this open found abandoned

  // --- recording (StoreRecorder drives these) ---
  // Inserts a `running` run owned by this process until end_run (or this process dies). Returns its id.
  int64_t begin_run(const TrainConfig& config, const RunInfo& info, const std::string& dataset_fingerprint);
  // Takes over an ended run to continue it from a checkpoint: running again, owned by this process, with the
  // epochs from info.first_epoch on forgotten (they will be reported again), and `config` recorded as what it
  // continues with (resume_config's: a moved dataset folder, other threads).
  void reopen_run(int64_t run, const RunInfo& info, const TrainConfig& config);
  // Forgets the steps from `first_step` on (a resumed run reports them again).
  void forget_steps_from(int64_t run, int64_t first_step);
  void add_steps(int64_t run, const std::vector<StepReport>& steps, double duration_seconds);
  // What an epoch reports before its end (StoreRecorder keeps them until then), to be written with the epoch: each
  // write of its own is a commit and, to a database server, a round trip, which short epochs feel.
  struct EpochDetails {
    std::vector<GradientHistogram> histograms;
    std::vector<std::vector<LayerNumerics>> layer_numerics;  // each the layers of one probed step
    std::vector<ConfusionMatrix> confusions;
    std::vector<EpochTimes> times;
    bool empty() const { return histograms.empty() && layer_numerics.empty() && confusions.empty() && times.empty(); }
  };
  // The epoch, the steps still pending before it and its details, in one transaction. Every commit survives a
  // killed process; with `sync` it is also fsynced (with all before it), so it survives a power cut too.
  void add_epoch(int64_t run, const EpochReport& epoch, const std::vector<StepReport>& steps, double duration_seconds,
                 bool sync = true, const EpochDetails& details = {});
  void add_histogram(int64_t run, const GradientHistogram& histogram);
  // What explains the run (train/run_details.h): one probed step's layers, a skipped step's layers, an epoch's time.
  void add_layer_numerics(int64_t run, const std::vector<LayerNumerics>& layers);
  void add_overflow(int64_t run, const OverflowReport& overflow);
  void add_epoch_times(int64_t run, const EpochTimes& times);
  void add_confusion(int64_t run, const ConfusionMatrix& confusion);
  // The run's precision divergence (one a run, at its end): recorded again, it replaces the one of its epoch.
  void add_divergence(int64_t run, const PrecisionDivergence& divergence);
  // A sweep's speeds timed in alternation, kept with each of its runs (recorded again, it replaces the last).
  void add_alternating_speed(const AlternatingSpeed& speed);
  // Replaces an earlier checkpoint of the run at the same path (the file was overwritten).
  void add_checkpoint(int64_t run, const CheckpointInfo& checkpoint);
  // One more of the run's notes (RunInfo::notes), as the trainer meets it.
  void add_note(int64_t run, const std::string& note);
  // Records the file of the run's final weights in its information (RunInfo::final_weights; store/final_weights.h).
  void set_final_weights(int64_t run, const std::string& path);
  // Records that the user paused a running run (RunInfo::paused_since, now) or resumed it, for every other reader of
  // the store to say; a run no longer running is left as it is.
  void set_paused(int64_t run, bool paused);
  // Records how the run ended (with its last steps), fsynced, and gives up ownership.
  void end_run(int64_t run, const RunEnd& end, const std::vector<StepReport>& steps, double duration_seconds);
  // Gives up ownership without writing (the row stays `running`: the next open marks it interrupted).
  void abandon_run(int64_t run);

  // --- reading ---
  std::vector<RunRecord> runs() const;  // oldest first
  RunRecord run(int64_t id) const;      // throws naming the id when absent
  std::optional<RunRecord> find_run(int64_t id) const;  // none when absent (deleted, say)
  // A run by id ("7") or by name; throws when none matches or a name is ambiguous.
  int64_t resolve(const std::string& id_or_name) const;
  // Each of several runs, in order; a run given twice (by id or name) is refused, naming it. "sweep:N" stands for the
  // runs of sweep N's points, in the points' order; each of its points without a run (not run yet, failed before
  // its run began, its run deleted) is added to `left_out`, "sweep 2 point 3 (its run deleted)", where given.
  std::vector<int64_t> resolve_each(const std::vector<std::string>& ids_or_names,
                                    std::vector<std::string>* left_out = nullptr) const;
  std::vector<EpochReport> epochs(int64_t run) const;
  std::vector<StepReport> steps(int64_t run) const;
  std::vector<GradientHistogram> histograms(int64_t run) const;
  std::vector<LayerNumerics> layer_numerics(int64_t run) const;        // by step, each step's layers in model order
  std::vector<OverflowReport> overflows(int64_t run) const;            // by step
  std::vector<EpochTimes> epoch_times(int64_t run) const;              // by epoch
  std::vector<ConfusionMatrix> confusion_matrices(int64_t run) const;  // by epoch
  // The run's precision divergence, if it was measured (a finished run in a low-precision mode).
  std::optional<PrecisionDivergence> divergence(int64_t run) const;
  // The speeds of the run's sweep timed in alternation, if it was timed so.
  std::optional<AlternatingSpeed> alternating_speed(int64_t run) const;
  std::vector<CheckpointInfo> checkpoints(int64_t run) const;  // oldest first; the last one resumes the run
  bool recording(int64_t run) const;                           // a live process records this run now
  // A reader that follows the store (the GUI's runs view) compares this with the last one it saw and re-reads the
  // runs only when it differs: one small query over the runs' own columns, no migration needed.
  struct ChangeMarker {
    int64_t runs = 0;
    int64_t largest_id = 0;       // a run removed and another added still differ
    std::string latest_update;    // to the second: two updates within one second differ in recorded_seconds
    double recorded_seconds = 0;  // every recorded step or epoch adds to its run's wall time
    int64_t running = 0;          // a run that ends, or is found abandoned and marked so by another process
    int64_t abandoned = 0;        // runs still `running` whose recording process is gone (not yet marked)
    int64_t edited_chars = 0;     // names, notes and tags: most edits change their length
    bool operator==(const ChangeMarker&) const = default;
  };
  ChangeMarker change_marker() const;

  // --- editing ---
  // Refuses `name` for run `run` (0: a new run) where check_run_name does, or where another run has it already.
  void check_new_name(const std::string& name, int64_t run = 0) const;
  // With `were` (the name or notes the user was shown), each refuses where another window or process changed them
  // meanwhile (EditConflict, saying what they are now), so that no edit is lost unseen.
  void rename(int64_t run, const std::string& name, const std::optional<std::string>& were = std::nullopt);
  void set_notes(int64_t run, const std::string& notes, const std::optional<std::string>& were = std::nullopt);
  // Adds `tag` (refused, saying why, where tag_problem finds one); false where the run had it already, in any case
  // (same_tag).
  bool add_tag(int64_t run, const std::string& tag);
  // Removes the run's tag that is `tag` in any case; returns it as it was stored. Throws where the run has none.
  std::string remove_tag(int64_t run, const std::string& tag);
  void remove(int64_t run);  // the run, all its rows and its final weights; refuses a run a live process records
  std::string removal_refusal(const RunRecord& r) const;  // why remove() would refuse it; empty when it would not

  // Whether `ampwb train --resume` can continue the run: not finished, no live process records it, and its
  // latest checkpoint (or the one before it) is on disk.
  bool resumable(int64_t run) const;

  // "ok", or SQLite's list of problems: the full check (integrity_check) and the quick one (quick_check, which
  // skips index contents; about 0.3 s on a 190 MB store of 1,000 runs).
  std::string integrity_check() const;
  std::string quick_check() const;
  // Writes a consistent copy of the store to `file` (SQLite's online backup: safe while runs are recording).
  // Refuses to overwrite an existing file.
  void backup_to(const std::string& file) const;

  // Marks `running` runs whose recording process is gone as interrupted, with kAbandonedRunReason; returns how
  // many. Opening does this; a long-lived reader (the GUI) may call it again. Does nothing on a read-only store.
  int recover_abandoned_runs();
  // The runs this object's recover_abandoned_runs calls (opening included) marked interrupted, in order.
  const std::vector<int64_t>& recovered_runs() const { return recovered_; }

 private:
  void open_checked(const std::string& path, Mode mode);
  void open_sqlite(const std::string& path, SqliteDb::Open how);
  void open_postgres(const std::string& uri, Mode mode);
  std::string database_check() const;
  void migrate();
  void report_abandoned(RunRecord& r) const;
  void reopen_owned(const RunRecord& run, const RunInfo& info, const TrainConfig& config);
  // Changes the run's information (its info JSON) inside the caller's transaction: read, `change`, written back.
  void edit_info(int64_t run, const std::function<void(nlohmann::json&)>& change);
  // Adds `notes` to the run's information, inside the caller's transaction; `again`: one already there too. A
  // `backend_description` given replaces the device the run describes.
  void append_notes(int64_t run, const std::vector<std::string>& notes, bool again,
                    const std::string& backend_description = {});
  void touch(int64_t run, double duration_seconds);
  void insert_steps(int64_t run, const std::vector<StepReport>& steps);
  void insert_detail(int64_t run, const char* kind, int epoch, int64_t step, const std::string& json);
  void replace_epoch_detail(int64_t run, const char* kind, int epoch, const std::string& json);
  template <class R>
  std::vector<R> details(int64_t run, const char* kind) const;
  void set_tags(int64_t run, const std::vector<std::string>& tags);
  void set_text(int64_t run, const std::string& column, const std::string& value,
                const std::optional<std::string>& were);  // rename, set_notes

  std::unique_ptr<SqlConnection> db_;
  SqliteDb* sqlite_ = nullptr;  // db_'s SQLite file, for what only SQLite has (PRAGMAs, its backup); null otherwise
  bool read_only_ = false;
  int found_version_ = 0;
  int interrupted_on_open_ = 0;
  std::set<int64_t> owned_;           // runs this store records (their locks are db_'s)
  std::vector<int64_t> recovered_;    // recovered_runs()
  struct BackgroundCheck;             // quick_check of a large store, beside the first writes
  std::shared_ptr<BackgroundCheck> background_check_;
};

// Opened for writing, a store is checked first (SQLite's quick_check): a damaged one is refused, saying how to
// recover it. A store up to this size is checked before anything is written (under 100 ms); a larger one in the
// background, and writing stops as soon as the check finds damage.
constexpr uintmax_t kStoreCheckedBeforeWritingBytes = uintmax_t{48} << 20;
std::string damaged_store_message(const std::string& path, const std::string& problems);

// Refuses names a run cannot have: empty, or all digits (it would read as an id).
void check_run_name(const std::string& name);

// Current UTC time as ISO 8601.
std::string utc_now_iso8601();

// Where a new run checkpoints by default, CLI and GUI alike: a folder of its own beside the store,
// <store folder>/checkpoints/<UTC time>-<pid>, then -2, -3, ... for this process's later runs within that second.
// Removed when the run finishes, unless kept on purpose.
std::string new_checkpoint_dir(const std::string& store_path);
// Whether `folder` is one new_checkpoint_dir made for this store: removed when its run finishes (a folder the user
// named is left alone).
bool is_own_checkpoint_dir(const std::string& store_path, const std::string& folder);

// Why `tag` cannot be a tag, "" where it can. Tags are listed joined by ", " (show, the GUI's Runs view) and "; "
// (CSV), and the GUI's Tag dialog reads a leading "-" as "remove the tag": a tag that held those would read as others.
std::string tag_problem(const std::string& tag);
// Whether two tags are one: the case of their Latin letters aside ("Baseline" is "baseline"), as the run list's tag
// filter and the workbench's match them.
bool same_tag(const std::string& a, const std::string& b);

}  // namespace ampwb
