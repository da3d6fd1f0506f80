// A run's training speed and the speed-up of one run over another, defined once for every view that shows them
// (the comparison table, the step-time split, the diagnosis, `ampwb compare` and `explain`, the report):
//
//   speed    = images per step / the median time of a steady-state training step
//   speed-up = the run's speed / the baseline's speed
//
// A step's time is the wall time between its result and the one before it (StepReport::wall_seconds): the wait
// for its data, its arithmetic and the host's work between steps. Steady state leaves out each epoch's first step
// (it follows the validation pass and the loader's start), each epoch's last (it is probed for the gradient
// histograms and may be a partial batch), the run's first kWarmupSteps steps (caches, buffers and primitives are
// made then) and steps probed for per-layer numerics. The spread of a speed is its interquartile range over steps;
// the speed-up's is a 95% bootstrap interval over blocks of consecutive steps, so slow drift of the machine within
// a run widens it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/run_record.h"
#include "train/events.h"
#include "train/machine_load.h"
#include "train/run_details.h"

namespace ampwb {

constexpr int64_t kWarmupSteps = 5;

struct RunSpeed {
  int64_t steps = 0;           // steady-state steps measured; 0 when the run has none
  double images_per_step = 0;  // of all the run's processes together
  double median_seconds = 0;   // per step
  double q1_seconds = 0, q3_seconds = 0;
  std::vector<double> block_median_seconds;  // of consecutive blocks of steps, in order (the bootstrap's units)

  bool known() const { return steps > 0 && median_seconds > 0; }
  double images_per_second() const { return known() ? images_per_step / median_seconds : 0; }
  // The interquartile range in images/s: the slower quarter's edge, then the faster's.
  double images_per_second_q1() const { return known() ? images_per_step / q3_seconds : 0; }
  double images_per_second_q3() const { return known() ? images_per_step / q1_seconds : 0; }
};

// The run's speed from its recorded steps (in step order), the images of a step in all its processes
// (RunRecord::global_batch_size) and its numerics_every (TrainConfig: the steps probed for per-layer numerics, whose
// host work is not a step's).
RunSpeed measure_speed(const std::vector<StepReport>& steps, int64_t images_per_step, int64_t numerics_every);

struct SpeedUp {
  double ratio = 0;          // 0 when either speed is unknown
  double low = 0, high = 0;  // the interval; 0 and infinity when either run has too few steps for one
  double confidence = 0.95;  // that it holds the true ratio: 95% for two runs' steps, 97% for 6 rounds in alternation
  bool known() const { return ratio > 0; }
  // The interval leaves out 1.0: the runs' speeds differ by more than their own step-to-step noise.
  bool distinguishable() const { return known() && (low > 1 || high < 1); }
};

SpeedUp speed_up(const RunSpeed& run, const RunSpeed& baseline);

// Timed in alternation (train/alternating_benchmark.h): the images/s of each round, the run's and the baseline's.
// The speed-up is the median of the rounds' ratios; its interval runs from the smallest to the largest, which holds
// the median ratio with probability 1 - 2^(1 - rounds): 97% for 6 rounds, too little (no interval) below 6.
constexpr size_t kIntervalRounds = 6;
SpeedUp speed_up_over_rounds(const std::vector<double>& run, const std::vector<double>& baseline);

// The speed-up of run `run` over run `baseline` from their sweep's alternating record; unknown when it holds
// neither, or when they are one configuration (seeds of it share one timing: nothing was timed between them).
SpeedUp alternating_speed_up(const AlternatingSpeed& timed, int64_t run, int64_t baseline);

// "1.32× (95% interval 1.25–1.40)", "0.98× (97% interval 0.93–1.04): not distinguishable from 1.0×", "-".
std::string speed_up_text(const SpeedUp& s);
// "1.32×" (faster) or "1.6× slower": the ratio alone, as a sentence reads it.
std::string speed_up_ratio_text(const SpeedUp& s);
// The heading of a ratio whose interval holds 1.0×, with the interval that makes it so: "No speed-up distinguishable
// from the noise: 0.98× (interval 0.93–1.04)"; where the interval spans more than a factor of two, "Speed-up not
// measured closely enough to tell: 0.09× (interval 0.05–1.54)", not a "no speed-up" that reads as the same speed.
std::string speed_up_within_noise_headline(const SpeedUp& s);
// "350.2 images/s (interquartile range 340.1–360.5, 412 steps)", "-".
std::string speed_text(const RunSpeed& s);
// The same in a table's cell, whose note says what the brackets hold: "1.32× (1.25–1.40)", "0.98× (0.93–1.04),
// within noise"; "350.2 images/s (IQR 340.1–360.5)".
std::string speed_up_cell(const SpeedUp& s);
std::string speed_cell(const RunSpeed& s);

struct RunLoad {
  int64_t run = 0;
  MachineLoad load;  // the mean over its epochs (mean_epoch_times)
};

// Loads further apart than this (in shares of the CPUs busy with other work) time runs under different conditions.
constexpr double kLoadDifference = 0.1;

// Why these runs' timings cannot be trusted or compared, in the user's words: "timings unreliable: the machine was
// 60% busy with other work during run 5", or runs measured under loads kLoadDifference apart; empty when neither
// (or when no run recorded its load).
std::string timing_warning(const std::vector<RunLoad>& runs);
// The same of a sweep's timing in alternation, which evens out the machine's drift but not a load that shares
// every turn: "timed in alternation while the machine was 45% busy with other work"; empty when it was quiet (or
// the record is older than its load).
std::string alternation_warning(const AlternatingSpeed& timed);

// What a run's steps do besides the baseline's with another precision: other work (another model, image size,
// batch or number of processes) or the same elsewhere (another device, number of CPU threads or machine), e.g.
// "other work (ResNet-20 against ResNet-18), elsewhere (host b against host a)"; empty when neither (or when the
// records do not say). A speed-up between runs that differ so is not their precision's alone.
std::string work_difference(const RunRecord& run, const RunRecord& baseline);

}  // namespace ampwb
