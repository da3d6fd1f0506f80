// Per-run ownership locks (flock on a file beside the database).
#include "store/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "store/sqlite.h"

namespace ampwb {

namespace {
// Whether `path` names the file open at `fd` (not one deleted, or deleted and made again, since it was opened).
bool names_open_file(const std::string& path, int fd) {
  struct stat open_file {
  }, at_path{};
  return ::fstat(fd, &open_file) == 0 && ::stat(path.c_str(), &at_path) == 0 && open_file.st_dev == at_path.st_dev &&
         open_file.st_ino == at_path.st_ino;
}
}  // namespace

std::string run_lock_path(const std::string& database_path, int64_t run_id) {
  return database_path + "-locks/run-" + std::to_string(run_id) + ".lock";
}

std::string point_lock_path(const std::string& database_path, int64_t sweep_id, int index) {
  return database_path + "-locks/sweep-" + std::to_string(sweep_id) + "-point-" + std::to_string(index) + ".lock";
}

RunLock RunLock::acquire(const std::string& path) {
  std::optional<RunLock> lock = take(path, LOCK_EX | LOCK_NB);
  if (!lock) throw StoreError("cannot lock '" + path + "': another process is recording this run");
  return std::move(*lock);
}

RunLock RunLock::acquire_shared(const std::string& path) { return std::move(*take(path, LOCK_SH)); }

std::optional<RunLock> RunLock::take(const std::string& path, int operation) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw StoreError("cannot create the run lock folder '" + folder.string() + "': " + ec.message());
  for (int attempt = 1;; ++attempt) {
    RunLock lock;
    lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock.fd_ < 0) throw StoreError("cannot create the run lock file '" + path + "': " + std::strerror(errno));
    lock.path_ = path;
    int locked = 0;
    while ((locked = ::flock(lock.fd_, operation)) != 0 && errno == EINTR) {
    }
    if (locked != 0) {
      if (errno == EWOULDBLOCK) return std::nullopt;
      throw StoreError("cannot lock '" + path + "': " + std::strerror(errno));
    }
    // The file may have been deleted between the open and the lock (a run's end, a dead run's leftover removed):
    // a lock on it would guard nothing, so the file at the path is opened again.
    if (names_open_file(path, lock.fd_)) return lock;
    if (attempt == 10) throw StoreError("cannot lock '" + path + "': the file keeps being replaced");
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // unlocks; the file stays, which is harmless (an unlocked file means "nobody")
}

RunLock::RunLock(RunLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

void RunLock::release() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // before unlocking: a prober that opened the file meanwhile still sees the run ended
  ::close(fd_);
  fd_ = -1;
}

void RunLock::release_shared() {
  if (fd_ < 0) return;
  // The last holder deletes the file; one that opened it meanwhile finds it gone and makes it again (take()).
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

void RunLock::remove_if_free(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && names_open_file(path, fd)) ::unlink(path.c_str());
  ::close(fd);
}

bool RunLock::held_elsewhere(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  // No lock file: nobody records this run. Any other failure (permissions) cannot tell, so assume a holder
  // rather than mark a live run interrupted.
  if (fd < 0) return errno != ENOENT;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return !free;
}

}  // namespace ampwb
