// Files replaced whole or not at all: written to a temporary file in the target's folder, flushed to disk (fsync),
// renamed over the target, and the folder flushed so that the rename itself survives a power cut. A reader, a crash
// or a full disk leaves either the old file or the new one, never half of either. Checkpoints, CSV reports and the
// dataset caches are written through it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ampwb {

// Writes `content` as the file `path` (whose folder must exist). Throws ampwb::Error naming the path and the cause
// (strerror: disk full, read-only folder, ...); the old file at `path`, if any, is then intact and no temporary is
// left behind.
void write_file_atomically(const std::string& path, std::string_view content);

// The same, written piece by piece (checkpoints, CSV reports). The temporary is "PATH.tmp-PID-N" beside the target;
// it takes the old file's permissions, or 0666 less the umask for a new file. A process killed mid-write leaves its
// temporary behind: the next commit of the same target removes it (its PID no longer runs).
//
//   AtomicFile file(path);
//   file.write(header); file.write(body);
//   file.flush();                    // optional: on disk, closed, readable at temporary_path() to check it
//   file.commit();                   // renamed over `path`
//
// Every member throws ampwb::Error naming `path`. Destroyed without commit() (an exception midway), the temporary is
// removed and `path` is untouched.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Writes what is buffered, flushes the temporary to disk and closes it. No more writes after it.
  void flush();
  // flush() unless done, then renames the temporary over the target and flushes the folder.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return temporary_; }

 private:
  void discard();                                               // closes and removes the temporary
  [[noreturn]] void fail(const std::string& doing, int error);  // discard(), then throws naming path_
  void write_out(const char* data, size_t size);

  std::string path_, temporary_;
  std::string buffer_;  // small writes (a CSV field) gather here; a syscall per field would be slow
  int fd_ = -1;
  bool flushed_ = false;
};

}  // namespace ampwb
