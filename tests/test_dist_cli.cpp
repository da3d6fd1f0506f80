// `ampwb train` on two real ranks of one mpirun: one run, trained by both and recorded by rank 0 alone. mpirun starts
// the two ranks with different run stores (a multiple-program launch), so a rank other than 0 that opened its own
// would leave a file behind.
#include "test_cli_util.h"

namespace ampwb::cli_test {
namespace {

// mpirun -np 1 ampwb ARGS(db for rank 0) : -np 1 ampwb ARGS(db for rank 1); one CPU thread a rank.
std::vector<std::string> two_ranks(const std::vector<std::string>& rank0, const std::vector<std::string>& rank1) {
  std::vector<std::string> argv = {AMPWB_MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1"};
  argv.insert(argv.end(), {"-np", "1", AMPWB_BINARY});
  argv.insert(argv.end(), rank0.begin(), rank0.end());
  argv.insert(argv.end(), {":", "-np", "1", AMPWB_BINARY});
  argv.insert(argv.end(), rank1.begin(), rank1.end());
  return argv;
}

std::vector<std::string> training(const std::string& db) {
  std::vector<std::string> args = tiny_training(db, 2);
  *(std::find(args.begin(), args.end(), "--threads") + 1) = "1";
  return args;
}

TEST(DistCli, TwoRanksTrainOneRunThatRankZeroAloneRecords) {
  TempDir dir("dist_two_ranks");
  const std::string db = dir.file("runs.sqlite"), other = dir.file("rank1/runs.sqlite");
  const Result r = run(two_ranks(training(db), training(other)));
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "2 processes train together");
  EXPECT_FALSE(fs::exists(dir.path() / "rank1")) << "rank 1 opened a run store of its own";

  RunStore store(db, RunStore::Mode::ReadOnly);
  const std::vector<RunRecord> runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::Finished) << runs[0].end_reason;
  EXPECT_EQ(store.epochs(runs[0].id).size(), 2u);
  const Result show = ampwb({"show", std::to_string(runs[0].id), "--json", "--db", db});
  ASSERT_EQ(show.status, 0) << show.output;
  const json j = json::parse(show.output);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["global_batch_size"], 8) << "4 images a rank";
  EXPECT_EQ(j["launcher"], "mpirun");
  // 60 training images, 30 a rank: 8 steps an epoch of up to 4 images a rank, where one process takes 15.
  EXPECT_EQ(runs[0].info.steps_per_epoch, 8);
}

// A setting rank 0 refuses once the flags are read (warm-up beyond the epochs) ends every rank at once, saying the
// flag: the other ranks, waiting for the configuration, hear the refusal instead.
TEST(DistCli, ARefusalOnRankZeroEndsEveryRank) {
  TempDir dir("dist_refused");
  std::vector<std::string> args = training(dir.file("runs.sqlite"));
  args.insert(args.end(), {"--warmup-epochs", "3"});  // of 2 epochs
  const Result r = run(two_ranks(args, args));
  EXPECT_NE(r.status, 0) << r.output;
  expect_contains(r.output, "--warmup-epochs: the warm-up epochs must be in [0, epochs]");
  EXPECT_FALSE(fs::exists(dir.file("runs.sqlite"))) << "refused before the store was opened";
}

}  // namespace
}  // namespace ampwb::cli_test
