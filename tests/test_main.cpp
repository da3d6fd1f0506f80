// The main of every GoogleTest program: each runs in a private home of its own (HOME, run store, data, cache and
// config folders in a temporary directory, removed at exit), so no test, and no `ampwb` a test starts, writes into
// the user's ~/.local/share/ampwb or ~/.cache/ampwb (tests/private_home.h). On a lent GPU (AMPWB_GPU_REQUIRED=1) a
// CUDA test that skips fails the program, unless its skip does not apply there (tests/gpu_required.h).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu_required.h"
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

// Under AMPWB_GPU_REQUIRED=1, the CUDA tests that skipped for a reason other than test::kDoesNotApply
// (gpu_required.h), each with its reason.
class GpuRequired : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult& result = *info.result();
    std::string name = std::string(info.test_suite_name()) + "." + info.name(), lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (!result.Skipped() || lower.find("cuda") == std::string::npos) return;
    std::string why;
    for (int i = 0; i < result.total_part_count(); ++i) why += result.GetTestPartResult(i).message();
    if (why.find(ampwb::test::kDoesNotApply) == std::string::npos) refused.push_back(name + ": " + why);
  }
  std::vector<std::string> refused;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new PrivateHome);
  const char* required = std::getenv("AMPWB_GPU_REQUIRED");
  auto* gpu_required = required && std::string(required) == "1" ? new GpuRequired : nullptr;
  if (gpu_required) ::testing::UnitTest::GetInstance()->listeners().Append(gpu_required);  // gtest owns it
  const int status = RUN_ALL_TESTS();
  if (!gpu_required || gpu_required->refused.empty()) return status;
  std::fprintf(stderr, "GPU required (AMPWB_GPU_REQUIRED=1), but %zu CUDA test(s) skipped:\n",
               gpu_required->refused.size());
  for (const std::string& line : gpu_required->refused) std::fprintf(stderr, "  %s\n", line.c_str());
  return 1;
}
