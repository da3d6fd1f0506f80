// The store commands through the real ampwb binary: flags in any order, bad usage refused by name, valid JSON for
// infinite values, and train --json -> show -> compare -> export csv -> delete, with every CSV parsed by an RFC 4180
// reader (and Python's) and checked against the store.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>

#include "analysis/numerics_grid.h"
#include "analysis/report_text.h"
#include "analysis/run_speed.h"
#include "store/store_filesystem.h"
#include "test_cli_util.h"

namespace ampwb {
namespace {
using namespace cli_test;

TEST(StoreCli, FlagsGoBeforeOrAfterTheRunAndAMisspeltOneIsRefusedByName) {
  TempDir dir("flag_order");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> train = tiny_training(db, 1, 1);
  train.insert(train.end(), {"--name", "train"});  // named like a command: still a run's name where RUN goes
  ASSERT_EQ(ampwb(train).status, 0);
  const Result before = ampwb({"show", "--json", "train", "--db", db});
  ASSERT_EQ(before.status, 0) << before.output;
  EXPECT_EQ(json::parse(before.output)["run"]["name"], "train");
  EXPECT_EQ(ampwb({"show", "train", "--json", "--db", db}).output, before.output);
  EXPECT_EQ(ampwb({"show", "--db", db, "--json", "1"}).output, before.output);
  EXPECT_EQ(ampwb({"show", "1", "--json=true", "--db=" + db}).output, before.output);
  EXPECT_EQ(ampwb({"show", "1", "--json=false", "--db", db}).output, ampwb({"show", "1", "--db", db}).output);
  EXPECT_EQ(ampwb({"compare", "--json", "1", "train", "--db", db}).output,
            ampwb({"compare", "1", "train", "--db", db, "--json"}).output);

  // Bad usage: exit status 2, and what was wrong on stderr, naming the command and the argument.
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"show", "1", "--jsn", "--db", db},
       "ampwb show: error: unknown option --jsn; did you mean --json? (see ampwb show --help)"},
      // The option meant is named where one alone is a typo away, or its words' shortening (the GUI says
      // "Validation images"); nothing is guessed for a word no option resembles.
      {{"train", "--max-validation-images", "5", "--db", db},
       "unknown option --max-validation-images; did you mean --max-val-images?"},
      {{"train", "--frobnicate", "--db", db}, "unknown option --frobnicate (see ampwb train --help)"},
      // An unknown option is named before the option it leaves missing, which it often is, misspelt or as a letter
      // other tools take.
      {{"report", "1", "--outt", dir.file("r.html"), "--db", db}, "unknown option --outt; did you mean --out?"},
      {{"report", "1", "-o", dir.file("r.html"), "--db", db}, "unknown option -o; did you mean --out?"},
      // A misspelt command is named with the one it most likely meant; a value that begins with '-' is told how
      // to be given.
      {{"shw", "1", "--db", db}, "unknown command 'shw'; did you mean show? (expected train, bench,"},
      {{"export", "chrt", "1"}, "unknown command 'chrt'; did you mean chart? (expected csv, chart or model)"},
      {{"rename", "1", "-x", "--db", db},
       "unknown option -x; a value that begins with '-' goes last, after -- (... -- -x)"},
      {{"rename", "1", "--", "-x", "--db", db},
       "every word after -- is a value, and '--db' is one too many: options go before --"},
      {{"show", "--db", db, "--", "1", "2"},
       "every word after -- is a value, and '2' is one too many (quote a value that holds spaces)"},
      {{"show", "1", "--frobnicate", "--db", db}, "unknown option --frobnicate (see ampwb show --help)"},
      // An operand given as a flag is told to go without it.
      {{"explain", "1", "--baseline", "1", "--db", db},
       "unknown option --baseline: BASELINE is given without a flag (ampwb explain RUN [BASELINE])"},
      {{"compare", "--runs", "1", "1", "--db", db},
       "unknown option --runs: RUN is given without a flag (ampwb compare RUN...)"},
      {{"tag", "1", "x", "-r", "--db", db}, "unknown option -r; did you mean --remove?"},
      {{"show", "--jsn=1", "1", "--db", db}, "unknown option --jsn"},
      {{"show", "1", "2", "--db", db}, "unexpected argument '2'"},
      {{"show", "--db", db}, "RUN is required"},
      {{"show", "1", "--db"}, "--db"},
      {{"compare", "1", "--db", db}, "RUN: At least 2 required (or one sweep:N)"},
      {{"runs", "--status", "done", "--db", db}, "--status: done not in {running,paused,finished,failed,stopped,"},
      {{"runs", "--status", "finishd", "--db", db}, "interrupted}; did you mean finished?"},
      {{"tag", "1", "--db", db}, "TAG is required"},
      {{"export", "png", "1", "--db", db}, "unknown command 'png' (expected csv, chart or model)"},
      {{"export", "csv", "--out", dir.file("csv"), "--db", db}, "RUN... or --all is required"},
      {{"export", "csv", "1", "--all", "--out", dir.file("csv"), "--db", db}, "excludes"},
      {{"export", "chart", "1", "--metric", "loss", "--out", dir.file("a.png"), "--width", "50", "--db", db},
       "--width: Value 50 not in range 100 to 10000"},
      {{"store"}, "ampwb store: error: needs a command: check, backup, recover or copy"},
      {{"store", "backup", "--db", db}, "FILE is required"},
  };
  for (const auto& [args, message] : refused) {
    const Result r = ampwb(args);
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.output;
    expect_contains(r.output, message);
  }
  EXPECT_EQ(RunStore(db, RunStore::Mode::ReadOnly).run(1).tags.size(), 0u) << "a refused line changes nothing";
  const Result dashed = ampwb({"rename", "1", "--db", db, "--", "-x"});
  EXPECT_EQ(dashed.status, 0) << dashed.output;
  EXPECT_EQ(RunStore(db, RunStore::Mode::ReadOnly).run(1).name, "-x");
}

// Every --json output is JSON a strict reader takes: infinities (and NaN, which SQLite stores as NULL) as null.
TEST(StoreCli, NonFiniteValuesPrintAsNullInEveryJsonOutput) {
  TempDir dir("nonfinite");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> events = tiny_training(db, 2, 1);
  events.push_back("--events-json");
  const Result trained = ampwb(events);
  ASSERT_EQ(trained.status, 0) << trained.output;
  std::istringstream lines(trained.output);  // JSON Lines and nothing else, its last line included
  for (std::string line; std::getline(lines, line);) EXPECT_TRUE(json::accept(line)) << line;
  ASSERT_EQ(ampwb(tiny_training(db, 1, 1)).status, 0);  // to compare with
  {  // as a diverged run records them: SQLite reads 9e999 as +infinity
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(handle,
                           "UPDATE epochs SET train_loss = 9e999, validation_loss = -9e999 WHERE epoch = 2;"
                           "UPDATE steps SET loss = 9e999",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(handle);
  }
  ASSERT_TRUE(std::isinf(RunStore(db, RunStore::Mode::ReadOnly).epochs(1).at(1).train_loss));
  Result r = ampwb({"show", "1", "--json", "--steps", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const json show = json::parse(r.output);
  EXPECT_TRUE(show["epochs"][1]["train_loss"].is_null()) << r.output;
  EXPECT_TRUE(show["epochs"][1]["validation_loss"].is_null());
  EXPECT_TRUE(show["summary"]["final_train_loss"].is_null());
  EXPECT_TRUE(show["steps"][0]["loss"].is_null());
  EXPECT_TRUE(show["epochs"][0]["train_loss"].is_number());
  EXPECT_TRUE(show["epochs"][0]["loss_scale"].is_null()) << "FP32 scales nothing, as show's table says";
  EXPECT_TRUE(show["steps"][0]["loss_scale"].is_null());
  r = ampwb({"runs", "--json", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(json::parse(r.output)[0]["summary"]["final_validation_loss"].is_null());
  r = ampwb({"compare", "1", "2", "--json", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(json::parse(r.output)["runs"][0]["final_train_loss"].is_null());
}

TEST(StoreCli, ShowPrintsPerLayerNumericsAsStored) {
  TempDir dir("numerics");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> train = tiny_training(db, 2, 2);
  train.insert(train.end(), {"--precision", "amp-fp16", "--numerics-every", "1"});
  const Result trained = ampwb(train);
  ASSERT_EQ(trained.status, 0) << trained.output;
  const RunStore store(db, RunStore::Mode::ReadOnly);
  const std::vector<LayerNumerics> stored = store.layer_numerics(1);
  ASSERT_EQ(stored.size(), 4u * 43u);  // every step of 2 x 2, ResNet-20's 43 layers each

  const Result j = ampwb({"show", "1", "--json", "--db", db});
  ASSERT_EQ(j.status, 0) << j.output;
  const json shown = json::parse(j.output);
  ASSERT_EQ(shown["layer_numerics"].size(), stored.size());
  EXPECT_EQ(shown["layer_numerics"][5], json(stored[5]));
  EXPECT_EQ(shown["epochs"][0]["loss_scale"], store.epochs(1)[0].loss_scale) << "amp-fp16 scales its loss";

  const Result r = ampwb({"show", "1", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  // amp-fp16 stores its gradients in FP16: the underflow has happened before the measure, so the table shows the
  // share below FP16's smallest normal instead.
  EXPECT_EQ(r.output.find("activation-gradient underflow"), std::string::npos);
  for (const char* part :
       {"per-layer numerics", "activation headroom", "activation gradients below 2^-14", "are stored in FP16",
        "precision per op (epoch 2, step 3, loss scale", "layer3.1.conv2", "downsample.1"})
    expect_contains(r.output, part);
  // The heat map's cell for the stem at epoch 2: its headroom on the epoch's last step, from the stored record.
  const LayerNumerics& stem = stored[3 * 43];
  ASSERT_EQ(stem.layer, "conv1");
  ASSERT_EQ(stem.step, 3);
  char cell[32];
  std::snprintf(cell, sizeof cell, "%.1f", std::log2(65504.0 / stem.activation.max_abs));
  const size_t row = r.output.find("\n  conv1 ");
  ASSERT_NE(row, std::string::npos) << r.output;
  const std::string line = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
  EXPECT_TRUE(line.ends_with(std::string(" ") + cell)) << line << " does not end in " << cell;
  // Precision per op: ResNet-20's convolutions and fc in FP16, its batch norms in FP32, one line each.
  const auto op_line = [&](const std::string& kind) {
    const size_t at = r.output.find("\n  " + kind + " ", r.output.find("precision per op"));
    return at == std::string::npos ? std::string() : r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
  };
  expect_contains(op_line("conv"), "21 f16");
  expect_contains(op_line("batch_norm"), "21 f32");
  expect_contains(op_line("linear"), "1 f16");
  expect_contains(op_line("total"), "43");
  EXPECT_EQ(r.output.find("probed epochs as columns"), std::string::npos) << "both epochs shown";

  // Probed over 12 epochs, a table shows 10 of them, spread from the first to the last, and says so.
  {
    RunStore writable(db);
    for (int epoch = 3; epoch <= 12; ++epoch) {
      std::vector<LayerNumerics> step(stored.end() - 43, stored.end());
      for (LayerNumerics& n : step) n.epoch = epoch, n.step = epoch * 2 - 1;
      writable.add_layer_numerics(1, step);
    }
  }
  const std::string twelve = ampwb({"show", "1", "--db", db}).output;
  expect_contains(twelve,
                  "  10 of its 12 probed epochs as columns, spread from the first to the last (--json has all)");
  const size_t header = twelve.find("  LAYER ", twelve.find("probed epochs as columns"));
  ASSERT_NE(header, std::string::npos) << twelve;
  std::istringstream cells(twelve.substr(header, twelve.find('\n', header) - header));
  const std::vector<std::string> columns{std::istream_iterator<std::string>(cells), {}};
  EXPECT_EQ(columns, (std::vector<std::string>{"LAYER", "E1", "E2", "E3", "E4", "E5", "E7", "E8", "E9", "E10", "E12"}));
}

// FP8's flags for a run in another mode do nothing, nor the loss scaler's for a run that scales no loss: the run
// trains, the user is told which flags it ignores, and it records them as they took effect (their defaults).
TEST(StoreCli, Fp8FlagsForAnotherModeAreSaidToDoNothing) {
  TempDir dir("fp8_flags");
  std::vector<std::string> train = tiny_training(dir.file("runs.sqlite"), 1, 1);
  train.insert(train.end(), {"--fp8-margin", "2", "--fp8-first-last"});
  const Result r = ampwb(train);
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output,
                  "ampwb train: warning: --fp8-margin, --fp8-first-last set amp-fp8 runs alone: this fp32 run ignores "
                  "them");
  // Recorded as they took effect: a run trained alike without the flags differs from it in nothing.
  std::vector<std::string> plain = tiny_training(dir.file("runs.sqlite"), 1, 1);
  ASSERT_EQ(ampwb(plain).status, 0);
  const Result differences = ampwb({"compare", "1", "2", "--db", dir.file("runs.sqlite")});
  EXPECT_EQ(differences.output.find("precision.fp8"), std::string::npos) << differences.output;
  const json fp8 =
      json::parse(ampwb({"show", "1", "--json", "--db", dir.file("runs.sqlite")}).output)["config"]["precision"]["fp8"];
  EXPECT_EQ(fp8["margin"], 0);
  EXPECT_EQ(fp8["first_and_last"], false);
  train.insert(train.end(), {"--precision", "amp-fp8"});
  EXPECT_EQ(ampwb(train).output.find("warning: --fp8"), std::string::npos);
  // The loss scaler's flags for a run that scales no loss, likewise; and not once the run scales it.
  std::vector<std::string> unscaled = tiny_training(dir.file("other.sqlite"), 1, 1);
  unscaled.insert(unscaled.end(), {"--precision", "amp-bf16", "--init-scale", "1024", "--scaler-preset", "apex"});
  expect_contains(ampwb(unscaled).output,
                  "ampwb train: warning: --scaler-preset, --init-scale set the loss scaler, which this amp-bf16 run "
                  "does not use (its format needs no loss scaling): it ignores them");
  EXPECT_EQ(json::parse(ampwb({"show", "1", "--json", "--db", dir.file("other.sqlite")})
                            .output)["config"]["precision"]["loss_scale"]["init_scale"],
            65536.0);
  unscaled.insert(unscaled.end(), {"--loss-scale", "dynamic"});
  EXPECT_EQ(ampwb(unscaled).output.find("loss scaler"), std::string::npos);

  // The amp-fp8 run's casts, in `show` and the report as the store holds them: each tensor's scale and amax.
  const RunStore store(dir.file("runs.sqlite"), RunStore::Mode::ReadOnly);
  const std::vector<LayerNumerics> records = store.layer_numerics(3);
  ASSERT_FALSE(records.empty());
  const NumericsGrid g = numerics_grid(records);
  std::vector<LayerNumerics> last;
  for (const auto& cells : g.cells)
    if (cells.back()) last.push_back(*cells.back());
  const std::vector<Fp8TensorRow> tensors = fp8_tensor_rows(last);
  ASSERT_FALSE(tensors.empty());
  const Result shown = ampwb({"show", "3", "--db", dir.file("runs.sqlite")});
  expect_contains(shown.output, "FP8 tensors (epoch 1, step " + std::to_string(g.steps.back()) + ")");
  // One value clipped in 100,000 is a share too small for two decimals, and still not none.
  EXPECT_EQ(percent_text(1e-5), "<0.01%");
  EXPECT_EQ(percent_text(0), "0.00%");
  EXPECT_EQ(percent_text(0.0012), "0.12%");
  const Result report = ampwb({"report", "3", "--out", dir.file("fp8.html"), "--db", dir.file("runs.sqlite")});
  ASSERT_EQ(report.status, 0) << report.output;
  const std::string html = read_text(dir.file("fp8.html"));
  expect_contains(html, "<h3>FP8 casts</h3>");
  for (const Fp8TensorRow& t : tensors) {
    const std::string scale = significant_text(t.numbers.scale, 4), amax = significant_text(t.numbers.amax, 4);
    expect_contains(shown.output, scale);
    // How much of the format it filled, in significant digits: a margin's 0.0039 is not 0.00.
    expect_contains(html, "<td>" + t.layer + "</td><td>" + t.tensor + "</td><td>" + number_text(t.numbers.format_max) +
                              "</td><td>" + scale + "</td><td>" + amax + "</td><td>" + significant_text(t.filled(), 3) +
                              "</td>");
  }
  ASSERT_EQ(ampwb({"report", "1", "--out", dir.file("fp32.html"), "--db", dir.file("runs.sqlite")}).status, 0);
  EXPECT_EQ(read_text(dir.file("fp32.html")).find("FP8 casts"), std::string::npos);
}

TEST(StoreCli, TrainJsonThenShowCompareAndExportCsvAgreeWithTheStore) {
  TempDir dir("e2e");
  const std::string db = dir.file("runs.sqlite");
  const std::string tricky = "fp32 baseline, \"quoted\" – ünïcode";
  std::vector<std::string> a = tiny_training(db, 2), b = tiny_training(db, 2);
  a.insert(a.end(), {"--name", tricky, "--json"});
  b.insert(b.end(), {"--lr", "0.1", "--topk", "1", "--json"});  // a top-k the two classes leave meaningful
  const Result ra = ampwb(a);
  ASSERT_EQ(ra.status, 0) << ra.output;
  const Result rb = ampwb(b);
  ASSERT_EQ(rb.status, 0) << rb.output;
  const json ja = json::parse(ra.output), jb = json::parse(rb.output);
  EXPECT_EQ(ja["run_id"], 1);
  EXPECT_EQ(jb["run_id"], 2);
  EXPECT_EQ(ja["name"], tricky);
  EXPECT_EQ(ja["status"], "finished");
  EXPECT_EQ(ja["epochs_completed"], 2);

  RunStore store(db, RunStore::Mode::Existing);
  const RunRecord run_a = store.run(1), run_b = store.run(2);
  const std::vector<EpochReport> ea = store.epochs(1), eb = store.epochs(2);
  ASSERT_EQ(ea.size(), 2u);
  const RunSummary sa = summarize(run_a, ea), sb = summarize(run_b, eb);
  EXPECT_EQ(ja["final_validation_accuracy"].get<double>(), ea.back().validation_accuracy);
  EXPECT_EQ(ja["final_train_loss"].get<double>(), ea.back().train_loss);
  EXPECT_EQ(ja["best_validation_accuracy"].get<double>(), sa.best_validation_accuracy);
  EXPECT_EQ(ja["epochs"][1]["images_per_second"].get<double>(), ea[1].images_per_second);

  // show, by name and as JSON
  Result r = ampwb({"show", tricky, "--json", "--steps", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const json show = json::parse(r.output);
  EXPECT_EQ(show["run"]["id"], 1);
  EXPECT_EQ(show["config"]["depth"], 20);
  EXPECT_EQ(show["epochs"][0]["validation_loss"].get<double>(), ea[0].validation_loss);
  EXPECT_EQ(show["summary"]["peak_bytes"].get<size_t>(), sa.peak_bytes);
  EXPECT_EQ(show["steps"].size(), store.steps(1).size());
  r = ampwb({"show", "1", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part : {"configuration", "epochs", "summary", "best validation accuracy", "fingerprint"})
    expect_contains(r.output, part);
  expect_contains(r.output, tricky);
  r = ampwb({"show", "1", "--steps", "--db", db});  // the steps are JSON's alone: not ignored in silence
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r.output, "--steps requires --json");

  // compare
  r = ampwb({"compare", "1", "2", "--json", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const json cmp = json::parse(r.output);
  EXPECT_EQ(cmp["differences"]["lr"], (json{"0.05", "0.1"}));
  EXPECT_FALSE(cmp["differences"].contains("depth"));
  // The speed-up is analysis/run_speed.h's, from the stored steps: the same figure the table, explain and the
  // report show.
  EXPECT_EQ(cmp["runs"][0]["speedup"]["ratio"].get<double>(), 1.0);
  const RunSpeed speed_a = measure_speed(store.steps(1), run_a.batch_size, run_a.config.numerics_every);
  const RunSpeed speed_b = measure_speed(store.steps(2), run_b.batch_size, run_b.config.numerics_every);
  ASSERT_TRUE(speed_a.known() && speed_b.known());
  EXPECT_DOUBLE_EQ(cmp["runs"][1]["speedup"]["ratio"].get<double>(),
                   speed_b.images_per_second() / speed_a.images_per_second());
  EXPECT_EQ(cmp["runs"][1]["speedup"]["text"], speed_up_text(speed_up(speed_b, speed_a)));
  EXPECT_EQ(cmp["runs"][1]["speed"]["steps"].get<int64_t>(), speed_b.steps);
  EXPECT_TRUE(cmp["runs"][1]["machine_load"]["other_cpu"].get<double>() >= 0) << "recorded on Linux";
  EXPECT_EQ(cmp["runs"][1]["mean_epoch_seconds"].get<double>(), sb.mean_epoch_seconds);
  r = ampwb({"compare", "1", "2", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part : {"configuration differences", "speed-up vs run 1", "skipped steps", "final loss scale",
                           "peak memory", "mean epoch time"})
    expect_contains(r.output, part);
  const size_t topk_row = r.output.find("validation top-k at epoch 2");
  ASSERT_NE(topk_row, std::string::npos) << r.output;
  const std::string topk_line = r.output.substr(topk_row, r.output.find('\n', topk_row) - topk_row);
  EXPECT_NE(topk_line.find("  -  "), std::string::npos) << topk_line;
  EXPECT_EQ(topk_line.substr(topk_line.size() - 7), "(top-1)") << topk_line;
  // FP32 scales nothing: its scale of 1 is said as no scaling, here and in `show`.
  expect_contains(r.output, "none (no loss scaling)");
  const std::string shown = ampwb({"show", "1", "--db", db}).output;
  expect_contains(shown, "final loss scale none (no loss scaling)");
  // Its epochs table's LOSS SCALE column (before PEAK's "80.4 MiB") reads "-", not the 1 it multiplied by.
  const size_t row = shown.find("\n      1 ", shown.find("\nepochs\n"));
  ASSERT_NE(row, std::string::npos) << shown;
  std::istringstream cells(shown.substr(row, shown.find('\n', row + 1) - row));
  std::vector<std::string> words{std::istream_iterator<std::string>(cells), {}};
  ASSERT_GE(words.size(), 3u);
  EXPECT_EQ(words[words.size() - 3], "-") << shown;
  // Its top-2 of two classes is not reported; run 2's top-1 is, under its k; the times say what they cover.
  EXPECT_EQ(words[5], "-") << shown;
  expect_contains(shown, "  TOP-K  EPOCH S  TRAIN IMG/S  ");
  expect_contains(shown, "EPOCH S: the whole epoch, its validation included");
  expect_contains(ampwb({"show", "2", "--db", db}).output, "  TOP-1  EPOCH S  ");

  // export csv
  const std::string out = dir.file("csv out");
  r = ampwb({"export", "csv", "1", "2", "--out", out, "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  for (int64_t id : {1, 2}) {
    const std::vector<StepReport> steps = store.steps(id);
    const auto step_rows = csv_records(out + "/run-" + std::to_string(id) + "-steps.csv");
    ASSERT_EQ(step_rows.size(), steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(num(step_rows[i].at("step")), steps[i].step);
      EXPECT_EQ(num(step_rows[i].at("epoch")), steps[i].epoch);
      // Single-precision values are written as their shortest decimal, which reads back as the same float.
      EXPECT_EQ(static_cast<float>(num(step_rows[i].at("loss"))), steps[i].loss);
      EXPECT_EQ(static_cast<float>(num(step_rows[i].at("accuracy"))), steps[i].accuracy);
      EXPECT_EQ(static_cast<float>(num(step_rows[i].at("learning_rate"))), steps[i].lr);
      EXPECT_EQ(static_cast<float>(num(step_rows[i].at("grad_norm"))), steps[i].grad_norm);
      const std::string lr = step_rows[i].at("learning_rate");  // at most a float's 9 significant digits
      const std::string mantissa = lr.substr(0, lr.find_first_of("eE"));
      const size_t first = mantissa.find_first_of("123456789");  // leading zeros are not significant
      const auto digits = first == std::string::npos
                              ? 0
                              : std::count_if(mantissa.begin() + static_cast<std::ptrdiff_t>(first), mantissa.end(),
                                              [](unsigned char c) { return std::isdigit(c) != 0; });
      EXPECT_LE(digits, 9) << lr;
      EXPECT_EQ(num(step_rows[i].at("wall_seconds")), steps[i].wall_seconds);
      EXPECT_EQ(step_rows[i].at("loss_scale"), "nan") << "FP32 scales nothing, as `show` says";
    }
    const std::vector<EpochReport> epochs = store.epochs(id);
    const auto epoch_rows = csv_records(out + "/run-" + std::to_string(id) + "-epochs.csv");
    ASSERT_EQ(epoch_rows.size(), epochs.size());
    for (size_t i = 0; i < epochs.size(); ++i) {
      EXPECT_EQ(num(epoch_rows[i].at("train_loss")), epochs[i].train_loss);
      EXPECT_EQ(num(epoch_rows[i].at("validation_accuracy")), epochs[i].validation_accuracy);
      if (id == 1)  // a top-2 of two classes is not reported
        EXPECT_EQ(epoch_rows[i].at("validation_topk_accuracy"), "nan");
      else
        EXPECT_EQ(num(epoch_rows[i].at("validation_topk_accuracy")), epochs[i].validation_topk);
      EXPECT_EQ(num(epoch_rows[i].at("seconds")), epochs[i].seconds);
      EXPECT_EQ(num(epoch_rows[i].at("images_per_second")), epochs[i].images_per_second);
      EXPECT_EQ(num(epoch_rows[i].at("data_wait_seconds")), epochs[i].data_wait_seconds);
      EXPECT_EQ(num(epoch_rows[i].at("peak_bytes")), static_cast<double>(epochs[i].peak_bytes));
      EXPECT_EQ(epoch_rows[i].at("loss_scale"), "nan");
    }
    const auto summary = csv_records(out + "/run-" + std::to_string(id) + "-summary.csv");
    ASSERT_EQ(summary.size(), 1u);
    const RunRecord rec = store.run(id);
    const RunSummary s = summarize(rec, epochs);
    EXPECT_EQ(summary[0].at("name"), rec.name);
    EXPECT_EQ(summary[0].at("backend"), rec.backend);  // holds commas: quoted
    EXPECT_EQ(num(summary[0].at("best_validation_accuracy")), s.best_validation_accuracy);
    EXPECT_EQ(num(summary[0].at("mean_images_per_second")), s.mean_images_per_second);
    EXPECT_EQ(num(summary[0].at("total_seconds")), s.total_seconds);
    EXPECT_EQ(num(summary[0].at("peak_bytes")), static_cast<double>(s.peak_bytes));
    EXPECT_EQ(num(summary[0].at("learning_rate")), rec.lr);
    EXPECT_EQ(summary[0].at("final_loss_scale"), "nan") << "FP32 scales nothing, as `show` says";
    EXPECT_EQ(summary[0].at("processes"), "1");
    EXPECT_EQ(num(summary[0].at("global_batch_size")), rec.batch_size);
    // Every setting of the run, as `show` lists it, so that a sweep's file keeps whatever it swept.
    for (const auto& [setting, value] : config_settings(rec.config)) {
      if (setting == "name") continue;  // the record's own column
      EXPECT_EQ(summary[0].at("config." + setting), value) << setting;
    }
    // The steady-state speed compare measures its speed-ups by: their ratio is its speed-up.
    const json& speed = cmp["runs"][static_cast<size_t>(id - 1)]["speed"];
    EXPECT_EQ(num(summary[0].at("steady_images_per_second")), speed["images_per_second"].get<double>());
    EXPECT_EQ(num(summary[0].at("steady_images_per_second_q1")), speed["images_per_second_q1"].get<double>());
    EXPECT_EQ(num(summary[0].at("steady_images_per_second_q3")), speed["images_per_second_q3"].get<double>());
    EXPECT_EQ(num(summary[0].at("steady_steps")), speed["steps"].get<double>());
    // What else the machine did meanwhile, as compare measured it, and its warning where that was too much.
    const json& load = cmp["runs"][static_cast<size_t>(id - 1)]["machine_load"];
    EXPECT_EQ(num(summary[0].at("machine_other_work_share")), load["other_cpu"].get<double>());
    EXPECT_EQ(num(summary[0].at("machine_steal_share")), load["steal"].get<double>());
    const std::string warning = summary[0].at("timing_warning");
    const bool busy = load["other_cpu"].get<double>() >= kBusyMachine || load["steal"].get<double>() >= kBusyMachine;
    EXPECT_EQ(warning.empty(), !busy) << warning;
    if (busy) expect_contains(warning, "timings unreliable: ");
    if (busy) expect_contains(warning, " during run " + std::to_string(id));
  }
  const auto all = csv_records(out + "/runs-summary.csv");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].at("name"), tricky);
  const auto long_form = csv_records(out + "/runs-long.csv");
  EXPECT_EQ(long_form.size(), (ea.size() + eb.size()) * 12);
  for (const auto& row : long_form)
    if (row.at("metric") == "validation_accuracy") {
      const auto& epochs = row.at("run_id") == "1" ? ea : eb;
      EXPECT_EQ(num(row.at("value")), epochs.at(static_cast<size_t>(num(row.at("epoch"))) - 1).validation_accuracy);
    }

  // Python's csv module (a standard reader) reads every file the same way.
  if (fs::exists("/usr/bin/python3")) {
    const std::string script =
        "import csv, json, sys, glob, os\n"
        "out = {}\n"
        "for p in sorted(glob.glob(os.path.join(sys.argv[1], '*.csv'))):\n"
        "    with open(p, newline='', encoding='utf-8') as f:\n"
        "        out[os.path.basename(p)] = list(csv.reader(f, strict=True))\n"
        "print(json.dumps(out))\n";
    std::ofstream(dir.file("read.py")) << script;
    const std::string log = dir.file("python.json");
    const pid_t py = spawn({"/usr/bin/python3", dir.file("read.py"), out}, log);
    ASSERT_EQ(wait_exit(py), 0) << read_text(log);
    const json by_python = json::parse(read_text(log));
    EXPECT_EQ(by_python.size(), 8u);
    for (const auto& [name, rows] : by_python.items())
      EXPECT_EQ(rows.get<std::vector<std::vector<std::string>>>(), parse_csv(read_text(out + "/" + name))) << name;
  }

  // Exporting into that folder again replaces its files only when asked to.
  r = ampwb({"export", "csv", "2", "--out", out, "--db", db});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "'" + out +
                                "' holds run-2-steps.csv, run-2-epochs.csv, run-2-summary.csv and 2 more "
                                "already, which this export would replace: name another --out, or add --overwrite");
  EXPECT_EQ(csv_records(out + "/runs-summary.csv").size(), 2u) << "the earlier export kept whole";
  const std::string plain = dir.file("plain file");  // where a folder of --out should be
  std::ofstream(plain) << "x";
  r = ampwb({"export", "csv", "2", "--out", plain + "/csv", "--db", db});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "'" + plain + "' is a file, not a folder");
  // Asked, it keeps the other run's files and says the summaries leave them out.
  r = ampwb({"export", "csv", "2", "--out", out, "--overwrite", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(out + "/run-1-steps.csv"));
  EXPECT_EQ(csv_records(out + "/runs-summary.csv").size(), 1u);
  expect_contains(r.output,
                  "also holds the files of an earlier export of run 1; runs-summary.csv and runs-long.csv "
                  "list only the 1 run exported now");
  EXPECT_EQ(ampwb({"export", "csv", "1", "2", "--out", out, "--overwrite", "--db", db}).output.find("note:"),
            std::string::npos);

  // A run given twice, by id or by name, is a mistake said as one (not a run exported or compared twice).
  for (const std::vector<std::string>& twice : {std::vector<std::string>{"export", "csv", "1", tricky, "--out", out},
                                                {"compare", "2", "2"},
                                                {"report", "1", "1", "--out", dir.file("twice.html")}}) {
    std::vector<std::string> args = twice;
    args.insert(args.end(), {"--db", db});
    r = ampwb(args);
    EXPECT_EQ(r.status, 1) << twice[0] << ": " << r.output;
    expect_contains(r.output, "is given twice");
  }
  // report: its format by the extension, in any case; anything else is refused before any work.
  r = ampwb({"report", "1", "--out", dir.file("report.txt"), "--db", db});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "a report is written as .html or .pdf");
  EXPECT_FALSE(fs::exists(dir.file("report.txt")));
  r = ampwb({"report", "1", "--out", dir.file("report.HTML"), "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(read_text(dir.file("report.HTML")), "<html");

  // delete: on a terminal (script(1) gives it one) it asks first, and only a yes deletes.
  const std::string on_terminal = "script -qec \"'" AMPWB_BINARY "' delete 2 --db '" + db + "'\" /dev/null";
  for (const char* answer : {"n", "", "nope"}) {
    r = run({"/bin/bash", "-c", "printf '" + std::string(answer) + "\\n' | " + on_terminal});
    EXPECT_EQ(r.status, 1) << answer << ": " << r.output;
    expect_contains(r.output, "delete run 2 (");
    expect_contains(r.output, "? This cannot be undone. [y/N]");
    expect_contains(r.output, "nothing deleted");
    EXPECT_EQ(json::parse(ampwb({"runs", "--json", "--db", db}).output).size(), 2u) << answer;
  }
  r = run({"/bin/bash", "-c", "printf 'y\\n' | " + on_terminal});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "deleted run 2 (");
  const json left = json::parse(ampwb({"runs", "--json", "--db", db}).output);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]["name"], tricky);
  r = ampwb({"show", "2", "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "no run 2");
  // --yes does not ask (nor does a run without a terminal, as the other tests' deletes are).
  r = run(
      {"/bin/bash", "-c", "script -qec \"'" AMPWB_BINARY "' delete 1 --yes --db '" + db + "'\" /dev/null </dev/null"});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "deleted run 1 (");
  EXPECT_EQ(r.output.find("[y/N]"), std::string::npos) << r.output;
}

// Names, tags and notes are text other people type: a cell a spreadsheet would read as a formula (OWASP's CSV
// injection: =, +, -, @, tab, carriage return first) is written as text, with an apostrophe; numbers stay numbers.
TEST(StoreCli, ExportedCsvNeverHoldsAFormulaFromTextButKeepsNegativeNumbers) {
  TempDir dir("csv_formulas");
  const std::string db = dir.file("runs.sqlite");
  const std::string name = "=HYPERLINK(\"http://example.invalid\",\"x\")";
  std::vector<std::string> train = tiny_training(db, 1, 2);
  // A negative setting, in the summaries: FP8's margin, in an amp-fp8 run, which uses it.
  train.insert(train.end(), {"--name", name, "--precision", "amp-fp8", "--fp8-margin", "-2"});
  Result r = ampwb(train);
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_EQ(ampwb({"tag", "1", "+cmd|' /C calc'!A0", "--db", db}).status, 0);
  ASSERT_EQ(ampwb({"note", "1", "@SUM(1+1)*cmd|' /C calc'!A0", "--db", db}).status, 0);
  { RunStore(db).add_steps(1, {{.epoch = 1, .step = 99, .loss = -0.5f}}, 1.0); }  // a negative number in the CSV

  const std::string out = dir.file("csv");
  r = ampwb({"export", "csv", "1", "--out", "-", "--db", db});  // standard output, as other tools read "-"
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, "--out -: export csv writes several files");
  EXPECT_FALSE(fs::exists("-")) << "a folder named '-' was made";
  r = ampwb({"export", "csv", "1", "--out", out, "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const auto summary = csv_records(out + "/runs-summary.csv");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].at("name"), "'" + name);
  EXPECT_EQ(summary[0].at("tags"), "'+cmd|' /C calc'!A0");
  EXPECT_EQ(summary[0].at("notes"), "'@SUM(1+1)*cmd|' /C calc'!A0");
  EXPECT_EQ(summary[0].at("config.precision.fp8.margin"), "-2");
  EXPECT_EQ(csv_records(out + "/runs-long.csv").at(0).at("run_name"), "'" + name);
  EXPECT_EQ(num(csv_records(out + "/run-1-steps.csv").back().at("loss")), -0.5);
  // Every cell of every file: what begins as a formula does is a number a spreadsheet reads as one.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(out)) {
    ++files;
    for (const auto& row : parse_csv(read_text(entry.path().string())))
      for (const std::string& cell : row)
        if (!cell.empty() && std::string("=+-@\t\r").find(cell.front()) != std::string::npos) {
          char* end = nullptr;
          std::strtod(cell.c_str(), &end);
          EXPECT_EQ(end, cell.c_str() + cell.size()) << entry.path() << ": a formula: " << cell;
        }
  }
  EXPECT_EQ(files, 5);
}

// A Slurm job may run on another node than its user's workbench: where its SQLite store lies on a network filesystem,
// it warns once that no other machine may open the store meanwhile. `store check` says where such a store lies.
// A note's later lines stay under its first in show; tag says what it changed, and refuses a tag that would read as
// two in the lists that show it.
TEST(StoreCli, ShowKeepsANotesLinesTogetherAndTagSaysWhatItChanged) {
  TempDir dir("show_notes");
  const std::string db = dir.file("runs.sqlite");
  ASSERT_EQ(ampwb(tiny_training(db, 1, 2)).status, 0);
  ASSERT_EQ(ampwb({"note", "1", "first line\nsecond line", "--db", db}).status, 0);
  expect_contains(ampwb({"show", "1", "--db", db}).output, "  notes      first line\n             second line\n");
  expect_contains(ampwb({"tag", "1", "keeper", "--db", db}).output, "run 1: added tag 'keeper'");
  expect_contains(ampwb({"tag", "1", "keeper", "--db", db}).output, "run 1: has the tag 'keeper' already");
  const Result two = ampwb({"tag", "1", "a, b", "--db", db});
  EXPECT_EQ(two.status, 1);
  expect_contains(two.output, "a tag cannot hold ',' or ';'");
  expect_contains(ampwb({"show", "1", "--db", db}).output, "  tags       keeper\n");
  // The list shows the tags, and finds a run by its tag whatever the case typed, as the workbench's filter does.
  const Result listed = ampwb({"runs", "--tag", "KEEPER", "--db", db});
  expect_contains(listed.output, "TAGS\n");
  expect_contains(listed.output, "  keeper\n");
  // One tag whatever its case, for tag and untag too.
  expect_contains(ampwb({"tag", "1", "Keeper", "--db", db}).output, "run 1: has the tag 'keeper' already");
  expect_contains(ampwb({"tag", "1", "KEEPER", "--remove", "--db", db}).output, "run 1: removed tag 'keeper'");
  EXPECT_TRUE(RunStore(db, RunStore::Mode::ReadOnly).run(1).tags.empty());
  // The configuration keeps the name the run was trained with; renamed since, it says what the run is named now.
  std::vector<std::string> named = tiny_training(db, 1, 2);
  named.insert(named.end(), {"--name", "first"});
  ASSERT_EQ(ampwb(named).status, 0);
  ASSERT_EQ(ampwb({"rename", "2", "second", "--db", db}).status, 0);
  const std::string shown = ampwb({"show", "2", "--db", db}).output;
  expect_contains(shown, " first (renamed since: second)\n");
}

TEST(StoreCli, AJobOnAStoreOnANetworkFilesystemIsWarnedAndStoreCheckSaysWhereItLies) {
  TempDir dir("store_nfs");
  fs::create_directories(dir.file("home"));
  const std::string db = dir.file("home/runs.sqlite");
  RunStore(db, RunStore::Mode::Create);
  const std::string table = mount_table_with_nfs_at(dir, dir.file("home"));
  const std::string warning = "warning: the run store '" + db +
                              "' is an SQLite file on nfs4, a network filesystem, "
                              "and this runs in Slurm job 77: while it is open here, no process on another machine";
  const Result job = ampwb({"runs", "--db", db}, {"/usr/bin/env", "SLURM_JOB_ID=77", "AMPWB_MOUNTINFO=" + table});
  EXPECT_EQ(job.status, 0) << job.output;
  expect_contains(job.output, warning);
  EXPECT_EQ(job.output.find(warning), job.output.rfind(warning)) << "said more than once: " << job.output;
  const Result no_job = ampwb({"runs", "--db", db}, {"/usr/bin/env", "-u", "SLURM_JOB_ID", "AMPWB_MOUNTINFO=" + table});
  EXPECT_EQ(no_job.output.find("warning:"), std::string::npos) << no_job.output;

  const std::string where = "it lies on " + fs::canonical(dir.file("home")).string() + " (nfs4), a network filesystem";
  const Result check = ampwb({"store", "check", "--db", db}, {"/usr/bin/env", "AMPWB_MOUNTINFO=" + table});
  EXPECT_EQ(check.status, 0) << check.output;
  expect_contains(check.output, where);
  if (const auto mount = filesystem_of(db); mount && !mount->network) {
    EXPECT_EQ(ampwb({"store", "check", "--db", db}).output.find("network filesystem"), std::string::npos);
  }
}

// A --db the store cannot use is refused in words, exit status 1, before anything is made of it in the current
// folder (it once trained into ./postgresql:/...); a path holding a ':' stays an SQLite file.
TEST(StoreCli, AUriTheStoreCannotUseIsRefusedAndCreatesNothing) {
  TempDir dir("uri");
  const std::vector<std::string> in_dir = {"/usr/bin/env", "-C", dir.path().string()};
  // A PostgreSQL store with no server behind it: refused, saying so, before anything is made of the URI.
  const std::string postgres = "postgresql:///ampwb?host=/nonexistent-ampwb-sockets";
  const std::string not_yet = "cannot connect to the PostgreSQL run store";
  const std::string known = "a run store is an SQLite file's path, or a URI of postgresql:// or postgres://";
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"runs", "--db", "mysql://x/y"},
       "ampwb runs: error: the run store's URI names the scheme 'mysql', which this "
       "build does not know: " +
           known},
      {{"runs", "--db", postgres}, "ampwb runs: error: " + not_yet + " '" + postgres + "'"},
      {tiny_training(postgres, 1, 1), "ampwb train: error: " + not_yet},
      {tiny_training("mysql://x/y", 1, 1), known},
      {{"show", "1", "--db", "postgres://ann:s3cret@/ampwb?host=/nonexistent-ampwb-sockets"},
       "'postgres://ann@/ampwb?host=/nonexistent-ampwb-sockets'"},
      {{"store", "check", "--db", "mysql://x/y"}, known},
      {{"store", "backup", "copy.sqlite", "--db", postgres}, not_yet},
  };
  for (const auto& [args, message] : refused) {
    const Result r = ampwb(args, in_dir);
    EXPECT_EQ(r.status, 1) << args[0] << ": " << r.output;
    expect_contains(r.output, message);
  }
  // `--db "$DB"` with DB unset: refused as a command line, not read as the default store.
  const Result empty =
      ampwb(tiny_training("", 1, 1), {"/usr/bin/env", "-C", dir.path().string(), "XDG_DATA_HOME=" + dir.file("data")});
  EXPECT_EQ(empty.status, 2) << empty.output;
  expect_contains(empty.output, "--db: an empty path");
  EXPECT_FALSE(fs::exists(dir.file("data")));
  const Result with_password = ampwb({"runs", "--db", "postgresql://ann:s3cret@/ampwb?host=/nonexistent"}, in_dir);
  EXPECT_EQ(with_password.output.find("s3cret"), std::string::npos) << with_password.output;
  // libpq's two lines ("...\n\tIs the server running...?") read as one error line of two sentences.
  expect_contains(with_password.output, "failed: No such file or directory. Is the server running locally");
  EXPECT_EQ(with_password.output.find('\t'), std::string::npos) << with_password.output;
  // The store named by $AMPWB_DB is checked the same way.
  std::vector<std::string> with_env = in_dir;
  with_env.push_back("AMPWB_DB=mysql://x/y");
  const Result from_env = ampwb({"runs"}, with_env);
  EXPECT_EQ(from_env.status, 1) << from_env.output;
  expect_contains(from_env.output, known);
  EXPECT_TRUE(fs::is_empty(dir.path())) << "a refused store made " << fs::directory_iterator(dir.path())->path();

  const Result colon = ampwb(tiny_training("lab:2026/runs.sqlite", 1, 1), in_dir);
  ASSERT_EQ(colon.status, 0) << colon.output;
  EXPECT_EQ(RunStore(dir.file("lab:2026/runs.sqlite"), RunStore::Mode::ReadOnly).runs().size(), 1u);
}

}  // namespace
}  // namespace ampwb
