// Configurations timed the way benchmarks are timed: in alternation (A B A B ..., the order rotated each round),
// several rounds of steady steps each on synthetic data, so that slow drift of the machine (another program
// starting, the clock throttling) falls on every configuration alike. A precision sweep measures its speed-up so
// after its trainings (analysis/run_speed.h turns the rounds into a speed-up with its interval).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "train/benchmark.h"
#include "train/config.h"
#include "train/run_details.h"

namespace ampwb {

struct AlternatingOptions {
  int rounds = 6;  // the slowest and fastest of 6 rounds bound the median ratio with 97% confidence
  int warmup = 2;  // steps before each round's timed ones (the model is built anew each round)
  int steps = 6;   // timed steps a round
};

// The benchmark of a training configuration: its model, batch, precision and device on synthetic images of its
// (resolved) size and number of classes.
BenchConfig bench_config_of(const TrainConfig& config, int image_size, int classes);

// images_per_second[c][r]: configuration c's speed in round r (its batch over the round's median step). Progress
// is told before each configuration's turn; a cancel flag that becomes true stops between turns (the rounds done
// are returned, the rest empty). `load`, where given, is set to the machine's other work during the timed steps.
std::vector<std::vector<double>> time_in_alternation(const std::vector<BenchConfig>& configs,
                                                     const AlternatingOptions& options = {},
                                                     const std::function<void(int round, int config)>& progress = {},
                                                     const std::atomic<bool>* cancel = nullptr,
                                                     MachineLoad* load = nullptr);

// `configs` less those that differ from an earlier one only in the seed, which does not change a step's time;
// of_config[i] (where given) is config i's index among them.
std::vector<BenchConfig> distinct_configurations(const std::vector<BenchConfig>& configs,
                                                 std::vector<size_t>* of_config = nullptr);

// The runs `runs`, whose configurations' benchmarks are `configs` (bench_config_of), timed so: each distinct
// configuration once a round, its runs sharing its rounds; the record the run store keeps, with the rounds done
// where cancelled. Progress names a configuration by its first run's index. Fewer than two distinct
// configurations have nothing to compare: the record is empty (no runs).
AlternatingSpeed time_runs_in_alternation(const std::vector<int64_t>& runs, const std::vector<BenchConfig>& configs,
                                          const AlternatingOptions& options = {},
                                          const std::function<void(int round, int run)>& progress = {},
                                          const std::atomic<bool>* cancel = nullptr);

}  // namespace ampwb
