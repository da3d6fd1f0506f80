// Where a run store lives (store/store_location.h): paths stay SQLite files, PostgreSQL URIs name a database server,
// any other scheme is refused naming the ones known, a refused location creates nothing, and no password is shown.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "store/run_store.h"
#include "store/sqlite.h"
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

}  // namespace
}  // namespace ampwb
