// SQLite's unix VFS with open file description locks: its "fcntl" system call replaced by one that turns the
// record-lock commands into their OFD forms (sqlite3_vfs::xSetSystemCall, SQLite's documented hook for this).
#include "store/sqlite_locks.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdarg>
#include <mutex>

namespace ampwb {
namespace {

#ifdef F_OFD_SETLK
int open_file_description_fcntl(int fd, int command, ...) {
  va_list args;
  va_start(args, command);
  void* argument = va_arg(args, void*);  // SQLite passes every command an argument (0 where it has none)
  va_end(args);
  const int ofd_command = command == F_SETLK    ? F_OFD_SETLK
                          : command == F_SETLKW ? F_OFD_SETLKW
                          : command == F_GETLK  ? F_OFD_GETLK
                                                : 0;
  if (ofd_command == 0) return ::fcntl(fd, command, argument);
  auto* lock = static_cast<struct flock*>(argument);
  lock->l_pid = 0;  // the OFD commands require it; SQLite leaves it unset
  return ::fcntl(fd, ofd_command, lock);
}

// Whether this kernel knows the OFD commands (EINVAL where it does not).
bool kernel_has_ofd_locks() {
  const int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock probe = {};
  probe.l_type = F_RDLCK;
  probe.l_whence = SEEK_SET;
  const bool ok = ::fcntl(fd, F_OFD_GETLK, &probe) == 0;
  ::close(fd);
  return ok;
}
#endif

bool install() {
#ifdef F_OFD_SETLK
  if (!kernel_has_ofd_locks()) return false;
  sqlite3_vfs* vfs = sqlite3_vfs_find("unix");
  if (vfs == nullptr || vfs->iVersion < 3 || vfs->xSetSystemCall == nullptr) return false;
  // Every unix VFS (unix, unix-excl, ...) shares this one table of system calls.
  return vfs->xSetSystemCall(vfs, "fcntl", reinterpret_cast<sqlite3_syscall_ptr>(&open_file_description_fcntl)) ==
         SQLITE_OK;
#else
  return false;
#endif
}

}  // namespace

bool sqlite_locks_survive_other_descriptors() {
  static const bool installed = install();
  return installed;
}

namespace {
// Installed before main(), while no thread and no connection exists yet: a connection opened with POSIX locks
// and then unlocked with OFD commands would keep its locks.
const bool installed_at_start = sqlite_locks_survive_other_descriptors();
}  // namespace

}  // namespace ampwb
