// Which filesystem a store's file lies on, read from the kernel's mount table.
#include "store/store_filesystem.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace ampwb {
namespace {

namespace fs = std::filesystem;

// mountinfo writes a space, tab, newline and backslash in a path as \040, \011, \012 and \134.
std::string unescaped(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    const std::string octal = i + 3 < field.size() ? field.substr(i + 1, 3) : "";
    if (field[i] == '\\' && octal.size() == 3 && octal.find_first_not_of("01234567") == std::string::npos) {
      out += static_cast<char>(std::stoi(octal, nullptr, 8));
      i += 3;
      continue;
    }
    out += field[i];
  }
  return out;
}

// Whether `folder` is `path` or a folder above it, component by component ("/home" holds "/home/u", not "/homer").
bool holds(const std::string& folder, const std::string& path) {
  if (folder == "/") return true;
  return path.compare(0, folder.size(), folder) == 0 && (path.size() == folder.size() || path[folder.size()] == '/');
}

}  // namespace

bool is_network_filesystem(const std::string& type) {
  static const std::set<std::string> kNetwork = {
      "nfs",          "nfs4",        "lustre",       "gpfs",           "beegfs",
      "ceph",         "cifs",        "smb3",         "smbfs",          "9p",
      "afs",          "ocfs2",       "gfs2",         "glusterfs",      "pvfs2",
      "orangefs",     "panfs",       "wekafs",       "fuse.sshfs",     "fuse.s3fs",
      "fuse.gcsfuse", "fuse.rclone", "fuse.juicefs", "fuse.glusterfs", "fuse.ceph-fuse",
      "fuse.davfs",   "fuse.mfs",    "quobyte",      "fuse.quobyte",   "fuse.xtreemfs"};
  return kNetwork.count(type) > 0;
}

std::optional<MountedFilesystem> filesystem_of(const std::string& path, const std::string& mountinfo) {
  // A line: ID PARENT MAJOR:MINOR ROOT MOUNT_POINT OPTIONS [OPTIONAL FIELDS...] - TYPE SOURCE SUPER_OPTIONS
  std::optional<MountedFilesystem> found;
  std::istringstream lines(mountinfo);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> field;
    for (std::string f; fields >> f;) field.push_back(f);
    size_t dash = 6;
    while (dash < field.size() && field[dash] != "-") ++dash;
    if (field.size() < 5 || dash + 1 >= field.size()) continue;
    const std::string mount_point = unescaped(field[4]);
    // The table lists mounts in the order they were made: of two that hold the path, one nests in the other, and
    // the later either lies deeper or covers the earlier; either way the path leads to it.
    if (!holds(mount_point, path)) continue;
    const std::string& type = field[dash + 1];
    found = MountedFilesystem{type, mount_point, is_network_filesystem(type)};
  }
  return found;
}

std::optional<MountedFilesystem> filesystem_of(const std::string& path) {
  const char* table = std::getenv("AMPWB_MOUNTINFO");
  std::ifstream in(table && *table ? table : "/proc/self/mountinfo");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  // The file, else the nearest folder that exists, made canonical: a symbolic link (the file's own too) leads to the
  // filesystem that SQLite writes the store and its -wal and -shm files on.
  std::error_code ec;
  fs::path existing = fs::absolute(path, ec);
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.root_path())
    existing = existing.parent_path();
  const fs::path canonical = fs::canonical(existing, ec);
  return filesystem_of(ec ? existing.string() : canonical.string(), text.str());
}

}  // namespace ampwb
