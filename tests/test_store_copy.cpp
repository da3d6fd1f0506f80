// Copying run stores (store/store_copy.h, `ampwb store copy` and a PostgreSQL store's `store backup`) on real
// SQLite files and a real PostgreSQL 15 (test_store_util.h): a round trip SQLite -> the other store -> SQLite keeps
// every record, a copy made again adds nothing, a run still recording stays behind, a destination that cannot take
// the runs is refused before anything is written, and a backup of a PostgreSQL store restores it. And recovering a
// damaged SQLite store (store/store_recover.h): whole, every record comes back; with pages scribbled over, every row
// on the others does, and what was lost is said.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "store/run_store.h"
#include "store/sqlite.h"
#include "store/store_copy.h"
#include "store/store_recover.h"
#include "store/sweep_record.h"
#include "test_store_util.h"

namespace ampwb {
namespace {
using namespace store_test;
using nlohmann::json;

std::vector<int64_t> record_runs(RunStore& store);  // a store's worth of runs, each kind of record: below

// The tests that run against both kinds of store: the parameter is the store the runs are copied into (and, for
// the recording test, out of).
class StoreCopy : public StoreTest {
 protected:
  // A source store of record_runs' runs, copied once into a new destination: where a repeat copy starts.
  struct CopiedOnce {
    std::string source, destination;
    std::vector<int64_t> ids;
  };
  CopiedOnce copied_once(const TempDir& dir) const {
    CopiedOnce c;
    c.source = dir.file("source.sqlite");
    {
      RunStore store(c.source);
      c.ids = record_runs(store);
    }
    c.destination = new_store(dir, "copy.sqlite");
    copy_store(c.source, c.destination);
    return c;
  }
};
INSTANTIATE_TEST_SUITE_P(Stores, StoreCopy, ::testing::ValuesIn(backends()), backend_name);

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

LayerNumerics layer(int epoch, int64_t step, const std::string& name) {
  LayerNumerics n;
  n.epoch = epoch;
  n.step = step;
  n.layer = name;
  n.kind = "conv";
  n.forward_dtype = "bf16";
  n.loss_scale = 1;
  n.activation = {100, 70000.5, 0.0, 0.01, 0.25, 0.0};
  return n;
}

// Three runs with every kind of record: a finished one (NaN losses, histograms, details, two checkpoints, a note), a
// failed one renamed, tagged and with notes, and one whose recording process died (marked interrupted when the
// store is next opened for writing). Returns their ids.
std::vector<int64_t> record_runs(RunStore& store) {
  TrainConfig first = config_named("first");
  const int64_t a = store.begin_run(first, info(), "fingerprint-a");
  std::vector<StepReport> steps;
  for (int64_t n = 0; n < 20; ++n) steps.push_back(step(n));
  steps[3].loss = static_cast<float>(kNaN);  // stored as NULL, read back as NaN
  steps[4].grad_norm = std::numeric_limits<float>::infinity();
  store.add_steps(a, {steps.begin(), steps.begin() + 10}, 1.0);
  store.add_epoch(a, epoch(1), {steps.begin() + 10, steps.end()}, 2.0);
  EpochReport second_epoch = epoch(2);
  second_epoch.validation_loss = kNaN;
  store.add_epoch(a, second_epoch, {}, 3.25);
  store.add_histogram(a, histogram(1, "weight", -20, {1, 2, 3}));
  store.add_histogram(a, histogram(1, "activation", -30, {4, 0, 5}));
  store.add_layer_numerics(a, {layer(1, 9, "conv1"), layer(1, 9, "layer1.0.conv1"), layer(1, 9, "fc")});
  store.add_overflow(a, {1, 3, 65536.0, {"fc", "layer3.2.conv2"}});
  EpochTimes times;
  times.epoch = 1;
  times.steps = 10;
  times.step_seconds = 0.5;
  store.add_epoch_times(a, times);
  store.add_confusion(a, {1, 2, {5, 1, 2, 4}});
  PrecisionDivergence divergence;
  divergence.epoch = 2;
  divergence.step = 19;
  divergence.mode = "amp-bf16";
  divergence.format = "bf16";
  divergence.unit_roundoff = 1.0 / 256;
  store.add_divergence(a, divergence);
  store.add_checkpoint(a, {1, 10, "/checkpoints/first-1.ampwb"});
  store.add_checkpoint(a, {2, 20, "/checkpoints/first-2.ampwb"});
  store.add_note(a, "the loss scale fell twice");
  store.end_run(a, {RunStatus::Finished, "", ""}, {}, 4.5);

  TrainConfig second = config_named("second");
  second.seed = 7;
  const int64_t b = store.begin_run(second, info(), "fingerprint-b");
  store.add_epoch(b, epoch(1), {step(0), step(1)}, 1.5);
  store.end_run(b, {RunStatus::Failed, "the loss became NaN", ""}, {step(2)}, 2.0);
  store.add_alternating_speed({{a, b}, {{100.5, 101.25}, {90.0, 91.0}}, 8, "synthetic 16 px images, batch 8", {}});
  store.rename(b, "second, renamed");
  store.add_tag(b, "baseline");
  store.add_tag(b, "bf16");
  store.set_notes(b, "two lines\nof notes");

  const int64_t c = store.begin_run(config_named("abandoned"), info(), "fingerprint-c");
  store.add_steps(c, {step(0), step(1)}, 0.5);
  store.abandon_run(c);  // the row stays running, with no process recording it
  return {a, b, c};
}

json histograms_json(const std::vector<GradientHistogram>& histograms) {
  json out = json::array();
  for (const GradientHistogram& h : histograms)
    out.push_back({h.epoch, h.kind, h.min_log2, h.max_log2, h.counts, h.zeros, h.nonfinite, h.total,
                   h.underflow_fraction, h.overflow_fraction, h.loss_scale});
  return out;
}

// Everything the store says about its runs, as the store's readers see it; ids only as positions in the list (each
// store gives its own). Compared as text: NaN is written as null.
std::string everything(const std::string& location) {
  RunStore store(location, RunStore::Mode::ReadOnly);
  const std::vector<RunRecord> runs = store.runs();
  std::map<int64_t, size_t> position;
  for (size_t i = 0; i < runs.size(); ++i) position[runs[i].id] = i;
  json out = json::array();
  for (const RunRecord& r : runs) {
    json j = r;
    j.erase("id");
    j.erase("run_id");
    j["config"] = r.config;
    j["info"] = r.info;
    j["unreadable"] = r.unreadable;
    j["epochs"] = store.epochs(r.id);
    j["steps"] = store.steps(r.id);
    j["histograms"] = histograms_json(store.histograms(r.id));
    j["layer_numerics"] = store.layer_numerics(r.id);
    j["overflows"] = store.overflows(r.id);
    j["epoch_times"] = store.epoch_times(r.id);
    j["confusion"] = store.confusion_matrices(r.id);
    const std::optional<PrecisionDivergence> divergence = store.divergence(r.id);
    j["divergence"] = divergence ? json(*divergence) : json();
    std::optional<AlternatingSpeed> speed = store.alternating_speed(r.id);
    if (speed)
      for (int64_t& run : speed->runs) run = static_cast<int64_t>(position.at(run));
    j["alternating_speed"] = speed ? json(*speed) : json();
    json checkpoints = json::array();
    for (const CheckpointInfo& c : store.checkpoints(r.id)) checkpoints.push_back({c.resume_epoch, c.step, c.path});
    j["checkpoints"] = checkpoints;
    out.push_back(j);
  }
  return out.dump(1);
}

// Every row of an SQLite store's tables as SQLite quotes its values, each store's own ids left out and a row's run
// named by its name: what a record-by-record comparison of two SQLite files needs.
std::string every_row(const std::string& file) {
  SqliteDb db(file, SqliteDb::Open::ReadOnly);
  const std::vector<std::pair<std::string, std::string>> tables = {{"runs", "id"},
                                                                   {"epochs", "run_id, epoch"},
                                                                   {"steps", "run_id, step"},
                                                                   {"histograms", "run_id, epoch, kind"},
                                                                   {"checkpoints", "run_id, id"},
                                                                   {"run_details", "run_id, rowid"}};
  std::string out;
  for (const auto& [table, order] : tables) {
    std::string values;
    SqliteStatement columns(db, "SELECT name FROM pragma_table_info('" + table + "') ORDER BY name");
    while (columns.step()) {
      const std::string c = columns.text(0);
      if (c == "id") continue;
      // The run information a copy writes its bookkeeping into (store_copy.cpp's kCopiedAnnotations) without it.
      const std::string value = c == "run_id" && table != "runs" ? "(SELECT name FROM runs WHERE runs.id = run_id)"
                                : c == "info_json"               ? "json_remove(info_json, '$.copied_annotations')"
                                                                 : c;
      values += (values.empty() ? "" : " || '|' || ") + std::string("quote(") + value + ")";
    }
    SqliteStatement rows(db, "SELECT " + values + " FROM " + table + " ORDER BY " + order);
    while (rows.step()) out += table + ": " + rows.text(0) + "\n";
  }
  return out;
}

int64_t count_rows(const std::string& location) {
  int64_t n = 0;
  for (const char* table : {"runs", "epochs", "steps", "histograms", "checkpoints", "run_details"})
    n += query_int(location, std::string("SELECT count(*) FROM ") + table);
  return n;
}

TEST_P(StoreCopy, RoundTripThroughTheOtherStoreKeepsEveryRecord) {
  TempDir dir("copy_round_trip");
  const std::string source = dir.file("source.sqlite");
  {
    RunStore store(source);
    record_runs(store);
  }
  EXPECT_EQ(RunStore(source).interrupted_on_open(), 1) << "the abandoned run is marked as any writer marks it";
  const std::string middle = new_store(dir, "middle.sqlite");
  const std::string back = dir.file("back.sqlite");

  const StoreCopyResult there = copy_store(source, middle);
  EXPECT_EQ(there.copied, 3);
  EXPECT_EQ(there.already_there, 0);
  EXPECT_TRUE(there.still_recording.empty());
  EXPECT_EQ(there.records, count_rows(source)) << "every row of every run, one each";
  const StoreCopyResult back_again = copy_store(middle, back);
  EXPECT_EQ(back_again.copied, 3);

  const std::string original = everything(source);
  EXPECT_NE(original.find("two lines\\nof notes"), std::string::npos) << original.substr(0, 2000);
  EXPECT_EQ(everything(middle), original);
  EXPECT_EQ(everything(back), original);
  EXPECT_EQ(every_row(back), every_row(source)) << "every column of every row, back in SQLite";
  EXPECT_EQ(count_rows(back), count_rows(source));
}

// Each store numbers its own runs: copied into a store that has runs of its own, each run says its id there, and
// says it again when a later copy finds it there.
TEST(StoreCopyIds, ARunNumberedOtherwiseThereSaysItsId) {
  TempDir dir("copy_ids");
  const std::string source = dir.file("source.sqlite"), numbered = dir.file("numbered.sqlite");
  {
    RunStore store(source);
    for (uint64_t seed : {1, 2}) {  // runs of one second are told apart by their settings
      TrainConfig c = config_named("seed " + std::to_string(seed));
      c.seed = seed;
      const int64_t id = store.begin_run(c, info(), "");
      store.end_run(id, {RunStatus::Finished, "", ""}, {step(0)}, 1.0);
    }
  }
  {
    RunStore store(numbered);
    TrainConfig c = config_named("of its own");
    c.seed = 3;
    const int64_t id = store.begin_run(c, info(), "");
    store.end_run(id, {RunStatus::Finished, "", ""}, {}, 1.0);
  }
  const StoreCopyResult copied = copy_store(source, numbered);
  ASSERT_EQ(copied.copied, 2);
  ASSERT_EQ(copied.renumbered.size(), 2u);
  for (const auto& [from, to] : copied.renumbered) {
    EXPECT_NE(from, to);
    EXPECT_EQ(RunStore(numbered, RunStore::Mode::ReadOnly).run(to).name,
              RunStore(source, RunStore::Mode::ReadOnly).run(from).name);
  }
  EXPECT_EQ(copy_store(source, numbered).renumbered, copied.renumbered) << "said again where found already";
  EXPECT_TRUE(copy_store(source, dir.file("new.sqlite")).renumbered.empty()) << "a new store keeps the ids";
}

TEST_P(StoreCopy, CopyingAgainAddsNothingAndTakesWhatChanged) {
  TempDir dir("copy_again");
  const std::string source = dir.file("source.sqlite");
  std::vector<int64_t> ids;
  {
    RunStore store(source);
    ids = record_runs(store);
    // A twin: the first run's configuration and dataset again, started in the same second or the next.
    TrainConfig twin_config = config_named("first");
    twin_config.name = "first, again";
    const int64_t twin = store.begin_run(twin_config, info(), "fingerprint-a");
    store.end_run(twin, {RunStatus::Cancelled, "stopped by the user", ""}, {step(0)}, 0.25);
  }
  EXPECT_EQ(RunStore(source).interrupted_on_open(), 1) << "the abandoned run, marked in the source itself";
  const std::string destination = new_store(dir, "copy.sqlite");
  EXPECT_EQ(copy_store(source, destination).copied, 4);
  const int64_t rows = count_rows(destination);

  const StoreCopyResult again = copy_store(source, destination);
  EXPECT_EQ(again.copied, 0);
  EXPECT_EQ(again.updated, 0);
  EXPECT_EQ(again.already_there, 4);
  EXPECT_TRUE(again.renumbered.empty()) << "a new store numbers the runs as the source did";
  EXPECT_EQ(again.records, 0);
  EXPECT_EQ(count_rows(destination), rows) << "a second copy adds nothing";
  EXPECT_EQ(everything(destination), everything(source));

  // Copied back the other way, every run is found there already.
  const StoreCopyResult reverse = copy_store(destination, source);
  EXPECT_EQ(reverse.copied, 0);
  EXPECT_EQ(reverse.already_there, 4);

  // A run that went on in the source (resumed: more steps, a later update) replaces the copy's older state; a
  // rename since the copy does not make it another run.
  {
    RunStore store(source);
    store.add_steps(ids[0], {step(20), step(21)}, 5.0);
    store.rename(ids[0], "first, resumed");
  }
  execute(source, "UPDATE runs SET updated = '2099-01-01T00:00:00Z' WHERE id = " + std::to_string(ids[0]));
  const StoreCopyResult resumed = copy_store(source, destination);
  EXPECT_EQ(resumed.copied, 0);
  EXPECT_EQ(resumed.updated, 1);
  EXPECT_EQ(resumed.already_there, 3);
  EXPECT_EQ(count_rows(destination), rows + 2) << "the run's two new steps, nothing twice";
  EXPECT_EQ(everything(destination), everything(source));
}

// Notes and tags written in the destination since the last copy survive the run's newer state copied over them; the
// name is the source's, and the one it replaces is said.
TEST_P(StoreCopy, ARunReplacedByItsNewerStateKeepsTheDestinationsNotesAndTags) {
  TempDir dir("copy_annotations");
  const auto [source, destination, ids] = copied_once(dir);
  {
    RunStore there(destination);
    there.set_notes(ids[0], "diverged at epoch 3: see the loss scale");
    there.add_tag(ids[0], "important");
    there.rename(ids[0], "renamed-there");
    RunStore here(source);
    here.set_notes(ids[0], "resumed on the big node");
    here.add_tag(ids[0], "resumed");
    here.add_steps(ids[0], {step(20), step(21)}, 5.0);
  }
  execute(source, "UPDATE runs SET updated = '2099-01-01T00:00:00Z' WHERE id = " + std::to_string(ids[0]));
  const StoreCopyResult r = copy_store(source, destination);
  EXPECT_EQ(r.updated, 1);
  EXPECT_EQ(r.annotations_kept, 1);
  ASSERT_EQ(r.names_replaced.size(), 1u);
  EXPECT_EQ(r.names_replaced[0].was, "renamed-there");
  EXPECT_EQ(r.names_replaced[0].now, RunStore(source).run(ids[0]).name);
  const RunRecord copied = RunStore(destination).run(ids[0]);
  EXPECT_EQ(copied.notes, "diverged at epoch 3: see the loss scale\n\nresumed on the big node");
  EXPECT_EQ(copied.tags, (std::vector<std::string>{"important", "resumed"}));
  EXPECT_EQ(copied.name, RunStore(source).run(ids[0]).name);
  EXPECT_EQ(RunStore(destination).steps(ids[0]).size(), RunStore(source).steps(ids[0]).size());
}

// Renamed, tagged and noted in the source after it was copied, a run is otherwise as it was (an edit leaves its time
// alone): copying again brings the edits, keeping the destination's own, and copies none of its records again.
TEST_P(StoreCopy, ARunEditedSinceItWasCopiedHasItsEditsBrought) {
  TempDir dir("copy_edits");
  const auto [source, destination, ids] = copied_once(dir);
  {
    RunStore here(source);
    here.rename(ids[0], "renamed-here");
    here.add_tag(ids[0], "Baseline");
    here.set_notes(ids[0], "the one to beat");
    RunStore there(destination);
    there.add_tag(ids[0], "baseline");  // the same tag, in another case
    there.add_tag(ids[0], "kept-there");
  }
  const StoreCopyResult r = copy_store(source, destination);
  EXPECT_EQ(r.updated, 0);
  EXPECT_EQ(r.records, 0) << "no record copied again";
  EXPECT_EQ(r.annotations_brought, 1);
  ASSERT_EQ(r.names_replaced.size(), 1u);
  EXPECT_EQ(r.names_replaced[0].now, "renamed-here");
  const RunRecord copied = RunStore(destination).run(ids[0]);
  EXPECT_EQ(copied.name, "renamed-here");
  EXPECT_EQ(copied.notes, "the one to beat");
  EXPECT_EQ(copied.tags, (std::vector<std::string>{"baseline", "kept-there"}));
  const StoreCopyResult again = copy_store(source, destination);
  EXPECT_EQ(again.annotations_brought, 0) << "brought once";
  EXPECT_TRUE(again.names_replaced.empty());
  // Edits made in the destination since, the source's unchanged: a copy leaves them as they are.
  {
    RunStore there(destination);
    there.rename(ids[0], "renamed-there");
    there.remove_tag(ids[0], "kept-there");
    there.set_notes(ids[0], "");
  }
  const StoreCopyResult third = copy_store(source, destination);
  EXPECT_EQ(third.annotations_brought, 0);
  EXPECT_TRUE(third.names_replaced.empty());
  const RunRecord kept = RunStore(destination).run(ids[0]);
  EXPECT_EQ(kept.name, "renamed-there");
  EXPECT_EQ(kept.tags, (std::vector<std::string>{"baseline"}));
  EXPECT_EQ(kept.notes, "");
}

TEST_P(StoreCopy, ARunStillRecordingStaysBehindAndADeadOneIsCopiedAsInterrupted) {
  TempDir dir("copy_recording");
  const std::string source = new_store(dir, "source.sqlite");
  const std::string destination = dir.file("copy.sqlite");
  RunStore store(source);
  const int64_t live = store.begin_run(config_named("live"), info(), "");
  store.add_steps(live, {step(0), step(1)}, 0.5);
  TrainConfig other = config_named("dead");
  other.seed = 3;
  const int64_t dead = store.begin_run(other, info(), "");
  store.abandon_run(dead);  // its process gone: no one holds the run

  const StoreCopyResult first = copy_store(source, destination);
  ASSERT_EQ(first.still_recording.size(), 1u);
  EXPECT_EQ(first.still_recording[0].id, live);
  EXPECT_EQ(first.still_recording[0].name, "live");
  EXPECT_EQ(first.copied, 1);
  EXPECT_EQ(first.interrupted, 1);
  RunStore copy(destination, RunStore::Mode::ReadOnly);
  ASSERT_EQ(copy.runs().size(), 1u);
  const RunRecord copied = copy.runs()[0];
  EXPECT_EQ(copied.name, "dead");
  EXPECT_EQ(copied.status, RunStatus::Interrupted);
  EXPECT_FALSE(copied.ended.empty()) << "marked, with an end time, as recovery marks it";
  expect_contains(copied.end_reason, "ended without reporting an end");

  store.end_run(live, {RunStatus::Finished, "", ""}, {step(2)}, 1.0);
  const StoreCopyResult second = copy_store(source, destination);
  EXPECT_EQ(second.copied, 1);
  EXPECT_TRUE(second.still_recording.empty());
  const int64_t live_there = RunStore(destination, RunStore::Mode::ReadOnly).resolve("live");
  EXPECT_EQ(RunStore(destination, RunStore::Mode::ReadOnly).steps(live_there).size(), 3u);
}

TEST_P(StoreCopy, ACopiedRunWhoseNameIsTakenThereGetsASuffix) {
  TempDir dir("copy_names");
  const std::string source = dir.file("source.sqlite");
  const std::string destination = new_store(dir, "copy.sqlite");
  {
    RunStore store(source);
    store.end_run(store.begin_run(config_named("baseline"), info(), ""), {RunStatus::Finished, "", ""}, {}, 1.0);
  }
  {
    RunStore store(destination);
    TrainConfig other = config_named("baseline");
    other.seed = 11;  // another run, of the same name
    store.end_run(store.begin_run(other, info(), ""), {RunStatus::Finished, "", ""}, {}, 1.0);
  }
  const StoreCopyResult copied = copy_store(source, destination);
  EXPECT_EQ(copied.copied, 1);
  RunStore there(destination, RunStore::Mode::ReadOnly);
  ASSERT_EQ(copied.renamed.size(), 1u);  // which run, and what it was and is named
  EXPECT_EQ(copied.renamed[0].run, there.resolve("baseline-2"));
  EXPECT_EQ(copied.renamed[0].was, "baseline");
  EXPECT_EQ(copied.renamed[0].now, "baseline-2");
  EXPECT_EQ(there.run(there.resolve("baseline")).seed, 11u);
  EXPECT_EQ(there.run(there.resolve("baseline-2")).seed, config_named("baseline").seed);
  EXPECT_EQ(copy_store(source, destination).already_there, 1) << "found again by what it is, not by its name";
}

TEST_P(StoreCopy, CopiesSweepsWithTheirPointsRunsByTheDestinationsIds) {
  TempDir dir("copy_sweeps");
  const std::string source = dir.file("source.sqlite");
  const std::string destination = new_store(dir, "copy.sqlite");
  int64_t sweep = 0;
  {
    RunStore store(source);
    const std::vector<int64_t> runs = record_runs(store);
    sweep = create_sweep(store, "seeds", R"({"grid": {"seed": [0, 7, 9]}})", "slurm", {"{}", "{}", "{}"});
    add_sweep_slurm_job(store, sweep, "4242");
    set_point_run(store, sweep, 0, runs[1]);
    set_point_state(store, sweep, 0, SweepPointState::Failed);
    set_point_run(store, sweep, 1, runs[0]);
    set_point_state(store, sweep, 1, SweepPointState::Finished);
  }
  {
    RunStore other(destination);  // a run of the destination's own first: the ids of the two stores differ
    other.end_run(other.begin_run(config_named("its own"), info(), ""), {RunStatus::Finished, "", ""}, {}, 1.0);
  }
  const StoreCopyResult copied = copy_store(source, destination);
  EXPECT_EQ(copied.sweeps, 1);
  RunStore there(destination, RunStore::Mode::ReadOnly);
  ASSERT_EQ(sweeps(there).size(), 1u);
  const SweepRecord s = sweeps(there)[0];
  EXPECT_EQ(s.name, "seeds");
  EXPECT_EQ(s.runs_on, "slurm");
  EXPECT_EQ(s.slurm_job_id, "4242");
  const std::vector<SweepPoint> points = sweep_points(there, s.id);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(there.run(points[0].run_id).name, "second, renamed");
  EXPECT_EQ(points[0].state, SweepPointState::Failed);
  EXPECT_EQ(there.run(points[1].run_id).name, "first");
  EXPECT_EQ(points[2].run_id, 0);
  ASSERT_TRUE(there.alternating_speed(points[1].run_id));
  EXPECT_EQ(there.alternating_speed(points[1].run_id)->runs, (std::vector<int64_t>{points[1].run_id, points[0].run_id}))
      << "the timing names its runs by the destination's ids";
  EXPECT_EQ(points[2].state, SweepPointState::Queued);

  EXPECT_EQ(copy_store(source, destination).sweeps, 0) << "nothing changed: nothing written";
  {
    RunStore store(source);
    cancel_sweep(store, sweep);
  }
  EXPECT_EQ(copy_store(source, destination).sweeps, 1);
  EXPECT_TRUE(sweeps(there)[0].cancelled);
  EXPECT_EQ(sweep_points(there, s.id)[2].state, SweepPointState::Cancelled);
  EXPECT_EQ(sweeps(there).size(), 1u) << "the same sweep, brought up to date";
}

TEST_P(StoreCopy, RefusesADestinationThatCannotTakeTheRunsBeforeWriting) {
  TempDir dir("copy_refused");
  const std::string source = dir.file("source.sqlite");
  {
    RunStore store(source);
    record_runs(store);
  }
  const std::string before = read_bytes(source);
  const auto refused = [&](const std::string& destination, const std::string& why) {
    const std::string message = error_of([&] { copy_store(source, destination); });
    expect_contains(message, why);
    EXPECT_EQ(message.find("--"), std::string::npos) << "a flag in the engine's words: " << message;
  };

  // Newer than this build.
  const std::string newer = new_store(dir, "newer.sqlite");
  { RunStore made(newer); }
  if (sqlite())
    execute(newer, "PRAGMA user_version = " + std::to_string(RunStore::kSchemaVersion + 1));
  else
    execute(newer, "UPDATE ampwb_meta SET value = '" + std::to_string(RunStore::kSchemaVersion + 1) +
                       "' WHERE key = 'schema_version'");
  refused(newer, "newer than this ampwb");
  EXPECT_EQ(query_int(newer, "SELECT count(*) FROM runs"), 0);

  // Not a run store: another program's database, and (SQLite) a file that is no database at all.
  const std::string foreign = new_store(dir, "foreign.sqlite");
  if (sqlite())
    SqliteDb(foreign, SqliteDb::Open::ReadWriteCreate).exec("CREATE TABLE orders(id INTEGER)");
  else
    execute(foreign, "CREATE TABLE orders(id BIGINT)");
  refused(foreign, "is not an ampwb run store");
  EXPECT_EQ(query_int(foreign, "SELECT count(*) FROM orders"), 0);
  if (sqlite()) {
    const std::string text = dir.file("notes.txt");
    std::ofstream(text) << "not a database, but long enough to be read as one would be read\n";
    refused(text, "not an SQLite database");
    EXPECT_EQ(read_bytes(text), "not a database, but long enough to be read as one would be read\n");
  }
  // The source itself.
  refused(source, "cannot be copied into itself");
  EXPECT_EQ(read_bytes(source), before) << "the source is only read";
  if (!sqlite()) {  // one PostgreSQL database named two ways: the server says it is one
    const std::string server = new_store(dir);
    {
      RunStore store(server);
      record_runs(store);
    }
    const std::string expected = everything(server);
    expect_contains(error_of([&] { copy_store(server, server + "&application_name=another"); }),
                    "cannot be copied into itself");
    EXPECT_TRUE(everything(server) == expected) << "the copy into itself changed the store";
  }
}

#ifdef AMPWB_TEST_POSTGRES
// `ampwb store copy|backup|check` on the real binary, with its output as a user reads it.
struct Command {
  int status = -1;
  std::string output;
};

Command ampwb(const std::string& arguments) {
  Command c;
  FILE* pipe = ::popen((std::string(AMPWB_BINARY) + " " + arguments + " 2>&1").c_str(), "r");
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) c.output.append(buffer, n);
  const int status = ::pclose(pipe);
  c.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return c;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

TEST(StoreCopyCli, CopiesIntoPostgresAndABackupOfItRestoresIt) {
  TempDir dir("copy_cli");
  const std::string source = dir.file("source.sqlite");
  {
    RunStore store(source);
    record_runs(store);
  }
  const std::string uri = postgres_server().uri();
  PostgresConnection(uri, false).exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public");

  const Command copied = ampwb("store copy " + quoted(source) + " " + quoted(uri));
  EXPECT_EQ(copied.status, 0) << copied.output;
  expect_contains(copied.output, "copied 3 runs (");
  expect_contains(copied.output, "; 0 already there; 1 run whose recording process was gone copied as interrupted");
  const Command again = ampwb("store copy " + quoted(source) + " " + quoted(uri));
  EXPECT_EQ(again.status, 0) << again.output;
  expect_contains(again.output, "copied 0 runs (0 records written); 3 already there");

  const Command check = ampwb("store check --db " + quoted(uri));
  EXPECT_EQ(check.status, 0) << check.output;
  expect_contains(check.output, "is whole (PostgreSQL, schema version " + std::to_string(RunStore::kSchemaVersion));

  const std::string backup = dir.file("backup.sqlite");
  const Command backed_up = ampwb("store backup " + quoted(backup) + " --db " + quoted(uri));
  EXPECT_EQ(backed_up.status, 0) << backed_up.output;
  expect_contains(backed_up.output, "(3 runs, ");
  expect_contains(backed_up.output, "an SQLite run store (restore it with ampwb store copy");
  const Command overwrite = ampwb("store backup " + quoted(backup) + " --db " + quoted(uri));
  EXPECT_EQ(overwrite.status, 1) << overwrite.output;
  expect_contains(overwrite.output, "a backup never overwrites a file");
  EXPECT_EQ(everything(backup), everything(uri)) << "the backup is a run store of its own, read as it is";

  // Restored into an empty database: the store as it was.
  const std::string expected = everything(uri);
  PostgresConnection(uri, false).exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public");
  const Command restored = ampwb("store copy " + quoted(backup) + " " + quoted(uri));
  EXPECT_EQ(restored.status, 0) << restored.output;
  EXPECT_EQ(everything(uri), expected);

  // A run left running by a process that is gone: check names it.
  execute(uri, "UPDATE runs SET status = 'running', ended = NULL WHERE name = 'first'");
  const Command abandoned = ampwb("store check --db " + quoted(uri));
  EXPECT_EQ(abandoned.status, 0) << abandoned.output;
  expect_contains(abandoned.output, "1 run marked running whose recording process is gone");
  expect_contains(abandoned.output, "(first), last recorded ");
  // Rows no run owns: damage, with what to do.
  execute(uri,
          "ALTER TABLE steps DROP CONSTRAINT steps_run_id_fkey; INSERT INTO steps(run_id, step, epoch) "
          "VALUES (999, 0, 1)");
  const Command orphans = ampwb("store check --db " + quoted(uri));
  EXPECT_EQ(orphans.status, 1) << orphans.output;
  expect_contains(orphans.output, "1 rows of steps belong to no run");
  expect_contains(orphans.output, "leaves the rows without a run behind");
}
#endif

// Every row of every table of an SQLite store.
int64_t all_rows(const std::string& file) {
  SqliteDb db(file, SqliteDb::Open::ReadOnly);
  SqliteStatement tables(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'sqlite_sequence'");
  int64_t n = 0;
  while (tables.step()) n += query_int(file, "SELECT count(*) FROM \"" + tables.text(0) + "\"");
  return n;
}

// A recovered store's runs get weights files of their own: the damaged store, kept beside it until the user is sure,
// and the recovered one each delete only their own.
TEST(StoreRecover, ARecoveredRunHasFinalWeightsOfItsOwn) {
  TempDir dir("recover_weights");
  const std::string source = dir.file("source.sqlite"), recovered = dir.file("recovered.sqlite");
  const std::string weights =
      dir.file("weights/source.sqlite-run-1.weights");  // named after its store, as it names them
  int64_t run = 0;
  {
    RunStore store(source);
    record_runs(store);
    run = store.runs().front().id;
    fs::create_directories(dir.file("weights"));
    std::ofstream(weights) << "the bytes of trained weights";
    store.set_final_weights(run, weights);
  }
  const StoreRecoverResult r = recover_store(source, recovered);
  EXPECT_TRUE(r.weights_shared.empty());
  const std::string own = RunStore(recovered, RunStore::Mode::ReadOnly).run(run).info.final_weights;
  EXPECT_NE(own, weights);
  EXPECT_EQ(fs::path(own).parent_path(), fs::path(dir.file("weights")));
  std::ifstream kept(own);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "the bytes of trained weights");
  RunStore(source).remove(run);
  EXPECT_FALSE(fs::exists(weights));
  EXPECT_TRUE(fs::exists(own));
}

TEST(StoreRecover, AWholeStoreComesBackRecordForRecordUnderItsOwnIds) {
  TempDir dir("recover_whole");
  const std::string source = dir.file("source.sqlite"), recovered = dir.file("recovered.sqlite");
  {
    RunStore store(source);
    record_runs(store);
    create_sweep(store, "lr", R"({"grid": {"lr": [0.1, 0.2]}})", "local", {"{}", "{}"});
  }
  const StoreRecoverResult r = recover_store(source, recovered);
  EXPECT_TRUE(r.lost.empty());
  EXPECT_TRUE(r.garbled.empty());
  EXPECT_TRUE(r.orphans.empty());
  EXPECT_EQ(r.runs, 3);
  EXPECT_EQ(r.rows, all_rows(recovered));
  // Opening the recovered store marked the abandoned run interrupted: the source, opened, does the same.
  EXPECT_EQ(RunStore(source).interrupted_on_open(), 1);
  EXPECT_EQ(everything(recovered), everything(source));
  EXPECT_EQ(every_row(recovered), every_row(source));
  for (const char* ids : {"SELECT group_concat(id) FROM runs", "SELECT group_concat(rowid) FROM run_details",
                          "SELECT seq FROM sqlite_sequence WHERE name = 'runs'", "SELECT count(*) FROM sweep_points",
                          "PRAGMA user_version"})
    EXPECT_EQ(query_text(recovered, ids), query_text(source, ids)) << ids;
  EXPECT_EQ(query_text(recovered, "PRAGMA integrity_check"), "ok");

  expect_contains(error_of([&] { recover_store(source, recovered); }), "'" + recovered + "' exists: name a new file");
  expect_contains(error_of([&] { recover_store(source, dir.file("no/such/folder.sqlite")); }),
                  "cannot write '" + dir.file("no/such/folder.sqlite") + "': the folder " + dir.file("no/such") +
                      " does not exist");
  std::ofstream(dir.file("notes.sqlite")) << "not a database\n";
  expect_contains(error_of([&] { recover_store(dir.file("notes.sqlite"), dir.file("x.sqlite")); }),
                  "'" + dir.file("notes.sqlite") + "' is not a run store (not an SQLite database)");
  execute(source, "PRAGMA user_version = 99");
  expect_contains(error_of([&] { recover_store(source, dir.file("x.sqlite")); }),
                  "was made by a newer ampwb (schema version 99");
  EXPECT_FALSE(fs::exists(dir.file("x.sqlite")));
  for (const auto& entry : fs::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().string().find(".recovering"), std::string::npos) << entry.path() << " left behind";
}

// The pages of one table's b-tree that hold its rows, in key order (SQLite's dbstat: a path sorts as the tree does),
// each with the number of rows on it.
std::vector<std::pair<int64_t, int64_t>> leaf_pages(const std::string& file, const std::string& table) {
  SqliteDb db(file, SqliteDb::Open::ReadOnly);
  SqliteStatement q(db, "SELECT pageno, ncell FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY path");
  q.bind(1, table);
  std::vector<std::pair<int64_t, int64_t>> pages;
  while (q.step()) pages.emplace_back(q.int64(0), q.int64(1));
  return pages;
}

// The rows before leaf `index`, in key order: they say whose rows are on it. A table without a rowid (steps) keeps
// rows in the pages above the leaves too, one between each two leaves.
int64_t rows_before(const std::vector<std::pair<int64_t, int64_t>>& leaves, size_t index, bool without_rowid = false) {
  int64_t before = without_rowid ? static_cast<int64_t>(index) : 0;
  for (size_t i = 0; i < index; ++i) before += leaves[i].second;
  return before;
}

// Makes a page unreadable as a whole: its header no longer says what kind of page it is.
void scribble_over_page(const std::string& file, int64_t page) {
  const int64_t page_size = query_int(file, "PRAGMA page_size");
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp((page - 1) * page_size);
  f.write(std::string(12, '\xff').data(), 12);
}

// `runs` finished runs of `steps` steps and two epochs each; returns each run's steps as stored.
std::vector<std::vector<StepReport>> record_finished_runs(const std::string& file, int runs, int steps) {
  std::vector<std::vector<StepReport>> stored;
  RunStore store(file);
  for (int run = 1; run <= runs; ++run) {
    const int64_t id = store.begin_run(config_named("run" + std::to_string(run)), info(), "fingerprint");
    std::vector<StepReport> made;
    for (int64_t n = 0; n < steps; ++n) made.push_back(step(n, steps / 2));
    store.add_epoch(id, epoch(1), {made.begin(), made.begin() + steps / 2}, 1.0);
    store.add_epoch(id, epoch(2), {made.begin() + steps / 2, made.end()}, 2.0);
    store.add_checkpoint(id, {2, steps, "/checkpoints/run" + std::to_string(run) + ".ampwb"});
    store.end_run(id, {RunStatus::Finished, "", ""}, {}, 3.0);
    stored.push_back(store.steps(id));
  }
  return stored;
}

// Checks one run's steps after a recovery, `damaged` the stretches [first, end) of `all` that were on damaged pages:
// those are gone, and every other step is as stored, but for the row that parts a damaged page from the next. That
// one sits in the page above, and a seek reaches it through the damaged page unless it lands on it exactly: it may go.
void expect_steps_left(const std::vector<StepReport>& all, const std::vector<StepReport>& left,
                       const std::vector<std::pair<int64_t, int64_t>>& damaged) {
  std::map<int64_t, const StepReport*> kept;
  for (const StepReport& s : left) kept[s.step] = &s;
  size_t matched = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto at = static_cast<int64_t>(i);
    const bool on_damaged =
        std::any_of(damaged.begin(), damaged.end(), [at](auto d) { return at >= d.first && at < d.second; });
    const bool parting = std::any_of(damaged.begin(), damaged.end(), [at](auto d) { return at == d.second; });
    const auto found = kept.find(all[i].step);
    if (on_damaged) {
      EXPECT_TRUE(found == kept.end()) << "step " << all[i].step << " was on a damaged page";
    } else if (found == kept.end()) {
      EXPECT_TRUE(parting) << "step " << all[i].step << " was readable, and is lost";
    } else {
      ++matched;
      EXPECT_EQ(json(*found->second), json(all[i])) << "step " << all[i].step;
    }
  }
  EXPECT_EQ(matched, left.size()) << "no step that was not stored";
}

TEST(StoreRecover, ADamagedStoreGivesUpOnlyTheRowsOnItsDamagedPages) {
  TempDir dir("recover_damaged");
  const std::string source = dir.file("runs.sqlite"), recovered = dir.file("recovered.sqlite");
  constexpr int kRuns = 40, kSteps = 300;
  const std::vector<std::vector<StepReport>> stored = record_finished_runs(source, kRuns, kSteps);
  // A page of runs near the end, and a page of steps inside run 2's.
  const auto runs_pages = leaf_pages(source, "runs"), steps_pages = leaf_pages(source, "steps");
  ASSERT_GE(runs_pages.size(), 4u);
  ASSERT_GE(steps_pages.size(), size_t{3 * kRuns});
  const size_t runs_page = runs_pages.size() - 2;
  const int64_t first_lost_run = rows_before(runs_pages, runs_page) + 1;
  const int64_t last_lost_run = first_lost_run + runs_pages[runs_page].second - 1;
  size_t steps_page = 0;
  while (rows_before(steps_pages, steps_page, true) < kSteps + 20) ++steps_page;
  const int64_t steps_at = rows_before(steps_pages, steps_page, true) - kSteps;  // in run 2's
  ASSERT_LE(rows_before(steps_pages, steps_page + 1, true), 2 * kSteps - 40) << "the page holds run 2's steps only";
  {  // a sweep whose first point's run is on the damaged page
    RunStore store(source);
    const int64_t sweep = create_sweep(store, "lr", R"({"grid": {"lr": [0.1, 0.2]}})", "local", {"{}", "{}"});
    set_point_run(store, sweep, 0, first_lost_run);
    set_point_run(store, sweep, 1, 1);
  }
  scribble_over_page(source, runs_pages[runs_page].first);
  scribble_over_page(source, steps_pages[steps_page].first);
  const std::string damaged_bytes = read_bytes(source);

  const StoreRecoverResult r = recover_store(source, recovered);
  EXPECT_EQ(read_bytes(source), damaged_bytes) << "the damaged store is only read";
  EXPECT_EQ(query_text(recovered, "PRAGMA integrity_check"), "ok");
  ASSERT_EQ(r.lost.size(), 2u);
  EXPECT_EQ(r.lost[0].table, "runs");
  EXPECT_EQ(r.lost[0].words,
            "runs between run " + std::to_string(first_lost_run - 1) + " and run " + std::to_string(last_lost_run + 1));
  EXPECT_EQ(r.lost[1].table, "steps");
  EXPECT_EQ(r.lost[1].words, "rows of run 2");
  EXPECT_EQ(r.incomplete_runs, std::set<int64_t>{2});
  const int64_t lost_runs = last_lost_run - first_lost_run + 1;
  EXPECT_EQ(r.orphans.at("steps"), kSteps * lost_runs) << "the lost runs' steps";
  EXPECT_EQ(r.orphans.at("epochs"), 2 * lost_runs);
  EXPECT_EQ(r.orphans.at("checkpoints"), lost_runs);
  EXPECT_EQ(r.runs, kRuns - lost_runs);
  EXPECT_EQ(r.rows, all_rows(recovered)) << "the orphans left out are not counted";

  RunStore store(recovered, RunStore::Mode::ReadOnly);
  std::vector<int64_t> ids, expected_ids;
  for (const RunRecord& run : store.runs()) ids.push_back(run.id);
  for (int64_t id = 1; id <= kRuns; ++id)
    if (id < first_lost_run || id > last_lost_run) expected_ids.push_back(id);
  EXPECT_EQ(ids, expected_ids) << "runs keep their ids";
  for (const int64_t id : expected_ids) {
    if (id == 2) continue;
    EXPECT_EQ(json(store.steps(id)), json(stored[static_cast<size_t>(id - 1)])) << "run " << id;
    EXPECT_EQ(store.epochs(id).size(), 2u);
    EXPECT_EQ(store.checkpoints(id).back().path, "/checkpoints/run" + std::to_string(id) + ".ampwb");
    EXPECT_TRUE(store.run(id).info.notes.empty());
  }
  expect_steps_left(stored[1], store.steps(2), {{steps_at, steps_at + steps_pages[steps_page].second}});
  expect_contains(store.run(2).info.notes.back(), "some of its records could not be read");
  // The point whose run was lost says which run it was, not that its run was deleted.
  EXPECT_EQ(r.unlinked.at("sweep_points"), 1);
  const std::vector<SweepPoint> points = sweep_points(store, 1);
  EXPECT_EQ(points[0].run_id, 0);
  EXPECT_EQ(lost_run(points[0].settings_json), first_lost_run);
  EXPECT_EQ(points[1].run_id, 1);
  EXPECT_EQ(lost_run(points[1].settings_json), 0);
}

// A file cut short keeps a header that counts its missing pages, and SQLite then reads none of it; the recovery reads
// the pages it holds, and says it was cut short.
TEST(StoreRecover, AStoreCutShortGivesBackTheRowsOfThePagesItHolds) {
  TempDir dir("recover_cut_short");
  const std::string source = dir.file("runs.sqlite"), recovered = dir.file("recovered.sqlite");
  constexpr int kRuns = 40, kSteps = 300;
  record_finished_runs(source, kRuns, kSteps);
  const int64_t page_size = query_int(source, "PRAGMA page_size"), pages = query_int(source, "PRAGMA page_count");
  const int64_t held = pages * 2 / 3;
  std::set<int64_t> expected_ids;
  int64_t id = 0;
  for (const auto& [page, rows] : leaf_pages(source, "runs"))
    for (int64_t r = 0; r < rows; ++r) {
      ++id;
      if (page <= held) expected_ids.insert(id);
    }
  ASSERT_FALSE(expected_ids.empty());
  fs::resize_file(source, static_cast<uintmax_t>(held * page_size));
  // What a recovery into the same file stopped by a kill left behind: its process is gone (pid_max is at most 2^22).
  for (const char* left : {".recovering-99999999", ".recovering-99999999-journal", ".reading-99999999"})
    std::ofstream(recovered + left) << "left behind";
  const std::string damaged_bytes = read_bytes(source);
  EXPECT_THROW(RunStore(source, RunStore::Mode::ReadOnly).runs(), StoreError) << "SQLite reads none of it";
  EXPECT_EQ(cut_short_words(source), "the file ends after " + std::to_string(held) + " of the " +
                                         std::to_string(pages) + " pages its header counts (cut short)");

  const StoreRecoverResult r = recover_store(source, recovered);
  EXPECT_EQ(r.cut_short, cut_short_words(source));
  EXPECT_EQ(read_bytes(source), damaged_bytes) << "the damaged store is only read";
  EXPECT_EQ(query_text(recovered, "PRAGMA integrity_check"), "ok");
  EXPECT_FALSE(r.lost.empty()) << "the rows of the missing pages are said lost";
  std::set<int64_t> ids;
  for (const RunRecord& run : RunStore(recovered, RunStore::Mode::ReadOnly).runs()) ids.insert(run.id);
  EXPECT_EQ(ids, expected_ids) << "every run whose row lies before the cut";
  for (const fs::directory_entry& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().string().find(".reading-"), std::string::npos) << e.path() << " stays";
    EXPECT_EQ(e.path().string().find(".recovering-"), std::string::npos) << e.path() << " stays";
  }
}

TEST(StoreRecover, ReadsOnBetweenDamagedPagesAndFromATablesDamagedStart) {
  TempDir dir("recover_between");
  const std::string source = dir.file("runs.sqlite"), recovered = dir.file("recovered.sqlite");
  constexpr int kRuns = 40, kSteps = 1000;
  const std::vector<std::vector<StepReport>> stored = record_finished_runs(source, kRuns, kSteps);
  // Steps: the table's first page, and in run 5's, three pages, one whole, three more. A read that fails past the
  // first three steps twice as far each time and lands beyond the whole page: it must be looked for in between.
  // Epochs, kept in writing order, from their first page.
  const auto steps_pages = leaf_pages(source, "steps"), epochs_pages = leaf_pages(source, "epochs");
  size_t page = 0;
  while (rows_before(steps_pages, page, true) < 4 * kSteps + 100) ++page;
  ASSERT_LE(rows_before(steps_pages, page + 7, true), 5 * kSteps - 100) << "the seven pages hold run 5's steps only";
  const std::vector<size_t> damaged = {0, page, page + 1, page + 2, page + 4, page + 5, page + 6};
  for (const size_t d : damaged) scribble_over_page(source, steps_pages[d].first);
  ASSERT_GE(epochs_pages.size(), 2u);
  scribble_over_page(source, epochs_pages[0].first);
  const int64_t epochs_lost = epochs_pages[0].second, first_epoch_run = epochs_lost / 2 + 1;

  const StoreRecoverResult r = recover_store(source, recovered);
  RunStore store(recovered, RunStore::Mode::ReadOnly);
  ASSERT_EQ(store.runs().size(), size_t{kRuns});
  // Each damaged page takes its rows with it; nothing else is lost, the whole page between included.
  expect_steps_left(stored[0], store.steps(1), {{0, steps_pages[0].second}});
  std::vector<std::pair<int64_t, int64_t>> in_run_5;
  for (size_t i = 1; i < damaged.size(); ++i) {
    const int64_t first = rows_before(steps_pages, damaged[i], true) - 4 * kSteps;
    in_run_5.emplace_back(first, first + steps_pages[damaged[i]].second);
  }
  expect_steps_left(stored[4], store.steps(5), in_run_5);
  EXPECT_EQ(store.epochs(1).size() + store.epochs(2).size(), 4u - std::min<size_t>(4, epochs_lost));
  std::vector<std::string> words;
  for (const LostRows& l : r.lost) words.push_back(l.table + ": " + l.words);
  // Run 5's two stretches, or more where a seek landed on a row parting two damaged pages.
  ASSERT_GE(words.size(), 4u);
  EXPECT_EQ(words[0], "epochs: rows up to run " + std::to_string(first_epoch_run) + "'s");
  EXPECT_EQ(words[1], "steps: rows up to run 1's");
  EXPECT_LE(words.size(), 6u);
  for (size_t i = 2; i < words.size(); ++i) EXPECT_EQ(words[i], "steps: rows of run 5");
  for (int64_t id = 1; id <= kRuns; ++id)
    EXPECT_EQ(r.incomplete_runs.count(id), id == 5 || id <= first_epoch_run ? 1u : 0u) << id;
}

}  // namespace
}  // namespace ampwb
