// A sweep's records in the run store, on both kinds of store: the grid and its points written at once, points taken
// one by one (never twice, also by two processes' connections), a point's run linked, requeued and finished, a
// cancelled sweep starting nothing more, a point held by its taker and its child until its state is settled (and
// queued again once nobody holds it, where it was killed before its run began), and a deleted run leaving its point
// without a run.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <thread>

#include <unistd.h>

#include "store/run_store.h"
#include "store/sweep_record.h"
#include "test_store_util.h"

namespace ampwb {
namespace {
using namespace store_test;

class SweepRecords : public StoreTest {};
INSTANTIATE_TEST_SUITE_P(Stores, SweepRecords, ::testing::ValuesIn(backends()), backend_name);

TEST_P(SweepRecords, KeepsTheGridAndItsPointsInOrder) {
  TempDir dir("sweep_grid");
  RunStore store(new_store(dir));
  const int64_t id = create_sweep(store, "modes", R"({"grid":{"seed":[0,1]}})", "slurm", {"{\"a\":0}", "{\"a\":1}"});
  add_sweep_slurm_job(store, id, "4711");
  const SweepRecord s = sweep(store, id);
  EXPECT_EQ(s.name, "modes");
  EXPECT_EQ(s.grid_json, R"({"grid":{"seed":[0,1]}})");
  EXPECT_EQ(s.runs_on, "slurm");
  EXPECT_EQ(s.slurm_job_id, "4711");
  EXPECT_EQ(slurm_jobs_text(s), "job 4711");
  EXPECT_FALSE(s.cancelled);
  const std::vector<SweepPoint> points = sweep_points(store, id);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[1].index, 1);
  EXPECT_EQ(points[1].settings_json, "{\"a\":1}");
  EXPECT_EQ(points[1].state, SweepPointState::Queued);
  EXPECT_EQ(points[1].run_id, 0);
  ASSERT_EQ(sweeps(store).size(), 1u);
  expect_contains(error_of([&] { sweep(store, id + 1); }), "no sweep " + std::to_string(id + 1));
  // A retry's job array joins the sweep's.
  add_sweep_slurm_job(store, id, "4790");
  EXPECT_EQ(slurm_jobs(sweep(store, id)), (std::vector<std::string>{"4711", "4790"}));
  EXPECT_EQ(slurm_jobs_text(sweep(store, id)), "jobs 4711, 4790");
}

TEST_P(SweepRecords, HandsEachPointOutOnceAcrossConnections) {
  TempDir dir("sweep_take");
  const std::string location = new_store(dir);
  RunStore first(location);
  const int64_t id = create_sweep(first, "", "{}", "local", {"{}", "{}", "{}"});
  RunStore second(location, RunStore::Mode::Existing);
  std::set<int> taken;
  for (int i = 0; i < 3; ++i) {
    const std::optional<SweepPoint> p = take_next_point(i % 2 ? second : first, id);
    ASSERT_TRUE(p);
    EXPECT_TRUE(taken.insert(p->index).second) << "point " << p->index << " taken twice";
  }
  EXPECT_FALSE(take_next_point(first, id));
  EXPECT_EQ(sweep_point(second, id, 2).state, SweepPointState::Running);
}

TEST_P(SweepRecords, LinksARunAndResumesARequeuedPoint) {
  TempDir dir("sweep_run");
  RunStore store(new_store(dir));
  const int64_t id = create_sweep(store, "", "{}", "slurm", {"{}", "{}"});
  const std::optional<SweepPoint> first = take_point(store, id, 1);
  ASSERT_TRUE(first);
  const int64_t run = store.begin_run(config_named("p1"), info(), "");
  set_point_run(store, id, 1, run);
  set_point_state(store, id, 1, SweepPointState::Requeued);
  release_point(store, *first);  // its task ended
  // Taken again, the point hands back its run, to be resumed.
  const std::optional<SweepPoint> again = take_point(store, id, 1);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->run_id, run);
  EXPECT_EQ(again->state, SweepPointState::Requeued);
  set_point_state(store, id, 1, SweepPointState::Finished);
  EXPECT_FALSE(take_point(store, id, 1)) << "a finished point runs again";
  expect_contains(error_of([&] { take_point(store, id, 2); }), "has no point 2");
  // Point 0 is taken while the next one runs; deleting point 1's run leaves the point without one.
  RunEnd finished;
  finished.status = RunStatus::Finished;
  store.end_run(run, finished, {}, 1.0);
  store.remove(run);
  EXPECT_EQ(sweep_point(store, id, 1).run_id, 0);
  EXPECT_EQ(sweep_point(store, id, 1).state, SweepPointState::Finished);
}

// A failed point queued again (a retry) and written back as it was (its retry refused): its run, why it failed and its
// retries are what they were.
TEST_P(SweepRecords, AFailedPointRequeuedThenRestoredIsAsItWas) {
  TempDir dir("sweep_retry_undone");
  RunStore store(new_store(dir));
  const int64_t id = create_sweep(store, "", "{}", "slurm", {R"({"values":{"seed":"0"}})", "{}"});
  const int64_t run = store.begin_run(config_named("p0"), info(), "");
  set_point_run(store, id, 0, run);
  set_point_failed(store, id, 0, "its node ran out of memory");
  const SweepPoint before = sweep_point(store, id, 0);
  EXPECT_EQ(requeue_failed_points(store, id), std::vector<int>{0});
  EXPECT_EQ(sweep_point(store, id, 0).run_id, 0);
  restore_points(store, {before});
  const SweepPoint after = sweep_point(store, id, 0);
  EXPECT_EQ(after.run_id, run);
  EXPECT_EQ(after.state, SweepPointState::Failed);
  EXPECT_EQ(after.settings_json, before.settings_json);
  EXPECT_EQ(point_failure(after), "its node ran out of memory");
  EXPECT_EQ(point_retries(after), 0);
}

// A `sweep run` holds each point it took until its child process ended and the point's state is settled: no other
// process takes it meanwhile, or takes it for abandoned while the child starts or ends, and neither does the holder.
TEST_P(SweepRecords, APointTakenIsHeldUntilItsStateIsSettled) {
  TempDir dir("sweep_held");
  const std::string location = new_store(dir);
  RunStore first(location);
  const int64_t id = create_sweep(first, "", "{}", "local", {"{}", "{}"});
  const std::optional<SweepPoint> started = take_next_point(first, id);
  ASSERT_TRUE(started);
  const int64_t run = first.begin_run(config_named("p0"), info(), "");
  set_point_run(first, id, 0, run);
  RunEnd stopped;  // a Ctrl-C: the run cancelled, its point requeued
  stopped.status = RunStatus::Cancelled;
  first.end_run(run, stopped, {}, 1.0);
  set_point_state(first, id, 0, SweepPointState::Requeued);
  release_point(first, *started);

  const std::optional<SweepPoint> resumed = take_next_point(first, id);
  ASSERT_TRUE(resumed);
  EXPECT_EQ(resumed->index, 0);
  EXPECT_EQ(resumed->run_id, run);
  RunStore second(location, RunStore::Mode::Existing);
  EXPECT_TRUE(requeue_abandoned_points(second, id).empty()) << "a point whose child is starting was requeued";
  EXPECT_EQ(sweep_point(second, id, 0).state, SweepPointState::Running);
  // Its child stopped and said so before the holder saw it end: the point is not taken again until released.
  set_point_state(first, id, 0, SweepPointState::Requeued);
  const std::optional<SweepPoint> other = take_next_point(second, id);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->index, 1);
  EXPECT_FALSE(take_next_point(first, id)) << "the holder took its own point a second time";
  release_point(first, *resumed);
  const std::optional<SweepPoint> again = take_next_point(first, id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->index, 0);
  // Its child killed before it recorded anything, the holder gone: the point is abandoned now.
  release_point(first, *again);
  EXPECT_EQ(requeue_abandoned_points(second, id), std::vector<int>{0});
  EXPECT_EQ(sweep_point(second, id, 0).state, SweepPointState::Requeued);
}

// A `sweep run` killed alone while its point's child starts: the child's hold keeps the point; once the child is gone
// too, the point, its run never begun, is queued again. A `sweep point` by hand leaves a point another process holds.
TEST_P(SweepRecords, AChildKeepsItsPointHeldAndAPointWithoutARunIsQueuedAgain) {
  TempDir dir("sweep_child_hold");
  const std::string location = new_store(dir);
  auto parent = std::make_unique<RunStore>(location);
  const int64_t id = create_sweep(*parent, "", "{}", "local", {"{}", "{}"});
  ASSERT_TRUE(take_next_point(*parent, id));
  auto child = std::make_unique<RunStore>(location, RunStore::Mode::Existing);
  ASSERT_TRUE(take_point(*child, id, 0, ::getppid()));  // as this process's child, its parent alive
  RunStore other(location, RunStore::Mode::Existing);
  expect_contains(error_of([&] { take_point(other, id, 0); }), "is held by another process, which trains it");
  EXPECT_FALSE(take_point(other, id, 0, ::getppid() + 1)) << "a child joined the hold of a parent that ended";
  parent.reset();
  EXPECT_TRUE(requeue_abandoned_points(other, id).empty()) << "a point whose child lives was queued again";
  child.reset();
  // A server ends a closed session's locks a moment later.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (other.connection().point_held(id, 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(requeue_abandoned_points(other, id), std::vector<int>{0});
  EXPECT_EQ(sweep_point(other, id, 0).state, SweepPointState::Queued);
  EXPECT_EQ(sweep_point(other, id, 1).state, SweepPointState::Queued);
}

TEST_P(SweepRecords, ACancelledSweepStartsNothingMore) {
  TempDir dir("sweep_cancel");
  RunStore store(new_store(dir));
  const int64_t id = create_sweep(store, "", "{}", "local", {"{}", "{}", "{}"});
  ASSERT_TRUE(take_next_point(store, id));
  set_point_state(store, id, 0, SweepPointState::Finished);
  ASSERT_TRUE(take_next_point(store, id));  // point 1 runs
  EXPECT_EQ(cancel_sweep(store, id), 2);    // points 1 and 2
  EXPECT_TRUE(sweep(store, id).cancelled);
  EXPECT_FALSE(take_next_point(store, id));
  EXPECT_FALSE(take_point(store, id, 2));
  // The running point's own end does not undo its cancellation (its run stopped, or failed, as the cancel asked)...
  set_point_state(store, id, 1, SweepPointState::Failed);
  EXPECT_EQ(sweep_point(store, id, 1).state, SweepPointState::Cancelled);
  set_point_state(store, id, 1, SweepPointState::Requeued);
  EXPECT_EQ(sweep_point(store, id, 1).state, SweepPointState::Cancelled);
  EXPECT_EQ(sweep_point(store, id, 0).state, SweepPointState::Finished);
  // ... unless its run finished all the same (the cancel came at its last step): a finished run counts in its group.
  set_point_state(store, id, 1, SweepPointState::Finished);
  EXPECT_EQ(sweep_point(store, id, 1).state, SweepPointState::Finished);
}

}  // namespace
}  // namespace ampwb
