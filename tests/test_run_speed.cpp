// The one definition of a run's speed and of a speed-up (analysis/run_speed.h) on constructed steps, the machine-load
// meter against a real busy process, and the warning that names a run timed beside other work.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "analysis/run_speed.h"
#include "analysis/time_comparison.h"
#include "spinners.h"
#include "train/alternating_benchmark.h"
#include "train/gpu_load.h"
#include "train/machine_load.h"

namespace ampwb {
namespace {

// Steps with the given durations, `per_epoch` to an epoch, in order.
std::vector<StepReport> steps_taking(const std::vector<double>& seconds, int per_epoch) {
  std::vector<StepReport> steps;
  double wall = 0;
  for (size_t i = 0; i < seconds.size(); ++i) {
    wall += seconds[i];
    steps.push_back(
        {.epoch = static_cast<int>(i / per_epoch) + 1, .step = static_cast<int64_t>(i), .wall_seconds = wall});
  }
  return steps;
}

std::vector<double> noisy(double median, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> noise(0, 0.08);  // a few per cent step to step, a long tail
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i) v.push_back(median * noise(rng));
  return v;
}

TEST(RunSpeed, SteadyStepsLeaveOutWarmUpEpochEdgesAndProbedSteps) {
  // 2 epochs of 10 steps: every step 0.1 s but the warm-up (1 s), each epoch's first (after validation: 5 s),
  // each epoch's last (probed for histograms: 2 s) and every 4th (probed for numerics: 3 s).
  std::vector<double> seconds(20, 0.1);
  for (int i = 0; i < kWarmupSteps; ++i) seconds[static_cast<size_t>(i)] = 1;
  seconds[10] = 5;
  seconds[9] = seconds[19] = 2;
  for (size_t i = 3; i < 20; i += 4) seconds[i] = 3;
  const RunSpeed s = measure_speed(steps_taking(seconds, 10), 16, 4);
  // Kept: 5, 6, 8 (epoch 1), 12, 13, 14, 16, 17, 18 (epoch 2: not 10, the first, nor 11 and 15, probed).
  EXPECT_EQ(s.steps, 9);
  EXPECT_NEAR(s.median_seconds, 0.1, 1e-9);
  EXPECT_NEAR(s.images_per_second(), 160, 1e-6);
  EXPECT_FALSE(measure_speed(steps_taking({0.1, 0.1}, 10), 16, 0).known()) << "no steady step";
  EXPECT_EQ(speed_text(RunSpeed{}), "-");
}

TEST(RunSpeed, MedianAndInterquartileRangeOverSteps) {
  std::vector<double> seconds(kWarmupSteps, 1.0);  // the warm-up
  for (double s : {0.1, 0.2, 0.3, 0.4, 0.5}) seconds.push_back(s);
  seconds.push_back(9);  // the epoch's last: left out
  const RunSpeed s = measure_speed(steps_taking(seconds, 100), 10, 0);
  ASSERT_EQ(s.steps, 5);
  EXPECT_NEAR(s.median_seconds, 0.3, 1e-12);
  EXPECT_NEAR(s.q1_seconds, 0.2, 1e-12);
  EXPECT_NEAR(s.q3_seconds, 0.4, 1e-12);
  EXPECT_NEAR(s.images_per_second_q1(), 25, 1e-9);  // the slower quarter's edge first
  EXPECT_NEAR(s.images_per_second_q3(), 50, 1e-9);
  EXPECT_EQ(speed_text(s), "33.3 images/s (interquartile range 25.0\u201350.0, 5 steps)");
  EXPECT_EQ(speed_cell(s), "33.3 images/s (IQR 25.0\u201350.0)");  // a table's, its note saying what IQR is
}

// Pairs of runs whose steps come from one distribution: a 95% interval leaves out 1.0 for about 5% of them.
TEST(RunSpeed, RunsThatDifferOnlyInNoiseAreNotDistinguishable) {
  int distinguished = 0;
  constexpr int kPairs = 100;
  for (uint64_t seed = 1; seed <= kPairs; ++seed) {
    const RunSpeed a = measure_speed(steps_taking(noisy(0.1, 200, seed), 50), 32, 0);
    const RunSpeed b = measure_speed(steps_taking(noisy(0.1, 200, seed + 1000), 50), 32, 0);
    const SpeedUp s = speed_up(b, a);
    distinguished += s.distinguishable();
    EXPECT_LE(s.low, s.ratio);
    EXPECT_GE(s.high, s.ratio);
    EXPECT_NEAR(s.ratio, 1, 0.05);
    if (seed == 1) {
      EXPECT_NE(speed_up_text(s).find("not distinguishable from 1.0\u00d7"), std::string::npos);
      EXPECT_TRUE(speed_up_cell(s).ends_with("), within noise")) << speed_up_cell(s);
    }
  }
  EXPECT_LE(distinguished, kPairs / 10) << "intervals too narrow for the noise";
}

TEST(RunSpeed, ARealSpeedUpIsDistinguishableAndItsIntervalHoldsIt) {
  const RunSpeed fp32 = measure_speed(steps_taking(noisy(0.15, 200, 7), 50), 32, 0);
  const RunSpeed bf16 = measure_speed(steps_taking(noisy(0.10, 200, 8), 50), 32, 0);
  const SpeedUp s = speed_up(bf16, fp32);
  EXPECT_TRUE(s.distinguishable()) << speed_up_text(s);
  EXPECT_NEAR(s.ratio, 1.5, 0.05);
  EXPECT_LT(s.low, 1.5);
  EXPECT_GT(s.high, 1.5);
  EXPECT_EQ(speed_up_text(speed_up(bf16, fp32)), speed_up_text(s)) << "the same interval every time";
  EXPECT_EQ(speed_up_cell(s), speed_up_text(s).replace(speed_up_text(s).find("95% interval "), 13, ""));
  // Different batches: images per second, not steps.
  const RunSpeed big = measure_speed(steps_taking(noisy(0.15, 200, 7), 50), 64, 0);
  EXPECT_NEAR(speed_up(big, fp32).ratio, 2.0, 1e-12);
  // A run with one steady step gives a ratio but no interval.
  const RunSpeed one = measure_speed(steps_taking(std::vector<double>(kWarmupSteps + 2, 0.1), 100), 32, 0);
  ASSERT_EQ(one.steps, 1);
  EXPECT_FALSE(speed_up(one, fp32).distinguishable());
  EXPECT_NE(speed_up_text(speed_up(one, fp32)).find("too few steps to tell it from 1.0\u00d7)"), std::string::npos);
  EXPECT_TRUE(speed_up_cell(speed_up(one, fp32)).ends_with("\u00d7 (too few to tell)"));
  // Nor do 4 steady steps, however far apart their speeds (1.5x): the bootstrap's medians take too few values; from
  // 8 an interval.
  const RunSpeed four = measure_speed(steps_taking(noisy(0.10, kWarmupSteps + 5, 9), 100), 32, 0);
  ASSERT_EQ(four.steps, 4);
  EXPECT_FALSE(speed_up(four, fp32).distinguishable()) << speed_up_text(speed_up(four, fp32));
  EXPECT_TRUE(speed_up_cell(speed_up(four, fp32)).ends_with("\u00d7 (too few to tell)"));
  const RunSpeed eight = measure_speed(steps_taking(noisy(0.10, kWarmupSteps + 9, 9), 100), 32, 0);
  ASSERT_EQ(eight.steps, 8);
  EXPECT_TRUE(speed_up(eight, fp32).distinguishable()) << speed_up_text(speed_up(eight, fp32));
}

// Rounds timed in alternation: the median of the rounds' ratios, and from 6 rounds an interval from the smallest
// ratio to the largest.
TEST(RunSpeed, RoundsTimedInAlternationGiveTheMedianRatioAndItsRange) {
  const std::vector<double> fp32{100, 90, 110, 100, 95, 105}, bf16{150, 144, 154, 160, 133, 168};
  const SpeedUp s = speed_up_over_rounds(bf16, fp32);
  // Ratios 1.5, 1.6, 1.4, 1.6, 1.4, 1.6: the median 1.55, from 1.4 to 1.6.
  EXPECT_NEAR(s.ratio, 1.55, 1e-12);
  EXPECT_NEAR(s.low, 1.4, 1e-12);
  EXPECT_NEAR(s.high, 1.6, 1e-12);
  EXPECT_TRUE(s.distinguishable());
  EXPECT_EQ(speed_up_text(s), "1.55\u00d7 (97% interval 1.40\u20131.60)") << "1 - 2^-5 for 6 rounds";
  // A bound next to 1 keeps the decimals that tell it from 1, so that the interval printed leaves 1.0 out as the
  // verdict says.
  const SpeedUp slower = speed_up_over_rounds({94, 99.6, 97, 97, 97, 97}, {100, 100, 100, 100, 100, 100});
  EXPECT_TRUE(slower.distinguishable());
  EXPECT_EQ(speed_up_text(slower), "0.97\u00d7 (97% interval 0.94\u20130.996)");
  const SpeedUp faster = speed_up_over_rounds({100.4, 104, 104, 104, 104, 106}, {100, 100, 100, 100, 100, 100});
  EXPECT_EQ(speed_up_text(faster), "1.04\u00d7 (97% interval 1.004\u20131.06)");
  const SpeedUp barely = speed_up_over_rounds({99.0, 99.6, 99.6, 99.6, 99.6, 99.8}, {100, 100, 100, 100, 100, 100});
  EXPECT_EQ(speed_up_text(barely), "0.996\u00d7 (97% interval 0.99\u20130.998)");
  EXPECT_EQ(speed_up_ratio_text(barely), "1.004\u00d7 slower");
  const SpeedUp hair =
      speed_up_over_rounds({99.985, 99.999, 99.999, 99.999, 99.999, 99.9995}, {100, 100, 100, 100, 100, 100});
  EXPECT_EQ(speed_up_text(hair), "0.9999\u00d7 (97% interval 0.9998\u20130.9999)");
  const SpeedUp few = speed_up_over_rounds({150, 144}, {100, 90});
  EXPECT_NEAR(few.ratio, 1.55, 1e-12);
  EXPECT_FALSE(few.distinguishable()) << "two rounds bound nothing";
  AlternatingSpeed timed{{7, 9, 10}, {fp32, bf16, fp32}, 6, "synthetic 16 px images, batch 8", {}};
  EXPECT_NEAR(alternating_speed_up(timed, 9, 7).ratio, 1.55, 1e-12);
  EXPECT_FALSE(alternating_speed_up(timed, 9, 8).known()) << "run 8 was not timed with them";
  EXPECT_FALSE(alternating_speed_up(timed, 10, 7).known()) << "another seed of run 7's configuration: one timing";
}

// Real benchmarks, each configuration once a round in a rotated order, each round's speed from its own steps.
TEST(AlternatingBenchmark, EachRoundTimesEveryConfigurationInARotatedOrder) {
  TrainConfig c;
  c.depth = 20;
  c.batch_size = 4;
  c.threads = 1;
  BenchConfig fp32 = bench_config_of(c, 8, 2);
  c.precision = precision_preset("amp-bf16");
  BenchConfig bf16 = bench_config_of(c, 8, 2);
  EXPECT_EQ(fp32.image_size, 8);
  EXPECT_EQ(bf16.precision, PrecisionMode::AmpBf16);
  std::vector<std::pair<int, int>> turns;
  const auto ips = time_in_alternation({fp32, bf16}, {.rounds = 3, .warmup = 1, .steps = 2},
                                       [&](int round, int config) { turns.emplace_back(round, config); });
  EXPECT_EQ(turns, (std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 1}, {1, 0}, {2, 0}, {2, 1}}));
  ASSERT_EQ(ips.size(), 2u);
  for (const auto& rounds : ips) {
    ASSERT_EQ(rounds.size(), 3u);
    for (double v : rounds) EXPECT_GT(v, 0);
  }
  std::atomic<bool> cancel{true};
  EXPECT_TRUE(time_in_alternation({fp32, bf16}, {}, {}, &cancel)[0].empty()) << "cancelled before the first turn";
}

// Alternation evens out the machine's drift, not a load that takes its share of every turn: the timing records
// the other work it ran beside (here a process spinning on every CPU), and its speed-ups are said to be unreliable.
TEST(AlternatingBenchmark, RecordsTheOtherWorkOfItsTurns) {
  TrainConfig c;
  c.depth = 20;
  c.batch_size = 4;
  c.threads = 1;
  const BenchConfig fp32 = bench_config_of(c, 8, 2);
  c.precision = precision_preset("amp-bf16");
  const BenchConfig bf16 = bench_config_of(c, 8, 2);
  AlternatingSpeed timed;
  timed.runs = {1, 2};
  {
    const Spinners busy;
    timed.images_per_second =
        time_in_alternation({fp32, bf16}, {.rounds = 2, .warmup = 1, .steps = 3}, {}, nullptr, &timed.load);
  }
  ASSERT_TRUE(timed.load.known());
  EXPECT_GE(timed.load.other_cpu, kBusyMachine) << machine_load_text(timed.load);
  const std::string warning = alternation_warning(timed);
  EXPECT_EQ(warning.rfind("timed in alternation while the machine was ", 0), 0u) << warning;
  EXPECT_NE(warning.find("% busy with other work"), std::string::npos) << warning;
  timed.load = {0.05, 0, 0};
  EXPECT_EQ(alternation_warning(timed), "");
  // A record stored before the load was kept reads as not recorded, and says nothing of it.
  AlternatingSpeed older;
  from_json(nlohmann::json::parse(R"({"runs": [1, 2], "images_per_second": [[100], [160]], "steps_per_round": 6,
                                      "data": "synthetic 16 px images, batch 8"})"),
            older);
  EXPECT_EQ(older.images_per_second[1][0], 160);
  EXPECT_FALSE(older.load.known());
  EXPECT_EQ(alternation_warning(older), "");
}

TEST(RunSpeed, TheWarningNamesTheBusyRunAndRunsUnderDifferentLoads) {
  const MachineLoad quiet{0.02, 0, 0}, busy{0.6, 0, 0}, stolen{0.01, 0.3, 0}, some{0.15, 0, 0};
  EXPECT_EQ(timing_warning({{3, quiet}, {5, busy}}),
            "timings unreliable: the machine was 60% busy with other work during run 5");
  // Runs busy alike in one phrase, however many (a sweep's).
  const MachineLoad busier{0.54, 0, 0};
  EXPECT_EQ(timing_warning({{3, busy}, {4, busy}, {5, busier}, {6, quiet}}),
            "timings unreliable: the machine was 54-60% busy with other work during runs 3, 4 and 5");
  EXPECT_EQ(timing_warning({{3, busy}, {4, busy}}),
            "timings unreliable: the machine was 60% busy with other work during runs 3 and 4");
  EXPECT_EQ(timing_warning({{3, quiet}, {5, stolen}}),
            "timings unreliable: the hypervisor took 30% of the CPUs for other guests during run 5");
  EXPECT_EQ(timing_warning({{3, quiet}, {5, some}}),
            "timings unreliable: the runs were measured under different loads (15% of the CPUs busy with other "
            "work during run 5, 2% during run 3)");
  EXPECT_EQ(timing_warning({{3, quiet}, {5, quiet}}), "");
  EXPECT_EQ(timing_warning({{3, quiet}, {5, MachineLoad{}}}), "") << "an old run without a load: nothing to say";
  EXPECT_EQ(machine_load_text(MachineLoad{}), "not recorded");
  EXPECT_EQ(machine_load_text({0.123, 0.01, 3700}), "12% of the CPUs busy with other work, 1% steal, 3.7 GHz");
  EXPECT_EQ(machine_load_cell({0.123, 0.01, 3700}), "12% other work, 1% steal, 3.7 GHz");
}

// On a GPU the load says its clock and who else used it; another process on the GPU makes the timings unreliable.
TEST(TimingWarning, NamesOtherProcessesOnTheGpu) {
  MachineLoad alone{0.01, 0, 0, 1410, 1980, 0};
  MachineLoad shared = alone;
  shared.gpu_other_processes = 2;
  EXPECT_EQ(machine_load_text(alone),
            "1% of the CPUs busy with other work, 0% steal; GPU at 1.41 of 1.98 GHz, no other process on it");
  EXPECT_EQ(machine_load_text(shared),
            "1% of the CPUs busy with other work, 0% steal; GPU at 1.41 of 1.98 GHz, 2 other processes on it");
  EXPECT_EQ(machine_load_cell(alone), "1% other work, 0% steal; GPU 1.41 of 1.98 GHz, no other process");
  EXPECT_EQ(machine_load_cell(shared), "1% other work, 0% steal; GPU 1.41 of 1.98 GHz, 2 other processes");
  EXPECT_EQ(timing_warning({{3, alone}, {5, alone}}), "");
  EXPECT_EQ(timing_warning({{3, alone}, {5, shared}}),
            "timings unreliable: 2 other processes used the GPU during run 5");
  // Epochs that read their GPU average its clock and keep the most other processes any of them saw.
  std::vector<EpochTimes> epochs(3);
  for (size_t i = 0; i < epochs.size(); ++i) {
    epochs[i].epoch = static_cast<int>(i + 1);
    epochs[i].steps = 10;
    epochs[i].load = alone;
    epochs[i].load.gpu_mhz = 1000 + 400 * static_cast<double>(i);
  }
  epochs[1].load.gpu_other_processes = 1;
  const MachineLoad mean = mean_epoch_times(epochs).load;  // every epoch's, the first's too
  EXPECT_DOUBLE_EQ(mean.gpu_mhz, 1400);
  EXPECT_EQ(mean.gpu_max_mhz, 1980);
  EXPECT_EQ(mean.gpu_other_processes, 1);
}

// Two records of one run on one machine, as the store gives them back.
RunRecord recorded(int64_t id, const std::string& mode) {
  RunRecord r;
  r.id = id;
  r.depth = 18;
  r.batch_size = 64;
  r.image_size = 28;
  r.device = DeviceChoice::cpu();
  r.backend = "cpu (oneDNN 2.6.3, avx512_core_bf16, 2 threads, convolutions of small images as matrix products)";
  r.host = "lab-1";
  r.config.precision = precision_preset(mode);
  r.info.model_summary = "ResNet-18 (small stem, 10 classes), 11.2 M parameters";
  return r;
}

// A speed-up is the precision's only between runs whose steps do the same work in the same place: each other
// difference is named, in the run's words against the baseline's.
TEST(WorkDifference, NamesWhatIsNotThePrecision) {
  const RunRecord fp32 = recorded(1, "fp32"), bf16 = recorded(2, "amp-bf16");
  EXPECT_EQ(work_difference(bf16, fp32), "");
  RunRecord other = bf16;
  other.depth = 20;
  other.info.model_summary = "ResNet-20 (small stem, 10 classes), 0.272 M parameters";
  EXPECT_EQ(work_difference(other, fp32), "other work (ResNet-20 against ResNet-18)");
  other = bf16;
  other.info.model_summary = "ResNet-18 (imagenet stem, 10 classes), 11.2 M parameters";
  EXPECT_EQ(work_difference(other, fp32),
            "other work (ResNet-18 (imagenet stem, 10 classes) against ResNet-18 (small stem, 10 classes))");
  other = bf16;
  other.image_size = 32;
  other.batch_size = 128;
  other.info.world_size = 2;
  EXPECT_EQ(work_difference(other, fp32),
            "other work (32 px images against 28 px images; batch 128 against batch 64; 2 processes against 1 "
            "process)");
  other = bf16;
  other.backend = "cpu (oneDNN 2.6.3, avx512_core_bf16, 1 thread)";
  other.host = "lab-2";
  EXPECT_EQ(work_difference(other, fp32), "elsewhere (1 thread against 2 threads; host lab-2 against host lab-1)");
  other.depth = 20;
  EXPECT_EQ(work_difference(other, fp32),
            "other work (ResNet-20 against ResNet-18), elsewhere (1 thread against 2 threads; host lab-2 against host "
            "lab-1)");
  // A GPU by its name, not its index: two of one kind are one place, and TF32 on or off is the precision's.
  other = bf16;
  other.device = DeviceChoice::cuda(0);
  other.backend = "cuda:0 (NVIDIA H200, 139.8 GiB, sm_90, 132 SMs; CUDA 13.0; TF32 off)";
  EXPECT_EQ(work_difference(other, fp32), "elsewhere (NVIDIA H200 against the CPU)");
  RunRecord on_gpu1 = other;
  on_gpu1.device = DeviceChoice::cuda(1);
  on_gpu1.backend = "cuda:1 (NVIDIA H200, 139.8 GiB, sm_90, 132 SMs; CUDA 13.0; TF32 on)";
  EXPECT_EQ(work_difference(on_gpu1, other), "");
  on_gpu1.backend = "cuda:1 (NVIDIA A100-SXM4-80GB, 79.3 GiB, sm_80, 108 SMs; CUDA 13.0; TF32 on)";
  EXPECT_EQ(work_difference(on_gpu1, other), "elsewhere (NVIDIA A100-SXM4-80GB against NVIDIA H200)");
  // Only how the same work is done: the backend's other choices are what a comparison is for.
  other = bf16;
  other.backend = "cpu (oneDNN 2.6.3, avx512_core_bf16, 2 threads, FP32 3x3 convolutions by Winograd F(2x2,3x3))";
  other.config.cuda_graphs = CudaGraphs::Off;
  EXPECT_EQ(work_difference(other, fp32), "");
  // A record that does not say (an old row without its run information) is not taken for a difference.
  other = bf16;
  other.info = {};
  other.host.clear();
  EXPECT_EQ(work_difference(other, fp32), "");
}

// A CPU run reads no GPU, and neither does a GPU setting naming a GPU that CUDA_VISIBLE_DEVICES hides.
TEST(GpuState, NothingOffAVisibleGpu) {
  EXPECT_FALSE(read_gpu_state("cpu"));
  const char* before = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::optional<std::string> kept = before ? std::optional<std::string>(before) : std::nullopt;
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_FALSE(read_gpu_state("cuda"));
  setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  EXPECT_FALSE(read_gpu_state("cuda:1"));
  if (kept)
    setenv("CUDA_VISIBLE_DEVICES", kept->c_str(), 1);
  else
    unsetenv("CUDA_VISIBLE_DEVICES");
}

// A process spinning beside the meter shows up as other work; without it, the share is small. The busy share is
// of the whole machine: one spinning process on n CPUs is at most 1/n of it.
TEST(MachineLoadMeter, SeesAProcessSpinningBesideIt) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const pid_t spinner = fork();
  ASSERT_GE(spinner, 0);
  if (spinner == 0)
    for (;;) {
    }
  MachineLoadMeter meter;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  while (std::chrono::steady_clock::now() < until) {
  }  // this process spins too: its own time is not other work
  const MachineLoad load = meter.stop();
  kill(spinner, SIGKILL);
  waitpid(spinner, nullptr, 0);
  ASSERT_TRUE(load.known());
  EXPECT_GT(load.other_cpu, 0.5 / static_cast<double>(cpus)) << machine_load_text(load);
  EXPECT_LE(load.other_cpu, 1.0);
  EXPECT_GE(load.steal, 0.0);
}

}  // namespace
}  // namespace ampwb
