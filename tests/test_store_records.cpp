// The run store's records on real SQLite files in temporary folders: every field recorded and read back as typed
// records, step batching, resolving and deleting runs, resume bookkeeping and the resume checks, the comparison of
// runs, the field lists' JSON (old keys kept, bad values refused by name), the dataset fingerprint and CSV.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "analysis/csv_export.h"
#include "analysis/run_compare.h"
#include "analysis/run_groups.h"
#include "store/dataset_fingerprint.h"
#include "store/run_resume.h"
#include "store/run_store.h"
#include "store/sqlite.h"
#include "store/store_recorder.h"
#include "test_store_util.h"
#include "train/checkpoint.h"

namespace ampwb {
namespace {
using namespace store_test;

// The tests that run against both kinds of store (test_store_util.h).
class StoreRecords : public StoreTest {};
INSTANTIATE_TEST_SUITE_P(Stores, StoreRecords, ::testing::ValuesIn(backends()), backend_name);

TEST_P(StoreRecords, RecordsEveryFieldAndReadsItBack) {
  TempDir dir("fields");
  RunStore store(new_store(dir));
  const TrainConfig config = config_named("bf16 \"quoted\", ünïcode");
  const int64_t id = store.begin_run(config, info(), "0123456789abcdef");
  EXPECT_EQ(store.run(id).status, RunStatus::Running);
  EXPECT_TRUE(store.recording(id));

  std::vector<StepReport> steps;
  for (int64_t n = 0; n < 10; ++n) steps.push_back(step(n));
  steps[3].skipped = true;
  steps[3].grad_norm = std::numeric_limits<float>::infinity();
  steps[4].grad_norm = std::numeric_limits<float>::quiet_NaN();
  store.add_steps(id, {steps.begin(), steps.begin() + 4}, 1.0);
  store.add_epoch(id, epoch(1), {steps.begin() + 4, steps.end()}, 2.0);
  GradientHistogram h;
  h.epoch = 1;
  h.kind = "weight";
  h.counts.assign(static_cast<size_t>(h.max_log2 - h.min_log2 + 1), 0);
  h.counts[3] = 17;
  h.counts.back() = 1LL << 40;
  h.zeros = 5;
  h.nonfinite = 1;
  h.total = 23;
  h.underflow_fraction = 0.125;
  h.overflow_fraction = 0.0625;
  h.loss_scale = 1024;
  store.add_histogram(id, h);
  store.add_checkpoint(id, {1, 5, "/ckpt/run-1-epoch-1.ampwb"});
  store.add_checkpoint(id, {1, 9, "/ckpt/run-1-epoch-1.ampwb"});  // overwrote the file: replaces the row
  store.end_run(id, {RunStatus::Cancelled, "stopped by the user after epoch 1"}, {step(10)}, 3.5);

  const RunRecord r = store.run(id);
  EXPECT_EQ(r.name, config.name);
  EXPECT_EQ(r.status, RunStatus::Cancelled);
  EXPECT_EQ(r.end_reason, "stopped by the user after epoch 1");
  EXPECT_FALSE(r.ended.empty());
  EXPECT_EQ(r.depth, 20);
  EXPECT_EQ(r.precision_name(), "amp-bf16");
  EXPECT_EQ(r.batch_size, 16);
  EXPECT_EQ(r.lr, 0.1);  // the float setting as typed, not 0.10000000149011612
  EXPECT_EQ(r.config.optimizer.kind, OptimizerKind::Sgd);
  EXPECT_EQ(r.epochs, 4);
  EXPECT_EQ(r.image_size, 16);
  EXPECT_EQ(r.seed, 0xfedcba9876543210ull);
  EXPECT_EQ(r.dataset_path, "/data/somewhere");
  EXPECT_EQ(r.dataset_fingerprint, "0123456789abcdef");
  EXPECT_EQ(r.device, DeviceChoice::cpu());
  EXPECT_EQ(r.backend, info().backend_description);
  EXPECT_EQ(r.ampwb_version, AMPWB_VERSION);
  expect_contains(r.versions, sqlite() ? "SQLite 3." : "PostgreSQL 15.");
  EXPECT_EQ(r.pid, ::getpid());
  EXPECT_DOUBLE_EQ(r.duration_seconds, 3.5);
  EXPECT_TRUE(r.unreadable.empty()) << r.unreadable;
  EXPECT_EQ(r.config.seed, config.seed);
  EXPECT_EQ(r.config.precision.mode, PrecisionMode::AmpBf16);
  EXPECT_EQ(r.config.topk, 3);
  EXPECT_EQ(r.info.train_images, 800);
  EXPECT_EQ(r.info.model_summary, info().model_summary);

  const std::vector<StepReport> got = store.steps(id);
  ASSERT_EQ(got.size(), 11u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(got[i].step, steps[i].step);
    EXPECT_EQ(got[i].epoch, steps[i].epoch);
    EXPECT_EQ(got[i].loss, steps[i].loss);
    EXPECT_EQ(got[i].accuracy, steps[i].accuracy);
    EXPECT_EQ(got[i].loss_scale, steps[i].loss_scale);
    EXPECT_EQ(got[i].skipped, steps[i].skipped);
    EXPECT_EQ(got[i].wall_seconds, steps[i].wall_seconds);
  }
  EXPECT_TRUE(std::isinf(got[3].grad_norm));  // SQLite keeps infinities
  EXPECT_TRUE(std::isnan(got[4].grad_norm));  // and NaN comes back as NaN, not 0
  EXPECT_EQ(got[5].grad_norm, steps[5].grad_norm);

  const std::vector<EpochReport> epochs = store.epochs(id);
  ASSERT_EQ(epochs.size(), 1u);
  const EpochReport e = epoch(1);
  EXPECT_EQ(epochs[0].train_loss, e.train_loss);
  EXPECT_EQ(epochs[0].validation_accuracy, e.validation_accuracy);
  EXPECT_EQ(epochs[0].validation_topk, e.validation_topk);
  EXPECT_EQ(epochs[0].topk, 3);
  EXPECT_EQ(epochs[0].seconds, e.seconds);
  EXPECT_EQ(epochs[0].images_per_second, e.images_per_second);
  EXPECT_EQ(epochs[0].data_wait_seconds, e.data_wait_seconds);
  EXPECT_EQ(epochs[0].compute_seconds, e.compute_seconds);
  EXPECT_EQ(epochs[0].skipped_steps, e.skipped_steps);
  EXPECT_EQ(epochs[0].loss_scale, e.loss_scale);
  EXPECT_EQ(epochs[0].peak_bytes, e.peak_bytes);

  const std::vector<GradientHistogram> hs = store.histograms(id);
  ASSERT_EQ(hs.size(), 1u);
  EXPECT_EQ(hs[0].counts, h.counts);
  EXPECT_EQ(hs[0].kind, "weight");
  EXPECT_EQ(hs[0].zeros, 5);
  EXPECT_EQ(hs[0].nonfinite, 1);
  EXPECT_EQ(hs[0].total, 23);
  EXPECT_EQ(hs[0].underflow_fraction, 0.125);
  EXPECT_EQ(hs[0].overflow_fraction, 0.0625);
  EXPECT_EQ(hs[0].loss_scale, 1024);

  const std::vector<CheckpointInfo> cs = store.checkpoints(id);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].path, "/ckpt/run-1-epoch-1.ampwb");
  EXPECT_EQ(cs[0].step, 9);
  EXPECT_FALSE(store.recording(id));
  if (sqlite()) {
    EXPECT_FALSE(fs::exists(run_lock_path(store.path(), id)));
  }
  EXPECT_EQ(store.integrity_check(), "ok");
}

TEST_P(StoreRecords, UnnamedRunsGetADescriptiveName) {
  TempDir dir("unnamed");
  RunStore store(new_store(dir));
  const int64_t id = store.begin_run(config_named(""), info(), "");
  EXPECT_EQ(store.run(id).name, "resnet20-amp-bf16-" + std::to_string(id));
}

TEST_P(StoreRecords, BatchesStepsAndCommitsEachEpochAtOnce) {
  TempDir dir("batch");
  const std::string path = new_store(dir);
  RunStore store(path);
  RunStore reader(path, RunStore::Mode::ReadOnly);  // another connection sees only what is committed
  StoreRecorderOptions options;
  options.batch_steps = 5;
  options.batch_seconds = 1e9;
  StoreRecorder recorder(store, config_named("batched"), options);
  recorder.on_start(info());
  const int64_t id = recorder.run_id();
  ASSERT_NE(id, 0);
  for (int64_t n = 0; n < 4; ++n) recorder.on_step(step(n));
  EXPECT_EQ(reader.steps(id).size(), 0u);
  recorder.on_step(step(4));
  EXPECT_EQ(reader.steps(id).size(), 5u);
  for (int64_t n = 5; n < 12; ++n) recorder.on_step(step(n));
  EXPECT_EQ(reader.steps(id).size(), 10u);
  recorder.on_epoch(epoch(1));  // the epoch takes the pending steps with it
  EXPECT_EQ(reader.steps(id).size(), 12u);
  EXPECT_EQ(reader.epochs(id).size(), 1u);
  EXPECT_EQ(reader.run(id).status, RunStatus::Running);
  recorder.on_step(step(12));
  recorder.on_end({RunStatus::Finished, ""});
  EXPECT_EQ(reader.steps(id).size(), 13u);
  EXPECT_EQ(reader.run(id).status, RunStatus::Finished);
  EXPECT_TRUE(recorder.error().empty());
}

TEST_P(StoreRecords, FlushesStepsAtLeastEverySoOften) {
  TempDir dir("timed");
  const std::string path = new_store(dir);
  RunStore store(path);
  RunStore reader(path, RunStore::Mode::ReadOnly);
  StoreRecorderOptions options;
  options.batch_steps = 1000;
  options.batch_seconds = 0.05;
  StoreRecorder recorder(store, config_named("timed"), options);
  recorder.on_start(info());
  recorder.on_step(step(0));
  EXPECT_EQ(reader.steps(recorder.run_id()).size(), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  recorder.on_step(step(1));
  EXPECT_EQ(reader.steps(recorder.run_id()).size(), 2u);
}
TEST_P(StoreRecords, ResolvesIdsAndUniqueNames) {
  TempDir dir("resolve");
  RunStore store(new_store(dir));
  const int64_t a = store.begin_run(config_named("alpha"), info(), "");
  const int64_t b = store.begin_run(config_named("twin"), info(), "");
  const int64_t c = store.begin_run(config_named("twin2"), info(), "");
  expect_contains(error_of([&] { store.begin_run(config_named("twin"), info(), ""); }), "already named 'twin'");
  // A store written before names were unique may hold twins: a name then picks out none.
  execute(store.path(), "UPDATE runs SET name = 'twin' WHERE id = " + std::to_string(c));
  EXPECT_EQ(store.resolve(std::to_string(a)), a);
  EXPECT_EQ(store.resolve("alpha"), a);
  const std::string ambiguous = error_of([&] { store.resolve("twin"); });
  expect_contains(ambiguous, "2 runs are named 'twin' (ids " + std::to_string(b) + ", " + std::to_string(c) + ")");
  expect_contains(error_of([&] { store.resolve("nobody"); }), "no run named 'nobody'");
  expect_contains(error_of([&] { store.resolve("nobody"); }), "(ampwb runs lists them)");
  // A name mistyped as the workbench's names are typed: the runs whose names hold it, spaces and punctuation aside.
  const int64_t gui = store.begin_run(config_named("amp-bf16 \u00b7 seed 0"), info(), "");
  expect_contains(error_of([&] { store.resolve("AMP-bf16 seed 0"); }),
                  "(did you mean run " + std::to_string(gui) + " (amp-bf16 \u00b7 seed 0)?)");
  expect_contains(error_of([&] { store.resolve("ALPH"); }), "(did you mean run " + std::to_string(a) + " (alpha)?)");
  for (int i = 0; i < 3; ++i) store.begin_run(config_named("alpha-" + std::to_string(i)), info(), "");
  expect_contains(error_of([&] { store.resolve("alph"); }),
                  "(4 runs' names hold 'alph', case and punctuation aside: ampwb runs lists them)");
  expect_contains(error_of([&] { store.resolve("-1"); }),
                  "no run -1 in the run store '" + store.path() + "': run ids count from 1");
  expect_contains(error_of([&] { store.resolve("99"); }), "no run 99");
  expect_contains(error_of([&] { store.rename(a, "42"); }), "cannot be a number");
  expect_contains(error_of([&] { store.rename(a, "sweep:1"); }), "'sweep:1' would read as the runs of sweep 1");
  store.rename(a, "sweep:one");  // only sweep:N stands for a sweep
  EXPECT_EQ(store.resolve("sweep:one"), a);
  expect_contains(error_of([&] { store.rename(a, ""); }), "cannot be empty");
  expect_contains(error_of([&] { store.rename(a, "  spaced  "); }), "cannot begin or end with a space");
  store.rename(c, "triplet");
  EXPECT_EQ(store.resolve("twin"), b);
}

TEST_P(StoreRecords, DeleteRemovesTheRunAndAllItsRows) {
  TempDir dir("delete");
  const std::string path = new_store(dir);
  RunStore store(path);
  const int64_t keep = store.begin_run(config_named("keep"), info(), "");
  const int64_t gone = store.begin_run(config_named("gone"), info(), "");
  for (int64_t id : {keep, gone}) {
    store.add_epoch(id, epoch(1), {step(0), step(1)}, 1.0);
    store.add_histogram(id, histogram(1, "weight", 0, {1, 2}));
    store.add_checkpoint(id, {1, 1, "/c"});
    store.end_run(id, {RunStatus::Finished, ""}, {}, 1.0);
  }
  store.remove(gone);
  expect_contains(error_of([&] { store.run(gone); }), "no run " + std::to_string(gone));
  for (const char* table : {"steps", "epochs", "histograms", "checkpoints"}) {
    EXPECT_EQ(query_int(path, std::string("SELECT COUNT(*) FROM ") + table + " WHERE run_id = " + std::to_string(gone)),
              0)
        << table;
    EXPECT_GT(query_int(path, std::string("SELECT COUNT(*) FROM ") + table + " WHERE run_id = " + std::to_string(keep)),
              0)
        << table;
  }
}

TEST_P(StoreRecords, ContinuingARunReplacesWhatIsReportedAgain) {
  TempDir dir("continue");
  RunStore store(new_store(dir));
  int64_t id = 0;
  {
    StoreRecorder first(store, config_named("resumable"));
    first.on_start(info());
    id = first.run_id();
    for (int64_t n = 0; n < 25; ++n) {  // epochs 1 and 2 complete, epoch 3 half done
      first.on_step(step(n));
      if (n % 10 == 9) first.on_epoch(epoch(static_cast<int>(n / 10) + 1));
    }
    first.on_end({RunStatus::Cancelled, "stopped"});
  }
  EXPECT_EQ(store.steps(id).size(), 25u);
  RunInfo resumed = info();
  resumed.first_epoch = 2;  // say the checkpoint was taken after epoch 1
  StoreRecorder second(store, config_named("resumable"), {}, id);
  second.on_start(resumed);
  EXPECT_EQ(second.run_id(), id);
  EXPECT_EQ(store.run(id).status, RunStatus::Running);
  EXPECT_EQ(store.epochs(id).size(), 1u);
  for (int64_t n = 10; n < 40; ++n) {
    second.on_step(step(n));
    if (n % 10 == 9) second.on_epoch(epoch(static_cast<int>(n / 10) + 1));
  }
  second.on_end({RunStatus::Finished, ""});
  const RunRecord r = store.run(id);
  EXPECT_EQ(r.status, RunStatus::Finished);
  EXPECT_EQ(r.end_reason, "");
  EXPECT_GE(r.duration_seconds, 0.0);
  EXPECT_EQ(store.epochs(id).size(), 4u);
  const std::vector<StepReport> steps = store.steps(id);
  ASSERT_EQ(steps.size(), 40u);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].step, static_cast<int64_t>(i));
  EXPECT_THROW(StoreRecorder(store, config_named("x"), {}, 999), StoreError);
}
TEST(DatasetFingerprint, ChangesWithFilesAndNotWithoutThem) {
  TempDir dir("fingerprint");
  fs::create_directories(dir.path() / "a");
  std::ofstream(dir.file("a/1.png")) << "abc";
  std::ofstream(dir.file("a/2.png")) << "defg";
  const std::string first = dataset_fingerprint(dir.path().string());
  EXPECT_EQ(first.size(), 16u);
  EXPECT_EQ(dataset_fingerprint(dir.path().string()), first);
  std::ofstream(dir.file("a/2.png")) << "defgh";  // resized
  const std::string resized = dataset_fingerprint(dir.path().string());
  EXPECT_NE(resized, first);
  fs::rename(dir.file("a/2.png"), dir.file("a/3.png"));
  EXPECT_NE(dataset_fingerprint(dir.path().string()), resized);
  EXPECT_EQ(dataset_fingerprint(dir.file("missing")), "");
}

TEST(DatasetFingerprint, KeepsTheValueStoredRunsHave) {
  // Runs store this value (runs.dataset_fingerprint) and `ampwb compare` sets them side by side: a folder must get
  // the value it always got, or an older run would seem to come from other data. Computed independently (Python,
  // FNV-1a 64 over "a.txt\0", 3 as 8 little-endian bytes, "sub/b.bin\0", 1000 likewise).
  TempDir dir("fingerprint_value");
  fs::create_directories(dir.path() / "sub");
  std::ofstream(dir.file("a.txt")) << "abc";
  std::ofstream(dir.file("sub/b.bin")) << std::string(1000, 'b');
  EXPECT_EQ(dataset_fingerprint(dir.path().string()), "ae6a8ccc007b1600");
}

TEST(Csv, QuotesPerRfc4180AndWritesExactNumbers) {
  EXPECT_EQ(csv_quote("plain"), "plain");
  EXPECT_EQ(csv_quote("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_quote("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_quote("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_quote("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv_quote("ünïcode"), "ünïcode");
  for (double v : {0.1, 1.0 / 3.0, 1e-300, 123456789.125, -2.5e17, static_cast<double>(0.05f)})
    EXPECT_EQ(std::strtod(csv_number(v).c_str(), nullptr), v) << csv_number(v);
  EXPECT_EQ(csv_number(2.0), "2");
  EXPECT_EQ(csv_number(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(csv_number(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(Csv, AWriterThatIsNotClosedLeavesNoFile) {
  TempDir dir("csvpartial");
  const std::string path = dir.file("out.csv");
  {
    CsvWriter w(path);
    w.field("a").field(1).end_row();
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));
  CsvWriter w(path);
  w.field("a").field(1.5).end_row();
  w.close();
  EXPECT_EQ(read_bytes(path), "a,1.5\r\n");
  expect_contains(error_of([&] { CsvWriter bad(dir.file("no/such/folder/x.csv")); }), "no/such/folder/x.csv");
}

TEST(StoredConfig, InputsTheFuzzerFoundAreRefusedByName) {
  // fuzz/corpus/store_record/regress-*: JSON that made nlohmann cast 7e30 to int (undefined behaviour).
  int seen = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(AMPWB_FUZZ_CORPUS) / "store_record")) {
    if (!entry.path().filename().string().starts_with("regress-")) continue;
    std::ifstream in(entry.path());
    const nlohmann::json j = nlohmann::json::parse(in);
    try {
      j.get<TrainConfig>();
      ADD_FAILURE() << entry.path() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stored configuration's"), std::string::npos) << e.what();
    }
    ++seen;
  }
  EXPECT_GE(seen, 1);
  const nlohmann::json huge_lr = {{"lr", 1e300}}, fractional_depth = {{"depth", 18.5}};
  EXPECT_THROW(huge_lr.get<TrainConfig>(), Error);
  EXPECT_THROW(fractional_depth.get<TrainConfig>(), Error);
  EXPECT_EQ(nlohmann::json({{"depth", 50}}).get<TrainConfig>().depth, 50);
}

// --- the resume checks (store/run_resume.h), which `ampwb train --resume` and the GUI's Resume both call ---

TEST(RunResume, RefusesByNameAndChangesOnlySettingsThatLeaveTheCurvesAlone) {
  TempDir dir("resume_checks");
  RunStore store(dir.file("runs.sqlite"));
  const std::string checkpoint = dir.file("checkpoint.ampwb");
  std::ofstream(checkpoint) << "x";
  const int64_t id = store.begin_run(config_named("stopped"), info(), "fp");
  const RunRecord training = store.run(id);
  EXPECT_EQ(resume_refusal(store, id), "run 1 ('stopped') is training in process " + std::to_string(training.pid) +
                                           " on " + training.host +
                                           ": it goes on there (stop it there first to resume it elsewhere)");
  store.end_run(id, {RunStatus::Cancelled, "stopped"}, {}, 1.0);
  expect_contains(resume_refusal(store, id), "recorded no checkpoint");
  EXPECT_FALSE(store.resumable(id));
  TrainConfig checkpointed = config_named("killed");  // with checkpoints, killed before its first
  checkpointed.checkpoint_dir = dir.file("killed");
  const int64_t killed = store.begin_run(checkpointed, info(), "fp");
  store.end_run(killed, {RunStatus::Interrupted, "killed"}, {}, 1.0);
  expect_contains(resume_refusal(store, killed), "'killed') ended before its first checkpoint");
  store.add_checkpoint(id, {3, 150, checkpoint});
  EXPECT_EQ(resume_refusal(store, id), "");
  EXPECT_TRUE(store.resumable(id));

  // Nothing asked: the stored configuration, continuing from the latest checkpoint.
  const TrainConfig same = resume_config(store, id);
  EXPECT_EQ(config_settings(same), config_settings(config_named("stopped")));
  EXPECT_EQ(same.resume_from, checkpoint);
  // A moved dataset folder, threads and the cache may change (the CLI refuses every other flag by name).
  ResumeChanges changes;
  changes.data_dir = "/moved";
  changes.threads = 3;
  changes.cache_budget_mb = 64;
  const TrainConfig moved = resume_config(store, id, changes);
  EXPECT_EQ(moved.data_dir, "/moved");
  EXPECT_EQ(moved.threads, 3);
  EXPECT_EQ(moved.data.cache_budget_mb, 64);
  EXPECT_EQ(moved.lr, 0.1f);

  // The checkpoint gone but the one before it kept: the trainer falls back to that one, so it still resumes.
  fs::rename(checkpoint, checkpoint + ".prev");
  EXPECT_EQ(resume_refusal(store, id), "");
  fs::remove(checkpoint + ".prev");
  expect_contains(resume_refusal(store, id), "is missing");
  EXPECT_FALSE(store.resumable(id));
  std::ofstream(checkpoint) << "x";
  store.reopen_run(id, info(), config_named("stopped"));
  store.end_run(id, {RunStatus::Finished, ""}, {}, 2.0);
  EXPECT_EQ(error_of([&] { resume_config(store, id); }), "run 1 ('stopped') finished: there is nothing to resume");
}

// A resume takes the checkpoint its store recorded last: where the file in the folder was written later, the one it
// replaced (PATH.prev) when that is the recorded one (the store could not record the later one), else nothing.
TEST(RunResume, TakesTheCheckpointItsStoreRecordedAndNoneWrittenSince) {
  TempDir dir("resume_recorded");
  RunStore store(dir.file("runs.sqlite"));
  const std::string checkpoint = dir.file("checkpoint.ampwb");
  const auto write_at = [&](int64_t step) {
    Checkpoint c;
    c.meta = {{"global_step", step}};
    save_checkpoint(checkpoint, c);  // the one before it stays as PATH.prev
  };
  const int64_t id = store.begin_run(config_named("stopped"), info(), "fp");
  store.add_checkpoint(id, {2, 100, checkpoint});
  store.end_run(id, {RunStatus::Interrupted, "killed"}, {}, 1.0);
  write_at(100);
  EXPECT_EQ(resume_config(store, id).resume_from, checkpoint);
  write_at(150);  // written, its row not: the process was killed between the two
  EXPECT_EQ(resume_config(store, id).resume_from, checkpoint + ".prev");
  write_at(200);  // another writer went on from there
  const std::string refusal = error_of([&] { resume_config(store, id); });
  expect_contains(refusal, "the checkpoint '" + checkpoint +
                               "' was written after 200 steps, but run 1 ('stopped') "
                               "stopped after 100: another run given the same checkpoint folder");
}

// Its epoch times change where it resumed with other threads: the run says where, and describes its device as now.
TEST(RunResume, OnAnotherDeviceTheRunSaysWhereItsEpochTimesChange) {
  TempDir dir("resume_threads");
  RunStore store(dir.file("runs.sqlite"));
  const int64_t id = store.begin_run(config_named("threads"), info(), "fp");
  store.end_run(id, {RunStatus::Cancelled, "stopped"}, {}, 1.0);
  RunInfo same = info();
  same.first_epoch = 2;
  store.reopen_run(id, same, config_named("threads"));
  store.end_run(id, {RunStatus::Cancelled, "stopped"}, {}, 2.0);
  EXPECT_TRUE(store.run(id).info.notes.empty()) << "resumed as it ran: nothing to say";

  RunInfo more = info();
  more.first_epoch = 3;
  more.backend_description = "cpu (oneDNN 2.6.3, avx512_core_bf16, 4 threads)";
  store.reopen_run(id, more, config_named("threads"));
  const RunRecord r = store.run(id);
  EXPECT_EQ(r.info.backend_description, more.backend_description);
  EXPECT_EQ(r.backend, more.backend_description);
  ASSERT_EQ(r.info.notes.size(), 1u);
  EXPECT_EQ(r.info.notes[0],
            "resumed at epoch 3 on cpu (oneDNN 2.6.3, avx512_core_bf16, 4 threads), after running on "
            "cpu (oneDNN 2.6.3, avx512_core_bf16, 2 threads): its epoch times from epoch 3 on are "
            "that device's");

  // A description that names the CPU's model, where the run's earlier one did not (recorded before descriptions
  // named it), is the same device; another model is another.
  // Stopped at the end of epoch `epoch`, then resumed on the device `description` names: the run's notes after.
  const auto notes_resumed_on = [&](int epoch, const std::string& description) {
    store.end_run(id, {RunStatus::Cancelled, "stopped"}, {}, epoch);
    RunInfo resumed = more;
    resumed.first_epoch = epoch + 1;
    resumed.backend_description = description;
    store.reopen_run(id, resumed, config_named("threads"));
    return store.run(id).info.notes.size();
  };
  EXPECT_EQ(notes_resumed_on(3, "cpu (AMD EPYC, oneDNN 2.6.3, avx512_core_bf16, 4 threads)"), 1u)
      << "resumed on the same CPU, now named";
  EXPECT_EQ(notes_resumed_on(4, "cpu (Intel Xeon, oneDNN 2.6.3, avx512_core_bf16, 4 threads)"), 2u)
      << "resumed on another CPU";
}

TEST(RunResume, RefusesAFolderWhoseFilesDifferAndRecordsAMovedOne) {
  TempDir dir("resume_dataset");
  fs::create_directories(dir.file("data/cat"));
  std::ofstream(dir.file("data/cat/1.png")) << "12345";
  TrainConfig config = config_named("moving");
  config.data_dir = dir.file("data");
  RunStore store(dir.file("runs.sqlite"));
  const int64_t id = store.begin_run(config, info(), dataset_fingerprint(config.data_dir));
  store.end_run(id, {RunStatus::Cancelled, "stopped"}, {}, 1.0);
  const std::string checkpoint = dir.file("checkpoint.ampwb");
  std::ofstream(checkpoint) << "x";
  store.add_checkpoint(id, {2, 10, checkpoint});
  EXPECT_EQ(resume_config(store, id).data_dir, config.data_dir);

  // The same files in another folder: resumes there, and the run records where its data now is.
  fs::copy(dir.file("data"), dir.file("moved"), fs::copy_options::recursive);
  ResumeChanges changes;
  changes.data_dir = dir.file("moved");
  const TrainConfig resumed = resume_config(store, id, changes);
  store.reopen_run(id, info(), resumed);
  EXPECT_EQ(store.run(id).dataset_path, dir.file("moved"));
  EXPECT_EQ(store.run(id).config.data_dir, dir.file("moved"));
  store.end_run(id, {RunStatus::Cancelled, "stopped again"}, {}, 2.0);

  // A file that changed size: other data, refused by name. So is one beside the images (the fingerprint's every
  // file), which the refusal says for the user to look for it.
  std::ofstream(dir.file("moved/cat/1.png")) << "123456";
  expect_contains(error_of([&] { resume_config(store, id); }), "does not hold the files run 1 ('moving') trained on");
  std::ofstream(dir.file("moved/cat/1.png")) << "12345";
  std::ofstream(dir.file("moved/README.txt")) << "how the images were made";
  expect_contains(error_of([&] { resume_config(store, id); }), "a notes file or a hidden folder too");
}

TEST_P(StoreRecords, ANameTakenByAnotherRunIsRefused) {
  TempDir dir("names");
  RunStore store(new_store(dir));
  const int64_t first = store.begin_run(config_named("baseline"), info(), "fp");
  const int64_t second = store.begin_run(config_named("other"), info(), "fp");
  expect_contains(error_of([&] { store.check_new_name("baseline"); }), "run 1 is already named 'baseline'");
  expect_contains(error_of([&] { store.rename(second, "baseline"); }), "run 1 is already named 'baseline'");
  EXPECT_EQ(store.run(second).name, "other");
  store.check_new_name("baseline", first);  // its own name
  store.rename(first, "baseline");
  store.check_new_name("fresh");
  expect_contains(error_of([&] { store.check_new_name("12"); }), "cannot be a number");
}

// Two windows or processes edit one run's name and notes: an edit that says what it was shown (the GUI's dialogs)
// is refused where the other changed them meanwhile, naming what they are now; a plain edit (the CLI) is not.
TEST_P(StoreRecords, AnEditOfWhatChangedMeanwhileIsRefusedNotWrittenOver) {
  TempDir dir("edits");
  const std::string path = new_store(dir);
  RunStore gui(path), cli(path);
  const int64_t id = gui.begin_run(config_named("first"), info(), "");
  gui.end_run(id, {RunStatus::Finished, ""}, {step(0)}, 1.0);
  cli.set_notes(id, "theirs");
  const std::string refused = error_of([&] { gui.set_notes(id, "mine", std::string()); });
  expect_contains(refused, "the notes of run 1 were changed by another window or process meanwhile");
  expect_contains(refused, "theirs");
  EXPECT_EQ(cli.run(id).notes, "theirs");
  gui.set_notes(id, "theirs and mine", std::string("theirs"));
  EXPECT_EQ(cli.run(id).notes, "theirs and mine");
  gui.set_notes(id, "theirs and mine", std::string("stale"));  // already what it asks for: nothing to refuse

  cli.rename(id, "renamed");
  expect_contains(error_of([&] { gui.rename(id, "mine", std::string("first")); }),
                  "run 1 was renamed 'renamed' by another window or process meanwhile");
  gui.rename(id, "mine", std::string("renamed"));
  EXPECT_EQ(cli.run(id).name, "mine");
  cli.rename(id, "plain");  // without what it was shown: as asked
  expect_contains(error_of([&] { gui.set_notes(99, "x", std::string()); }), "no run 99");
}

// --- the comparison (analysis/run_compare.h), which `ampwb compare` and the GUI's table both render ---

// Steady steps of `seconds` each (and the warm-up's, and each epoch's first and last, which measure_speed leaves out).
std::vector<StepReport> steps_of(double seconds, int epochs = 1, int per_epoch = 30) {
  std::vector<StepReport> steps;
  double wall = 0;
  for (int e = 1; e <= epochs; ++e)
    for (int b = 0; b < per_epoch; ++b) {
      wall += seconds;
      steps.push_back({.epoch = e, .step = static_cast<int64_t>((e - 1) * per_epoch + b), .wall_seconds = wall});
    }
  return steps;
}

ComparedRun compared(int64_t id, float lr, const std::string& mode, std::vector<EpochReport> epochs,
                     double step_seconds = 0.1) {
  ComparedRun r;
  r.record.id = id;
  r.record.name = "run " + std::to_string(id);
  r.record.status = RunStatus::Finished;
  r.record.epochs = 2;
  r.record.backend = "cpu (oneDNN)";
  r.record.config = config_named(r.record.name);
  r.record.config.lr = lr;
  r.record.config.precision = precision_preset(mode);
  r.record.info.validation_images = 200;
  r.record.batch_size = 32;
  r.epochs = std::move(epochs);
  r.steps = steps_of(step_seconds);
  return r;
}

const CompareRow& row(const Comparison& c, const std::string& label) {
  for (const CompareRow& r : c.rows)
    if (r.label == label) return r;
  throw std::runtime_error("no row '" + label + "'");
}

// Activation gradients an amp-fp16 run stored in FP16 underflowed before any histogram saw them: its underflow row
// says so, with the share below FP16's smallest normal, where an FP32 run's says what FP16 would lose.
TEST(RunCompare, TheUnderflowOfGradientsAlreadyInFp16SaysSo) {
  GradientHistogram h;
  h.epoch = 1;
  h.kind = "activation";
  h.counts.assign(static_cast<size_t>(h.max_log2 - h.min_log2 + 1), 0);
  h.counts[static_cast<size_t>(-20 - h.min_log2)] = 30;  // 2^-20: subnormal in FP16
  h.counts[static_cast<size_t>(-3 - h.min_log2)] = 60;
  h.zeros = 10;
  h.total = 100;
  std::vector<ComparedRun> runs{compared(1, 0.1f, "fp32", {epoch(1)}), compared(2, 0.1f, "amp-fp16", {epoch(1)})};
  for (ComparedRun& r : runs) r.histograms = {h};
  const Comparison c = compare_runs(runs);
  const CompareRow& underflow = row(c, "FP16 underflow, activation gradients (last epoch)");
  EXPECT_EQ(underflow.values, (std::vector<std::string>{"0%", "0% (30% below 2^-14)"}));
  // Each run's gradients as its loss scale made them: unlike numbers, said so.
  expect_contains(underflow.note, "each run's as its loss scale multiplied them");
  expect_contains(underflow.note, "their share below 2^-14");
}

TEST(RunCompare, FormatsEveryCellOnceAndMarksTheRowsThatDiffer) {
  EpochReport fast = epoch(1), slow = epoch(1);
  fast.images_per_second = 300;
  slow.images_per_second = 150;
  const std::vector<ComparedRun> runs{compared(4, 0.05f, "amp-bf16", {fast, epoch(2)}, 0.1),
                                      compared(9, 0.1f, "fp32", {slow}, 0.2)};
  const Comparison c = compare_runs(runs);
  EXPECT_EQ(c.at_epoch, 1);                                                   // the last epoch both completed
  EXPECT_EQ(row(c, "lr").values, (std::vector<std::string>{"0.05", "0.1"}));  // floats in their shortest form
  EXPECT_TRUE(row(c, "lr").setting);
  EXPECT_TRUE(row(c, "lr").differs);
  EXPECT_EQ(row(c, "precision.mode").values, (std::vector<std::string>{"amp-bf16", "fp32"}));
  EXPECT_FALSE(row(c, "depth").differs);
  EXPECT_EQ(row(c, "seed").values[0], "18364758544493064720");  // all 64 bits
  EXPECT_EQ(row(c, "(device)").values[0], "cpu (oneDNN)");
  expect_contains(row(c, "speed-up vs run 4").note, "only timing them in alternation (a sweep run here) evens out");
  // An image size left to the data ("auto", stored as 0) is said with the size it came to.
  std::vector<ComparedRun> sized = runs;
  sized[0].record.config.image_size = 0;
  sized[0].record.image_size = 28;
  EXPECT_EQ(row(compare_runs(sized), "image_size").values[0], "auto (28 px)");
  const auto settings = run_settings(sized[0].record);  // as `ampwb show` lists it
  EXPECT_NE(
      std::find(settings.begin(), settings.end(), std::pair<std::string, std::string>{"image_size", "auto (28 px)"}),
      settings.end());
  // The top-k row where a run reports its top-k; none where no run does (a k that covers every class).
  EXPECT_EQ(row(c, "validation top-k at epoch 1").values[0], "90.00% (top-3)");
  std::vector<ComparedRun> unreported = runs;
  for (ComparedRun& r : unreported)
    for (EpochReport& e : r.epochs) e.topk = 0;
  EXPECT_THROW(row(compare_runs(unreported), "validation top-k at epoch 1"), std::runtime_error);
  unreported = runs;  // recorded as top-3 of 3 classes, 100% by construction, before the engine left those out
  for (ComparedRun& r : unreported) r.record.info.class_names = {"a", "b", "c"};
  EXPECT_THROW(row(compare_runs(unreported), "validation top-k at epoch 1"), std::runtime_error);
  unreported[0].record.info.class_names.push_back("d");
  EXPECT_EQ(row(compare_runs(unreported), "validation top-k at epoch 1").values,
            (std::vector<std::string>{"90.00% (top-3)", "-"}));
  // A run alone has no speed-up row: nothing to be faster than.
  for (const CompareRow& r : compare_runs({runs[0]}).rows) EXPECT_FALSE(r.label.starts_with("speed-up")) << r.label;
  // The processes each run trained on, with the launcher and the batch of all of them together.
  std::vector<ComparedRun> on_two = runs;
  on_two[1].record.info.world_size = 2;
  on_two[1].record.info.launcher = Launcher::Mpirun;
  const Comparison with_two = compare_runs(on_two);
  const CompareRow& processes = row(with_two, "(processes)");
  EXPECT_EQ(processes.values, (std::vector<std::string>{"1", "2, started by mpirun: 64 images a step in all"}));
  EXPECT_TRUE(processes.setting);
  EXPECT_TRUE(processes.differs);
  EXPECT_FALSE(row(c, "(processes)").differs);
  // Two processes do other work than one: the speed-up says it is not the precision's alone.
  EXPECT_TRUE(c.work_warning.empty());
  EXPECT_EQ(with_two.work_warning,
            "speed-ups not the precision's alone: run 9 against run 4: other work (2 processes against 1 process)");
  EXPECT_THROW(row(c, "name"), std::runtime_error);  // a run's name is its column header, not a setting
  EXPECT_EQ(row(c, "status").values, (std::vector<std::string>{"finished, 2/2 epochs", "finished, 1/2 epochs"}));
  EXPECT_EQ(row(c, "validation accuracy at epoch 1").values, (std::vector<std::string>{"50.00%", "50.00%"}));
  EXPECT_FALSE(row(c, "validation accuracy at epoch 1").differs);
  EXPECT_FALSE(row(c, "validation accuracy at epoch 1").setting);
  // The final loss of a run stopped early is another epoch's: the loss at the common epoch compares like with like.
  EXPECT_EQ(row(c, "final validation loss").values, (std::vector<std::string>{"0.5500", "1.1000"}));
  EXPECT_EQ(row(c, "validation loss at epoch 1").values, (std::vector<std::string>{"1.1000", "1.1000"}));
  // Speed-ups against the first run by default, against the one chosen otherwise.
  // Speed from the steady steps' times (analysis/run_speed.h), not the epochs' images/s: 32 images in 0.1 s and 0.2 s.
  EXPECT_EQ(row(c, "training speed (steady state)").values[0], "320.0 images/s (IQR 320.0\u2013320.0)");
  EXPECT_EQ(row(c, "speed-up vs run 4").values[0], "baseline");
  EXPECT_DOUBLE_EQ(c.speedups[1].ratio, 0.5);
  EXPECT_EQ(row(c, "speed-up vs run 4").values[1], "0.50\u00d7 (0.50\u20130.50)");
  EXPECT_EQ(row(c, "machine load while training").values[0], "not recorded");
  EXPECT_TRUE(c.timing_warning.empty());
  const Comparison against_second = compare_runs(runs, {.baseline = 1, .at_epoch = 2});
  EXPECT_EQ(row(against_second, "speed-up vs run 9").values[0], "2.00\u00d7 (2.00\u20132.00)");
  EXPECT_EQ(row(against_second, "speed-up vs run 9").values[1], "baseline");
  EXPECT_EQ(row(against_second, "validation accuracy at epoch 2").values, (std::vector<std::string>{"60.00%", "-"}));
  EXPECT_EQ(row(against_second, "validation loss at epoch 2").values, (std::vector<std::string>{"0.5500", "-"}));
  // Runs without histograms: the FP16 rows say so.
  EXPECT_EQ(row(c, "FP16 underflow, weight gradients (last epoch)").values[0], "-");
  // Results first, then the settings.
  EXPECT_FALSE(c.rows.front().setting);
  EXPECT_TRUE(c.rows.back().setting);
}

// A speed-up timed while the machine did other work carries the warning's sign, so that the cell read alone (copied,
// or in a narrow window) keeps its caveat; the row's note says what the sign means.
TEST(RunCompare, ASpeedUpTimedUnderOtherWorkIsMarked) {
  std::vector<ComparedRun> runs{compared(1, 0.1f, "fp32", {epoch(1)}, 0.2),
                                compared(2, 0.1f, "amp-bf16", {epoch(1)}, 0.1)};
  EpochTimes quiet_epoch;
  quiet_epoch.epoch = 1, quiet_epoch.steps = 10, quiet_epoch.load = {.other_cpu = 0.02, .steal = 0};
  for (ComparedRun& r : runs) r.times = {quiet_epoch};
  const Comparison quiet = compare_runs(runs);
  EXPECT_EQ(row(quiet, "speed-up vs run 1").values[1], "2.00\u00d7 (2.00\u20132.00)");
  EXPECT_EQ(row(quiet, "speed-up vs run 1").note.find("\u26a0"), std::string::npos);
  EXPECT_TRUE(quiet.timing_warning.empty());
  runs[1].times[0].load.other_cpu = 0.56;
  const Comparison busy = compare_runs(runs);
  EXPECT_EQ(row(busy, "speed-up vs run 1").values,
            (std::vector<std::string>{"baseline", "2.00\u00d7 (2.00\u20132.00) \u26a0"}));
  expect_contains(row(busy, "speed-up vs run 1").note, "\u26a0: timed while the machine did other work");
  expect_contains(busy.timing_warning, "56% busy with other work during run 2");
  // With the busy run as the baseline the other is marked alike: the ratio holds both timings.
  EXPECT_EQ(row(compare_runs(runs, {.baseline = 1}), "speed-up vs run 2").values[0],
            "0.50\u00d7 (0.50\u20130.50) \u26a0");
  // Three runs, only the third busy: the warning names it alone, and only its cell is marked, the second's load (15%
  // against the baseline's 2%) differing but not busy.
  std::vector<ComparedRun> three = runs;
  three.push_back(compared(3, 0.1f, "amp-fp16", {epoch(1)}, 0.1));
  three[1].times[0].load.other_cpu = 0.15;
  three[2].times = {quiet_epoch};
  three[2].times[0].load.other_cpu = 0.30;
  const Comparison one_busy = compare_runs(three);
  EXPECT_EQ(one_busy.timing_warning, "timings unreliable: the machine was 30% busy with other work during run 3");
  EXPECT_EQ(row(one_busy, "speed-up vs run 1").values[1], "2.00\u00d7 (2.00\u20132.00)");
  EXPECT_EQ(row(one_busy, "speed-up vs run 1").values[2], "2.00\u00d7 (2.00\u20132.00) \u26a0");
  // The sweep's timing in alternation, marked where other work shared its turns.
  runs[1].times[0].load.other_cpu = 0.02;
  runs[1].alternating = AlternatingSpeed{
      {1, 2}, {std::vector<double>(6, 100), std::vector<double>(6, 150)}, 20, "synthetic 16 px images", {}};
  runs[1].alternating->load = {.other_cpu = 0.02, .steal = 0};
  const std::string label = "speed-up vs run 1, timed in alternation (sweep)";
  EXPECT_EQ(row(compare_runs(runs), label).values,
            (std::vector<std::string>{"baseline", "1.50\u00d7 (1.50\u20131.50)"}));
  runs[1].alternating->load.other_cpu = 0.45;
  const Comparison shared = compare_runs(runs);
  EXPECT_EQ(row(shared, label).values[1], "1.50\u00d7 (1.50\u20131.50) \u26a0");
  expect_contains(row(shared, label).note, "\u26a0: timed while the machine did other work");
  EXPECT_EQ(row(shared, "speed-up vs run 1").values[1], "2.00\u00d7 (2.00\u20132.00)") << "the trainings were quiet";
}

// Beside amp-fp8 runs the comparison says what FP8 clipped and made zero: each run's worst tensor at its last probed
// step (an earlier probe's clipping is explain's to tell), "-" for a run without FP8 tensors.
TEST(RunCompare, AnFp8RunsClippedAndZeroedSharesAreRows) {
  std::vector<ComparedRun> runs{compared(1, 0.1f, "fp32", {epoch(1)}), compared(2, 0.1f, "amp-bf16", {epoch(1)})};
  EXPECT_THROW(row(compare_runs(runs), "FP8 clipped, worst tensor (last probed step)"), std::runtime_error)
      << "no FP8 run, no FP8 rows";
  runs[1].record.config.precision = precision_preset("amp-fp8");
  LayerNumerics early, conv, fc;
  early.step = 3, conv.step = fc.step = 9;
  early.fp8_input = {1.0, 900.0, 448.0, 100, 0.5, 0.0};  // clipped half at step 3, no longer at step 9
  conv.fp8_input = {2.0, 100.0, 448.0, 100, 0.0, 0.01};
  conv.fp8_output_grad = {1e3, 1e-3, 57344.0, 100, 0.002, 0.25};
  runs[1].layers = {early, conv, fc};  // fc: no FP8 tensor
  const Comparison c = compare_runs(runs);
  EXPECT_EQ(row(c, "FP8 clipped, worst tensor (last probed step)").values, (std::vector<std::string>{"-", "0.20%"}));
  EXPECT_EQ(row(c, "FP8 made zero, worst tensor (last probed step)").values, (std::vector<std::string>{"-", "25.00%"}));
  expect_contains(row(c, "FP8 clipped, worst tensor (last probed step)").note, "ampwb show lists each tensor");
}

TEST(RunCompare, WhatARunDidNotMeasureIsADashAndLeftOutOfTheGroupMeans) {
  EpochReport unvalidated = epoch(1);  // as the trainer reports an epoch without validation images
  unvalidated.validation_loss = unvalidated.validation_accuracy = unvalidated.validation_topk = RunSummary::kNone;
  std::vector<ComparedRun> runs{compared(1, 0.1f, "fp32", {epoch(1)}), compared(2, 0.1f, "fp32", {unvalidated}),
                                compared(3, 0.1f, "fp32", {})};  // 3 failed before its first epoch
  runs[2].steps.resize(3);                                       // its warm-up
  runs[1].record.info.validation_images = 0;
  runs[2].record.status = RunStatus::Failed;
  const Comparison c = compare_runs(runs);
  EXPECT_EQ(row(c, "best validation accuracy").values, (std::vector<std::string>{"50.00% (epoch 1)", "-", "-"}));
  EXPECT_EQ(row(c, "final validation loss").values, (std::vector<std::string>{"1.1000", "-", "-"}));
  EXPECT_EQ(row(c, "training speed (steady state)").values[2], "-");
  EXPECT_EQ(row(c, "speed-up vs run 1").values[2], "-");
  // One that trained an epoch of too few steps for a steady speed says so, and what to do.
  std::vector<ComparedRun> short_epoch{runs[0], compared(4, 0.1f, "fp32", {epoch(1)})};
  short_epoch[1].steps.resize(3);
  const Comparison s = compare_runs(short_epoch);
  EXPECT_EQ(row(s, "training speed (steady state)").values[1], "- (too few steps)");
  EXPECT_EQ(row(s, "speed-up vs run 1").values[1], "- (too few steps)");
  expect_contains(row(s, "speed-up vs run 1").note, "too few steps: a steady speed leaves out a run's first 5 steps");
  EXPECT_TRUE(std::isnan(c.summaries[2].final_train_loss)) << "never measured: NaN (JSON null, CSV nan)";
  ConfigGroup all;
  all.members = {0, 1, 2};
  for (const GroupMetric& m : group_metrics(c.summaries, c.speeds(), all)) {
    if (m.metric == "best validation accuracy (%)") {
      EXPECT_DOUBLE_EQ(m.mean, 50.0) << "run 1 alone measured it";
    }
    if (m.metric == "training images/s (steady state)") {
      EXPECT_NEAR(m.mean, 320.0, 1e-6) << "32 images in 0.1 s: runs 1 and 2, not the failed one";
      EXPECT_DOUBLE_EQ(m.std, 0.0) << "two runs of one speed agree";
    }
  }
  // One run has no spread to report: its standard deviation is not 0 but unknown, and the views show the mean alone.
  ConfigGroup one;
  one.members = {0};
  for (const GroupMetric& m : group_metrics(c.summaries, c.speeds(), one)) {
    EXPECT_TRUE(std::isnan(m.std)) << m.metric;
    EXPECT_FALSE(std::isnan(m.mean)) << m.metric;
  }
}

// A group's result reads as a measurement with its uncertainty: the spread to two digits, the mean as precise.
TEST(RunGroups, AMeanIsWrittenToTheDigitsItsSpreadAllows) {
  const double none = RunSummary::kNone;
  EXPECT_EQ(mean_std_text({"", 468.2, 114.0}), "470 ± 110");
  EXPECT_EQ(mean_std_text({"", 0.81234, 0.00417}), "0.8123 ± 0.0042");
  EXPECT_EQ(mean_std_text({"", 91.26, 0.96}), "91.26 ± 0.96");
  EXPECT_EQ(mean_std_text({"", 91.26, 0.996}), "91.3 ± 1.0");
  EXPECT_EQ(mean_std_text({"", 12345.6, 0.0}), "12345.6 ± 0");
  EXPECT_EQ(mean_std_text({"", 96.6666666666667, 1.5e-14}), "96.6667 ± 0") << "equal runs, but for rounding";
  EXPECT_EQ(mean_std_text({"", 12345.6, none}), "12345.6");
  EXPECT_EQ(mean_std_text({"", none, none}), "-");
}

// Runs grouped by image size: a size of 0 is the flag's "auto", as ampwb show says, not a size of 0 px.
TEST(RunGroups, AnAutomaticImageSizeIsNamedAuto) {
  std::vector<TrainConfig> configs(3);
  configs[2].image_size = 32;
  const std::vector<ConfigGroup> groups = group_configs(configs, "image_size");
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(group_label("image_size", groups[0]), "image_size = auto (2 runs)");
  EXPECT_EQ(group_label("image_size", groups[1]), "image_size = 32 (1 run)");
  configs[1].seed = 1;
  EXPECT_EQ(group_configs(configs, kAllButSeed)[1].value, "image_size = 32");
}

// --- the field lists' JSON (train/record_fields.h) ---

// A run's training speed over its epochs is the images trained over the time training them: a slow first epoch
// counts for the time it took, not as one rate among others.
TEST(RunSummary, TheSpeedOverEpochsIsTheirImagesOverTheirTime) {
  RunRecord run;
  std::vector<EpochReport> epochs(3);
  const double rates[] = {100, 300, 0};  // the last one timed nothing
  for (size_t i = 0; i < epochs.size(); ++i) {
    epochs[i].epoch = static_cast<int>(i) + 1;
    epochs[i].images_per_second = rates[i];
  }
  // 600 images at 100/s and 600 at 300/s: 1200 images in 8 s.
  EXPECT_DOUBLE_EQ(summarize(run, epochs).mean_images_per_second, 150.0);
  epochs[0].images_per_second = epochs[1].images_per_second = 0;
  EXPECT_TRUE(std::isnan(summarize(run, epochs).mean_images_per_second)) << "none timed: unknown";
}

TEST(RecordJson, KeepsTheStoredKeysAndRefusesValuesThatDoNotFitByName) {
  const nlohmann::json stored = config_named("x");
  EXPECT_EQ(stored["optimizer"]["kind"], "sgd");
  EXPECT_EQ(stored["precision"]["mode"], "amp-bf16");
  EXPECT_EQ(stored["precision"]["loss_scale"]["kind"], "off");
  EXPECT_EQ(stored["stem"], "auto");
  // Single-precision settings as typed: 0.9, not the 0.8999999761581421 that 0.9f widens to.
  EXPECT_EQ(stored["optimizer"]["beta1"].get<double>(), 0.9);
  EXPECT_EQ(stored["optimizer"]["beta1"].dump(), "0.9");
  EXPECT_FALSE(stored.contains("resume_from"));  // where a process continues from, not what the run is
  EXPECT_EQ(config_settings(stored.get<TrainConfig>()), config_settings(config_named("x")));
  // What older versions stored (fewer keys) loads with the defaults of the rest.
  const TrainConfig old = nlohmann::json{{"depth", 56}, {"optimizer", {{"kind", "adam"}}}}.get<TrainConfig>();
  EXPECT_EQ(old.depth, 56);
  EXPECT_EQ(old.optimizer.kind, OptimizerKind::Adam);
  EXPECT_EQ(old.optimizer.momentum, OptimizerConfig{}.momentum);
  const TrainConfig defaults;
  EXPECT_EQ(old.batch_size, defaults.batch_size);
  // A value of the wrong kind is refused with the field's path.
  expect_contains(error_of([] { nlohmann::json{{"name", 5}}.get<TrainConfig>(); }), "configuration's name is not text");
  expect_contains(error_of([] {
                    nlohmann::json{{"optimizer", {{"momentum", "high"}}}}.get<TrainConfig>();
                  }),
                  "configuration's optimizer.momentum is not a number");
  expect_contains(error_of([] { nlohmann::json{{"seed", -1}}.get<TrainConfig>(); }), "seed is not a whole number");
  expect_contains(error_of([] { nlohmann::json{{"precision", {{"mode", "fp8"}}}}.get<TrainConfig>(); }), "fp8");

  // The run information under the keys the store has always used; epochs and steps under the CLI's keys.
  const nlohmann::json i = info();
  EXPECT_EQ(i["model"], info().model_summary);
  EXPECT_EQ(i["classes"], (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(i["steps_per_epoch"], 50);
  EXPECT_EQ(i.get<RunInfo>().class_names, info().class_names);
  const nlohmann::json e = epoch(2);
  EXPECT_EQ(e["validation_topk"], 0.9);
  EXPECT_EQ(e["peak_bytes"], (size_t{5} << 32) + 2);
  EXPECT_EQ(e.size(), 14u);
  const nlohmann::json s = step(3);
  EXPECT_EQ(s["lr"], 0.1);  // the float's shortest decimal
  EXPECT_EQ(s["lr"].get<float>(), 0.1f);
  EXPECT_EQ(s["skipped"], false);
  EXPECT_EQ(s.get<StepReport>().grad_norm, step(3).grad_norm);
}

TEST(RunStore, AnUnreadableStoredConfigurationIsListedWithDefaultsAndNotResumed) {
  TempDir dir("unreadable");
  const std::string path = dir.file("runs.sqlite");
  int64_t id = 0;
  {
    RunStore store(path);
    id = store.begin_run(config_named("damaged"), info(), "fp");
    store.end_run(id, {RunStatus::Cancelled, ""}, {}, 1.0);
    store.add_checkpoint(id, {1, 1, path});  // any file that exists
  }
  {
    SqliteDb db(path, SqliteDb::Open::ReadWrite);
    db.exec("UPDATE runs SET config_json = '{\"depth\": 7e30}', info_json = 'not json'");
  }
  RunStore store(path);
  const RunRecord r = store.run(id);
  EXPECT_EQ(r.name, "damaged");
  const TrainConfig defaults;
  EXPECT_EQ(r.config.depth, defaults.depth);
  expect_contains(r.unreadable, "configuration's depth");
  expect_contains(r.unreadable, "run information is not JSON");
  expect_contains(resume_refusal(store, id), "cannot be resumed");
}

// A column holding a name this version does not know (a newer version's mode, a hand edit) keeps the run listed, with
// the other runs, its field at its default and the problem said; such a run is not resumed.
TEST(RunStore, AnUnknownNameInAColumnIsListedWithTheOtherRuns) {
  TempDir dir("unknown-name");
  const std::string path = dir.file("runs.sqlite");
  int64_t odd = 0, plain = 0;
  {
    RunStore store(path);
    for (int64_t* id : {&odd, &plain}) {
      *id = store.begin_run(config_named(id == &odd ? "odd" : "plain"), info(), "fp");
      store.end_run(*id, {RunStatus::Cancelled, ""}, {}, 1.0);
      store.add_checkpoint(*id, {1, 1, path});
    }
  }
  {
    SqliteDb db(path, SqliteDb::Open::ReadWrite);
    db.exec("UPDATE runs SET precision = 'fp4', device = 'tpu' WHERE id = " + std::to_string(odd));
  }
  RunStore store(path);
  const std::vector<RunRecord> runs = store.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "odd");
  expect_contains(runs[0].unreadable, "the stored device 'tpu' is not cpu, cuda, cuda:N or auto");
  expect_contains(runs[0].unreadable, "'fp4'");
  EXPECT_TRUE(runs[0].device.is_cpu());
  EXPECT_EQ(runs[0].precision_name(), runs[1].precision_name()) << "the configuration's own, read over the column";
  expect_contains(resume_refusal(store, odd), "cannot be resumed");
  EXPECT_EQ(runs[1].unreadable, "");
  EXPECT_EQ(resume_refusal(store, plain), "");
}

// A configuration stored without its precision mode (the oldest stores) shows the mode its column holds.
TEST(RunStore, AConfigurationWithoutItsModeKeepsTheColumns) {
  TempDir dir("nomode");
  const std::string path = dir.file("runs.sqlite");
  TrainConfig c = config_named("old");
  c.precision = precision_preset("amp-bf16");
  int64_t id = 0;
  {
    RunStore store(path);
    id = store.begin_run(c, info(), "fp");
    store.end_run(id, {RunStatus::Finished, ""}, {}, 1.0);
  }
  {
    SqliteDb db(path, SqliteDb::Open::ReadWrite);
    db.exec("UPDATE runs SET config_json = '{\"depth\": 20}'");
  }
  RunStore store(path);
  const RunRecord r = store.run(id);
  EXPECT_EQ(r.unreadable, "");
  EXPECT_EQ(r.config.depth, 20);
  EXPECT_EQ(r.precision_name(), "amp-bf16");
}
}  // namespace
}  // namespace ampwb
