// Delayed FP8 scaling (core/delayed_scaling.h): Transformer Engine's defaults, its scale formula and history roll,
// checked step by step against a plain model of the window of past amaxes; the rules, the margin, the cases that
// keep the scale, the settings it refuses and a checkpoint's round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "core/convert8.h"
#include "core/delayed_scaling.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/setting_error.h"

namespace ampwb {
namespace {

TEST(DelayedScaling, StartsAsTransformerEngineDoes) {
  const DelayedScalingSettings defaults;
  EXPECT_EQ(defaults.history_length, 1024);
  EXPECT_EQ(defaults.margin, 0);
  EXPECT_EQ(defaults.rule, AmaxRule::Max);
  const DelayedScaling scaling(Fp8Format::E4M3);
  EXPECT_EQ(scaling.scale(), 1.0f);
  EXPECT_EQ(scaling.scale_inverse(), 1.0f);
  EXPECT_EQ(scaling.amax_history(), std::vector<float>(1024, 0.0f));
}

TEST(DelayedScaling, TheScaleBringsTheAmaxToTheFormatsMaxUnderTheMargin) {
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2})
    for (int margin : {0, 1, 3, -2}) {
      DelayedScaling scaling(f, {.history_length = 4, .margin = margin});
      scaling.record_amax(3.0f);
      EXPECT_EQ(scaling.update(), 3.0f);
      const float want = std::ldexp(fp8_max(f), -margin) / 3.0f;
      EXPECT_EQ(scaling.scale(), want) << fp8_format_name(f) << ", margin " << margin;
      EXPECT_EQ(scaling.scale_inverse(), 1.0f / want);
    }
  DelayedScaling e4m3(Fp8Format::E4M3);
  e4m3.record_amax(2.0f);
  e4m3.update();
  EXPECT_EQ(e4m3.scale(), 224.0f);  // 448 / 2
}

// Over many steps of random amaxes (some steps with none, some with several records), each update's scale is the
// one the largest amax of the last history_length steps gives, or the step's own under most-recent.
TEST(DelayedScaling, TheScaleFollowsTheWindowOfPastAmaxes) {
  for (AmaxRule rule : {AmaxRule::Max, AmaxRule::MostRecent})
    for (int length : {1, 2, 16}) {
      DelayedScaling scaling(Fp8Format::E5M2, {.history_length = length, .margin = 1, .rule = rule});
      std::deque<float> window;  // the last `length` steps' amaxes, newest last
      float want_scale = 1.0f;
      Rng rng(static_cast<uint64_t>(length) * 2 + (rule == AmaxRule::Max));
      for (int step = 0; step < 500; ++step) {
        float step_amax = 0.0f;
        const auto records = static_cast<int>(rng.below(4));  // none in about one step in four
        for (int r = 0; r < records; ++r) {
          const auto amax = static_cast<float>(std::ldexp(rng.uniform(), static_cast<int>(rng.below(40)) - 20));
          scaling.record_amax(amax);
          step_amax = std::max(step_amax, amax);
        }
        ASSERT_EQ(scaling.step_amax(), step_amax);
        window.push_back(step_amax);
        if (static_cast<int>(window.size()) > length) window.pop_front();
        float amax = window.back();
        if (rule == AmaxRule::Max)
          for (float a : window) amax = std::max(amax, a);
        if (amax > 0) want_scale = std::ldexp(kE5M2Max, -1) / amax;
        ASSERT_EQ(scaling.update(), amax) << "step " << step;
        ASSERT_EQ(scaling.scale(), want_scale) << "step " << step << ", length " << length;
        ASSERT_EQ(scaling.step_amax(), 0.0f);
      }
    }
}

TEST(DelayedScaling, TheHistoryRollsAsTransformerEnginesDoes) {
  DelayedScaling scaling(Fp8Format::E4M3, {.history_length = 4});
  for (float amax : {1.0f, 2.0f, 3.0f, 4.0f, 5.0f}) {
    scaling.record_amax(amax);
    scaling.update();
  }
  EXPECT_EQ(scaling.amax_history(), (std::vector<float>{0.0f, 3.0f, 4.0f, 5.0f}));  // this step's, then oldest first
  scaling.record_amax(0.5f);
  EXPECT_EQ(scaling.amax_history(), (std::vector<float>{0.5f, 3.0f, 4.0f, 5.0f}));
  EXPECT_EQ(scaling.update(), 5.0f);
  EXPECT_EQ(scaling.amax_history(), (std::vector<float>{0.0f, 4.0f, 5.0f, 0.5f}));
}

TEST(DelayedScaling, ZeroInfiniteAndNaNAmaxesKeepTheScale) {
  DelayedScaling scaling(Fp8Format::E4M3, {.history_length = 3});
  scaling.record_amax(7.0f);
  scaling.update();
  const float scale = scaling.scale();
  EXPECT_EQ(scale, 64.0f);
  scaling.record_amax(std::numeric_limits<float>::quiet_NaN());  // passed over: this step's amax stays 0
  EXPECT_EQ(scaling.step_amax(), 0.0f);
  // An infinity holds the scale for as long as it is in the history (3 steps), then the scale moves again.
  scaling.record_amax(std::numeric_limits<float>::infinity());
  for (int step = 0; step < 3; ++step) {
    EXPECT_TRUE(std::isinf(scaling.update())) << step;
    EXPECT_EQ(scaling.scale(), scale) << step;
    scaling.record_amax(2.0f);
  }
  EXPECT_EQ(scaling.update(), 2.0f);
  EXPECT_EQ(scaling.scale(), 224.0f);
  // Steps with nothing recorded: the history empties and the last scale stays.
  DelayedScaling idle(Fp8Format::E5M2, {.history_length = 2});
  idle.record_amax(1.0f);
  idle.update();
  for (int step = 0; step < 3; ++step) idle.update();
  EXPECT_EQ(idle.scale(), kE5M2Max);
}

TEST(DelayedScaling, AScaleBeyondFloatBecomesFloatsMax) {
  DelayedScaling scaling(Fp8Format::E5M2, {.history_length = 1});
  scaling.record_amax(std::numeric_limits<float>::denorm_min());
  scaling.update();
  EXPECT_EQ(scaling.scale(), std::numeric_limits<float>::max());
  EXPECT_GT(scaling.scale_inverse(), 0.0f);
}

TEST(DelayedScaling, ANegativeAmaxIsRefused) {
  DelayedScaling scaling(Fp8Format::E4M3);
  EXPECT_THROW(scaling.record_amax(-1.0f), Error);
}

// The delay: a tensor that doubles every step is cast with the scale of the step before, so its largest values land
// at twice the format's max and saturate, every step; with the most recent rule and a constant tensor they land on it.
TEST(DelayedScaling, ATensorThatGrowsFasterThanItsHistorySaturates) {
  for (AmaxRule rule : {AmaxRule::Max, AmaxRule::MostRecent}) {
    DelayedScaling scaling(Fp8Format::E4M3, {.history_length = 8, .rule = rule});
    scaling.record_amax(1.0f);
    scaling.update();
    for (int step = 1; step < 6; ++step) {
      const float amax = std::ldexp(1.0f, step);
      const float scaled = amax * scaling.scale();
      EXPECT_EQ(scaled, 2 * kE4M3Max) << step;
      float cast = scaled;
      round_through_fp8(Fp8Format::E4M3, &cast, 1);
      EXPECT_EQ(cast, kE4M3Max) << "saturated at step " << step;
      scaling.record_amax(amax);
      scaling.update();
    }
  }
  DelayedScaling steady(Fp8Format::E4M3, {.rule = AmaxRule::MostRecent});
  steady.record_amax(3.0f);
  steady.update();
  float cast = 3.0f * steady.scale();
  round_through_fp8(Fp8Format::E4M3, &cast, 1);
  EXPECT_EQ(cast, kE4M3Max);
}

TEST(DelayedScaling, SettingsOutOfRangeAreRefusedByName) {
  auto refused_setting = [](const DelayedScalingSettings& settings) -> std::string {
    try {
      DelayedScaling scaling(Fp8Format::E4M3, settings);
    } catch (const SettingError& e) {
      return e.setting();
    }
    return "";
  };
  EXPECT_EQ(refused_setting({.history_length = 0}), "fp8.amax_history_length");
  EXPECT_EQ(refused_setting({.history_length = 1'000'001}), "fp8.amax_history_length");
  EXPECT_EQ(refused_setting({.margin = 65}), "fp8.margin");
  EXPECT_EQ(refused_setting({.margin = -65}), "fp8.margin");
  EXPECT_EQ(refused_setting({.history_length = 1, .margin = 64}), "");
}

TEST(DelayedScaling, ACheckpointsStateContinuesTheSameSteps) {
  DelayedScaling original(Fp8Format::E5M2, {.history_length = 5});
  for (float amax : {3.0f, 9.0f, 0.25f}) {
    original.record_amax(amax);
    original.update();
  }
  DelayedScaling restored(Fp8Format::E5M2, {.history_length = 5});
  restored.restore(original.state());
  EXPECT_EQ(restored.scale(), original.scale());
  EXPECT_EQ(restored.scale_inverse(), original.scale_inverse());
  for (float amax : {0.5f, 0.1f, 0.2f, 0.3f, 0.4f, 0.6f}) {
    original.record_amax(amax);
    restored.record_amax(amax);
    EXPECT_EQ(restored.update(), original.update());
    EXPECT_EQ(restored.scale(), original.scale());
  }
  DelayedScaling shorter(Fp8Format::E5M2, {.history_length = 4});
  EXPECT_THROW(shorter.restore(original.state()), Error);
  EXPECT_THROW(restored.restore({std::vector<float>(5, 0.0f), 0.0f}), Error);
}

TEST(DelayedScaling, TheAmaxRulesNames) {
  EXPECT_EQ(parse_choice<AmaxRule>("max"), AmaxRule::Max);
  EXPECT_EQ(parse_choice<AmaxRule>("most-recent"), AmaxRule::MostRecent);
  EXPECT_FALSE(parse_choice<AmaxRule>("most_recent").has_value());
  EXPECT_EQ(choice_names<AmaxRule>(), "max or most-recent");
}

}  // namespace
}  // namespace ampwb
