// A sweep in the run store: a grid of training configurations (its points), where it runs (this machine or a
// Slurm job array), and for each point its state and the run that trains it. Kept in the store's own database
// beside the runs (schema version 6), through the store's connection, so an SQLite file and a PostgreSQL database
// keep the same records; many processes (a job array's tasks) update one sweep's points at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/run_store.h"

namespace ampwb {

// A point's state: queued until a process takes it, running while its run trains, requeued when its run was
// interrupted (preempted) and will resume from its checkpoint; finished, failed and cancelled are final.
enum class SweepPointState { Queued, Running, Finished, Failed, Cancelled, Requeued };
const char* sweep_point_state_name(SweepPointState state);
inline bool is_final(SweepPointState state) {
  return state == SweepPointState::Finished || state == SweepPointState::Failed || state == SweepPointState::Cancelled;
}
std::optional<SweepPointState> parse_sweep_point_state(const std::string& name);

struct SweepPoint {
  int64_t sweep_id = 0;
  int index = 0;              // 0-based, the grid's order
  // What the point sets: {"values": {setting: value}, "config": the run's TrainConfig}, and "failure", why it failed
  // where that is not in a run of its (a refusal before its run began, its process gone).
  std::string settings_json;
  int64_t run_id = 0;         // 0 until its run starts
  SweepPointState state = SweepPointState::Queued;
  std::string updated;  // UTC, ISO 8601
};

struct SweepRecord {
  int64_t id = 0;
  std::string name, created;
  std::string grid_json;     // the grid as given: {"grid": {setting: [values]}, "settings": {setting: value}}
  std::string runs_on;       // "local" or "slurm"
  // Its Slurm job arrays' ids once submitted, comma-separated: the sweep's own, then each retry's of its failed points
  // (`sweep run --retry-failed`); empty otherwise. slurm_jobs() splits them.
  std::string slurm_job_id;
  bool cancelled = false;    // the user cancelled it: no point starts any more
};

// Writes a new sweep and its points (all queued) in one transaction; returns its id.
int64_t create_sweep(RunStore& store, const std::string& name, const std::string& grid_json, const std::string& runs_on,
                     const std::vector<std::string>& point_settings);
// Records a job array submitted for the sweep, after those it had.
void add_sweep_slurm_job(RunStore& store, int64_t sweep, const std::string& job_id);
std::vector<std::string> slurm_jobs(const SweepRecord& s);  // oldest first
// "job 42", "jobs 42, 57" (`noun` "job array": "job arrays 42, 57").
std::string slurm_jobs_text(const SweepRecord& s, const std::string& noun = "job");

std::vector<SweepRecord> sweeps(const RunStore& store);                      // oldest first
SweepRecord sweep(const RunStore& store, int64_t id);                        // throws naming the id when absent
std::vector<SweepPoint> sweep_points(const RunStore& store, int64_t sweep);  // by index
SweepPoint sweep_point(const RunStore& store, int64_t sweep, int index);     // throws when absent

// Takes the first queued point of a sweep that is not cancelled (marks it running); nullopt when none is left.
// One transaction: two processes never take the same point. The store's connection holds the point (its lock) until
// release_point(), once the child process that trains it ended and the point's state is settled: until then no other
// process takes it, or takes it for abandoned.
std::optional<SweepPoint> take_next_point(RunStore& store, int64_t sweep);
void release_point(RunStore& store, const SweepPoint& point);
// Takes point `index` to run it (a job array's task, or the child of the `sweep run` that took it, whose process id is
// `parent`), unless it is final or its sweep cancelled: returns the point as it was before (its run, if one was
// started), or nullopt when it must not run. The point is held, beside the parent's hold, until this store's
// connection closes. Throws where another process holds it; nullopt where `parent` has ended (its hold went with it,
// and another process may have taken the point since).
std::optional<SweepPoint> take_point(RunStore& store, int64_t sweep, int index, int parent = 0);
// A cancelled point keeps its state, unless `state` is Finished: its run finished all the same.
void set_point_state(RunStore& store, int64_t sweep, int index, SweepPointState state);
void set_point_run(RunStore& store, int64_t sweep, int index, int64_t run);
// Failed, and why, kept with the point (as set_point_state, a cancelled point stays cancelled).
void set_point_failed(RunStore& store, int64_t sweep, int index, const std::string& why);
std::string point_failure(const SweepPoint& point);  // the why set_point_failed kept, else empty
// The run a point had before its store was recovered without it (store_recover.h), else 0: a point without a run
// otherwise had its run deleted, or has none yet.
int64_t lost_run(const std::string& settings_json);
// Every failed point of the sweep queued again, to train a new run (the failed run stays in the store as it is, its
// checkpoint in its folder: the point counts its retries, and trains each in a folder of its own). Returns their
// indexes.
std::vector<int> requeue_failed_points(RunStore& store, int64_t sweep);
int point_retries(const SweepPoint& point);
// Writes the points back as they were read (their settings, run, state and time): a requeue undone.
void restore_points(RunStore& store, const std::vector<SweepPoint>& points);
// A point taken but not started again (Ctrl-C before it began): queued once more.
void return_point(RunStore& store, int64_t sweep, int index);
// Points still marked running that no process holds and whose run no process records any more (the sweep's
// processes were killed): an interrupted or cancelled run's point requeued, to resume from its checkpoint; a point
// killed before its run began queued again; a finished or failed run's point marked so. Returns the indexes requeued
// or queued again.
std::vector<int> requeue_abandoned_points(RunStore& store, int64_t sweep);

// Cancels the sweep: no point starts any more, and every point not final is marked cancelled. Returns how many.
int cancel_sweep(RunStore& store, int64_t sweep);

}  // namespace ampwb
