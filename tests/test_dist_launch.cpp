// The launchers' variables (engine/dist/launch.h): each launcher read from a fake environment, the most specific one
// chosen where several set theirs, and every malformed or inconsistent value refused with a message that names it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <ostream>
#include <set>
#include <string>

#include "core/error.h"
#include "dist/launch.h"

namespace ampwb {
namespace {

using Variables = std::map<std::string, std::string>;

LaunchInfo read(const Variables& variables) { return read_launch_info(environment_of(variables)); }

TEST(Launch, NoLauncherVariablesMeanOneProcess) {
  for (const Variables& variables :
       {Variables{}, Variables{{"PATH", "/usr/bin"}},
        // An sbatch script's own process, without and with -n 2 (Slurm 22.05): no
        // SLURM_STEP_ID, which only srun's tasks have.
        Variables{{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "17"}},
        Variables{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "17"}}}) {
    const LaunchInfo info = read(variables);
    EXPECT_EQ(info.launcher, Launcher::Single);
    EXPECT_EQ(info.rank, 0);
    EXPECT_EQ(info.world_size, 1);
    EXPECT_EQ(info.local_rank, 0);
    EXPECT_FALSE(info.local_world_size);
    EXPECT_EQ(describe(info), "a single process");
  }
}

TEST(Launch, MpirunSetsRanksAndLocalSizes) {
  const LaunchInfo info = read({{"OMPI_COMM_WORLD_RANK", "3"},
                                {"OMPI_COMM_WORLD_SIZE", "4"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(info.launcher, Launcher::Mpirun);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "");
  EXPECT_FALSE(info.master_port);
  EXPECT_EQ(describe(info), "rank 3 of 4 (local rank 1 of 2), launched by mpirun");
}

TEST(Launch, SrunSetsRanksButNoLocalSize) {
  const LaunchInfo info = read({{"SLURM_PROCID", "5"},
                                {"SLURM_NTASKS", "8"},
                                {"SLURM_LOCALID", "1"},
                                {"SLURM_STEP_ID", "0"},
                                {"MASTER_ADDR", "node07"},
                                {"MASTER_PORT", "29500"}});
  EXPECT_EQ(info.launcher, Launcher::Srun);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_FALSE(info.local_world_size);
  // An sbatch script may set the rendezvous for a later launch without MPI: it is read whatever the launcher.
  EXPECT_EQ(info.master_addr, "node07");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_EQ(describe(info), "rank 5 of 8 (local rank 1), launched by srun");
}

TEST(Launch, TorchrunSetsRanksAndTheRendezvous) {
  const LaunchInfo info = read({{"RANK", "2"},
                                {"WORLD_SIZE", "4"},
                                {"LOCAL_RANK", "0"},
                                {"LOCAL_WORLD_SIZE", "2"},
                                {"MASTER_ADDR", "10.0.0.1"},
                                {"MASTER_PORT", "29500"}});
  EXPECT_EQ(info.launcher, Launcher::Torchrun);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "10.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
}

TEST(Launch, TheMostSpecificLauncherWinsInsideASlurmAllocation) {
  // mpirun or torchrun started inside an sbatch script inherit the batch step's SLURM_* variables.
  const Variables slurm{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "0"}};
  Variables mpirun = slurm;
  mpirun.insert({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(read(mpirun).launcher, Launcher::Mpirun);
  EXPECT_EQ(read(mpirun).world_size, 8);
  Variables torchrun = slurm;
  torchrun.insert(
      {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "n0"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(read(torchrun).launcher, Launcher::Torchrun);
  EXPECT_EQ(read(torchrun).rank, 3);
}

TEST(Launch, OneRankOfTorchrunNeedsNoRendezvous) {
  const LaunchInfo info = read({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}});
  EXPECT_EQ(info.launcher, Launcher::Torchrun);
  EXPECT_EQ(info.world_size, 1);
}

TEST(Launch, TheProcessEnvironmentIsRead) {
  ::setenv("AMPWB_TEST_DIST_VARIABLE", "value", 1);
  EXPECT_EQ(process_environment()("AMPWB_TEST_DIST_VARIABLE"), "value");
  ::unsetenv("AMPWB_TEST_DIST_VARIABLE");
  EXPECT_FALSE(process_environment()("AMPWB_TEST_DIST_VARIABLE"));
}

struct Malformed {
  const char* name;
  Variables variables;
  std::string message;  // a part of the Error's text
};

void PrintTo(const Malformed& malformed, std::ostream* out) { *out << malformed.name; }

class MalformedLaunch : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedLaunch, IsRefusedNamingTheVariableAndItsValue) {
  try {
    const LaunchInfo info = read(GetParam().variables);
    ADD_FAILURE() << "read as " << describe(info);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

const Variables kMpirunTwo{
    {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
const Variables kTorchrunTwo{
    {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "n0"}, {"MASTER_PORT", "29500"}};

Variables with(Variables variables, const std::string& name, const std::string& value) {
  variables[name] = value;
  return variables;
}

Variables without(Variables variables, const std::string& name) {
  variables.erase(name);
  return variables;
}

INSTANTIATE_TEST_SUITE_P(
    EveryKind, MalformedLaunch,
    ::testing::Values(
        Malformed{"RankNotANumber", with(kMpirunTwo, "OMPI_COMM_WORLD_RANK", "abc"),
                  "OMPI_COMM_WORLD_RANK='abc' is not a whole number (one of mpirun's variables)"},
        Malformed{"RankAFraction", with(kTorchrunTwo, "RANK", "1.5"), "RANK='1.5' is not a whole number"},
        Malformed{"RankEmpty", with(kTorchrunTwo, "RANK", ""), "RANK='' is not a whole number"},
        Malformed{"RankWithASpace", with(kTorchrunTwo, "RANK", " 1"), "RANK=' 1' is not a whole number"},
        Malformed{"SizeBeyondAnInt", with(kTorchrunTwo, "WORLD_SIZE", "99999999999"),
                  "WORLD_SIZE='99999999999' is not a whole number"},
        Malformed{"RankAtTheSize", with(kMpirunTwo, "OMPI_COMM_WORLD_RANK", "2"),
                  "OMPI_COMM_WORLD_RANK=2 is not within 0 .. OMPI_COMM_WORLD_SIZE=2 - 1"},
        Malformed{"RankNegative", with(kTorchrunTwo, "RANK", "-1"), "RANK=-1 is not within 0 .. WORLD_SIZE=2 - 1"},
        Malformed{"NoTasks",
                  {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "0"}},
                  "SLURM_NTASKS=0 is not a positive count (srun's variables)"},
        Malformed{"NoLocalId",
                  {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "3"}},
                  "SLURM_LOCALID is not set, but SLURM_STEP_ID is: srun sets both"},
        Malformed{"RankWithoutSize", {{"RANK", "0"}}, "WORLD_SIZE is not set, but RANK is: torchrun sets both"},
        Malformed{"SizeWithoutRank", without(kMpirunTwo, "OMPI_COMM_WORLD_RANK"),
                  "OMPI_COMM_WORLD_RANK is not set, but OMPI_COMM_WORLD_SIZE is"},
        Malformed{"LocalRankAtTheSize", with(kMpirunTwo, "OMPI_COMM_WORLD_LOCAL_RANK", "2"),
                  "OMPI_COMM_WORLD_LOCAL_RANK=2 is not within 0 .. OMPI_COMM_WORLD_SIZE=2 - 1"},
        Malformed{"LocalRankAtTheLocalSize", with(kMpirunTwo, "OMPI_COMM_WORLD_LOCAL_SIZE", "1"),
                  "OMPI_COMM_WORLD_LOCAL_RANK=1 is not below OMPI_COMM_WORLD_LOCAL_SIZE=1"},
        Malformed{"LocalSizeAboveTheSize", with(kTorchrunTwo, "LOCAL_WORLD_SIZE", "3"),
                  "LOCAL_WORLD_SIZE=3 is not within 1 .. WORLD_SIZE=2"},
        Malformed{"PortBeyondTheRange", with(kTorchrunTwo, "MASTER_PORT", "70000"),
                  "MASTER_PORT='70000' is not a port (1 .. 65535)"},
        Malformed{"PortNotANumber", with(kTorchrunTwo, "MASTER_PORT", "http"),
                  "MASTER_PORT='http' is not a port (1 .. 65535)"},
        Malformed{"EmptyMasterAddress", with(kMpirunTwo, "MASTER_ADDR", ""), "MASTER_ADDR is set but empty"},
        Malformed{"NoMasterAddress", without(kTorchrunTwo, "MASTER_ADDR"),
                  "MASTER_ADDR is not set, but WORLD_SIZE=2 is"},
        Malformed{"NoMasterPort", without(kTorchrunTwo, "MASTER_PORT"), "MASTER_PORT is not set, but WORLD_SIZE=2 is"}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return std::string(info.param.name); });

TEST(Launch, EveryLauncherHasOneRowAndItsNameReadsBack) {
  std::set<std::string> names;
  std::set<int> values;
  for (const Choice<Launcher>& row : ChoiceTable<Launcher>::rows) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    EXPECT_TRUE(values.insert(static_cast<int>(row.value)).second) << row.name;
    EXPECT_EQ(parse_choice<Launcher>(row.name), row.value);
    EXPECT_NE(std::string(row.help), "");
  }
  EXPECT_EQ(*values.rbegin() + 1, static_cast<int>(values.size()));
  EXPECT_EQ(choice_names<Launcher>(), "single, mpirun, srun or torchrun");
}

// The local rank picks the GPU, or the one GPU a rank sees; a rank without a GPU of its own is refused by name.
TEST(Launch, TheLocalRankPicksTheGpu) {
  LaunchInfo launch = read({{"RANK", "5"},
                            {"WORLD_SIZE", "8"},
                            {"LOCAL_RANK", "1"},
                            {"LOCAL_WORLD_SIZE", "4"},
                            {"MASTER_ADDR", "node0"},
                            {"MASTER_PORT", "29500"}});
  EXPECT_EQ(gpu_of_rank(launch, 4), 1);
  EXPECT_EQ(gpu_of_rank(launch, 2), 1);
  EXPECT_EQ(gpu_of_rank(launch, 1), 0);  // CUDA_VISIBLE_DEVICES gave this rank its own
  launch.local_rank = 3;
  try {
    gpu_of_rank(launch, 2);
    ADD_FAILURE() << "local rank 3 was given one of 2 GPUs";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "this process is rank 5 of 8 (local rank 3 of 4), launched by torchrun, but this machine has 2 GPUs "
                 "(cuda:0 to cuda:1): start at most one rank per GPU on each machine");
  }
  try {
    gpu_of_rank(launch, 0);
    ADD_FAILURE() << "a GPU was chosen among none";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("to train on a GPU, but it sees none"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ampwb
