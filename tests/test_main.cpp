// The main of every GoogleTest program: each runs in a private home of its own (HOME, run store, data, cache and
// config folders in a temporary directory, removed at exit), so no test, and no `ampwb` a test starts, writes into
// the user's ~/.local/share/ampwb or ~/.cache/ampwb (tests/private_home.h).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "private_home.h"

namespace {

class PrivateHome : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "ampwb-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a temporary folder for the tests");
    root_ = pattern;
    for (const char* sub : {"home", "data", "cache", "config"}) std::filesystem::create_directories(root_ / sub);
    ::setenv("HOME", (root_ / "home").c_str(), 1);
    ::setenv("XDG_DATA_HOME", (root_ / "data").c_str(), 1);
    ::setenv("XDG_CONFIG_HOME", (root_ / "config").c_str(), 1);
    ::setenv("AMPWB_DB", (root_ / "data" / "runs.sqlite").c_str(), 1);
#ifdef AMPWB_TEST_CACHE  // decoded images, shared by the suite's programs, in the build tree
    ::setenv("XDG_CACHE_HOME", AMPWB_TEST_CACHE, 1);
#else
    ::setenv("XDG_CACHE_HOME", (root_ / "cache").c_str(), 1);
#endif
  }
  void TearDown() override {
    for (const std::string& file : ampwb::test::ampwb_files_under(root_ / "home"))
      ADD_FAILURE() << "written into the home folder, not the XDG folder the program was given: " << file;
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }

 private:
  std::filesystem::path root_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new PrivateHome);
  return RUN_ALL_TESTS();
}
