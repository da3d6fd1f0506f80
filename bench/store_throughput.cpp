// A benchmark, not a test: records per second into an SQLite run store and into a PostgreSQL one, written as a
// training run writes them (through StoreRecorder: steps batched, each epoch its own commit), and the store's share
// of a training step for both, against step times measured in the same program (the worst case, a tiny ResNet-20,
// and the run a user starts by default): every record a real run writes (its steps, each epoch's histograms, layer
// numerics, confusion, time breakdown and the epoch), from the second epoch of a run on, since a real run keeps its
// connection for all its epochs; what a run pays once (its row, its first writes on a new connection, its end) is
// said apart. The stores and the plain training alternate round by round, so drifting machine load hits all alike;
// figures are medians over the rounds. The goal (the store under 1% of a step) is printed beside them; the exit
// status says only whether the runs worked (the figures in docs/benchmarks.md, "Run store").
//
// PostgreSQL: a private server started for the run (tests/postgres_server.h: initdb in a temporary folder, a Unix
// socket, stopped at the end), never a server of the machine's, since its database is emptied between runs. That
// server runs without fsync (its command line says so, over any setting): a real server's commits cost a WAL flush
// more, so its figures here are the store's own cost, a floor.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/error.h"
#include "image_folder_util.h"
#include "postgres_server.h"
#include "store/postgres.h"
#include "store/run_store.h"
#include "store/store_copy.h"
#include "store/store_recorder.h"
#include "train/trainer.h"

namespace ampwb {
namespace {
using bench::Clock;
using bench::median;
using bench::seconds_since;

const char* verdict(bool met) { return met ? "goal met" : "GOAL MISSED"; }

// Where each kind of store lives for the benchmark: an SQLite file in a private folder, a PostgreSQL database
// emptied before each use.
struct Stores {
  fs::path folder;
  std::string postgres;
  std::string sqlite() const { return (folder / "runs.sqlite").string(); }
  // A fresh, empty store of the kind.
  std::string fresh(bool use_postgres) const {
    if (use_postgres) {
      PostgresConnection(postgres, false).exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public");
      return postgres;
    }
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(sqlite() + suffix);
    fs::remove_all(sqlite() + "-locks");
    return sqlite();
  }
};

const char* name_of(bool use_postgres) { return use_postgres ? "PostgreSQL" : "SQLite"; }

// The recorder alone, fed a run's events as fast as it takes them: records per second with no training around.
struct Throughput {
  double steps_per_second = 0, epochs_per_second = 0, records_per_second = 0;
};

Throughput recorder_alone(const std::string& location) {
  RunStore store(location);
  TrainConfig c;
  c.data_dir = "/data/synthetic";
  RunInfo info;
  info.steps_per_epoch = 500;
  const int epochs = 20;
  StoreRecorder recorder(store, c);  // the options a training run has
  recorder.on_start(info);
  double step_seconds = 0, epoch_seconds = 0;
  for (int e = 1; e <= epochs; ++e) {
    const auto steps_start = Clock::now();
    for (int64_t n = 0; n < info.steps_per_epoch; ++n) {
      StepReport s;
      s.epoch = e;
      s.step = (e - 1) * info.steps_per_epoch + n;
      s.loss = 1.0f / static_cast<float>(s.step + 1);
      s.lr = 0.1f;
      s.loss_scale = 65536;
      s.wall_seconds = 0.01 * static_cast<double>(s.step);
      recorder.on_step(s);
    }
    step_seconds += seconds_since(steps_start);
    EpochReport r;
    r.epoch = e;
    r.train_loss = 1.0 / e;
    const auto epoch_start = Clock::now();
    recorder.on_epoch(r);
    epoch_seconds += seconds_since(epoch_start);
  }
  recorder.on_end({RunStatus::Finished, "", ""});
  AMPWB_CHECK(recorder.error().empty(), "the recorder failed: " << recorder.error());
  const double steps = static_cast<double>(epochs) * static_cast<double>(info.steps_per_epoch);
  AMPWB_CHECK(store.steps(recorder.run_id()).size() == static_cast<size_t>(steps), "steps went missing");
  return {steps / step_seconds, epochs / epoch_seconds, (steps + epochs) / (step_seconds + epoch_seconds)};
}

// Times a step (the gaps between step reports within an epoch) and every callback the recorder takes, as a real
// run makes them: each epoch's (its steps, histograms, layer numerics, confusion, time breakdown and the epoch
// itself) apart from once a run's (its row made; final weights, its end written and fsynced).
class Timed : public TrainObserver {
 public:
  explicit Timed(TrainObserver* recorder) : recorder_(recorder) {}
  void on_start(const RunInfo& e) override {
    time(run_seconds, [&] { recorder_->on_start(e); });
  }
  void on_step(const StepReport& e) override {
    if (e.epoch == epoch_) step_gaps.push_back(e.wall_seconds - last_wall_);
    epoch_ = e.epoch;
    last_wall_ = e.wall_seconds;
    if (epoch_seconds.size() <= static_cast<size_t>(e.epoch)) {
      epoch_seconds.resize(e.epoch + 1);
      epoch_steps.resize(e.epoch + 1);
    }
    ++epoch_steps[e.epoch];
    in_epoch([&] { recorder_->on_step(e); });
  }
  void on_histogram(const GradientHistogram& e) override {
    in_epoch([&] { recorder_->on_histogram(e); });
  }
  void on_layer_numerics(const std::vector<LayerNumerics>& e) override {
    in_epoch([&] { recorder_->on_layer_numerics(e); });
  }
  void on_overflow(const OverflowReport& e) override {
    in_epoch([&] { recorder_->on_overflow(e); });
  }
  void on_epoch_times(const EpochTimes& e) override {
    in_epoch([&] { recorder_->on_epoch_times(e); });
  }
  void on_confusion(const ConfusionMatrix& e) override {
    in_epoch([&] { recorder_->on_confusion(e); });
  }
  void on_checkpoint(const CheckpointInfo& e) override {
    in_epoch([&] { recorder_->on_checkpoint(e); });
  }
  void on_epoch(const EpochReport& e) override {
    in_epoch([&] { recorder_->on_epoch(e); });
  }
  void on_divergence(const PrecisionDivergence& e) override {
    time(run_seconds, [&] { recorder_->on_divergence(e); });
  }
  void on_final_weights(const ModelWeights& e) override {
    time(run_seconds, [&] { recorder_->on_final_weights(e); });
  }
  void on_note(const std::string& e) override {
    time(run_seconds, [&] { recorder_->on_note(e); });
  }
  void on_end(const RunEnd& e) override {
    time(run_seconds, [&] { recorder_->on_end(e); });
  }
  std::vector<double> step_gaps;
  std::vector<double> epoch_seconds;  // the recorder's time in each epoch (1-based)
  std::vector<int64_t> epoch_steps;
  double run_seconds = 0;

 private:
  template <class F>
  void time(double& total, F&& f) {
    if (!recorder_) return;
    const auto t = Clock::now();
    f();
    total += seconds_since(t);
  }
  template <class F>
  void in_epoch(F&& f) {
    if (epoch_ > 0) time(epoch_seconds[epoch_], f);
  }
  TrainObserver* recorder_;
  int epoch_ = 0;
  double last_wall_ = 0;
};

struct TrainingRound {
  double step_seconds = 0;  // median step time of the run
  // The recorder's time a step from the second epoch on (its epochs' commits spread over their steps): what each
  // step pays once the run's connection is warm, as it is through a real run of many epochs.
  double store_per_step = 0;
  double first_epoch_extra = 0;  // what the first epoch paid more than a later one (a new session's first writes)
  double store_per_run = 0;      // the recorder's start and end of the run
  double store_seconds = 0;      // all the recorder's time
  double wall_seconds = 0;       // the whole run
  int64_t steps_per_epoch = 0;
};

TrainingRound train(const TrainConfig& c, const std::string* location) {
  std::unique_ptr<RunStore> store;
  std::unique_ptr<StoreRecorder> recorder;
  if (location) {
    store = std::make_unique<RunStore>(*location);
    recorder = std::make_unique<StoreRecorder>(*store, c);
  }
  Timed timed(recorder.get());
  Trainer trainer(c, &timed);
  const auto start = Clock::now();
  AMPWB_CHECK(trainer.run().status == RunStatus::Finished, "the benchmark's training did not finish");
  TrainingRound r;
  r.wall_seconds = seconds_since(start);
  r.steps_per_epoch = timed.epoch_steps.back();
  r.step_seconds = median(timed.step_gaps);
  AMPWB_CHECK(timed.epoch_seconds.size() > 2, "the benchmark's run needs two epochs at least");
  double later_seconds = 0;
  int64_t later_steps = 0;
  for (size_t e = 2; e < timed.epoch_seconds.size(); ++e) {
    later_seconds += timed.epoch_seconds[e];
    later_steps += timed.epoch_steps[e];
  }
  r.store_per_step = later_seconds / static_cast<double>(later_steps);
  r.first_epoch_extra = timed.epoch_seconds[1] - r.store_per_step * static_cast<double>(timed.epoch_steps[1]);
  r.store_per_run = timed.run_seconds;
  r.store_seconds = timed.run_seconds + timed.epoch_seconds[1] + later_seconds;
  if (recorder) AMPWB_CHECK(recorder->error().empty(), "the recorder failed: " << recorder->error());
  return r;
}

// ampwb store copy's own speed, SQLite into PostgreSQL and back: what a user copying a large store waits.
void copy_speed(const Stores& stores, int runs) {
  const std::string source = (stores.folder / "copy-source.sqlite").string();
  for (int i = 0; i < runs; ++i) recorder_alone(source);
  const auto into = Clock::now();
  const StoreCopyResult there = copy_store(source, stores.fresh(true));
  const double into_seconds = seconds_since(into);
  const std::string back = (stores.folder / "copy-back.sqlite").string();
  const auto out = Clock::now();
  const StoreCopyResult back_again = copy_store(stores.postgres, back);
  const double back_seconds = seconds_since(out);
  AMPWB_CHECK(there.copied == runs && back_again.copied == runs, "the copies left runs out");
  std::printf(
      "[ store ] store copy of %d runs (%lld records): SQLite into PostgreSQL %.0f records/s, back into "
      "SQLite %.0f records/s\n",
      runs, static_cast<long long>(there.records), static_cast<double>(there.records) / into_seconds,
      static_cast<double>(back_again.records) / back_seconds);
}

// The store's share of a training step for runs of `c` on two classes of `per_class` striped `size` px images:
// plain, SQLite and PostgreSQL in turn, the order rotating each round.
void step_share(const Stores& stores, int rounds, TrainConfig c, int per_class, int size, const char* what) {
  const fs::path data = make_stripes_folder("store_throughput", per_class, size);
  c.data_dir = data.string();
  c.threads = 2;
  c.data.validation_fraction = 0.2;
  std::vector<TrainingRound> kinds[3];  // plain, SQLite, PostgreSQL
  for (int round = 0; round < rounds; ++round)
    for (int k = 0; k < 3; ++k) {
      const int kind = (round + k) % 3;
      std::string location;
      if (kind > 0) location = stores.fresh(kind == 2);
      kinds[kind].push_back(train(c, kind > 0 ? &location : nullptr));
    }
  std::vector<double> plain_steps;
  for (const TrainingRound& r : kinds[0]) plain_steps.push_back(r.step_seconds);
  std::printf(
      "[ store ] %s, %lld steps an epoch, %d epochs; %d rounds of plain, SQLite and PostgreSQL in turn; plain "
      "median step %.3f ms\n",
      what, static_cast<long long>(kinds[0].front().steps_per_epoch), c.epochs, rounds, 1e3 * median(plain_steps));
  for (int kind = 1; kind < 3; ++kind) {
    std::vector<double> steps, store, shares, firsts, runs, run_shares;
    for (size_t i = 0; i < kinds[kind].size(); ++i) {
      const TrainingRound& r = kinds[kind][i];
      steps.push_back(r.step_seconds);
      store.push_back(r.store_per_step);
      shares.push_back(r.store_per_step / kinds[0][i].step_seconds);  // against the same round's plain step
      firsts.push_back(r.first_epoch_extra);
      runs.push_back(r.store_per_run);
      run_shares.push_back(r.store_seconds / r.wall_seconds);
    }
    std::printf(
        "[ store ] %-10s median step %.3f ms; the store %.1f us a step from the second epoch on (its epochs' "
        "records spread over their steps) = %.3f%% of a plain step: %s; once a run: its start and end %.1f ms, "
        "its first epoch %.1f ms more than a later one; all the store's time %.2f%% of the whole run\n",
        name_of(kind == 2), 1e3 * median(steps), 1e6 * median(store), 100 * median(shares),
        verdict(median(shares) < 0.01), 1e3 * median(runs), 1e3 * median(firsts), 100 * median(run_shares));
  }
  fs::remove_all(data);
}

void run(const Stores& stores, int rounds) {
  char cpu[256] = "";
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "model name : %255[^\n]", cpu) == 1) break;
    std::fclose(f);
  }
  PostgresConnection server(stores.postgres, true);
  SqlStatement fsync(server, "SHOW fsync");
  std::printf("[ store ] %s, %ld CPUs; %s (a private server: fsync %s, Unix socket)\n", cpu,
              ::sysconf(_SC_NPROCESSORS_ONLN), server.database_version().c_str(),
              fsync.step() ? fsync.text(0).c_str() : "?");

  // Records per second, the stores alternating.
  std::vector<Throughput> alone[2];
  for (int round = 0; round < rounds; ++round)
    for (bool use_postgres : {round % 2 == 1, round % 2 == 0})
      alone[use_postgres].push_back(recorder_alone(stores.fresh(use_postgres)));
  for (bool use_postgres : {false, true}) {
    std::vector<double> steps, epochs, records;
    for (const Throughput& t : alone[use_postgres]) {
      steps.push_back(t.steps_per_second);
      epochs.push_back(t.epochs_per_second);
      records.push_back(t.records_per_second);
    }
    std::printf(
        "[ store ] %-10s recorder alone: %.0f steps/s (200-step transactions), %.0f epoch commits/s, %.0f "
        "records/s overall (median of %d runs of 10,000 steps and 20 epochs)\n",
        name_of(use_postgres), median(steps), median(epochs), median(records), rounds);
  }
  copy_speed(stores, 5);

  // The worst case for the store: a tiny model and images, so steps are short, and short epochs, so each epoch's
  // records weigh on few steps.
  TrainConfig tiny;
  tiny.depth = 20;
  tiny.epochs = 8;  // a run keeps its connection: its later epochs show what a step pays
  tiny.batch_size = 8;
  step_share(stores, rounds, tiny, 120, 16, "worst case: ResNet-20, 16 px, batch 8");  // 24 steps an epoch
  // The run a user starts by default (ResNet-18, batch 64, Fashion-MNIST's 28 px), in epochs of 10 steps where
  // Fashion-MNIST's are 750: each epoch's records weigh 75 times what they do in the real run.
  TrainConfig usual;
  usual.epochs = 3;
  step_share(stores, rounds, usual, 400, 28, "the default run: ResNet-18, 28 px, batch 64");
}

}  // namespace
}  // namespace ampwb

int main(int argc, char** argv) {
  using namespace ampwb;
  try {
    const int rounds = argc > 1 ? std::stoi(argv[1]) : 5;  // ampwb_store_throughput [ROUNDS]
    const fs::path folder = fs::temp_directory_path() / ("ampwb_bench_store_" + std::to_string(::getpid()));
    fs::create_directories(folder);
    const test::PostgresServer server("ampwb_bench");
    run({folder, server.uri()}, rounds);
    fs::remove_all(folder);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampwb_store_throughput: %s\n", e.what());
    return 1;
  }
}
