// Rounds of benchmarks, each configuration once a round, the order rotated so that none always goes first.
#include "train/alternating_benchmark.h"

#include <algorithm>
#include <numeric>

namespace ampwb {

BenchConfig bench_config_of(const TrainConfig& config, int image_size, int classes) {
  BenchConfig b;
  b.depth = config.depth;
  b.image_size = image_size;
  b.batch_size = config.batch_size;
  b.num_classes = classes;
  b.precision = config.precision.mode;
  b.device = config.device;
  b.threads = config.threads;
  b.seed = config.seed;
  b.stem = config.stem;
  b.conv_algorithm = config.conv_algorithm;
  b.deterministic = config.deterministic;
  b.host_sync = config.host_sync;
  b.cuda_graphs = config.cuda_graphs;
  return b;
}

std::vector<std::vector<double>> time_in_alternation(const std::vector<BenchConfig>& configs,
                                                     const AlternatingOptions& options,
                                                     const std::function<void(int round, int config)>& progress,
                                                     const std::atomic<bool>* cancel, MachineLoad* load) {
  std::vector<std::vector<double>> images_per_second(configs.size());
  std::vector<MachineLoad> turns;
  std::vector<double> turn_seconds;  // of timed steps: a faster configuration's turn weighs less in the load
  const auto result = [&] {
    if (load) *load = mean_load(turns, turn_seconds);
    return images_per_second;
  };
  const int n = static_cast<int>(configs.size());
  for (int round = 0; round < options.rounds; ++round) {
    std::vector<double> this_round(configs.size());
    for (int turn = 0; turn < n; ++turn) {
      if (cancel && *cancel) return result();
      const int c = (round + turn) % n;
      if (progress) progress(round, c);
      BenchConfig b = configs[static_cast<size_t>(c)];
      b.warmup = options.warmup;
      b.steps = options.steps;
      const BenchResult timed = run_benchmark(b);
      this_round[static_cast<size_t>(c)] = timed.images_per_second;
      turns.push_back(timed.load);
      turn_seconds.push_back(std::accumulate(timed.step_ms.begin(), timed.step_ms.end(), 0.0) / 1000);
    }
    for (size_t c = 0; c < configs.size(); ++c) images_per_second[c].push_back(this_round[c]);
  }
  return result();
}

std::vector<BenchConfig> distinct_configurations(const std::vector<BenchConfig>& configs,
                                                 std::vector<size_t>* of_config) {
  std::vector<BenchConfig> distinct;
  if (of_config) of_config->clear();
  for (BenchConfig c : configs) {
    c.seed = 0;
    const auto at = std::find(distinct.begin(), distinct.end(), c);
    if (of_config) of_config->push_back(static_cast<size_t>(at - distinct.begin()));
    if (at == distinct.end()) distinct.push_back(c);
  }
  return distinct;
}

AlternatingSpeed time_runs_in_alternation(const std::vector<int64_t>& runs, const std::vector<BenchConfig>& configs,
                                          const AlternatingOptions& options,
                                          const std::function<void(int round, int run)>& progress,
                                          const std::atomic<bool>* cancel) {
  std::vector<size_t> of_run;
  const std::vector<BenchConfig> distinct = distinct_configurations(configs, &of_run);
  AlternatingSpeed timed;
  if (distinct.size() < 2) return timed;
  std::vector<int> first_run(distinct.size(), -1);
  for (size_t r = of_run.size(); r-- > 0;) first_run[of_run[r]] = static_cast<int>(r);
  timed.runs = runs;
  timed.steps_per_round = options.steps;
  timed.data = "synthetic " + std::to_string(distinct[0].image_size) + " px images, batch " +
               std::to_string(distinct[0].batch_size);
  const std::vector<std::vector<double>> rounds = time_in_alternation(
      distinct, options,
      [&](int round, int config) {
        if (progress) progress(round, first_run[static_cast<size_t>(config)]);
      },
      cancel, &timed.load);
  for (size_t c : of_run) timed.images_per_second.push_back(rounds[c]);
  return timed;
}

}  // namespace ampwb
