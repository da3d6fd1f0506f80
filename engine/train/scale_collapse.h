// The loss scale's collapse: many consecutive skipped steps, each halving the scale, because gradients are inf or
// NaN whatever the scale. One definition for the stored diagnosis (analysis/diagnosis.cpp, rule `scale_collapse`) and
// the live alarm (the GUI's banner, `ampwb train`'s warning), so both fire at the same step and name the same layers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/events.h"
#include "train/run_details.h"

namespace ampwb {

// Consecutive skipped steps that count as a collapse: each halves the scale, so 10 divide it by 1024, far more than
// the few skips with which a dynamic scaler finds its level at the start of a run.
constexpr int64_t kScaleCollapseRun = 10;

// What to try, said by the diagnosis and the alarm alike.
inline constexpr const char* kScaleCollapseAdvice =
    "no scale fixes a gradient that is inf or NaN before scaling: look at the named layer, lower the learning rate, "
    "check the data for extreme values, or use amp-bf16";

// The layers where overflows started (the first layer each report names, nearest the loss), most frequent first,
// at most `at_most`: "layer3.2.conv2 (7 steps), fc (3 steps)". Empty when no report names a layer.
std::string overflow_origins(const std::vector<OverflowReport>& overflows, size_t at_most = 3);

// A run of consecutive skipped steps.
struct SkippedRun {
  int64_t first_step = 0, last_step = 0;
  int64_t length = 0;                      // steps skipped in a row
  double first_scale = 1, last_scale = 1;  // the scales the first and the last skipped step used
  double trained_scale = 0;                // the scale of the step after it, which trained; 0 while none has
  std::vector<OverflowReport> overflows;   // the forensics of its steps

  bool ended() const { return trained_scale > 0; }
  // What the skips brought the scale down to: the scale that then trained, else the last one tried (backing off by
  // the run's own factor, its hysteresis and its floor, not always halving).
  double reached_scale() const { return ended() ? trained_scale : last_scale; }
  // Skips from the run's first step until one was not: the scaler lowering an initial scale that was too high until
  // the gradients fit, not gradients that overflow whatever the scale.
  bool found_initial_level() const { return first_step == 0 && ended(); }
  // That, or skips from the first step that are still above the scale GradScaler starts at: the initial scale's
  // doing, whatever a lower one would meet.
  bool from_initial_scale() const;
};

// The runs of consecutive skipped steps among `steps` (in step order), their overflows left to the caller.
std::vector<SkippedRun> skipped_runs(const std::vector<StepReport>& steps);

// Of a run from_initial_scale(): "the initial loss scale 1e+12 was too high: the first 22 steps were skipped, lowering
// it to 238419, at which the gradients were finite", and what to try.
std::string initial_scale_too_high(const SkippedRun& run);
std::string initial_scale_advice(const SkippedRun& run);

// Watches a live run's steps and overflow reports and says when the scale has collapsed (kScaleCollapseRun skipped
// steps in a row). Steps arrive in order; an overflow report may arrive after later steps (the GUI hands them over
// in batches), so reports are matched to the run of skips by step number.
class ScaleCollapseWatch {
 public:
  explicit ScaleCollapseWatch(int64_t run_length = kScaleCollapseRun) : run_length_(run_length) {}

  // True on the step that makes a run of skips a collapse (once per collapse).
  bool step(const StepReport& step);
  void overflow(const OverflowReport& overflow);
  void reset() { *this = ScaleCollapseWatch(run_length_); }

  bool collapsed() const { return latest_.has_value(); }
  int collapses() const { return collapses_; }
  const std::optional<SkippedRun>& latest() const { return latest_; }  // the latest collapse, growing while it lasts
  // One line: "the loss scale collapsed: 10 consecutive steps skipped (1 to 10), the scale fell from 65536 to 64;
  // inf/NaN gradients started in layer3.2.conv2 (10 steps). Try: ..."; empty when not collapsed. Skips from the
  // run's first step are said as what they may yet turn out to be, an initial scale too high, and once a step trains
  // again, as that.
  std::string warning() const;

 private:
  int64_t run_length_;
  SkippedRun current_;  // length 0: the last step was not skipped
  std::optional<SkippedRun> latest_;
  int collapses_ = 0;
};

}  // namespace ampwb
