// The acceptance for sweeps on a cluster: a real single-node Slurm (slurm_cluster.h) and a real PostgreSQL 15
// (postgres_server.h). A 6-point sweep (2 modes x 3 seeds, ResNet-20 on the stripes) submitted as one job array
// records every point once in PostgreSQL; one point requeued mid-run (scontrol requeue: SIGTERM, then the task
// again) resumes its run from its checkpoint and finishes; and the comparison grouped by everything but the seed
// equals that of the same grid swept here into SQLite. Then `sweep cancel` of a running Slurm sweep, and a sweep whose
// points failed on the nodes submitted again.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "analysis/run_compare.h"
#include "analysis/run_groups.h"
#include "postgres_server.h"
#include "slurm_cluster.h"
#include "store/sweep_record.h"
#include "test_cli_util.h"

namespace ampwb {
namespace {
using namespace cli_test;
using test::SlurmCluster;
using namespace std::chrono_literals;

std::vector<std::string> sweep_of_modes_and_seeds(const std::string& db) {
  // Long enough (40 epochs of 15 steps) for the test to requeue a point while it trains.
  return {"sweep",
          "--data",
          stripes().string(),
          "--depth",
          "20",
          "--epochs",
          "40",
          "--batch-size",
          "4",
          "--threads",
          "1",
          "--val-fraction",
          "0.25",
          "--precision",
          "fp32,amp-bf16",
          "--seed",
          "0,1,2",
          "--db",
          db};
}

// The sweep's runs grouped by everything but the seed: each group's label and its metrics' mean and std.
std::vector<std::pair<std::string, std::vector<GroupMetric>>> grouped(const std::string& db, int64_t sweep) {
  RunStore store(db, RunStore::Mode::ReadOnly);
  std::vector<TrainConfig> configs;
  std::vector<RunSummary> summaries;
  std::vector<RunSpeed> speeds;
  for (const SweepPoint& p : sweep_points(store, sweep)) {
    const RunRecord run = store.run(p.run_id);
    configs.push_back(run.config);
    summaries.push_back(summarize(run, store.epochs(p.run_id)));
    speeds.push_back(run_timing(run, store.steps(p.run_id), {}).speed);
  }
  std::vector<std::pair<std::string, std::vector<GroupMetric>>> out;
  for (const ConfigGroup& g : group_configs(configs, kAllButSeed)) {
    out.emplace_back(group_label(kAllButSeed, g), group_metrics(summaries, speeds, g));
  }
  return out;
}

std::vector<SweepPoint> points_of(const std::string& db, int64_t sweep) {
  try {
    return sweep_points(RunStore(db, RunStore::Mode::ReadOnly), sweep);
  } catch (const std::exception&) {
    return {};
  }
}

TEST(SweepSlurm, AJobArrayRecordsEveryPointOnceAndARequeuedPointResumes) {
  test::PostgresServer postgres;  // each throws, failing the test, naming what could not start
  SlurmCluster cluster;
  TempDir dir("sweep_slurm");
  // The sweep's folder and checkpoints of a PostgreSQL store go to the data folder: a private one.
  ::setenv("XDG_DATA_HOME", dir.file("data").c_str(), 1);
  ::setenv("SLURM_CONF", cluster.conf().c_str(), 1);  // sbatch here, and the tasks, which inherit it
  const std::string db = postgres.uri();

  std::vector<std::string> submit = sweep_of_modes_and_seeds(db);
  submit.insert(submit.end(), {"--on", "slurm", "--max-parallel", "2"});
  const Result submitted = ampwb(submit);
  ASSERT_EQ(submitted.status, 0) << submitted.output;
  expect_contains(submitted.output, "sweep 1: 6 points");
  const std::string job = sweep(RunStore(db, RunStore::Mode::ReadOnly), 1).slurm_job_id;
  ASSERT_FALSE(job.empty());
  expect_contains(submitted.output, "submitted as Slurm job array " + job);

  // Point 0 requeued once its run has an epoch: SIGTERM ends the run as interrupted with a checkpoint.
  // <data folder>/ampwb/sweeps/<id>-<created>/: the script and each task's output.
  fs::path folder;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(dir.file("data")) / "ampwb" / "sweeps"))
    if (e.path().filename().string().starts_with("1-")) folder = e.path();
  ASSERT_TRUE(fs::exists(folder / "sweep.sbatch")) << folder;
  int64_t run0 = 0;
  ASSERT_TRUE(SlurmCluster::wait_until(
      [&] {
        const std::vector<SweepPoint> points = points_of(db, 1);
        if (points.empty() || points[0].run_id == 0) return false;
        run0 = points[0].run_id;
        return RunStore(db, RunStore::Mode::ReadOnly).epochs(run0).size() >= 1;
      },
      60s))
      << cluster.run({"squeue"}).output << read_text((folder / "task-0.out").string());
  // sweep status shows Slurm's view beside the store's: task 0 (point 1) runs, and at most 2 tasks at once make
  // the rest wait for the array's task limit.
  const Result status = ampwb({"sweep", "status", "1", "--db", db});
  ASSERT_EQ(status.status, 0) << status.output;
  expect_contains(status.output, "Slurm (squeue): job array " + job + ": ");
  expect_contains(status.output, "pending (JobArrayTaskLimit)");
  const std::string point1 = status.output.substr(status.output.find("\n      1     0  "));
  expect_contains(point1.substr(0, point1.find('\n', 1)), "; Slurm: running");
  const test::CommandResult requeued = cluster.run({"scontrol", "requeue", job + "_0"});
  ASSERT_EQ(requeued.exit_code, 0) << requeued.output;
  ASSERT_TRUE(SlurmCluster::wait_until([&] { return cluster.job_state(job + "_0") == "PENDING"; }, 30s))
      << cluster.job_state(job + "_0");
  {
    RunStore store(db, RunStore::Mode::ReadOnly);
    EXPECT_EQ(store.run(run0).status, RunStatus::Interrupted) << store.run(run0).end_reason;
    EXPECT_LT(store.epochs(run0).size(), 40u) << "the run ended before the requeue reached it";
    EXPECT_EQ(sweep_point(store, 1, 0).state, SweepPointState::Requeued);
  }
  // Slurm holds a requeued batch job 120 s before it may start again: the test lifts that hold.
  const test::CommandResult released = cluster.run({"scontrol", "update", "JobId=" + job + "_0", "StartTime=now"});
  ASSERT_EQ(released.exit_code, 0) << released.output;

  ASSERT_TRUE(SlurmCluster::wait_until(
      [&] {
        const std::vector<SweepPoint> points = points_of(db, 1);
        if (points.size() != 6) return false;
        for (const SweepPoint& p : points)
          if (p.state != SweepPointState::Finished && p.state != SweepPointState::Failed) return false;
        return true;
      },
      180s))
      << ampwb({"sweep", "status", "1", "--db", db}).output << cluster.run({"squeue"}).output;

  RunStore store(db, RunStore::Mode::ReadOnly);
  const std::vector<SweepPoint> points = sweep_points(store, 1);
  std::set<int64_t> runs;
  for (const SweepPoint& p : points) {
    EXPECT_EQ(p.state, SweepPointState::Finished)
        << "point " << p.index + 1 << ": "
        << read_text((folder / ("task-" + std::to_string(p.index) + ".out")).string());
    runs.insert(p.run_id);
    EXPECT_EQ(store.run(p.run_id).status, RunStatus::Finished);
    EXPECT_EQ(store.epochs(p.run_id).size(), 40u);
  }
  EXPECT_EQ(runs.size(), 6u);
  EXPECT_EQ(store.runs().size(), 6u) << "a point was recorded twice";
  EXPECT_EQ(points[0].run_id, run0) << "the requeued point started over instead of resuming its run";
  expect_contains(read_text((folder / "task-0.out").string()),
                  "resuming run " + std::to_string(run0) + " from its checkpoint");
  EXPECT_EQ(cluster.job_restarts(job + "_0"), 1);

  // The same grid here, into SQLite: the same groups, the same means and spreads.
  const std::string local = dir.file("runs.sqlite");
  std::vector<std::string> here = sweep_of_modes_and_seeds(local);
  here.insert(here.end(), {"-j", "2"});
  const Result swept = ampwb(here);
  ASSERT_EQ(swept.status, 0) << swept.output;
  const auto on_slurm = grouped(db, 1), on_local = grouped(local, 1);
  ASSERT_EQ(on_slurm.size(), 2u);
  ASSERT_EQ(on_local.size(), on_slurm.size());
  int compared = 0;  // the results compared: accuracies and losses
  for (size_t g = 0; g < on_slurm.size(); ++g) {
    EXPECT_EQ(on_slurm[g].first, on_local[g].first);
    ASSERT_EQ(on_slurm[g].second.size(), on_local[g].second.size());
    for (size_t m = 0; m < on_slurm[g].second.size(); ++m) {
      const GroupMetric &a = on_slurm[g].second[m], &b = on_local[g].second[m];
      EXPECT_EQ(a.metric, b.metric);
      if (a.metric.find("time") != std::string::npos || a.metric.find("/s") != std::string::npos)
        continue;  // times and speeds differ from run to run
      ++compared;
      EXPECT_NEAR(a.mean, b.mean, 1e-9) << on_slurm[g].first << ": " << a.metric;
      if (!std::isnan(a.std) || !std::isnan(b.std)) {  // NaN both: a group of one run has no spread
        EXPECT_NEAR(a.std, b.std, 1e-9) << on_slurm[g].first << ": " << a.metric;
      }
    }
  }
  EXPECT_GE(compared, 8);
  // Point by point too: the same curves, the requeued point's resumed run included.
  RunStore here_store(local, RunStore::Mode::ReadOnly);
  const std::vector<SweepPoint> here_points = sweep_points(here_store, 1);
  ASSERT_EQ(here_points.size(), points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    const std::vector<EpochReport> a = store.epochs(points[i].run_id), b = here_store.epochs(here_points[i].run_id);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(a.back().train_loss, b.back().train_loss) << "point " << i;
    EXPECT_EQ(a.back().validation_accuracy, b.back().validation_accuracy) << "point " << i;
  }

  // sweep cancel: scancel of the job array, every point left cancelled, the running runs ended with a checkpoint.
  std::vector<std::string> long_sweep = sweep_of_modes_and_seeds(db);
  ASSERT_EQ(long_sweep[5], "--epochs");
  long_sweep[6] = "400";  // --epochs
  long_sweep.insert(long_sweep.end(), {"--on", "slurm", "--max-parallel", "2"});
  const Result second = ampwb(long_sweep);
  ASSERT_EQ(second.status, 0) << second.output;
  const std::string second_job = sweep(RunStore(db, RunStore::Mode::ReadOnly), 2).slurm_job_id;
  int64_t running = 0;
  ASSERT_TRUE(SlurmCluster::wait_until(
      [&] {
        const std::vector<SweepPoint> p = points_of(db, 2);
        if (p.empty() || p[0].run_id == 0) return false;
        running = p[0].run_id;
        return RunStore(db, RunStore::Mode::ReadOnly).epochs(running).size() >= 1;
      },
      60s))
      << cluster.run({"squeue"}).output;
  const Result cancelled = ampwb({"sweep", "cancel", "2", "--db", db});
  ASSERT_EQ(cancelled.status, 0) << cancelled.output;
  expect_contains(cancelled.output, "Slurm job " + second_job + " cancelled");
  EXPECT_TRUE(SlurmCluster::wait_until([&] { return cluster.job_state(second_job + "_0") == "CANCELLED"; }, 30s))
      << cluster.job_state(second_job + "_0");
  EXPECT_TRUE(SlurmCluster::wait_until(
      [&] { return RunStore(db, RunStore::Mode::ReadOnly).run(running).status != RunStatus::Running; }, 30s));
  RunStore after(db, RunStore::Mode::ReadOnly);
  EXPECT_EQ(after.run(running).status, RunStatus::Interrupted) << after.run(running).end_reason;
  EXPECT_TRUE(after.resumable(running));
  for (const SweepPoint& p : sweep_points(after, 2)) EXPECT_EQ(p.state, SweepPointState::Cancelled) << p.index;
  EXPECT_TRUE(sweep(after, 2).cancelled);
  const Result status_after = ampwb({"sweep", "status", "2", "--db", db});
  expect_contains(status_after.output, "; Slurm: cancelled\n");
  EXPECT_EQ(status_after.output.find("JobArrayTaskLimit"), std::string::npos) << "a waiting task's reason outlived it";

  // A point whose task fails before it records a run (no dataset folder on the node): sweep status names the task's
  // output, where the reason is.
  std::vector<std::string> missing = sweep_of_modes_and_seeds(db);
  ASSERT_EQ(missing[1], "--data");
  missing[2] = dir.file("not on the nodes");
  missing[6] = "2";  // --epochs: short, for the retry below
  missing.insert(missing.end(), {"--on", "slurm"});
  const Result third = ampwb(missing);
  ASSERT_EQ(third.status, 0) << third.output;
  expect_contains(third.output, "its points fail unless the nodes Slurm runs them on have that dataset folder");
  ASSERT_TRUE(SlurmCluster::wait_until(
      [&] {
        const std::vector<SweepPoint> p = points_of(db, 3);
        return !p.empty() &&
               std::all_of(p.begin(), p.end(), [](const SweepPoint& point) { return is_final(point.state); });
      },
      60s))
      << cluster.run({"squeue"}).output;
  const Result failed = ampwb({"sweep", "status", "3", "--db", db});
  ASSERT_EQ(failed.status, 0) << failed.output;
  const std::string said = "; why is in ";
  const size_t why = failed.output.find(said);
  ASSERT_NE(why, std::string::npos) << failed.output;
  const size_t from = why + said.size();
  const std::string output_file = failed.output.substr(from, failed.output.find('\n', from) - from);
  EXPECT_TRUE(output_file.ends_with("/task-0.out")) << output_file;
  expect_contains(read_text(output_file), "does not exist");
  expect_contains(failed.output, "ampwb sweep run 3 --retry-failed submits the failed points to Slurm again");

  // The folder there now, the failed points submitted again: a job array of their tasks, each a new run, finishes.
  fs::create_directory_symlink(stripes(), dir.file("not on the nodes"));
  const std::string first_job = sweep(RunStore(db, RunStore::Mode::ReadOnly), 3).slurm_job_id;
  const Result retried = ampwb({"sweep", "run", "3", "--retry-failed", "--db", db});
  ASSERT_EQ(retried.status, 0) << retried.output;
  expect_contains(retried.output, "point 6 failed; queued again as task 5 of Slurm job array ");
  const std::vector<std::string> jobs = slurm_jobs(sweep(RunStore(db, RunStore::Mode::ReadOnly), 3));
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0], first_job);
  ASSERT_TRUE(SlurmCluster::wait_until(
      [&] {
        const std::vector<SweepPoint> p = points_of(db, 3);
        return !p.empty() && std::all_of(p.begin(), p.end(), [](const SweepPoint& point) {
          return point.state == SweepPointState::Finished;
        });
      },
      120s))
      << cluster.run({"squeue"}).output << ampwb({"sweep", "status", "3", "--db", db}).output;
  RunStore done(db, RunStore::Mode::ReadOnly);
  for (const SweepPoint& p : sweep_points(done, 3)) EXPECT_EQ(done.run(p.run_id).status, RunStatus::Finished);
  const Result retried_status = ampwb({"sweep", "status", "3", "--db", db});
  expect_contains(retried_status.output, "(jobs " + first_job + ", " + jobs[1] + ")");
  expect_contains(retried_status.output, ": job arrays " + first_job + ", " + jobs[1] + ": 6 completed");
  EXPECT_EQ(retried_status.output.find("why is in"), std::string::npos) << retried_status.output;
  expect_contains(ampwb({"sweep", "run", "3", "--retry-failed", "--db", db}).output,
                  "sweep 3 has no failed point to retry");
}

}  // namespace
}  // namespace ampwb
