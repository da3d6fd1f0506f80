// A checkpoint folder held by the one run that writes it: an flock(2) on "<folder>/checkpoint.lock", taken before the
// run starts and held until it ends. A second run given the same folder, from this run store, another one or a copy
// of it, is refused instead of overwriting the checkpoint the first resumes from. The kernel drops the lock when its
// holder dies, however it dies, so a folder is never held by a run that is gone.
#pragma once

#include <string>

namespace ampwb {

class CheckpointFolderLock {
 public:
  CheckpointFolderLock() = default;
  // Makes the folder, opens its lock file (which shows the folder can be written) and takes the lock. Throws
  // SettingError on "checkpoint_dir" naming the folder when it cannot be written or another process holds it.
  static CheckpointFolderLock take(const std::string& folder);
  ~CheckpointFolderLock();
  CheckpointFolderLock(CheckpointFolderLock&& other) noexcept;
  CheckpointFolderLock& operator=(CheckpointFolderLock&& other) noexcept;

 private:
  int fd_ = -1;
};

}  // namespace ampwb
