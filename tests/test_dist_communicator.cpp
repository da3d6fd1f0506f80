// The communicator of one process and the choice of communicator for a launch (engine/dist/make_communicator.h):
// one rank exchanges nothing, and the launches this build cannot serve are refused by name before any rank waits.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/make_communicator.h"
#include "dist/single_process_communicator.h"

namespace ampwb {
namespace {

std::string error_of(const LaunchInfo& launch) {
  try {
    const std::unique_ptr<Communicator> communicator = make_communicator(launch);
    return "made: " + communicator->describe();
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(SingleProcessCommunicator, LeavesTheDataAsItIs) {
  SingleProcessCommunicator one;
  EXPECT_EQ(one.rank(), 0);
  EXPECT_EQ(one.world_size(), 1);
  EXPECT_EQ(one.local_rank(), 0);
  std::vector<float> floats{1.5f, -2.0f};
  std::vector<double> doubles{0.25};
  std::vector<int64_t> counts{int64_t{1} << 40, 7};
  one.all_reduce_sum(floats.data(), floats.size());
  one.all_reduce_sum(doubles.data(), doubles.size());
  one.all_reduce_sum(counts.data(), counts.size());
  EXPECT_EQ(floats, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(doubles, std::vector<double>{0.25});
  EXPECT_EQ(counts, (std::vector<int64_t>{int64_t{1} << 40, 7}));
  char bytes[3] = {'a', 'b', 'c'};
  one.broadcast(bytes, sizeof bytes, 0);
  EXPECT_EQ(std::string(bytes, 3), "abc");
  one.barrier();
  EXPECT_EQ(one.describe(), "single process");
}

// Device collectives are NCCL's: a host communicator says it has none, and refuses them by name.
TEST(SingleProcessCommunicator, HasNoDeviceCollectives) {
  SingleProcessCommunicator one;
  EXPECT_FALSE(one.reduces_device_memory());
  EXPECT_EQ(one.device_index(), -1);
  float value = 1;
  try {
    one.all_reduce_mean_on_device({{&value, 1}}, 0);
    ADD_FAILURE() << "a host communicator took a device all-reduce";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "an all-reduce of device memory needs a communicator over GPU memory (NCCL); single process works on "
                 "host memory only");
  }
  EXPECT_THROW(one.broadcast_on_device(&value, sizeof value, 0), Error);
  EXPECT_THROW(one.set_device_stream(nullptr), Error);
}

TEST(SingleProcessCommunicator, RefusesABroadcastFromAnotherRank) {
  SingleProcessCommunicator one;
  char byte = 0;
  try {
    one.broadcast(&byte, 1, 1);
    ADD_FAILURE() << "a broadcast from rank 1 of 1 was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broadcast from rank 1, but a single process has rank 0 only"),
              std::string::npos)
        << e.what();
  }
}

TEST(MakeCommunicator, OneRankIsASingleProcessWhateverTheLauncher) {
  for (const Launcher launcher : {Launcher::Single, Launcher::Mpirun, Launcher::Srun, Launcher::Torchrun}) {
    LaunchInfo launch;
    launch.launcher = launcher;
    const std::unique_ptr<Communicator> communicator = make_communicator(launch);
    EXPECT_EQ(communicator->world_size(), 1) << choice_name(launcher);
    EXPECT_EQ(communicator->describe(), "single process") << choice_name(launcher);
  }
}

// Their rendezvous carries NCCL's id, not the CPU's collectives, which are MPI's.
TEST(MakeCommunicator, RefusesTorchrunRanksOnTheCpu) {
  LaunchInfo launch;
  launch.launcher = Launcher::Torchrun;
  launch.rank = 1;
  launch.world_size = 2;
  launch.local_rank = 1;
  launch.master_addr = "127.0.0.1";
  launch.master_port = 29500;
  EXPECT_NE(error_of(launch).find("this process is rank 1 of 2 (local rank 1), launched by torchrun, on the CPU, but "
                                  "torchrun-style ranks have no collectives over host memory without MPI: start the "
                                  "ranks with mpirun or srun, or train on GPUs (the device cuda)"),
            std::string::npos)
      << error_of(launch);
}

// Ranks that train on a GPU are NCCL's: refused, by name, where the build has no NCCL or the process no GPU; with a
// GPU, this process (started outside mpirun) is refused by MPI, which carries NCCL's id, as MPI's own ranks are.
TEST(MakeCommunicator, GpuRanksGoToNccl) {
  LaunchInfo launch;
  launch.launcher = Launcher::Mpirun;
  launch.world_size = 2;
  try {
    make_communicator(launch, kDefaultCollectiveTimeout, DeviceChoice::cuda(0));
    ADD_FAILURE() << "a communicator was made for a rank MPI does not see";
  } catch (const Error& e) {
    const std::string error = e.what();
    const std::string launched = "this process is rank 0 of 2 (local rank 0), launched by mpirun";
    if (!have_nccl()) {
      EXPECT_EQ(error.find(launched + ", to train on cuda:0, but this build has no NCCL"), 0u) << error;
    } else if (error.find("GPU, but it sees none") != std::string::npos) {
      EXPECT_EQ(error, launched + ", to train on a GPU, but it sees none");
    } else {
      const std::string refusal =
          have_mpi() ? "but MPI says rank 0 of 1" : "but this build has no MPI to pass NCCL's id";
      EXPECT_NE(error.find(refusal), std::string::npos) << error;
    }
  }
}

// Started outside mpirun, a process that says it is one of two ranks finds MPI alone (a singleton), or no MPI in the
// build: either way it is refused, naming its launch, instead of waiting for a rank that never comes.
TEST(MakeCommunicator, RefusesRanksThatMpiDoesNotSee) {
  LaunchInfo launch;
  launch.launcher = Launcher::Mpirun;
  launch.world_size = 2;
  const std::string error = error_of(launch);
  if (have_mpi()) {
    EXPECT_NE(error.find("the launcher's variables say rank 0 of 2 (local rank 0), launched by mpirun, but MPI says "
                         "rank 0 of 1"),
              std::string::npos)
        << error;
  } else {
    EXPECT_NE(error.find("this process is rank 0 of 2 (local rank 0), launched by mpirun, but this build has no MPI"),
              std::string::npos)
        << error;
  }
}

}  // namespace
}  // namespace ampwb
