// A checkpoint folder held by the one run that writes it: an flock(2) on "<folder>/checkpoint.lock", taken before the
// run starts and held until it ends. A second run given the same folder, from this run store, another one or a copy
// of it, is refused instead of overwriting the checkpoint the first resumes from. The kernel drops the lock when its
// holder dies, however it dies, so a folder is never held by a run that is gone. The lock is held over NFS where its
// lock daemon runs, so a run on another machine is refused too.
#pragma once

#include <string>

namespace ampwb {

class CheckpointFolderLock {
 public:
  CheckpointFolderLock() = default;
  // Makes the folder, checks it can be written, opens its lock file and takes the lock. Throws SettingError on
  // "checkpoint_dir" naming the folder when it cannot be written or another process holds it. Where the filesystem
  // takes no locks, the folder is not held, and unguarded() says why.
  static CheckpointFolderLock take(const std::string& folder);
  ~CheckpointFolderLock();
  CheckpointFolderLock(CheckpointFolderLock&& other) noexcept;
  CheckpointFolderLock& operator=(CheckpointFolderLock&& other) noexcept;

  const std::string& unguarded() const { return unguarded_; }  // why the folder is not held; empty when it is

 private:
  int fd_ = -1;
  std::string unguarded_;
};

}  // namespace ampwb
