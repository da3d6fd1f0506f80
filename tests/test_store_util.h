// What the run store's tests share: a temporary folder, queries into a store, the fixture that runs a test against
// each kind of store (an SQLite file, and a real PostgreSQL 15 where libpq is built in), and sample records (a
// configuration, run information, steps, epochs, histograms).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "store/run_store.h"
#include "store/sqlite.h"
#include "store/store_location.h"
#ifdef AMPWB_TEST_POSTGRES
#include "postgres_server.h"
#include "store/postgres.h"
#endif

namespace ampwb::store_test {
namespace fs = std::filesystem;

// A fresh folder, removed with everything in it at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("ampwb_store_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A connection of its own to the store at `location` (an SQLite file, read-only; a PostgreSQL database).
inline std::unique_ptr<SqlConnection> connect(const std::string& location) {
#ifdef AMPWB_TEST_POSTGRES
  if (is_database_server(location)) return std::make_unique<PostgresConnection>(location, false);
#endif
  return std::make_unique<SqliteConnection>(location, SqliteDb::Open::ReadOnly);
}

inline int64_t query_int(const std::string& location, const std::string& sql) {
  const std::unique_ptr<SqlConnection> db = connect(location);
  SqlStatement q(*db, sql);
  EXPECT_TRUE(q.step()) << sql;
  return q.int64(0);
}

inline std::string query_text(const std::string& location, const std::string& sql) {
  const std::unique_ptr<SqlConnection> db = connect(location);
  SqlStatement q(*db, sql);
  EXPECT_TRUE(q.step()) << sql;
  return q.text(0);
}

// Runs `sql` in the store at `location` behind the store's back (a file written by an older ampwb, a damaged row).
inline void execute(const std::string& location, const std::string& sql) {
#ifdef AMPWB_TEST_POSTGRES
  if (is_database_server(location)) return PostgresConnection(location, false).exec(sql);
#endif
  SqliteDb(location, SqliteDb::Open::ReadWrite).exec(sql);
}

// The kinds of run store every store test runs against.
enum class Backend { Sqlite, PostgreSql };

inline std::vector<Backend> backends() {
#ifdef AMPWB_TEST_POSTGRES
  return {Backend::Sqlite, Backend::PostgreSql};
#else
  return {Backend::Sqlite};
#endif
}

inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::Sqlite ? "sqlite" : "postgresql";
}

#ifdef AMPWB_TEST_POSTGRES
// One real PostgreSQL 15 server for the whole test program, started by the first test that needs it (initdb takes
// a second or two) and stopped when the program ends.
inline test::PostgresServer& postgres_server() {
  static test::PostgresServer server;
  return server;
}
#endif

// A test of the run store, once for each kind of store (INSTANTIATE_TEST_SUITE_P(..., ::testing::ValuesIn(backends()),
// backend_name)).
class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  // A new, empty store's location: `file` in `dir` for SQLite; for PostgreSQL, the test server's database, emptied
  // of every table (the tests of one program share the server, one test after another).
  std::string new_store(const TempDir& dir, const std::string& file = "runs.sqlite") const {
    if (GetParam() == Backend::Sqlite) return dir.file(file);
#ifdef AMPWB_TEST_POSTGRES
    const std::string uri = postgres_server().uri();
    PostgresConnection(uri, false).exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public");
    return uri;
#else
    ADD_FAILURE() << "no PostgreSQL in this build";
    return {};
#endif
  }
  bool sqlite() const { return GetParam() == Backend::Sqlite; }
};

inline TrainConfig config_named(const std::string& name) {
  TrainConfig c;
  c.name = name;
  c.data_dir = "/data/somewhere";
  c.depth = 20;
  c.epochs = 4;
  c.batch_size = 16;
  c.lr = 0.1f;
  c.seed = 0xfedcba9876543210ull;  // above 2^63: must survive the signed INTEGER column
  c.precision = precision_preset("amp-bf16");
  c.topk = 3;
  return c;
}

inline RunInfo info() {
  RunInfo i;
  i.model_summary = "ResNet-20 (small stem, 10 classes)";
  i.backend_description = "cpu (oneDNN 2.6.3, avx512_core_bf16, 2 threads)";
  i.precision_summary = "amp-bf16";
  i.image_size = 16;
  i.train_images = 800;
  i.validation_images = 200;
  i.class_names = {"a", "b"};
  i.dataset_layout = "class-folders";
  i.steps_per_epoch = 50;
  return i;
}

inline StepReport step(int64_t n, int steps_per_epoch = 10) {
  StepReport s;
  s.step = n;
  s.epoch = static_cast<int>(n / steps_per_epoch) + 1;
  s.loss = 2.0f / static_cast<float>(n + 1);
  s.accuracy = 0.125f * static_cast<float>(n % 8);
  s.lr = 0.1f;
  s.loss_scale = 65536.0f;
  s.grad_norm = 1.5f + static_cast<float>(n);
  s.wall_seconds = 0.01 * static_cast<double>(n);
  return s;
}

inline EpochReport epoch(int n) {
  EpochReport e;
  e.epoch = n;
  e.train_loss = 1.0 / n;
  e.train_accuracy = 0.5 + 0.01 * n;
  e.validation_loss = 1.1 / n;
  e.validation_accuracy = 0.4 + 0.1 * n;
  e.validation_topk = 0.9;
  e.topk = 3;
  e.seconds = 2.5 * n;
  e.images_per_second = 320 + n;
  e.data_wait_seconds = 0.25;
  e.compute_seconds = 2.0;
  e.skipped_steps = n;
  e.loss_scale = 32768.0 / n;
  e.peak_bytes = (size_t{5} << 32) + static_cast<size_t>(n);  // above 32 bits
  return e;
}

inline void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

inline GradientHistogram histogram(int epoch, const std::string& kind, int min_log2, std::vector<int64_t> counts) {
  GradientHistogram h;
  h.epoch = epoch;
  h.kind = kind;
  h.min_log2 = min_log2;
  h.max_log2 = min_log2 + static_cast<int>(counts.size()) - 1;
  h.counts = std::move(counts);
  for (int64_t c : h.counts) h.total += c;
  return h;
}

}  // namespace ampwb::store_test
