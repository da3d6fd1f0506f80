// A benchmark, not a test: the cost of recording into the run store against step time (the figures in
// docs/benchmarks.md, "Run store"), in a real training and with the recorder alone fed synthetic events. The goal
// (under 2% of a step) is printed beside the figures; the exit status says only whether the runs worked.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "bench_util.h"
#include "core/error.h"
#include "image_folder_util.h"
#include "store/run_store.h"
#include "store/store_recorder.h"
#include "train/trainer.h"

namespace ampwb {
namespace {
using bench::Clock;
using bench::median;

// A private folder for the run store, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("ampwb_bench_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const char* verdict(bool met) { return met ? "goal met" : "GOAL MISSED"; }

class StepTimes : public TrainObserver {
 public:
  void on_step(const StepReport& r) override {
    if (r.epoch == last_epoch_) gaps.push_back(r.wall_seconds - last_);  // within an epoch: one step's time
    last_epoch_ = r.epoch;
    last_ = r.wall_seconds;
  }
  std::vector<double> gaps;

 private:
  int last_epoch_ = 0;
  double last_ = 0;
};

// Forwards to a StepTimes and, when given, to a recorder, timing what each of the recorder's callbacks costs.
class Timed : public TrainObserver {
 public:
  Timed(StepTimes& times, TrainObserver* recorder) : times_(times), recorder_(recorder) {}
  void on_start(const RunInfo& e) override {
    time(start_end, [&] { recorder_->on_start(e); });
  }
  void on_step(const StepReport& e) override {
    times_.on_step(e);
    time(step_seconds, [&] { recorder_->on_step(e); });
  }
  void on_epoch(const EpochReport& e) override {
    if (recorder_) epoch_seconds.push_back(0);
    time(recorder_ ? epoch_seconds.back() : start_end, [&] { recorder_->on_epoch(e); });
  }
  void on_end(const RunEnd& e) override {
    time(start_end, [&] { recorder_->on_end(e); });
  }
  double start_end = 0, step_seconds = 0;
  std::vector<double> epoch_seconds;

 private:
  template <class F>
  void time(double& total, F&& f) {
    if (!recorder_) return;
    const auto t = Clock::now();
    f();
    total += std::chrono::duration<double>(Clock::now() - t).count();
  }
  StepTimes& times_;
  TrainObserver* recorder_;
};

// Worst case for the store: a tiny model, so steps are short.
void recording_in_a_training() {
  TempDir dir("overhead");
  const fs::path data = make_stripes_folder("store_overhead", 120, 16);
  TrainConfig c;
  c.data_dir = data.string();
  c.depth = 20;
  c.epochs = 3;
  c.batch_size = 8;
  c.threads = 2;
  c.data.validation_fraction = 0.2;  // 192 training images: 24 steps an epoch
  RunStore store(dir.file("runs.sqlite"));
  std::vector<double> plain_steps, recorded_steps, plain_runs, recorded_runs, step_costs, epoch_costs, run_costs,
      fractions;
  int64_t steps_per_epoch = 0;
  const int pairs = 4;
  for (int pair = 0; pair < pairs; ++pair) {
    for (bool record : {false, true}) {  // alternating, so drifting machine load hits both alike
      StepTimes times;
      StoreRecorder recorder(store, c);
      Timed timed(times, record ? &recorder : nullptr);
      Trainer trainer(c, &timed);
      const auto start = Clock::now();
      AMPWB_CHECK(trainer.run().status == RunStatus::Finished, "the benchmark's training did not finish");
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      (record ? recorded_steps : plain_steps)
          .insert((record ? recorded_steps : plain_steps).end(), times.gaps.begin(), times.gaps.end());
      (record ? recorded_runs : plain_runs).push_back(seconds);
      if (!record) continue;
      AMPWB_CHECK(recorder.error().empty(), "the recorder failed: " << recorder.error());
      const auto stored = store.steps(recorder.run_id());
      steps_per_epoch = static_cast<int64_t>(stored.size()) / c.epochs;
      step_costs.push_back(timed.step_seconds / static_cast<double>(stored.size()));
      epoch_costs.insert(epoch_costs.end(), timed.epoch_seconds.begin(), timed.epoch_seconds.end());
      run_costs.push_back(timed.start_end);
      double all = timed.start_end + timed.step_seconds;
      for (double e : timed.epoch_seconds) all += e;
      fractions.push_back(all / seconds);
    }
  }
  const double step = median(plain_steps);
  const double per_step = median(step_costs) + median(epoch_costs) / static_cast<double>(steps_per_epoch);
  std::printf("[ overhead ] ResNet-20, 16 px, batch 8, %lld steps an epoch, %d epochs; %d runs each, alternating\n",
              static_cast<long long>(steps_per_epoch), c.epochs, pairs);
  std::printf("[ overhead ] median step %.3f ms without recording, %.3f ms with; median run %.3f s vs %.3f s\n",
              1e3 * step, 1e3 * median(recorded_steps), median(plain_runs), median(recorded_runs));
  std::printf(
      "[ overhead ] recorder: on_step %.2f us a step (batches included), on_epoch %.3f ms an epoch, "
      "start + end %.1f ms a run\n",
      1e6 * median(step_costs), 1e3 * median(epoch_costs), 1e3 * median(run_costs));
  std::printf("[ overhead ] per step (epochs amortized): %.2f us = %.3f%% of a step; whole runs: %.3f%% of wall time\n",
              1e6 * per_step, 100 * per_step / step, 100 * median(fractions));
  std::printf("[ overhead ] goal: under 2%% of a step and of wall time: %s\n",
              verdict(per_step / step < 0.02 && median(fractions) < 0.02));
  fs::remove_all(data);
}

// The recorder alone, fed synthetic events as fast as it takes them: what a step and an epoch cost with no
// training around to blur the figure.
void recorder_alone() {
  TempDir dir("recorder_alone");
  RunStore store(dir.file("runs.sqlite"));
  TrainConfig c;
  c.data_dir = dir.path().string();
  RunInfo info;
  info.steps_per_epoch = 500;
  const int epochs = 40;
  std::vector<double> per_epoch;
  StoreRecorderOptions options;
  options.sync_seconds = 0;  // the worst case: every epoch fsynced
  StoreRecorder recorder(store, c, options);
  recorder.on_start(info);
  const auto start = Clock::now();
  double epoch_seconds = 0;
  for (int e = 1; e <= epochs; ++e) {
    for (int64_t n = 0; n < info.steps_per_epoch; ++n) {
      StepReport s;
      s.epoch = e;
      s.step = (e - 1) * info.steps_per_epoch + n;
      s.loss = 1.0f / static_cast<float>(s.step + 1);
      recorder.on_step(s);
    }
    EpochReport r;
    r.epoch = e;
    const auto t = Clock::now();
    recorder.on_epoch(r);
    per_epoch.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    epoch_seconds += per_epoch.back();
  }
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  recorder.on_end({RunStatus::Finished, ""});
  const double steps = static_cast<double>(epochs) * static_cast<double>(info.steps_per_epoch);
  const double per_step = (total - epoch_seconds) / steps;
  std::printf(
      "[ overhead ] recorder alone: %.2f us a step (200-step batches), %.3f ms an epoch commit with fsync "
      "(median of %d)\n",
      1e6 * per_step, 1e3 * median(per_epoch), epochs);
  AMPWB_CHECK(store.steps(recorder.run_id()).size() == static_cast<size_t>(steps), "steps went missing");
  // 20 us is 2% of a 1 ms step, far shorter than any real training step.
  std::printf("[ overhead ] goal: under 20 us a step: %s\n", verdict(per_step < 20e-6));
}

}  // namespace
}  // namespace ampwb

int main() {
  try {
    ampwb::recording_in_a_training();
    ampwb::recorder_alone();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampwb_store_overhead: %s\n", e.what());
    return 1;
  }
}
