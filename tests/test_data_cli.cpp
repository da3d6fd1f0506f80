// `ampwb dataset inspect` end to end: the JSON report of a real folder, exit status 0 when it can be trained on,
// non-zero with a clear message when it cannot, and the built-in sample; the dataset commands' flags in any order,
// their help, and bad usage refused by name.
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

  // The text report ends with its error lines. Where it goes to a file, stderr says why too; on a terminal (here
  // script's) the reader sees the reason once.
  const std::string why = "only one usable class";
  const CliRun to_file = ampwb("dataset inspect '" + data.str() + "'", scratch);
  EXPECT_NE(to_file.status, 0);
  EXPECT_NE(to_file.out.find("error: '" + data.str() + "' has " + why), std::string::npos) << to_file.out;
  EXPECT_NE(to_file.err.find(why), std::string::npos) << to_file.err;
  const std::string shown = "script -qec \"'" + std::string(AMPWB_BINARY) + "' dataset inspect '" + data.str() +
                            "'\" /dev/null >'" + (scratch / "terminal.txt").string() + "' 2>&1";
  EXPECT_NE(std::system(shown.c_str()), 0);
  const auto bytes = read_bytes(scratch / "terminal.txt");
  const std::string terminal(bytes.begin(), bytes.end());
  EXPECT_NE(terminal.find(why), std::string::npos) << terminal;
  EXPECT_EQ(terminal.find(why), terminal.rfind(why)) << terminal;
  EXPECT_NE(terminal.find("cannot be trained on (the error lines above say why)"), std::string::npos) << terminal;
  // Both outputs into one file (2>&1): the reason once there too.
  const std::string together = "'" + std::string(AMPWB_BINARY) + "' dataset inspect '" + data.str() + "' >'" +
                               (scratch / "both.txt").string() + "' 2>&1";
  EXPECT_NE(std::system(together.c_str()), 0);
  const auto both_bytes = read_bytes(scratch / "both.txt");
  const std::string both(both_bytes.begin(), both_bytes.end());
  EXPECT_NE(both.find(why), std::string::npos) << both;
  EXPECT_EQ(both.find(why), both.rfind(why)) << both;
  EXPECT_GT(both.find("cannot be trained on (the error lines above say why)"), both.find("error: '")) << both;
}

TEST(DataCli, FlagsInAnyOrderAndAMisspeltFlagRefusedByName) {
  TempDir data("cli_order"), scratch("cli_order_scratch");
  for (const char* name : {"a", "b"})
    for (int i = 0; i < 2; ++i) write_image(data / name / (std::to_string(i) + ".png"), pattern_image(8, 8, i));
  const CliRun before = ampwb("dataset inspect --json '" + data.str() + "'", scratch);
  ASSERT_EQ(before.status, 0) << before.err;
  EXPECT_EQ(nlohmann::json::parse(before.out)["total_images"], 4);
  const CliRun after = ampwb("dataset inspect '" + data.str() + "' --no-cache --json", scratch);
  EXPECT_EQ(after.out, before.out);

  const std::vector<std::pair<std::string, std::string>> refused = {
      {"dataset inspect '" + data.str() + "' --jsn",
       "ampwb dataset inspect: error: unknown option --jsn; did you mean --json? (see ampwb dataset inspect --help)"},
      {"dataset inspect", "DIR is required"},
      {"dataset", "ampwb dataset: error: needs a command: inspect, sample, bench-decode or bench-loader"},
      {"dataset inspekt '" + data.str() + "'",
       "unknown command 'inspekt'; did you mean inspect? (expected inspect, sample,"},
      {"dataset bench-loader '" + data.str() + "' --split test", "--split: test not in {train,validation}"},
      {"dataset bench-decode --count lots", "--count: expects a whole number, got 'lots'"},
  };
  for (const auto& [arguments, message] : refused) {
    const CliRun r = ampwb(arguments, scratch);
    EXPECT_EQ(r.status, 2) << arguments << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << arguments << ": " << r.err;
    EXPECT_EQ(r.out, "") << arguments;
  }
}

TEST(DataCli, EveryDatasetCommandsHelpExitsZeroAndNamesItsFlags) {
  TempDir scratch("cli_help");
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"dataset", {"inspect", "sample", "bench-decode", "bench-loader"}},
      {"dataset inspect", {"DIR", "--json", "--val-fraction", "--validation-fraction", "--seed", "--no-cache"}},
      {"dataset sample", {"--help"}},
      {"dataset bench-decode", {"--count", "--repeat", "--dir", "--json"}},
      {"dataset bench-loader",
       {"DIR", "--val-fraction", "--seed", "--no-cache", "--image-size", "--batch-size", "--threads", "--augment",
        "--crop", "--normalization", "--cache-mb", "--split", "--epochs", "--compute-ms", "--json"}},
  };
  for (const auto& [command, flags] : commands) {
    const CliRun r = ampwb(command + " --help", scratch);
    EXPECT_EQ(r.status, 0) << command << ": " << r.err;
    EXPECT_NE(r.out.find("Usage: ampwb " + command), std::string::npos) << r.out;
    for (const std::string& flag : flags) EXPECT_NE(r.out.find(flag), std::string::npos) << command << " " << flag;
  }
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
