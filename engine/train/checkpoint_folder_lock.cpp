// The checkpoint folder's lock.
#include "train/checkpoint_folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/setting_error.h"

namespace ampwb {

CheckpointFolderLock CheckpointFolderLock::take(const std::string& folder) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  CheckpointFolderLock lock;
  if (!error && ::access(folder.c_str(), W_OK | X_OK) != 0) error = std::error_code(errno, std::generic_category());
  if (!error) {
    const std::string path = (std::filesystem::path(folder) / "checkpoint.lock").string();
    lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock.fd_ < 0) error = std::error_code(errno, std::generic_category());
  }
  if (error)
    throw SettingError("checkpoint_dir", "cannot write checkpoints to " + folder + ": " + error.message() +
                                             " (choose another checkpoint folder, or no checkpoints)");
  if (::flock(lock.fd_, LOCK_EX | LOCK_NB) == 0) return lock;
  if (errno == EWOULDBLOCK)
    throw SettingError("checkpoint_dir", "the checkpoint folder " + folder +
                                             " is in use by another training run: give this run a folder of its "
                                             "own, or wait until that run ends");
  // A filesystem without locks (NFS without its lock daemon) trains as before, unguarded.
  lock.unguarded_ = std::error_code(errno, std::generic_category()).message();
  return lock;
}

CheckpointFolderLock::~CheckpointFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor of the open file lets the lock go
}

CheckpointFolderLock::CheckpointFolderLock(CheckpointFolderLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), unguarded_(std::move(other.unguarded_)) {}

CheckpointFolderLock& CheckpointFolderLock::operator=(CheckpointFolderLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    unguarded_ = std::move(other.unguarded_);
  }
  return *this;
}

}  // namespace ampwb
