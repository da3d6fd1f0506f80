// Per-tensor FP8 scaling from the history of the tensor's largest magnitude: Transformer Engine's DelayedScaling
// recipe (transformer_engine/common/recipe/delayed_scaling.cu), for one tensor.
//
// A tensor x is stored in FP8 as round(x * scale), and its FP8 values times scale_inverse() stand for x. Each step
// records the amax of x (max |x|, from the FP32 tensor before the cast); at the step's end update() takes the amax the
// rule picks from the history (the largest of the last history_length steps, this one included, or this step's
// alone), sets scale = (fp8_max * 2^-margin) / amax, so that the largest magnitude seen lands margin powers of two
// under the format's max, and rolls the history by one step. The scale is "delayed": step n casts with the scale the
// amaxes up to step n - 1 gave, so a tensor that grows faster than its history saturates until the next update.
// Where the amax is zero, infinite or NaN (a tensor of zeros, an overflow upstream) the scale stays as it was, and
// a scale that would be infinite (an amax below FP32's range for it) becomes FP32's max, both as Transformer Engine
// does; an infinity in the history therefore holds the scale for history_length steps with the "max" rule.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/choices.h"
#include "core/fp8.h"

namespace ampwb {

enum class AmaxRule : uint8_t { Max, MostRecent };

template <>
struct ChoiceTable<AmaxRule> {
  static constexpr const char* what = "FP8 amax rule";
  static constexpr std::array<Choice<AmaxRule>, 2> rows = {{
      {AmaxRule::Max, "max", "largest in history", "the largest amax of the history's steps sets the scale"},
      {AmaxRule::MostRecent, "most-recent", "most recent", "the step's own amax sets the next step's scale"},
  }};
};

// Transformer Engine's DelayedScaling defaults.
struct DelayedScalingSettings {
  int history_length = 1024;  // steps whose amax is kept, this one included (amax_history_len)
  int margin = 0;             // powers of two between the scaled amax and the format's max
  AmaxRule rule = AmaxRule::Max;
};

// Throws SettingError naming the setting ("fp8.amax_history_length", "fp8.margin") when out of range.
void check_delayed_scaling_settings(const DelayedScalingSettings& settings);

// What a checkpoint keeps of one tensor's scaling.
struct DelayedScalingState {
  std::vector<float> amax_history;  // in amax_history()'s order
  float scale = 1.0f;
};

class DelayedScaling {
 public:
  // Starts at scale 1 with an empty history (all zeros), as Transformer Engine does.
  explicit DelayedScaling(Fp8Format format, const DelayedScalingSettings& settings = {});

  Fp8Format format() const { return format_; }
  const DelayedScalingSettings& settings() const { return settings_; }

  // The factor this step's cast multiplies by, and its reciprocal (in FP32, as Transformer Engine's scale_inv).
  float scale() const { return scale_; }
  float scale_inverse() const { return scale_inverse_; }

  // Takes one amax of the tensor this step (max |x|, never negative): the step keeps the largest of its calls (one
  // per micro-batch, say). A NaN is passed over, as Transformer Engine's amax reductions (fmaxf) pass over NaN
  // elements; an infinity is kept.
  void record_amax(float amax);
  float step_amax() const { return history_.front(); }  // the largest recorded since the last update()

  // Ends the step: the rule's amax over the history sets the next scale; this step's amax joins the past steps (the
  // oldest drops out) and the next step's starts at 0. Returns the amax the scale came from.
  float update();

  // Transformer Engine's layout: [0] this step's amax so far, [1 .. length-1] the past steps, oldest first.
  const std::vector<float>& amax_history() const { return history_; }

  DelayedScalingState state() const { return {history_, scale_}; }
  // Continues from a checkpoint's state; its history must be history_length long and its scale finite and positive.
  void restore(const DelayedScalingState& state);

 private:
  Fp8Format format_;
  DelayedScalingSettings settings_;
  std::vector<float> history_;
  float scale_ = 1.0f;
  float scale_inverse_ = 1.0f;
};

// The same scaling as a backend's ops keep it on their device, so that no step waits for the host to scale the next
// (Fp8TensorScaling, Backend::update_fp8_scalings): F32 values, kFp8StateHistory + history_length of them. The past
// steps' amaxes are a ring whose oldest entry moves on each step, where DelayedScaling rolls its whole history.
inline constexpr int64_t kFp8StateScaleInverse = 0;  // what a product of the cast's values is multiplied by
inline constexpr int64_t kFp8StateScale = 1;         // what the next cast multiplies by
inline constexpr int64_t kFp8StateScaleUsed = 2;     // the scale the last update's cast had used
inline constexpr int64_t kFp8StateOldest = 3;        // the ring's oldest entry, a whole number below 2^24
inline constexpr int64_t kFp8StateHistory = 4;       // this step's amax, then the ring of history_length - 1 past ones

// state (with the scale used) in that layout, and back.
std::vector<float> device_state(const DelayedScalingState& state, float scale_used);
DelayedScalingState from_device_state(const float* state, int64_t count, float* scale_used = nullptr);
// One step's end on a state in that layout: record_amax(amax), then update(), as DelayedScaling does them.
// scaled_max: the format's largest value times 2^-margin.
void update_device_state(float* state, int64_t count, float amax, AmaxRule rule, float scaled_max);

}  // namespace ampwb
