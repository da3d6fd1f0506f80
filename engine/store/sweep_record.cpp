// A sweep's rows: sweeps and sweep_points (run_store.cpp's migration 5 -> 6), through the store's connection.
#include "store/sweep_record.h"

#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>
#include <type_traits>

#include "store/reconnecting.h"
#include "store/sqlite.h"

namespace ampwb {
namespace {

constexpr const char* kStateNames[] = {"queued", "running", "finished", "failed", "cancelled", "requeued"};

const char* kPointColumns = "sweep_id, idx, settings_json, run_id, state, updated";

SweepPoint read_point(const SqlStatement& q) {
  SweepPoint p;
  p.sweep_id = q.int64(0);
  p.index = static_cast<int>(q.int64(1));
  p.settings_json = q.text(2);
  p.run_id = q.is_null(3) ? 0 : q.int64(3);
  p.state = parse_sweep_point_state(q.text(4)).value_or(SweepPointState::Failed);
  p.updated = q.text(5);
  return p;
}

SweepRecord read_sweep(const SqlStatement& q) {
  SweepRecord s;
  s.id = q.int64(0);
  s.name = q.text(1);
  s.created = q.text(2);
  s.grid_json = q.text(3);
  s.runs_on = q.text(4);
  s.slurm_job_id = q.text(5);
  s.cancelled = q.text(6) == "cancelled";
  return s;
}

const char* kSweepColumns = "id, name, created, grid_json, runs_on, slurm_job_id, state";

bool final_state(SweepPointState s) {
  return s == SweepPointState::Finished || s == SweepPointState::Failed || s == SweepPointState::Cancelled;
}

std::optional<SweepPoint> find_point(SqlConnection& db, int64_t sweep, int index) {
  SqlStatement q(db, std::string("SELECT ") + kPointColumns + " FROM sweep_points WHERE sweep_id = ? AND idx = ?");
  q.bind(1, sweep).bind(2, index);
  if (!q.step()) return std::nullopt;
  return read_point(q);
}

bool sweep_cancelled(SqlConnection& db, int64_t sweep) {
  SqlStatement q(db, "SELECT state FROM sweeps WHERE id = ?");
  q.bind(1, sweep);
  return !q.step() || q.text(0) == "cancelled";
}

void update_point(SqlConnection& db, int64_t sweep, int index, SweepPointState state) {
  SqlStatement u(db, "UPDATE sweep_points SET state = ?, updated = ? WHERE sweep_id = ? AND idx = ?");
  u.bind(1, sweep_point_state_name(state)).bind(2, utc_now_iso8601()).bind(3, sweep).bind(4, index).run();
}

}  // namespace

const char* sweep_point_state_name(SweepPointState state) { return kStateNames[static_cast<int>(state)]; }

std::optional<SweepPointState> parse_sweep_point_state(const std::string& name) {
  for (int i = 0; i < static_cast<int>(std::size(kStateNames)); ++i)
    if (name == kStateNames[i]) return static_cast<SweepPointState>(i);
  return std::nullopt;
}

int64_t create_sweep(RunStore& store, const std::string& name, const std::string& grid_json, const std::string& runs_on,
                     const std::vector<std::string>& point_settings) {
  return reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    const std::string now = utc_now_iso8601();
    SqlStatement insert(db,
                        "INSERT INTO sweeps(name, created, grid_json, runs_on, state) VALUES (?, ?, ?, ?, 'active') "
                        "RETURNING id");
    insert.bind(1, name).bind(2, now).bind(3, grid_json).bind(4, runs_on);
    if (!insert.step()) throw StoreError("run store '" + store.path() + "': a new sweep's row has no id");
    const int64_t id = insert.int64(0);
    insert.reset();
    SqlStatement point(db,
                       "INSERT INTO sweep_points(sweep_id, idx, settings_json, state, updated) VALUES (?, ?, ?, "
                       "'queued', ?)");
    for (size_t i = 0; i < point_settings.size(); ++i) {
      point.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, point_settings[i]).bind(4, now);
      point.run();
    }
    t.commit();
    return id;
  });
}

void add_sweep_slurm_job(RunStore& store, int64_t sweep, const std::string& job_id) {
  reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    SqlStatement q(db, "SELECT slurm_job_id FROM sweeps WHERE id = ?");
    q.bind(1, sweep);
    const std::string before = q.step() ? q.text(0) : std::string();
    SqlStatement(db, "UPDATE sweeps SET slurm_job_id = ? WHERE id = ?")
        .bind(1, before.empty() ? job_id : before + "," + job_id)
        .bind(2, sweep)
        .run();
    t.commit();
  });
}

std::vector<std::string> slurm_jobs(const SweepRecord& s) {
  std::vector<std::string> jobs;
  for (size_t from = 0; from < s.slurm_job_id.size();) {
    const size_t comma = std::min(s.slurm_job_id.find(',', from), s.slurm_job_id.size());
    if (comma > from) jobs.push_back(s.slurm_job_id.substr(from, comma - from));
    from = comma + 1;
  }
  return jobs;
}

std::string slurm_jobs_text(const SweepRecord& s, const std::string& noun) {
  const std::vector<std::string> jobs = slurm_jobs(s);
  std::string text = noun + (jobs.size() == 1 ? " " : "s ");
  for (size_t i = 0; i < jobs.size(); ++i) text += (i ? ", " : "") + jobs[i];
  return text;
}

std::vector<SweepRecord> sweeps(const RunStore& store) {
  return reconnecting([&] {
    SqlStatement q(store.connection(), std::string("SELECT ") + kSweepColumns + " FROM sweeps ORDER BY id");
    std::vector<SweepRecord> out;
    while (q.step()) out.push_back(read_sweep(q));
    return out;
  });
}

SweepRecord sweep(const RunStore& store, int64_t id) {
  return reconnecting([&] {
    SqlStatement q(store.connection(), std::string("SELECT ") + kSweepColumns + " FROM sweeps WHERE id = ?");
    q.bind(1, id);
    if (!q.step()) throw Error("no sweep " + std::to_string(id) + " in the run store '" + store.path() + "'");
    return read_sweep(q);
  });
}

std::vector<SweepPoint> sweep_points(const RunStore& store, int64_t sweep) {
  return reconnecting([&] {
    SqlStatement q(store.connection(),
                   std::string("SELECT ") + kPointColumns + " FROM sweep_points WHERE sweep_id = ? ORDER BY idx");
    q.bind(1, sweep);
    std::vector<SweepPoint> out;
    while (q.step()) out.push_back(read_point(q));
    return out;
  });
}

SweepPoint sweep_point(const RunStore& store, int64_t sweep, int index) {
  return reconnecting([&] {
    const std::optional<SweepPoint> p = find_point(store.connection(), sweep, index);
    if (!p)
      throw Error("sweep " + std::to_string(sweep) + " has no point " + std::to_string(index) + " in the run store '" +
                  store.path() + "'");
    return *p;
  });
}

namespace {
// After the transaction that held the point rolled back (nothing else may go in it).
void release_quietly(SqlConnection& db, int64_t sweep, int index) {
  try {
    db.release_point(sweep, index);
  } catch (const StoreError&) {  // the connection is lost, and the hold with it
  }
}
}  // namespace

std::optional<SweepPoint> take_next_point(RunStore& store, int64_t sweep) {
  return reconnecting([&]() -> std::optional<SweepPoint> {
    SqlConnection& db = store.connection();
    std::optional<int> held;
    try {
      SqlTransaction t(db);
      if (sweep_cancelled(db, sweep)) return std::nullopt;
      // The first that no other process holds still: one that took a point holds it until its state is settled.
      SqlStatement q(
          db, "SELECT idx FROM sweep_points WHERE sweep_id = ? AND state IN ('queued', 'requeued') ORDER BY idx");
      q.bind(1, sweep);
      std::vector<int> candidates;
      while (q.step()) candidates.push_back(static_cast<int>(q.int64(0)));
      q.reset();
      for (const int index : candidates)
        if (db.try_hold_point(sweep, index)) {
          held = index;
          break;
        }
      if (!held) return std::nullopt;
      const std::optional<SweepPoint> p = find_point(db, sweep, *held);
      update_point(db, sweep, *held, SweepPointState::Running);
      t.commit();
      return p;
    } catch (...) {
      if (held) release_quietly(db, sweep, *held);
      throw;
    }
  });
}

void release_point(RunStore& store, const SweepPoint& point) {
  reconnecting([&] { store.connection().release_point(point.sweep_id, point.index); });
}

std::optional<SweepPoint> take_point(RunStore& store, int64_t sweep, int index, int parent) {
  return reconnecting([&]() -> std::optional<SweepPoint> {
    SqlConnection& db = store.connection();
    bool held = false;
    try {
      SqlTransaction t(db);
      std::optional<SweepPoint> p = find_point(db, sweep, index);
      if (!p)
        throw Error("sweep " + std::to_string(sweep) + " has no point " + std::to_string(index) +
                    " in the run store '" + store.path() + "'");
      if (final_state(p->state) || sweep_cancelled(db, sweep)) return std::nullopt;
      if (parent != 0) {
        if (::getppid() != parent) return std::nullopt;  // checked in the transaction that joins its hold
        db.join_point(sweep, index);
      } else if (!db.try_hold_point(sweep, index)) {
        throw Error("sweep " + std::to_string(sweep) + "'s point " + std::to_string(index + 1) +
                    " is held by another process, which trains it (a sweep run, or another sweep point)");
      }
      held = true;
      update_point(db, sweep, index, SweepPointState::Running);
      t.commit();
      return p;
    } catch (...) {
      if (held) release_quietly(db, sweep, index);
      throw;
    }
  });
}

void set_point_state(RunStore& store, int64_t sweep, int index, SweepPointState state) {
  reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    // A point cancelled meanwhile stays cancelled: its run's end (cancelled by the signal) says no more. A run that
    // finished all the same (the cancel came at its last step) is the point's result, counted with its group.
    const std::optional<SweepPoint> p = find_point(db, sweep, index);
    if (p && p->state == SweepPointState::Cancelled && state != SweepPointState::Cancelled &&
        state != SweepPointState::Finished)
      return;
    update_point(db, sweep, index, state);
    t.commit();
  });
}

void set_point_failed(RunStore& store, int64_t sweep, int index, const std::string& why) {
  reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    const std::optional<SweepPoint> p = find_point(db, sweep, index);
    if (!p || p->state == SweepPointState::Cancelled) return;
    nlohmann::json settings = nlohmann::json::parse(p->settings_json, nullptr, false);
    if (settings.is_object()) {
      settings["failure"] = why;
      SqlStatement u(db, "UPDATE sweep_points SET settings_json = ? WHERE sweep_id = ? AND idx = ?");
      u.bind(1, settings.dump()).bind(2, sweep).bind(3, index).run();
    }
    update_point(db, sweep, index, SweepPointState::Failed);
    t.commit();
  });
}

// One field of a point's settings record, or `none` where the record lacks it (or is not JSON) or holds another type.
template <class T>
T settings_field(const std::string& settings_json, const char* key, T none) {
  const nlohmann::json settings = nlohmann::json::parse(settings_json, nullptr, false);
  if (!settings.is_object() || !settings.contains(key)) return none;
  const nlohmann::json& value = settings[key];
  if constexpr (std::is_same_v<T, std::string>)
    return value.is_string() ? value.get<std::string>() : none;
  else
    return value.is_number_integer() ? value.get<T>() : none;
}

int point_retries(const SweepPoint& point) { return settings_field(point.settings_json, "retries", 0); }
std::string point_failure(const SweepPoint& point) {
  return settings_field(point.settings_json, "failure", std::string());
}
int64_t lost_run(const std::string& settings_json) { return settings_field(settings_json, "run_lost", int64_t{0}); }

std::vector<int> requeue_failed_points(RunStore& store, int64_t sweep) {
  return reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    std::vector<SweepPoint> failed;
    SqlStatement q(db, std::string("SELECT ") + kPointColumns +
                           " FROM sweep_points WHERE sweep_id = ? AND state = ? ORDER BY idx");
    q.bind(1, sweep).bind(2, sweep_point_state_name(SweepPointState::Failed));
    while (q.step()) failed.push_back(read_point(q));
    std::vector<int> requeued;
    for (const SweepPoint& p : failed) {
      nlohmann::json settings = nlohmann::json::parse(p.settings_json, nullptr, false);
      if (settings.is_object()) {
        settings.erase("failure");
        settings["retries"] = settings.value("retries", 0) + 1;  // a folder of its own: the failed run's stays
      }
      SqlStatement u(db,
                     "UPDATE sweep_points SET settings_json = ?, run_id = NULL, state = ?, updated = ? "
                     "WHERE sweep_id = ? AND idx = ?");
      u.bind(1, settings.is_object() ? settings.dump() : p.settings_json)
          .bind(2, sweep_point_state_name(SweepPointState::Queued))
          .bind(3, utc_now_iso8601())
          .bind(4, sweep)
          .bind(5, p.index)
          .run();
      requeued.push_back(p.index);
    }
    t.commit();
    return requeued;
  });
}

void restore_points(RunStore& store, const std::vector<SweepPoint>& points) {
  reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    for (const SweepPoint& p : points) {
      SqlStatement update(db,
                          "UPDATE sweep_points SET settings_json = ?, run_id = ?, state = ?, updated = ? "
                          "WHERE sweep_id = ? AND idx = ?");
      update.bind(1, p.settings_json);
      if (p.run_id != 0)
        update.bind(2, p.run_id);
      else
        update.bind_null(2);
      update.bind(3, sweep_point_state_name(p.state)).bind(4, p.updated).bind(5, p.sweep_id).bind(6, p.index).run();
    }
    t.commit();
  });
}

void set_point_run(RunStore& store, int64_t sweep, int index, int64_t run) {
  reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    SqlStatement(db, "UPDATE sweep_points SET run_id = ?, updated = ? WHERE sweep_id = ? AND idx = ?")
        .bind(1, run)
        .bind(2, utc_now_iso8601())
        .bind(3, sweep)
        .bind(4, index)
        .run();
    t.commit();
  });
}

void return_point(RunStore& store, int64_t sweep, int index) {
  reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    const std::optional<SweepPoint> p = find_point(db, sweep, index);
    if (p && p->state == SweepPointState::Running)
      update_point(db, sweep, index, p->run_id ? SweepPointState::Requeued : SweepPointState::Queued);
    t.commit();
  });
}

std::vector<int> requeue_abandoned_points(RunStore& store, int64_t sweep) {
  return reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    // A run still recorded by its process says running: opening the store marked every abandoned one interrupted.
    SqlStatement q(db,
                   "SELECT p.idx, p.run_id, r.status FROM sweep_points p LEFT JOIN runs r ON r.id = p.run_id "
                   "WHERE p.sweep_id = ? AND p.state = 'running' AND (r.id IS NULL OR r.status <> 'running') "
                   "ORDER BY p.idx");
    q.bind(1, sweep);
    std::vector<std::tuple<int, bool, std::string>> abandoned;
    while (q.step()) abandoned.emplace_back(static_cast<int>(q.int64(0)), !q.is_null(1), q.text(2));
    q.reset();
    std::vector<int> requeued;
    for (const auto& [index, has_run, run_status] : abandoned) {
      if (db.point_held(sweep, index)) continue;  // a process trains it, or is starting or ending it
      SweepPointState state = has_run ? SweepPointState::Requeued : SweepPointState::Queued;
      if (run_status == run_status_name(RunStatus::Finished)) state = SweepPointState::Finished;
      if (run_status == run_status_name(RunStatus::Failed)) state = SweepPointState::Failed;
      if (state == SweepPointState::Requeued || state == SweepPointState::Queued) requeued.push_back(index);
      update_point(db, sweep, index, state);
    }
    t.commit();
    return requeued;
  });
}

int cancel_sweep(RunStore& store, int64_t sweep) {
  store.require_writable("cancel a sweep");
  return reconnecting([&] {
    SqlConnection& db = store.connection();
    SqlTransaction t(db);
    SqlStatement(db, "UPDATE sweeps SET state = 'cancelled' WHERE id = ?").bind(1, sweep).run();
    SqlStatement u(db,
                   "UPDATE sweep_points SET state = 'cancelled', updated = ? WHERE sweep_id = ? AND state IN "
                   "('queued', 'running', 'requeued')");
    u.bind(1, utc_now_iso8601()).bind(2, sweep).run();
    const int changed = db.changes();
    t.commit();
    return changed;
  });
}

}  // namespace ampwb
