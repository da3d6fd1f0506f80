// The filesystem an SQLite store lies on. SQLite's WAL keeps its index in memory mapped from the store's -shm file,
// which stays coherent only between processes of one machine: on a network filesystem (a cluster's NFS home, Lustre
// or GPFS scratch) a store is safe while every process that opens it runs on one machine, and two machines writing
// it at once can corrupt it (https://sqlite.org/wal.html, "all processes using a database must be on the same host").
#pragma once

#include <optional>
#include <string>

namespace ampwb {

struct MountedFilesystem {
  std::string type;         // as the kernel names it: "ext4", "nfs4", "lustre", "fuse.sshfs"
  std::string mount_point;  // where it is mounted, unescaped
  bool network = false;     // whether other machines can open the same files through it
};

// Whether a filesystem of `type` (as /proc/self/mountinfo names it) is shared between machines.
bool is_network_filesystem(const std::string& type);

// The mount that holds `path` in the mount table `mountinfo` (the text of /proc/self/mountinfo): of the mounts whose
// folder holds `path`, the one made last. `path` is absolute and canonical.
std::optional<MountedFilesystem> filesystem_of(const std::string& path, const std::string& mountinfo);

// The mount that holds the file `path` (which need not exist yet: its nearest existing folder is looked up) on this
// machine; none where the mount table cannot be read. $AMPWB_MOUNTINFO names a mount table to read instead of the
// kernel's, so that the tests can place a store on a network filesystem this machine cannot mount.
std::optional<MountedFilesystem> filesystem_of(const std::string& path);

}  // namespace ampwb
