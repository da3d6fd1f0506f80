// A real single-node Slurm (slurm_cluster.h) does what a sweep on a cluster will rely on: a job array runs every
// task with its own SLURM_ARRAY_TASK_ID, a --requeue job requeued while running starts again with
// SLURM_RESTART_COUNT=1, and a cancelled job's script gets SIGTERM before it is killed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "slurm_cluster.h"

namespace {
namespace fs = std::filesystem;
using ampwb::test::CommandResult;
using ampwb::test::SlurmCluster;
using namespace std::chrono_literals;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The job id `sbatch --parsable` printed ("id" or "id;cluster").
std::string job_id(const CommandResult& submitted) {
  return submitted.output.substr(0, submitted.output.find_first_of(";\n"));
}

// A batch script that notes each start (with its restart count) and each SIGTERM in files under `dir`, then sleeps
// on its first start only (a second start finishes at once). It sleeps in one-second steps rather than waiting on one
// long child: Slurm signals the job's processes one by one, and a shell whose only child died first would run on to
// "finished" and exit before its own SIGTERM came.
fs::path write_sleeper_script(const fs::path& dir) {
  const fs::path script = dir / "sleeper.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                        << "trap 'echo TERM >> " << (dir / "signals").string() << "; exit 143' TERM\n"
                        << "echo \"start ${SLURM_RESTART_COUNT:-0}\" >> " << (dir / "starts").string() << "\n"
                        << "if [ \"${SLURM_RESTART_COUNT:-0}\" = 0 ]; then\n"
                        << "  i=0; while [ $i -lt 300 ]; do sleep 1; i=$((i + 1)); done\n"
                        << "fi\n"
                        << "echo finished >> " << (dir / "starts").string() << "\n";
  fs::permissions(script, fs::perms::owner_exec, fs::perm_options::add);
  return script;
}

TEST(SlurmCluster, RunsAJobArrayAndRequeuesATask) {
  SlurmCluster cluster;  // throws, failing the test, naming a daemon that cannot start

  // A job array of three tasks, each writing its task id into a file of its own.
  const fs::path array_dir = cluster.folder() / "array";
  fs::create_directories(array_dir);
  const CommandResult array =
      cluster.run({"sbatch", "--parsable", "--array=0-2", "--output=" + (array_dir / "%A_%a.log").string(), "--wrap",
                   "echo $SLURM_ARRAY_TASK_ID > " + array_dir.string() + "/task_$SLURM_ARRAY_TASK_ID"});
  ASSERT_EQ(array.exit_code, 0) << array.output;
  const std::string array_job = job_id(array);
  const auto task = [&](int i) { return array_job + "_" + std::to_string(i); };
  EXPECT_TRUE(SlurmCluster::wait_until(
      [&] {
        for (int i = 0; i < 3; ++i) {
          const std::string state = cluster.job_state(task(i));
          if (state.empty() || state == "PENDING" || state == "RUNNING" || state == "COMPLETING") return false;
        }
        return true;
      },
      30s))
      << cluster.run({"squeue"}).output << cluster.tail("slurmctld.log");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(cluster.job_state(task(i)), "COMPLETED") << "task " << i;
    EXPECT_EQ(read_text(array_dir / ("task_" + std::to_string(i))), std::to_string(i) + "\n") << "task " << i;
  }

  // A --requeue job requeued while it runs: SIGTERM, back to pending, then a second start that finishes.
  const fs::path requeue_dir = cluster.folder() / "requeue";
  fs::create_directories(requeue_dir);
  const CommandResult submitted =
      cluster.run({"sbatch", "--parsable", "--requeue", "--output=" + (requeue_dir / "job.log").string(),
                   write_sleeper_script(requeue_dir).string()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = job_id(submitted);
  ASSERT_TRUE(SlurmCluster::wait_until([&] { return read_text(requeue_dir / "starts") == "start 0\n"; }, 30s))
      << cluster.job_state(job) << "\n"
      << cluster.tail("slurmctld.log");
  const CommandResult requeued = cluster.run({"scontrol", "requeue", job});
  ASSERT_EQ(requeued.exit_code, 0) << requeued.output;
  ASSERT_TRUE(SlurmCluster::wait_until([&] { return cluster.job_state(job) == "PENDING"; }, 30s))
      << cluster.job_state(job);
  // Slurm holds a requeued batch job for 120 s (its BeginTime) before it may start again; the test lifts that hold.
  const CommandResult released = cluster.run({"scontrol", "update", "JobId=" + job, "StartTime=now"});
  ASSERT_EQ(released.exit_code, 0) << released.output;
  EXPECT_TRUE(SlurmCluster::wait_until([&] { return cluster.job_state(job) == "COMPLETED"; }, 30s))
      << cluster.job_state(job) << "\n"
      << cluster.tail("slurmctld.log");
  EXPECT_EQ(read_text(requeue_dir / "starts"), "start 0\nstart 1\nfinished\n");
  EXPECT_EQ(read_text(requeue_dir / "signals"), "TERM\n");  // the first start's trap saw the requeue's SIGTERM
  EXPECT_EQ(cluster.job_restarts(job), 1);
}

// A job cancelled while it runs (as a preempting cancel does): its script gets SIGTERM and may act on it before
// SIGKILL, after KillWait.
TEST(SlurmCluster, CancelledJobSeesSigterm) {
  SlurmCluster cluster;
  const fs::path dir = cluster.folder() / "cancel";
  fs::create_directories(dir);
  const CommandResult submitted = cluster.run(
      {"sbatch", "--parsable", "--output=" + (dir / "job.log").string(), write_sleeper_script(dir).string()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = job_id(submitted);
  ASSERT_TRUE(SlurmCluster::wait_until([&] { return read_text(dir / "starts") == "start 0\n"; }, 30s))
      << cluster.job_state(job);
  const CommandResult cancelled = cluster.run({"scancel", job});
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.output;
  EXPECT_TRUE(SlurmCluster::wait_until([&] { return cluster.job_state(job) == "CANCELLED"; }, 30s))
      << cluster.job_state(job);
  EXPECT_TRUE(SlurmCluster::wait_until([&] { return read_text(dir / "signals") == "TERM\n"; }, 10s))
      << read_text(dir / "signals");
  EXPECT_EQ(read_text(dir / "starts"), "start 0\n");  // not started again, and not past its sleep
}

// A daemon that cannot start fails the test naming it, with its log's last lines: here slurmd, whose spool folder
// cannot be created.
TEST(SlurmCluster, NamesADaemonThatCannotStart) {
  try {
    SlurmCluster cluster("SlurmdSpoolDir=/proc/ampwb-no-such-folder\n");
    FAIL() << "started with a spool folder that cannot exist";
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("SlurmCluster: slurmd exited"), std::string::npos) << message;
    EXPECT_NE(message.find("last lines of"), std::string::npos) << message;
    EXPECT_NE(message.find("/proc/ampwb-no-such-folder"), std::string::npos) << message;
  }
}

}  // namespace
