// One store shared by a long-lived process (the GUI holds its connection for hours) and short ones (`ampwb runs`,
// another program's SQLite), while code beside SQLite in the long-lived process opens and closes the store's files:
// what a file dialog's completer, a MIME sniffer or a header read does. With POSIX record locks that close drops
// every SQLite lock of the process, and the next short process deletes the -wal and -shm files the long-lived one
// still writes into (store/sqlite_locks.h); here every run must come through whole.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "private_home.h"
#include "store/sqlite_locks.h"
#include "test_cli_util.h"
#include "test_store_util.h"

namespace ampwb {
namespace {
using cli_test::ampwb;
using cli_test::expect_contains;
using cli_test::Result;
using store_test::TempDir;
namespace fs = std::filesystem;

// A run as the GUI's recorder writes one: begun, two epochs of steps, ended.
int64_t record_run(RunStore& store, const std::string& name) {
  const int64_t id = store.begin_run(store_test::config_named(name), store_test::info(), "");
  store.add_epoch(id, store_test::epoch(1), {store_test::step(0), store_test::step(1)}, 1.0);
  store.add_epoch(id, store_test::epoch(2), {store_test::step(10), store_test::step(11)}, 2.0);
  store.end_run(id, {RunStatus::Finished, ""}, {}, 3.0);
  return id;
}

ino_t inode_of(const std::string& path) {
  struct stat s {};
  return ::stat(path.c_str(), &s) == 0 ? s.st_ino : 0;
}

// Opens and closes a descriptor of `path` in this process, beside SQLite's own.
void open_and_close(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  char byte = 0;
  EXPECT_EQ(::read(fd, &byte, 1), 1) << path;
  ::close(fd);
}

TEST(StoreSharing, StrayDescriptorsInALongLivedProcessNeverLetAnotherProcessRemoveItsWal) {
  ASSERT_TRUE(sqlite_locks_survive_other_descriptors()) << "this kernel lacks open file description locks";
  TempDir dir("sharing");
  const std::string db = dir.file("runs.sqlite");
  std::vector<int64_t> ids;
  {
    RunStore gui(db);  // held throughout, as the GUI holds it
    ids.push_back(record_run(gui, "before"));
    const ino_t wal = inode_of(db + "-wal"), shm = inode_of(db + "-shm");
    ASSERT_NE(wal, 0u);
    ASSERT_NE(shm, 0u);
    for (int round = 0; round < 2; ++round) {
      for (const char* suffix : {"", "-wal", "-shm"}) open_and_close(db + suffix);
      // Another ampwb opens and closes the store, then a program with SQLite's stock (POSIX) locks.
      const Result listed = ampwb({"runs", "--db", db});
      ASSERT_EQ(listed.status, 0) << listed.output;
      expect_contains(listed.output, "before");
      const Result counted = cli_test::run({"/usr/bin/python3", "-c",
                                            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                                            "print(c.execute('SELECT count(*) FROM runs').fetchone()[0]); c.close()",
                                            db});
      ASSERT_EQ(counted.status, 0) << counted.output;
      EXPECT_EQ(std::stoi(counted.output), static_cast<int>(ids.size()));
      EXPECT_EQ(inode_of(db + "-wal"), wal) << "the write-ahead log this process writes into was removed";
      EXPECT_EQ(inode_of(db + "-shm"), shm) << "the shared index this process reads was removed";
      ids.push_back(record_run(gui, "after-" + std::to_string(round)));
    }
    const Result listed = ampwb({"runs", "--json", "--db", db});
    ASSERT_EQ(listed.status, 0) << listed.output;
    EXPECT_EQ(cli_test::json::parse(listed.output).size(), ids.size()) << "another process sees every run";
  }
  RunStore reopened(db, RunStore::Mode::ReadOnly);
  EXPECT_EQ(reopened.integrity_check(), "ok");
  ASSERT_EQ(reopened.runs().size(), ids.size());
  for (int64_t id : ids) {
    EXPECT_EQ(reopened.run(id).status, RunStatus::Finished);
    EXPECT_EQ(reopened.epochs(id).size(), 2u);
    EXPECT_EQ(reopened.steps(id).size(), 4u);
  }
}

// The suite's guard of the user's home (tests/private_home.h) sees a write that ignores the XDG folders, and none
// from a run given them, as every test's ampwb is.
TEST(PrivateHome, FindsWhatAnAmpwbWroteIntoHomeAndNothingWhenGivenTheXdgFolders) {
  TempDir dir("private_home");
  const std::string home = dir.file("home");
  fs::create_directories(home);
  std::vector<std::string> train = cli_test::tiny_training(dir.file("unused.sqlite"), 1, 1);
  train.resize(train.size() - 2);  // no --db: the store goes where the environment says
  const Result given = ampwb(train, {"/usr/bin/env", "HOME=" + home});
  ASSERT_EQ(given.status, 0) << given.output;
  EXPECT_TRUE(test::ampwb_files_under(home).empty());
  const Result ignored = ampwb(train, {"/usr/bin/env", "-u", "AMPWB_DB", "-u", "XDG_DATA_HOME", "HOME=" + home});
  ASSERT_EQ(ignored.status, 0) << ignored.output;
  const std::vector<std::string> found = test::ampwb_files_under(home);
  EXPECT_NE(std::find(found.begin(), found.end(), home + "/.local/share/ampwb/runs.sqlite"), found.end())
      << given.output;
}

}  // namespace
}  // namespace ampwb
