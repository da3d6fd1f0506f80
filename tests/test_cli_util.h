// What the tests of the ampwb command line over the run store share: temporary folders, an image folder, running
// the real binary (AMPWB_BINARY) and collecting its output, a tiny training's flags, and an RFC 4180 CSV reader.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "image_folder_util.h"
#include "store/run_store.h"
#include "store/store_recorder.h"
#include "train/trainer.h"

namespace ampwb::cli_test {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("ampwb_store_cli_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// An image folder for the whole test program, written once.
inline const fs::path& stripes() {
  static const fs::path folder = [] {
    const fs::path f = make_stripes_folder("store_cli", 40, 16);
    std::atexit(
        [] { fs::remove_all(fs::temp_directory_path() / ("ampwb_test_store_cli_" + std::to_string(::getpid()))); });
    return f;
  }();
  return folder;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts argv[0] with the rest as its arguments (no shell), stdout and stderr into `log`, and no standard input:
// a test run from a terminal must not hand it one to ask questions on.
inline pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::dup2(::open("/dev/null", O_RDONLY), 0);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

struct Result {
  int status = -1;
  std::string output;
};

inline int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs a program to its end and collects its output.
inline Result run(const std::vector<std::string>& argv) {
  static int counter = 0;
  const std::string log = (fs::temp_directory_path() /
                           ("ampwb_store_cli_log_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                              .string();
  Result r;
  r.status = wait_exit(spawn(argv, log));
  r.output = read_text(log);
  fs::remove(log);
  return r;
}

// A mount table that puts `folder` on NFS, for $AMPWB_MOUNTINFO: this machine cannot mount a network filesystem.
inline std::string mount_table_with_nfs_at(const TempDir& dir, const std::string& folder) {
  const std::string table = dir.file("mountinfo");
  std::ofstream(table) << "22 1 8:2 / / rw,relatime - ext4 /dev/sda2 rw\n"
                       << "40 22 0:45 / " << fs::canonical(folder).string()
                       << " rw,relatime shared:20 - nfs4 fs1:/export/home rw,vers=4.2\n";
  return table;
}

// Runs `ampwb ARGS...`, prefixed by `as` (setpriv, to drop root).
inline Result ampwb(std::vector<std::string> args, const std::vector<std::string>& as = {}) {
  args.insert(args.begin(), AMPWB_BINARY);
  args.insert(args.begin(), as.begin(), as.end());
  return run(args);
}

// ResNet-20 on 60 training images of 16 px, batches of 4 (15 steps an epoch unless capped), as `command` takes it:
// train, or sweep (whose points then run on one thread each, `threads`, so that two at once share the two cores).
inline std::vector<std::string> tiny_training(const std::string& db, int epochs, int max_steps = 0,
                                              const std::string& command = "train", int threads = 2) {
  return {command,
          "--data",
          stripes().string(),
          "--depth",
          "20",
          "--epochs",
          std::to_string(epochs),
          "--batch-size",
          "4",
          "--threads",
          std::to_string(threads),
          "--val-fraction",
          "0.25",
          "--max-steps-per-epoch",
          std::to_string(max_steps),
          "--db",
          db};
}

inline void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in:\n" << text;
}

// A CLI paragraph as one line: print_wrapped (app/text_table.h) continues its lines after four spaces.
inline std::string unwrapped(const std::string& text) {
  std::string out;
  for (size_t at = 0; at < text.size();)
    if (text.compare(at, 5, "\n    ") == 0)
      out += ' ', at += 5;
    else
      out += text[at++];
  return out;
}

// --- an RFC 4180 reader: CRLF record ends, quoted fields with doubled quotes, anything else is an error ---
inline std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    std::string field;
    if (text[i] == '"') {
      ++i;
      for (;;) {
        if (i >= n) throw std::runtime_error("unterminated quoted field");
        if (text[i] == '"') {
          if (i + 1 < n && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += text[i++];
      }
    } else {
      while (i < n && text[i] != ',' && text[i] != '\r' && text[i] != '\n') {
        if (text[i] == '"') throw std::runtime_error("quote inside an unquoted field");
        field += text[i++];
      }
    }
    row.push_back(field);
    if (i >= n) break;
    if (text[i] == ',') {
      ++i;
      if (i >= n) row.push_back("");
      continue;
    }
    if (text.compare(i, 2, "\r\n") != 0) throw std::runtime_error("a record must end with CRLF");
    i += 2;
    rows.push_back(std::move(row));
    row.clear();
  }
  if (!row.empty()) rows.push_back(std::move(row));
  for (const auto& r : rows)
    if (r.size() != rows[0].size()) throw std::runtime_error("records of different lengths");
  return rows;
}

// Rows as maps from the header's column names.
inline std::vector<std::map<std::string, std::string>> csv_records(const std::string& path) {
  const auto rows = parse_csv(read_text(path));
  std::vector<std::map<std::string, std::string>> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    std::map<std::string, std::string> m;
    for (size_t c = 0; c < rows[0].size(); ++c) m[rows[0][c]] = rows[r][c];
    out.push_back(m);
  }
  return out;
}

inline double num(const std::string& s) {
  size_t used = 0;
  const double v = std::stod(s, &used);
  EXPECT_EQ(used, s.size()) << s;
  return v;
}

inline int64_t stored_epochs(const std::string& db, int64_t run) {
  try {
    RunStore store(db, RunStore::Mode::ReadOnly);
    return static_cast<int64_t>(store.epochs(run).size());
  } catch (const StoreError&) {
    return 0;  // not created yet
  }
}

}  // namespace ampwb::cli_test
