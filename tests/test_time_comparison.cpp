// The comparison of two runs' step time by class (analysis/time_comparison.h) on constructed EpochTimes with exact
// ratios: the rows, the mean over epochs without the first, and the sentence's groups, thresholds and wording.
#include <gtest/gtest.h>

#include <vector>

#include "analysis/time_comparison.h"

namespace ampwb {
namespace {

using C = TimeClass;

// A step of `ms` per class given, data wait as given, and `other_ms` of host work.
EpochTimes epoch(int number, std::vector<std::pair<C, double>> ms, double wait_ms, double other_ms = 0,
                 int64_t steps = 10) {
  EpochTimes t;
  t.epoch = number;
  t.steps = steps;
  t.data_wait_seconds = wait_ms / 1000;
  for (const auto& [c, v] : ms) t.op_seconds[static_cast<size_t>(c)] = v / 1000;
  t.step_seconds = t.data_wait_seconds + t.op_total_seconds() + other_ms / 1000;
  return t;
}

const TimeRow& row(const TimeComparison& c, const std::string& label) {
  for (const TimeRow& r : c.rows)
    if (r.label == label) return r;
  throw std::runtime_error("no row " + label);
}

TEST(TimeComparison, MeansLeaveTheFirstEpochsTimesOutAndWeighBySteps) {
  EpochTimes cold = epoch(1, {{C::ConvForward, 100}}, 50);
  EpochTimes a = epoch(2, {{C::ConvForward, 10}}, 2, 0, 10), b = epoch(3, {{C::ConvForward, 40}}, 2, 0, 30);
  a.replayed = 0.5;  // shares of each epoch's steps: their mean, not weighed by the timed steps
  b.replayed = 1.0;
  a.why_not_captured = "a capture failed";
  const EpochTimes mean = mean_epoch_times({cold, a, b});
  EXPECT_DOUBLE_EQ(mean.replayed, 0.75);
  EXPECT_EQ(mean.why_not_captured, "a capture failed");
  EXPECT_EQ(mean.steps, 40);
  EXPECT_DOUBLE_EQ(mean.op_seconds[static_cast<size_t>(C::ConvForward)], (10 * 0.010 + 30 * 0.040) / 40);
  EXPECT_NEAR(mean.data_wait_seconds, 0.002, 1e-15);
  // The machine's load is every epoch's, the first's too: a first epoch slowed by other work shows in the run's
  // epoch times.
  cold.load = {0.44, 0, 2000};
  a.load = b.load = {0.01, 0, 2000};
  EXPECT_DOUBLE_EQ(mean_epoch_times({cold, a, b}).load.other_cpu, (10 * 0.44 + 10 * 0.01 + 30 * 0.01) / 50);
  EXPECT_NEAR(mean_epoch_times({cold}).step_seconds, cold.step_seconds, 1e-15) << "a single epoch is kept";
  EXPECT_EQ(mean_epoch_times({}).steps, 0);
}

TEST(TimeComparison, RowsGiveEachClassItsTimeShareAndSpeedUp) {
  const EpochTimes a = epoch(1,
                             {{C::ConvForward, 30},
                              {C::ConvBackwardData, 30},
                              {C::ConvBackwardWeights, 30},
                              {C::BatchNorm, 20},
                              {C::Relu, 5},
                              {C::Add, 5}},
                             70, 10);  // a 200 ms step
  const EpochTimes b = epoch(1,
                             {{C::ConvForward, 15},
                              {C::ConvBackwardData, 15},
                              {C::ConvBackwardWeights, 20},
                              {C::BatchNorm, 20},
                              {C::Relu, 5},
                              {C::Add, 5}},
                             70, 20);  // 170 ms
  // Steady speeds of those steps, too few for an interval.
  const auto steady = [](double seconds) {
    RunSpeed speed;
    speed.steps = 3;
    speed.images_per_step = 32;
    speed.median_seconds = seconds;
    return speed;
  };
  const TimeComparison c = compare_times({{a}, steady(0.2)}, {{b}, steady(0.17)});
  ASSERT_TRUE(c.available) << c.unavailable();
  ASSERT_EQ(c.rows.size(), kTimeClassCount + 3);
  EXPECT_EQ(c.rows[0].label, "conv forward");
  constexpr double e = 1e-12;
  EXPECT_NEAR(row(c, "conv forward").ms[0], 30, e);
  EXPECT_NEAR(row(c, "conv forward").ms[1], 15, e);
  EXPECT_NEAR(row(c, "conv forward").speedup, 2, e);
  EXPECT_NEAR(row(c, "conv forward").share[0], 0.15, e);
  EXPECT_NEAR(row(c, "batch norm").speedup, 1, e);
  EXPECT_NEAR(row(c, "data wait").share[1], 70.0 / 170, e);
  EXPECT_NEAR(row(c, "other").ms[0], 10, e);
  EXPECT_NEAR(row(c, "other").ms[1], 20, e);
  EXPECT_NEAR(row(c, "step").speedup, 200.0 / 170, e);
  EXPECT_EQ(row(c, "pooling").speedup, 0) << "no time in either run: no ratio";
  // Convolutions 90 -> 50 ms: 1.8x; batch norm the same; elementwise 10 ms of 200 and 170: named, unchanged.
  // With too few steps for an interval, the steps' ratio, said to be no more.
  EXPECT_EQ(c.sentence,
            "convolutions 1.8\u00d7 faster, batch norm unchanged, elementwise unchanged, data wait 41% of the step, so "
            "end to end 1.18\u00d7 (too few steps to tell it from 1.0\u00d7)");
  // A run without a steady step has no step time to set beside the other's: its epochs' mean holds its warm-up.
  const TimeComparison unsteady = compare_times({{a}, {}}, {{b}, steady(0.17)});
  EXPECT_FALSE(unsteady.available);
  EXPECT_EQ(unsteady.sentence, "");
  EXPECT_EQ(unsteady.unavailable(), "too few steps for a steady speed in the baseline");
  EXPECT_EQ(compare_times({{a}, steady(0.2)}, {{}, steady(0.17)}).unavailable(), "not recorded for the run");
}

TEST(TimeComparison, TheSentenceNamesWhatChangedAndWhatIsNew) {
  const EpochTimes fp32 = epoch(1, {{C::ConvForward, 100}, {C::Optimizer, 10}, {C::Loss, 1}}, 1);
  // Twice as slow convolutions, conversions that the baseline did not have, the optimizer within 5%.
  const EpochTimes bf16 = epoch(1, {{C::ConvForward, 200}, {C::Optimizer, 10.4}, {C::Convert, 40}, {C::Loss, 1}}, 1);
  const SpeedUp slower{0.44, 0.40, 0.48}, faster{2.27, 2.1, 2.4}, same{1.0, 0.97, 1.03};
  EXPECT_EQ(time_sentence(fp32, bf16, slower),
            "convolutions 2.0\u00d7 slower, optimizer unchanged, conversions new (16% of the step), so end to end "
            "0.44\u00d7 (95% interval 0.40\u20130.48)");
  EXPECT_EQ(time_sentence(bf16, fp32, faster),
            "convolutions 2.0\u00d7 faster, conversions gone, optimizer unchanged, so end to end 2.27\u00d7 (95% "
            "interval 2.10\u20132.40)");
  EXPECT_EQ(time_sentence(fp32, fp32, same),
            "convolutions unchanged, optimizer unchanged, so end to end 1.00\u00d7 (95% interval 0.97\u20131.03): "
            "not distinguishable from 1.0\u00d7");
  EXPECT_FALSE(compare_times({{fp32}, {}}, {}).available) << "a run without times";
  EXPECT_TRUE(compare_times({{fp32}, {}}, {}).sentence.empty());
}

// The scale check is its own group: an optimizer that got faster is not hidden by a scale check that got slower.
TEST(TimeComparison, TheScaleCheckIsItsOwnLine) {
  const EpochTimes fp32 = epoch(1, {{C::ConvForward, 100}, {C::Optimizer, 26}}, 1);
  const EpochTimes fp16 = epoch(1, {{C::ConvForward, 100}, {C::Optimizer, 8}, {C::ScaleCheck, 20}}, 1);
  EXPECT_EQ(time_sentence(fp32, fp16, {1.0, 0.98, 1.02}),
            "convolutions unchanged, optimizer 3.2\u00d7 faster, scale check new (16% of the step), so end to end "
            "1.00\u00d7 (95% interval 0.98\u20131.02): not distinguishable from 1.0\u00d7");
}

// The rows split each run's median steady step by the timed steps' shares: they add up to it, and the step row's
// ratio is the speed-up every other view shows.
TEST(TimeComparison, RowsSplitTheMedianStepSoTheyAddUpToTheSpeedUp) {
  const EpochTimes a = epoch(1, {{C::ConvForward, 60}, {C::Optimizer, 20}}, 10, 10);  // a 100 ms timed step
  const EpochTimes b = epoch(1, {{C::ConvForward, 30}, {C::Optimizer, 20}}, 10, 10);  // 70 ms
  RunSpeed sa, sb;  // median steps of 110 and 80 ms (the timed steps' mean differs from the median)
  sa = {.steps = 40,
        .images_per_step = 8,
        .median_seconds = 0.110,
        .q1_seconds = 0.1,
        .q3_seconds = 0.12,
        .block_median_seconds = std::vector<double>(20, 0.11)};
  sb = {.steps = 40,
        .images_per_step = 8,
        .median_seconds = 0.080,
        .q1_seconds = 0.07,
        .q3_seconds = 0.09,
        .block_median_seconds = std::vector<double>(20, 0.08)};
  const TimeComparison c = compare_times({{a}, sa}, {{b}, sb});
  double sum[2] = {0, 0};
  for (const TimeRow& r : c.rows)
    if (r.label != "step")
      for (int i : {0, 1}) sum[i] += r.ms[i];
  EXPECT_NEAR(sum[0], 110, 1e-9);
  EXPECT_NEAR(sum[1], 80, 1e-9);
  EXPECT_NEAR(row(c, "step").ms[0], 110, 1e-9);
  EXPECT_NEAR(row(c, "conv forward").ms[0], 66, 1e-9);  // 60% of the median step
  EXPECT_NEAR(row(c, "step").speedup, c.speedup.ratio, 1e-12);
  EXPECT_NEAR(c.speedup.ratio, 110.0 / 80, 1e-12);
  EXPECT_NE(c.sentence.find("so end to end " + speed_up_text(c.speedup)), std::string::npos) << c.sentence;
  EXPECT_TRUE(c.speedup.distinguishable()) << speed_up_text(c.speedup);  // 40 steps in 20 blocks: an interval
}

// Many processes: the wait for the all-reduce is a part of the step, the rows above "step" still adding up to it;
// the all-reduce's own time on its thread is a row after it, beside the step. One process has neither row.
TEST(TimeComparison, CommunicationWaitIsInTheStepAndCommunicationBesideIt) {
  EpochTimes two = epoch(1, {{C::ConvForward, 60}}, 10, 10);  // 80 ms, then 5 ms of it waiting for the all-reduce
  two.communication_wait_seconds = 0.005;
  two.communication_seconds = 0.020;  // 15 ms of it hidden by backward
  two.step_seconds += two.communication_wait_seconds;
  EXPECT_NEAR(two.other_seconds(), 0.010, 1e-15);
  const std::vector<TimeRow> rows = time_rows({{two}, {}});
  double above_step = 0;
  bool past_step = false;
  std::vector<std::string> labels;
  for (const TimeRow& r : rows) {
    labels.push_back(r.label);
    if (r.label == "step") past_step = true;
    if (!past_step) above_step += r.ms[0];
  }
  EXPECT_NEAR(above_step, 85, 1e-9);
  ASSERT_GE(labels.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(labels.end() - 4, labels.end()),
            (std::vector<std::string>{"waiting for communication", "other", "step", "communication (beside backward)"}));
  EXPECT_NEAR(rows.back().ms[0], 20, 1e-9);
  for (const TimeRow& r : time_rows({{epoch(1, {{C::ConvForward, 60}}, 10, 10)}, {}}))
    EXPECT_EQ(r.label.find("communication"), std::string::npos) << r.label;
}

}  // namespace
}  // namespace ampwb
