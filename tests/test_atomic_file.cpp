// The atomic file write (core/atomic_file.h) on real files in a temporary folder: a new file and a replaced one, a
// write that fails midway (an exception in the caller, a file-size limit, a read-only folder) leaves the old file
// whole and no temporary behind, permissions are kept, errors name the path, and concurrent writers of one file
// leave one whole version.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;

// A fresh folder, removed with everything in it at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("ampwb_atomic_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, ec);
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  // The names in the folder: what a failed write must not leave behind.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    return out;
  }

 private:
  fs::path path_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AtomicFile, WritesANewFileAndReplacesAnOldOneWhole) {
  TempDir dir("replace");
  const std::string path = dir.file("report.csv");
  write_file_atomically(path, "first\n");
  EXPECT_EQ(read_text(path), "first\n");
  write_file_atomically(path, "");
  EXPECT_EQ(read_text(path), "");
  std::string big(3 * 65536 + 17, 'x');  // past the write buffer, in pieces of every size
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  {
    AtomicFile file(path);
    file.write(big.substr(0, 10));
    file.write(big.substr(10, 70000));
    file.write(big.substr(70010));
    EXPECT_EQ(read_text(path), "") << "the target changes only at commit()";
    file.commit();
  }
  EXPECT_EQ(read_text(path), big);
  EXPECT_EQ(dir.names(), std::vector<std::string>{"report.csv"}) << "no temporary left";
}

TEST(AtomicFile, TheNextCommitRemovesWhatAKilledWriterLeft) {
  TempDir dir("orphans");
  const std::string path = dir.file("checkpoint.ampwb");
  // A writer killed mid-write: a child that opens its temporary, writes half, and dies by SIGKILL.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    AtomicFile file(path);
    file.write(std::string(100000, 'h'));
    file.flush();
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(dir.names().size(), 1u);
  ASSERT_TRUE(dir.names()[0].starts_with("checkpoint.ampwb.tmp-" + std::to_string(child) + "-")) << dir.names()[0];
  // A temporary of a process that still runs (the test's parent) and another target's are not ours to remove.
  const std::string live = "checkpoint.ampwb.tmp-" + std::to_string(::getppid()) + "-7";
  const std::string other = "other.ampwb.tmp-" + std::to_string(child) + "-0";
  for (const std::string& name : {live, other}) std::ofstream(dir.file(name)) << "x";

  write_file_atomically(path, "the next checkpoint");
  EXPECT_EQ(read_text(path), "the next checkpoint");
  std::vector<std::string> names = dir.names();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoint.ampwb", live, other}));
}

TEST(AtomicFile, AnExceptionMidwayLeavesTheOldFileAndNoTemporary) {
  TempDir dir("midway");
  const std::string path = dir.file("checkpoint.ampwb");
  write_file_atomically(path, "the old checkpoint");
  try {
    AtomicFile file(path);
    file.write(std::string(100000, 'n'));
    file.flush();  // on disk and complete: still only the temporary
    EXPECT_EQ(read_text(file.temporary_path()), std::string(100000, 'n'));
    EXPECT_EQ(fs::path(file.temporary_path()).parent_path(), dir.path()) << "beside the target, for rename()";
    throw std::runtime_error("the caller's check of the new file failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_text(path), "the old checkpoint");
  EXPECT_EQ(dir.names(), std::vector<std::string>{"checkpoint.ampwb"});
}

TEST(AtomicFile, AWriteTheFileSystemRefusesMidwayLeavesTheOldFile) {
  TempDir dir("fsize");
  const std::string path = dir.file("data.bin");
  write_file_atomically(path, "old");
  // In a child: a 64 KiB file-size limit makes the kernel refuse the write partway (EFBIG), as a full disk would.
  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{};
    ::getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = 65536;
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const std::string message = error_of([&] { write_file_atomically(path, std::string(1 << 20, 'z')); });
    const bool names_path = message.find("cannot write '" + path + "'") != std::string::npos;
    const bool says_why = message.find(std::strerror(EFBIG)) != std::string::npos;
    ::_exit(names_path && says_why ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the error must name the path and the cause";
  EXPECT_EQ(read_text(path), "old");
  EXPECT_EQ(dir.names(), std::vector<std::string>{"data.bin"});
}

TEST(AtomicFile, AFolderThatCannotBeWrittenIsAnErrorNamingThePath) {
  TempDir dir("readonly");
  const std::string missing = dir.file("no/such/folder/x.csv");
  const std::string message = error_of([&] { write_file_atomically(missing, "x"); });
  EXPECT_NE(message.find("cannot write '" + missing + "': " + std::strerror(ENOENT)), std::string::npos) << message;

  const std::string path = dir.file("kept.txt");
  write_file_atomically(path, "kept");
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores permissions";
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  const std::string refused = error_of([&] { write_file_atomically(path, "lost"); });
  EXPECT_NE(refused.find("cannot write '" + path + "': " + std::strerror(EACCES)), std::string::npos) << refused;
  fs::permissions(dir.path(), fs::perms::owner_all);
  EXPECT_EQ(read_text(path), "kept");
  EXPECT_EQ(dir.names(), std::vector<std::string>{"kept.txt"});
}

TEST(AtomicFile, AReplacedFileKeepsItsPermissions) {
  TempDir dir("mode");
  const std::string path = dir.file("private.csv");
  write_file_atomically(path, "a");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  write_file_atomically(path, "b");
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(read_text(path), "b");
}

TEST(AtomicFile, ConcurrentWritersOfOneFileLeaveOneWholeVersion) {
  TempDir dir("concurrent");
  const std::string path = dir.file("cache.tsv");
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&, w] {
      for (int round = 0; round < 20; ++round)
        write_file_atomically(path, std::string(50000, static_cast<char>('a' + w)));
    });
  for (auto& t : writers) t.join();
  const std::string text = read_text(path);
  ASSERT_EQ(text.size(), 50000u);
  EXPECT_EQ(text, std::string(50000, text[0])) << "a mix of two writers";
  EXPECT_EQ(dir.names(), std::vector<std::string>{"cache.tsv"});
}

TEST(AtomicFile, MisuseIsAnErrorNotACorruptFile) {
  TempDir dir("misuse");
  const std::string path = dir.file("x");
  AtomicFile file(path);
  file.write("abc");
  file.commit();
  EXPECT_NE(error_of([&] { file.write("more"); }).find("cannot write '" + path + "'"), std::string::npos);
  EXPECT_NE(error_of([&] { file.commit(); }).find("cannot write '" + path + "'"), std::string::npos);
  EXPECT_EQ(read_text(path), "abc");
}

}  // namespace
}  // namespace ampwb
