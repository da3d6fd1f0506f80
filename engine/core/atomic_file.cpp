// The atomic file write: temporary, fsync, rename, fsync of the folder.
#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace ampwb {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 16;

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Flushes the folder's entry list, where the rename lives. Filesystems that cannot flush a folder say EINVAL.
void sync_folder(const std::string& path) {
  const int fd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // a folder we may write but not read: the file is in place, only its durability is unknown
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0 && error != EINVAL && error != ENOTSUP)
    throw Error("cannot write '" + path + "': flushing its folder failed: " + std::strerror(error));
}

// Removes the temporaries of `path` that a killed process left ("PATH.tmp-PID-N" whose PID no longer runs). A
// process that still runs may be writing its own: those stay, and so does anything whose name does not parse.
void remove_orphaned_temporaries(const std::string& path) {
  const std::string folder = folder_of(path);
  const size_t slash = path.find_last_of('/');
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp-";
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (!name.starts_with(prefix)) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || *end != '-' || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink((folder + "/" + name).c_str());
  }
  ::closedir(dir);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // Process id and a counter: two processes, or two threads, writing the same file never share a temporary.
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temporary_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 100)) {  // EEXIST: a leftover of a crashed process with our id
      const int error = errno;
      temporary_.clear();
      fail("", error);
    }
  }
  struct stat old {};
  if (::stat(path_.c_str(), &old) == 0 && S_ISREG(old.st_mode)) ::fchmod(fd_, old.st_mode & 07777);
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  temporary_.clear();
}

void AtomicFile::fail(const std::string& doing, int error) {
  discard();
  throw Error("cannot write '" + path_ + "': " + (doing.empty() ? "" : doing + ": ") + std::strerror(error));
}

void AtomicFile::write_out(const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("", errno);
    if (n == 0) fail("", EIO);
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::write(const void* data, size_t size) {
  if (flushed_ || temporary_.empty())
    throw Error("cannot write '" + path_ + "': written after flush(), commit() or a failure");
  const char* p = static_cast<const char*>(data);
  if (buffer_.size() + size <= kBufferBytes) {
    buffer_.append(p, size);
    return;
  }
  write_out(buffer_.data(), buffer_.size());
  buffer_.clear();
  if (size >= kBufferBytes) {
    write_out(p, size);
  } else {
    buffer_.append(p, size);
  }
}

void AtomicFile::flush() {
  if (flushed_) return;
  if (temporary_.empty()) throw Error("cannot write '" + path_ + "': flushed after a failure or commit()");
  write_out(buffer_.data(), buffer_.size());
  buffer_.clear();
  buffer_.shrink_to_fit();
  if (::fsync(fd_) != 0) fail("flushing to disk failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) fail("closing failed", errno);  // NFS reports write errors here
  flushed_ = true;
}

void AtomicFile::commit() {
  if (temporary_.empty()) throw Error("cannot write '" + path_ + "': committed after a failure or a commit()");
  flush();
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) fail("moving it into place failed", errno);
  temporary_.clear();  // it is the target now
  sync_folder(path_);
  remove_orphaned_temporaries(path_);
}

void write_file_atomically(const std::string& path, std::string_view content) {
  AtomicFile file(path);
  file.write(content);
  file.commit();
}

}  // namespace ampwb
