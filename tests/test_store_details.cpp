// The details that explain a run (train/run_details.h) in the run store, on real SQLite files: every field read back,
// forgotten with the steps and epochs a resumed run reports again, deleted with the run, and a damaged row refused
// by name.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "store/run_store.h"
#include "store/sqlite.h"
#include "store/store_recorder.h"
#include "test_store_util.h"

namespace ampwb {
namespace {
using namespace store_test;

// The tests that run against both kinds of store (test_store_util.h).
class StoreDetails : public StoreTest {};
INSTANTIATE_TEST_SUITE_P(Stores, StoreDetails, ::testing::ValuesIn(backends()), backend_name);

LayerNumerics layer(int epoch, int64_t step, const std::string& name) {
  LayerNumerics n;
  n.epoch = epoch;
  n.step = step;
  n.layer = name;
  n.kind = "conv";
  n.in_channels = 3;
  n.out_channels = 16;
  n.forward_dtype = "f16";
  n.backward_dtype = "f16";
  n.casts = 2;
  n.loss_scale = 65536;
  n.activation = {100, 70000.5, 0.0, 0.01, 0.25, 0.0};
  n.activation_grad = {100, 3.5, 0.125, 0.0, 0.5, 0.0};
  n.weight_grad = {432, 1e-3, 0.0625, 0.0, 0.0, 0.03125};
  return n;
}

OverflowReport overflow(int epoch, int64_t step) {
  return {epoch, step, 65536.0, {"fc", "layer4.1.conv2", "layer4.1.bn2"}};
}

EpochTimes times(int epoch) {
  EpochTimes t;
  t.epoch = epoch;
  t.steps = 10;
  t.step_seconds = 0.5;
  t.data_wait_seconds = 0.05;
  for (size_t i = 0; i < kTimeClassCount; ++i) t.op_seconds[i] = 0.001 * static_cast<double>(i + 1);
  return t;
}

PrecisionDivergence divergence(int epoch) {
  PrecisionDivergence d;
  d.epoch = epoch;
  d.step = 10 * epoch - 1;
  d.mode = "amp-bf16";
  d.format = "bf16";
  d.samples = 16;
  d.loss_scale = 1;
  d.unit_roundoff = 1.0 / 256;
  d.threshold = kDepartureUnits / 256;
  d.loss = {0.003, 0.69, 0};
  LayerDivergence conv1{"conv1", "conv", "bf16", {0.002, 40.5, 0}, {0.004, 1e-3, 0}, {0.01, 0.5, 0}};
  LayerDivergence fc{"fc", "linear", "bf16", {0.03, 7.0, 0}, {0.0, 0.0, 0}, {0.0, 0.2, 3}};
  d.layers = {conv1, fc};
  find_departures(d);
  return d;
}

TEST_P(StoreDetails, RecordsEveryFieldAndReadsItBack) {
  TempDir dir("details");
  RunStore store(new_store(dir));
  const int64_t id = store.begin_run(config_named("explained"), info(), "");
  store.add_layer_numerics(id, {layer(1, 9, "conv1"), layer(1, 9, "layer1.0.conv1")});
  store.add_overflow(id, overflow(1, 3));
  store.add_epoch_times(id, times(1));
  store.add_epoch_times(id, times(1));  // an epoch's breakdown is replaced, not repeated

  const std::vector<LayerNumerics> layers = store.layer_numerics(id);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(nlohmann::json(layers[1]), nlohmann::json(layer(1, 9, "layer1.0.conv1")));
  EXPECT_EQ(layers[0].layer, "conv1");  // model order kept within a step
  EXPECT_EQ(layers[1].activation.max_abs, 70000.5);
  EXPECT_EQ(layers[1].weight_grad.nonfinite_fraction, 0.03125);
  const std::vector<OverflowReport> overflows = store.overflows(id);
  ASSERT_EQ(overflows.size(), 1u);
  EXPECT_EQ(overflows[0].layers, (std::vector<std::string>{"fc", "layer4.1.conv2", "layer4.1.bn2"}));
  EXPECT_EQ(overflows[0].loss_scale, 65536.0);
  const std::vector<EpochTimes> epochs = store.epoch_times(id);
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0].op_seconds, times(1).op_seconds);
  EXPECT_DOUBLE_EQ(epochs[0].other_seconds(), 0.5 - 0.05 - epochs[0].op_total_seconds());
  store.add_confusion(id, {1, 2, {5, 1, 2, 4}});
  store.add_confusion(id, {1, 2, {6, 0, 2, 4}});  // replaced, not repeated
  ASSERT_EQ(store.confusion_matrices(id).size(), 1u);
  EXPECT_EQ(store.confusion_matrices(id)[0].counts, (std::vector<int64_t>{6, 0, 2, 4}));
  EXPECT_FALSE(store.divergence(id));
  store.add_divergence(id, divergence(1));
  store.add_divergence(id, divergence(1));  // replaced, not repeated
  ASSERT_TRUE(store.divergence(id));
  EXPECT_EQ(nlohmann::json(*store.divergence(id)), nlohmann::json(divergence(1)));
  EXPECT_EQ(store.divergence(id)->first_departing, "fc");
  EXPECT_EQ(store.divergence(id)->layers.at(1).weight_grad.nonfinite, 3);
  EXPECT_FALSE(store.divergence(id)->layers.at(1).activation_grad.measured());  // a zero reference
  // Keys by class name, as the JSON a user reads.
  EXPECT_EQ(nlohmann::json(epochs[0]).at("conv_backward_weights"), 0.003);
}

// A pause is in the run's information while it lasts, for every reader of the store; a run that ended is not paused,
// and what else the information holds stays.
TEST_P(StoreDetails, APauseIsRecordedWhileItLastsAndOnlyOnARunningRun) {
  TempDir dir("details-pause");
  const std::string path = new_store(dir);
  RunStore store(path);
  StoreRecorder recorder(store, config_named("paused"));
  recorder.on_start(info());
  const int64_t id = recorder.run_id();
  recorder.on_note("a note before the pause");
  recorder.on_paused();
  const RunRecord paused = RunStore(path, RunStore::Mode::ReadOnly).run(id);
  EXPECT_TRUE(paused.info.paused_since.starts_with("20")) << paused.info.paused_since;
  EXPECT_EQ(run_state_words(paused), "paused");
  EXPECT_EQ(paused.info.notes.back(), "a note before the pause");
  recorder.on_resumed(1.5);
  EXPECT_TRUE(store.run(id).info.paused_since.empty());
  EXPECT_EQ(run_state_words(store.run(id)), "running");
  recorder.on_end(RunEnd(RunStatus::Cancelled, "stopped by the user"));
  store.set_paused(id, true);  // ended: nothing to pause
  EXPECT_TRUE(store.run(id).info.paused_since.empty());
  EXPECT_EQ(run_state_words(store.run(id)), "stopped");
  EXPECT_EQ(recorder.error(), "");
  // Killed while paused, then resumed by another process: that one trains, and the old pause is over.
  {
    StoreRecorder killed(store, config_named("paused"), {}, id);
    killed.on_start(info());
    killed.on_paused();
    EXPECT_TRUE(is_paused(store.run(id)));
  }  // given up without an end, as a killed process's run is
  StoreRecorder again(store, config_named("paused"), {}, id);
  again.on_start(info());
  EXPECT_EQ(run_state_words(store.run(id)), "running");
  again.on_end(RunEnd(RunStatus::Finished, ""));
}

TEST_P(StoreDetails, AResumedRunForgetsWhatItReportsAgainAndDeletingForgetsAll) {
  TempDir dir("details-resume");
  const std::string path = new_store(dir);
  RunStore store(path);
  int64_t id = 0;
  {
    StoreRecorder first(store, config_named("resumable"));
    first.on_start(info());
    id = first.run_id();
    for (int64_t n = 0; n < 25; ++n) {  // epochs 1 and 2 complete, epoch 3 half done
      first.on_step(step(n));
      if (n == 4 || n == 21) first.on_overflow(overflow(static_cast<int>(n / 10) + 1, n));
      if (n % 10 == 9) {
        first.on_layer_numerics({layer(static_cast<int>(n / 10) + 1, n, "conv1")});
        first.on_epoch_times(times(static_cast<int>(n / 10) + 1));
        first.on_epoch(epoch(static_cast<int>(n / 10) + 1));
      }
    }
    first.on_divergence(divergence(2));  // as if measured after epoch 2
    first.on_end({RunStatus::Cancelled, "stopped"});
  }
  ASSERT_TRUE(store.divergence(id));
  ASSERT_EQ(store.overflows(id).size(), 2u);
  RunInfo resumed = info();
  resumed.first_epoch = 2;  // the checkpoint was taken after epoch 1
  resumed.first_step = 10;
  {
    StoreRecorder second(store, config_named("resumable"), {}, id);
    second.on_start(resumed);
    EXPECT_EQ(store.epoch_times(id).size(), 1u);
    EXPECT_FALSE(store.divergence(id)) << "epoch 2 is reported again";
    second.on_step(step(10));
    EXPECT_EQ(store.layer_numerics(id).size(), 1u);
    EXPECT_EQ(store.overflows(id).size(), 1u);  // step 21's is gone, step 4's kept
    EXPECT_EQ(store.overflows(id)[0].step, 4);
    second.on_divergence(divergence(3));
    second.on_end({RunStatus::Finished, ""});
  }
  EXPECT_EQ(store.divergence(id)->epoch, 3);
  store.remove(id);
  EXPECT_EQ(query_int(path, "SELECT COUNT(*) FROM run_details"), 0);
}

// A run stopped within an epoch resumes at the step its checkpoint took: what that epoch's earlier steps recorded
// stays, as their steps do.
TEST_P(StoreDetails, AResumeWithinAnEpochKeepsTheRecordsOfTheStepsBeforeItsCheckpoint) {
  TempDir dir("details-mid-epoch");
  RunStore store(new_store(dir));
  int64_t id = 0;
  {
    StoreRecorder first(store, config_named("stopped-within"));
    first.on_start(info());
    id = first.run_id();
    for (int64_t n = 0; n < 17; ++n) {  // epoch 1 complete, epoch 2 stopped after 7 of its steps
      first.on_step(step(n));
      first.on_layer_numerics({layer(static_cast<int>(n / 10) + 1, n, "conv1")});
      if (n == 12) first.on_overflow(overflow(2, n));
      if (n == 9) first.on_epoch(epoch(1));
    }
    first.on_end({RunStatus::Cancelled, "stopped"});
  }
  RunInfo resumed = info();
  resumed.first_epoch = 2;
  resumed.first_step = 17;
  StoreRecorder second(store, config_named("stopped-within"), {}, id);
  second.on_start(resumed);
  second.on_step(step(17));
  second.on_layer_numerics({layer(2, 17, "conv1")});
  second.on_end({RunStatus::Finished, ""});
  std::vector<int64_t> steps, expected;
  for (const LayerNumerics& n : store.layer_numerics(id)) steps.push_back(n.step);
  for (int64_t n = 0; n <= 17; ++n) expected.push_back(n);
  EXPECT_EQ(steps, expected) << "the layer numerics of epoch 2's steps before its checkpoint were forgotten";
  ASSERT_EQ(store.overflows(id).size(), 1u);
  EXPECT_EQ(store.overflows(id)[0].step, 12);
}

TEST(RunDetails, ADamagedRowIsRefusedByName) {
  TempDir dir("details-damaged");
  const std::string path = dir.file("runs.sqlite");
  RunStore store(path);
  const int64_t id = store.begin_run(config_named("damaged"), info(), "");
  store.add_overflow(id, overflow(1, 3));
  {
    SqliteDb db(path, SqliteDb::Open::ReadWrite);
    db.exec("UPDATE run_details SET body_json = '{\"step\": \"three\"}'");
  }
  expect_contains(error_of([&] { store.overflows(id); }), "step is not a whole number");
  {
    SqliteDb db(path, SqliteDb::Open::ReadWrite);
    db.exec("UPDATE run_details SET body_json = 'not json'");
  }
  expect_contains(error_of([&] { store.overflows(id); }), "damaged overflow record for run " + std::to_string(id));

  store.add_divergence(id, divergence(1));
  {
    SqliteDb db(path, SqliteDb::Open::ReadWrite);
    db.exec(
        "UPDATE run_details SET body_json = json_set(body_json, '$.layers[1].activation.relative_error', 'big') "
        "WHERE kind = 'divergence'");
  }
  expect_contains(error_of([&] { store.divergence(id); }), "layers[1].activation.relative_error is not a number");
  {
    SqliteDb db(path, SqliteDb::Open::ReadWrite);
    db.exec("UPDATE run_details SET body_json = '{\"layers\": 3}' WHERE kind = 'divergence'");
  }
  expect_contains(error_of([&] { store.divergence(id); }), "precision divergence's layers is not a list");
}

TEST(RunDetails, TheVersion4MigrationKeepsEveryDetailInOrder) {
  TempDir dir("details-migrate");
  const std::string path = dir.file("runs.sqlite");
  int64_t id = 0;
  {
    RunStore store(path);
    id = store.begin_run(config_named("kept"), info(), "");
    store.add_layer_numerics(id, {layer(1, 9, "conv1"), layer(1, 9, "layer1.0.conv1")});
    store.add_confusion(id, {1, 2, {5, 1, 2, 4}});
  }
  {
    // As a version-3 store leaves it: the same rows, without the tables of later versions, the migration to run.
    SqliteDb db(path, SqliteDb::Open::ReadWrite);
    db.exec("DROP TABLE sweep_points; DROP TABLE sweeps; PRAGMA user_version = 3");
  }
  RunStore store(path);
  EXPECT_EQ(store.found_schema_version(), 3);
  EXPECT_EQ(query_int(path, "PRAGMA user_version"), RunStore::kSchemaVersion);
  ASSERT_EQ(store.layer_numerics(id).size(), 2u);
  EXPECT_EQ(store.layer_numerics(id)[1].layer, "layer1.0.conv1");
  EXPECT_EQ(store.confusion_matrices(id).at(0).counts, (std::vector<int64_t>{5, 1, 2, 4}));
  store.add_divergence(id, divergence(1));  // the new kind passes the table's check
  EXPECT_TRUE(store.divergence(id));
  store.remove(id);
  EXPECT_EQ(query_int(path, "SELECT COUNT(*) FROM run_details"), 0);
  EXPECT_EQ(store.integrity_check(), "ok");
}

// An epoch's details wait for it and are committed with it (one transaction, and for PostgreSQL one round trip);
// a batch of steps that comes first takes them, and an epoch cut short keeps them with the run's end.
TEST_P(StoreDetails, AnEpochsDetailsAreCommittedWithItOrWithTheStepsOrTheEnd) {
  TempDir dir("epoch_details");
  const std::string path = new_store(dir);
  RunStore store(path);
  RunStore reader(path, RunStore::Mode::ReadOnly);  // another connection sees only what is committed
  StoreRecorderOptions options;
  options.batch_steps = 4;
  options.batch_seconds = 1e9;
  StoreRecorder recorder(store, config_named("details"), options);
  recorder.on_start(info());
  const int64_t id = recorder.run_id();
  for (int64_t n = 0; n < 2; ++n) recorder.on_step(step(n));
  recorder.on_layer_numerics({layer(1, 1, "conv1"), layer(1, 1, "fc")});
  recorder.on_histogram(histogram(1, "gradients", -20, {1, 2, 3}));
  recorder.on_confusion({1, 2, {5, 1, 2, 4}});
  recorder.on_epoch_times(times(1));
  EXPECT_TRUE(reader.layer_numerics(id).empty());
  EXPECT_TRUE(reader.histograms(id).empty());
  EXPECT_TRUE(reader.confusion_matrices(id).empty());
  EXPECT_TRUE(reader.epoch_times(id).empty());
  recorder.on_epoch(epoch(1));
  EXPECT_EQ(reader.steps(id).size(), 2u);
  EXPECT_EQ(reader.epochs(id).size(), 1u);
  ASSERT_EQ(reader.layer_numerics(id).size(), 2u);
  EXPECT_EQ(nlohmann::json(reader.layer_numerics(id)[1]), nlohmann::json(layer(1, 1, "fc")));
  ASSERT_EQ(reader.histograms(id).size(), 1u);
  EXPECT_EQ(reader.histograms(id)[0].counts, (std::vector<int64_t>{1, 2, 3}));
  ASSERT_EQ(reader.confusion_matrices(id).size(), 1u);
  EXPECT_EQ(reader.confusion_matrices(id)[0].counts, (std::vector<int64_t>{5, 1, 2, 4}));
  ASSERT_EQ(reader.epoch_times(id).size(), 1u);
  EXPECT_EQ(reader.epoch_times(id)[0].op_seconds, times(1).op_seconds);

  // Probed every step: the numerics go with the batch of steps after them.
  recorder.on_step(step(10));
  recorder.on_layer_numerics({layer(2, 10, "conv1")});
  for (int64_t n = 11; n < 14; ++n) recorder.on_step(step(n));  // the fourth pending step: a batch
  EXPECT_EQ(reader.steps(id).size(), 6u);
  EXPECT_EQ(reader.layer_numerics(id).size(), 3u);

  // Cut short before its end: what the epoch reported stays with the run's end.
  recorder.on_histogram(histogram(2, "gradients", -20, {4, 5}));
  recorder.on_epoch_times(times(2));
  recorder.on_end({RunStatus::Cancelled, "cancelled by the user"});
  EXPECT_TRUE(recorder.error().empty()) << recorder.error();
  EXPECT_EQ(reader.histograms(id).size(), 2u);
  EXPECT_EQ(reader.epoch_times(id).size(), 2u);
  EXPECT_EQ(reader.epochs(id).size(), 1u);
  EXPECT_EQ(reader.run(id).status, RunStatus::Cancelled);
}

// A write that fails inside an epoch's transaction (for PostgreSQL, sent with the commit) fails the whole epoch,
// naming the statement, and leaves nothing of it; the connection goes on recording.
TEST_P(StoreDetails, AFailedWriteInAnEpochLeavesNothingOfItAndTheStoreGoesOn) {
  TempDir dir("epoch_failure");
  const std::string path = new_store(dir);
  RunStore store(path);
  const int64_t id = store.begin_run(config_named("failing"), info(), "");
  RunStore::EpochDetails details;
  details.times.push_back(times(1));
  details.histograms.push_back(histogram(1, "gradients", -20, {1}));
  RunStore::EpochDetails broken = details;
  broken.histograms[0].loss_scale = std::nan("");  // stored as NULL, which the column refuses: after the steps went
  const std::string error = error_of([&] { store.add_epoch(id, epoch(1), {step(0), step(1)}, 1.0, false, broken); });
  expect_contains(error, "loss_scale");
  EXPECT_EQ(query_int(path, "SELECT COUNT(*) FROM steps"), 0);
  EXPECT_EQ(query_int(path, "SELECT COUNT(*) FROM run_details"), 0);
  EXPECT_EQ(query_int(path, "SELECT COUNT(*) FROM histograms"), 0);
  EXPECT_EQ(query_int(path, "SELECT COUNT(*) FROM epochs"), 0);
  store.add_epoch(id, epoch(1), {step(0), step(1)}, 1.0, false, details);
  EXPECT_EQ(store.steps(id).size(), 2u);
  EXPECT_EQ(store.epochs(id).size(), 1u);
  EXPECT_EQ(store.histograms(id).size(), 1u);
  EXPECT_EQ(store.epoch_times(id).size(), 1u);
}

}  // namespace
}  // namespace ampwb
