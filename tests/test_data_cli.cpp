// `ampwb dataset inspect` end to end: the JSON report of a real folder, exit status 0 when it can be trained on,
// non-zero with a clear message when it cannot, and the built-in sample.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data_test_util.h"

namespace ampwb {
namespace {
using namespace ampwb::testing;

struct CliRun {
  int status = -1;
  std::string out, err;
};

CliRun ampwb(const std::string& arguments, const TempDir& scratch) {
  const fs::path out = scratch / "stdout.txt", err = scratch / "stderr.txt";
  const std::string command = std::string("XDG_CACHE_HOME='") + (scratch / "cache").string() + "' '" + AMPWB_BINARY +
                              "' " + arguments + " >'" + out.string() + "' 2>'" + err.string() + "'";
  CliRun r;
  const int raw = std::system(command.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  const auto o = read_bytes(out), e = read_bytes(err);
  r.out.assign(o.begin(), o.end());
  r.err.assign(e.begin(), e.end());
  return r;
}

TEST(DataCli, InspectJson) {
  TempDir data("cli_data"), scratch("cli_scratch");
  for (int i = 0; i < 3; ++i)
    write_image(data / "zèbres rayés" / (std::to_string(i) + ".png"), pattern_image(12, 10, i));
  for (int i = 0; i < 2; ++i) write_image(data / "lions" / (std::to_string(i) + ".jpg"), pattern_image(12, 10, i));
  write_text(data / "lions" / "fake.jpg", "not a jpeg");
  fs::create_directories(data / "nothing here");
  const CliRun r = ampwb("dataset inspect '" + data.str() + "' --json", scratch);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layout"], "class-folders");
  EXPECT_EQ(j["total_images"], 5);
  ASSERT_EQ(j["classes"].size(), 2u);
  EXPECT_EQ(j["classes"][0]["name"], "lions");
  EXPECT_EQ(j["classes"][0]["images"], 2);
  EXPECT_EQ(j["classes"][1]["name"], "zèbres rayés");
  EXPECT_EQ(j["classes"][1]["images"], 3);
  ASSERT_EQ(j["skipped"].size(), 1u);
  EXPECT_EQ(j["skipped"][0]["path"], "lions/fake.jpg");
  EXPECT_EQ(j["skipped"][0]["reason"], "not an image (the file holds text)");
  EXPECT_EQ(j["empty_classes"], nlohmann::json::array({"nothing here"}));
  EXPECT_EQ(j["trainable"], true);

  const CliRun text = ampwb("dataset inspect '" + data.str() + "'", scratch);
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.out.find("lions/fake.jpg: not an image (the file holds text)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("trainable: yes"), std::string::npos) << text.out;
}

TEST(DataCli, UntrainableFoldersExitNonZeroWithTheReason) {
  TempDir data("cli_bad"), scratch("cli_bad_scratch");
  const CliRun missing = ampwb("dataset inspect '" + (data / "missing").string() + "'", scratch);
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;

  write_image(data / "one" / "a.png", pattern_image(8, 8));
  const CliRun one = ampwb("dataset inspect '" + data.str() + "' --json", scratch);
  EXPECT_NE(one.status, 0);
  EXPECT_NE(one.err.find("only one usable class ('one'); at least two are needed"), std::string::npos) << one.err;
  const nlohmann::json j = nlohmann::json::parse(one.out);
  EXPECT_EQ(j["trainable"], false);
}

TEST(DataCli, BuiltinSample) {
  TempDir scratch("cli_sample");
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const CliRun path = ampwb("dataset sample", scratch);
  EXPECT_EQ(path.status, 0);
  EXPECT_EQ(path.out, "/usr/share/datasets/fashion-mnist\n");
  const CliRun r = ampwb("dataset inspect /usr/share/datasets/fashion-mnist --json", scratch);
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["total_images"], 70000);
  EXPECT_EQ(j["classes"][9]["name"], "Ankle boot");
}

}  // namespace
}  // namespace ampwb
