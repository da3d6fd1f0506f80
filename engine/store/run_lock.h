// Who is recording a run: an flock(2) on a per-run lock file beside the database, held by the recording process
// for as long as the run is `running`.
//
// Why flock: the kernel drops the lock when its holder dies, however it dies (SIGKILL, OOM killer, power cut of a
// container), so "the lock is free" means exactly "no process is recording this run". No pid is compared, so pid
// reuse cannot fool it, and flock locks belong to an open file description, so a GUI that opens the store in the
// same process as a recorder still sees the run's lock as held. Lock files live in "<database>-locks/run-<id>.lock"
// (a sweep point's, SqlConnection::try_hold_point, in "sweep-<id>-point-<index>.lock");
// they are opened with O_CLOEXEC so that a child the trainer might spawn cannot keep a dead run alive.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ampwb {

class RunLock {
 public:
  RunLock() = default;
  // Creates the lock file (and its folder) and takes the lock; throws StoreError naming the file on failure or
  // when another process holds it.
  static RunLock acquire(const std::string& path);
  // A lock several holders share (a sweep point's: the process that took it and its child). Waits only while a
  // prober (held_elsewhere) has it, which lets go at once.
  static RunLock acquire_shared(const std::string& path);
  ~RunLock();
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;

  // Unlocks and deletes the lock file (the run row must already say how the run ended).
  void release();
  // Unlocks a shared lock, deleting the file where no other holder is left.
  void release_shared();
  bool held() const { return fd_ >= 0; }

  // True while some process holds the lock at `path`; a missing file means no holder. Never creates anything.
  static bool held_elsewhere(const std::string& path);
  // Deletes the lock file at `path` (a dead run's leftover) unless a process holds it: holding it meanwhile, so that
  // no process takes the lock on a file that is then deleted under it.
  static void remove_if_free(const std::string& path);

 private:
  // Opens (makes) the file and flock()s it with `operation`: nullopt where LOCK_NB finds it held.
  static std::optional<RunLock> take(const std::string& path, int operation);

  int fd_ = -1;
  std::string path_;
};

// The lock file of run `run_id` in the store at `database_path`.
std::string run_lock_path(const std::string& database_path, int64_t run_id);
// The lock file of point `index` (from 0) of sweep `sweep_id`.
std::string point_lock_path(const std::string& database_path, int64_t sweep_id, int index);

}  // namespace ampwb
