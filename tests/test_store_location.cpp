// Where a run store lives (store/store_location.h): paths stay SQLite files, PostgreSQL URIs name a database server,
// any other scheme is refused naming the ones known, a refused location creates nothing, and no password is shown.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "store/run_store.h"
#include "store/sqlite.h"
#include "store/store_filesystem.h"
#include "store/store_location.h"

namespace ampwb {
namespace {

// The message of the StoreError `location` is refused with; empty when it is taken.
std::string refusal(const std::string& location) {
  try {
    parse_store_location(location);
  } catch (const StoreError& e) {
    return e.what();
  }
  return {};
}

TEST(StoreLocation, PathsAreSqliteFilesEvenWithAColon) {
  for (const std::string path : {"runs.sqlite", "/var/lib/ampwb/runs.sqlite", "./mysql://x", "a/b:c/runs.sqlite",
                                 "C:\\runs.sqlite", "postgresql:runs", "1mysql://x", "my sql://x", "://x"}) {
    const StoreLocation location = parse_store_location(path);
    EXPECT_EQ(location.kind, StoreLocation::Kind::SqliteFile) << path;
    EXPECT_EQ(location.text, path);
    EXPECT_EQ(sqlite_store_file(path), path);
  }
}

TEST(StoreLocation, PostgresqlUrisAreDatabaseServersNotFiles) {
  for (const std::string uri :
       {"postgresql:///ampwb?host=/run/pg", "postgres://user@db.lab:5432/ampwb", "PostgreSQL://db/ampwb"}) {
    const StoreLocation location = parse_store_location(uri);
    EXPECT_EQ(location.kind, StoreLocation::Kind::PostgreSql) << uri;
    EXPECT_EQ(location.text, uri);
    EXPECT_TRUE(is_database_server(uri));
    try {
      sqlite_store_file(uri);
      ADD_FAILURE() << uri << " was taken as an SQLite file";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("is a PostgreSQL database, not an SQLite file"), std::string::npos)
          << e.what();
    }
  }
}

TEST(StoreLocation, AnUnknownSchemeIsRefusedNamingItAndTheKnownOnes) {
  for (const auto& [uri, scheme] : std::vector<std::pair<std::string, std::string>>{
           {"mysql://x/y", "mysql"}, {"sqlite:///tmp/runs.sqlite", "sqlite"}, {"S3+https://bucket/runs", "s3+https"}}) {
    const std::string message = refusal(uri);
    EXPECT_NE(message.find("the scheme '" + scheme + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("postgresql:// or postgres://"), std::string::npos) << message;
    EXPECT_NE(message.find("SQLite file's path"), std::string::npos) << message;
  }
  EXPECT_EQ(refusal(""), "the run store path is empty");
}

TEST(StoreLocation, ARefusedUriNeverPrintsItsPassword) {
  EXPECT_EQ(refusal("mysql://ann:s3cret@db/runs").find("s3cret"), std::string::npos);
  try {
    sqlite_store_file("postgresql://ann:s3cret@db/runs");
    ADD_FAILURE() << "taken";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
  }
}

TEST(StoreLocation, PasswordsAreLeftOutOfWhatIsShown) {
  EXPECT_EQ(location_without_password("postgresql://ann:s3cret@db.lab:5432/runs?sslmode=require"),
            "postgresql://ann@db.lab:5432/runs?sslmode=require");
  EXPECT_EQ(location_without_password("postgres://db/runs?user=ann&password=s3cret&sslmode=verify-full"),
            "postgres://db/runs?user=ann&password=***&sslmode=verify-full");
  EXPECT_EQ(location_without_password("postgresql://ann@db/runs?password=s3cret"),
            "postgresql://ann@db/runs?password=***");
  EXPECT_EQ(location_without_password("postgresql:///runs?host=/run/pg&service=lab"),
            "postgresql:///runs?host=/run/pg&service=lab");
  EXPECT_EQ(location_without_password("/home/ann/a:b@c/runs.sqlite"), "/home/ann/a:b@c/runs.sqlite");
}

// What another process is handed carries no password, not even a masked one it would send to the server.
TEST(StoreLocation, OtherProcessesGetNoPasswordAtAll) {
  EXPECT_EQ(location_for_other_processes("postgresql://ann:s3cret@db.lab:5432/runs?sslmode=require"),
            "postgresql://ann@db.lab:5432/runs?sslmode=require");
  EXPECT_EQ(location_for_other_processes("postgres://db/runs?user=ann&password=s3cret&sslmode=verify-full"),
            "postgres://db/runs?user=ann&sslmode=verify-full");
  EXPECT_EQ(location_for_other_processes("postgresql://ann@db/runs?password=s3cret"), "postgresql://ann@db/runs");
  EXPECT_EQ(location_for_other_processes("postgresql:///runs?password=s3cret&host=/run/pg"),
            "postgresql:///runs?host=/run/pg");
  EXPECT_EQ(location_for_other_processes("postgresql://db/runs?password=s3cret"), "postgresql://db/runs");
  // An SQLite file's path is handed on as it is, whatever it holds.
  EXPECT_EQ(location_for_other_processes("/home/ann/a?password=x/runs.sqlite"), "/home/ann/a?password=x/runs.sqlite");
  EXPECT_EQ(location_for_other_processes("/home/ann/runs?"), "/home/ann/runs?");
}

// RunStore opens every store, the workbench's too: it refuses before making a folder of the URI, and a server it
// cannot reach is said so, without its password.
TEST(StoreLocation, RunStoreRefusesAUriAndCreatesNothing) {
  namespace fs = std::filesystem;
  ASSERT_FALSE(fs::exists("mysql:"));
  ASSERT_FALSE(fs::exists("postgresql:"));
  EXPECT_THROW(RunStore("mysql://x/y", RunStore::Mode::Create), StoreError);
  try {
    RunStore("postgresql://ann:s3cret@/ampwb?host=/nonexistent-ampwb-socket-folder", RunStore::Mode::Create);
    ADD_FAILURE() << "a store without a server";
  } catch (const StoreError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
    EXPECT_NE(message.find("cannot connect to the PostgreSQL run store"), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists("mysql:"));
  EXPECT_FALSE(fs::exists("postgresql:"));
}

// A cluster node's mount table, as /proc/self/mountinfo writes it: the filesystem of a path is the mount made last of
// those whose folder holds it (deeper, at the same place, or covering an earlier deeper one), and the network ones
// are told from the local ones.
TEST(StoreFilesystem, TheMountTableNamesTheFilesystemOfAPath) {
  const std::string node =
      "22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw,errors=remount-ro\n"
      "40 22 0:45 / /home rw,relatime shared:20 - nfs4 fs1:/export/home rw,vers=4.2,hard\n"
      "41 22 0:46 / /scratch rw,relatime shared:21 master:3 - lustre 10.0.0.1@o2ib:/scratch rw,flock\n"
      "42 22 0:47 / /gpfs/projects rw,relatime - gpfs projects rw\n"
      "43 22 0:48 / /mnt/my\\040data rw,nosuid,nodev - fuse.sshfs me@host:/data rw,user_id=0\n"
      "44 40 8:17 / /home/u/local rw,relatime shared:30 - ext4 /dev/sdb1 rw\n"
      "45 22 0:50 / /tmp rw shared:5 - tmpfs tmpfs rw\n"
      "46 45 0:51 / /tmp rw - nfs srv:/tmp rw,vers=3\n"
      "47 22 8:33 / /srv/data/deep rw - ext4 /dev/sdc1 rw\n"
      "48 22 0:52 / /srv rw - nfs4 srv:/srv rw\n";
  struct Expected {
    std::string path, type, mount_point;
    bool network;
  };
  for (const Expected& e : std::vector<Expected>{{"/home/u/runs.sqlite", "nfs4", "/home", true},
                                                 {"/homer/runs.sqlite", "ext4", "/", false},
                                                 {"/home/u/local/runs.sqlite", "ext4", "/home/u/local", false},
                                                 {"/home/u/localer/runs.sqlite", "nfs4", "/home", true},
                                                 {"/scratch", "lustre", "/scratch", true},
                                                 {"/gpfs/projects/a/runs.sqlite", "gpfs", "/gpfs/projects", true},
                                                 {"/gpfs/runs.sqlite", "ext4", "/", false},
                                                 {"/mnt/my data/runs.sqlite", "fuse.sshfs", "/mnt/my data", true},
                                                 {"/tmp/runs.sqlite", "nfs", "/tmp", true},
                                                 {"/srv/data/deep/runs.sqlite", "nfs4", "/srv", true},
                                                 {"/", "ext4", "/", false}}) {
    const std::optional<MountedFilesystem> mount = filesystem_of(e.path, node);
    ASSERT_TRUE(mount) << e.path;
    EXPECT_EQ(mount->type, e.type) << e.path;
    EXPECT_EQ(mount->mount_point, e.mount_point) << e.path;
    EXPECT_EQ(mount->network, e.network) << e.path;
  }
  EXPECT_FALSE(filesystem_of("/home/u/runs.sqlite", ""));
  EXPECT_FALSE(filesystem_of("/home/u/runs.sqlite", "not a mount table\n40 22 0:45 / /home rw\n"));
  for (const std::string local : {"ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "fuse"})
    EXPECT_FALSE(is_network_filesystem(local)) << local;
}

// On this machine, the kernel's own mount table read for a store that does not exist yet agrees with findmnt(8)
// (util-linux) on the folder that will hold it.
TEST(StoreFilesystem, ThisMachinesFilesystemAgreesWithFindmnt) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::temp_directory_path() / ("ampwb_store_fs_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  const std::optional<MountedFilesystem> mount = filesystem_of((folder / "new" / "runs.sqlite").string());
  std::string said;
  if (FILE* pipe = ::popen(("findmnt -n -r -o FSTYPE,TARGET -T '" + folder.string() + "'").c_str(), "r")) {
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, pipe)) said += buffer;
    ::pclose(pipe);
  }
  fs::remove_all(folder);
  ASSERT_TRUE(mount);
  ASSERT_FALSE(said.empty()) << "findmnt said nothing";
  const size_t space = said.find(' ');  // raw: "TYPE TARGET\n"
  EXPECT_EQ(mount->type, said.substr(0, space));
  EXPECT_EQ(mount->mount_point + "\n", said.substr(space + 1));
}

}  // namespace
}  // namespace ampwb
