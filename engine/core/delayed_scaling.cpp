// Delayed FP8 scaling for one tensor: the amax history, its roll and the scale it gives.
#include "core/delayed_scaling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/setting_error.h"

namespace ampwb {

namespace {
constexpr int kMaxHistoryLength = 1'000'000;
constexpr int kMaxMargin = 64;  // keeps fp8_max * 2^-margin a normal FP32 either way
}  // namespace

void check_delayed_scaling_settings(const DelayedScalingSettings& settings) {
  if (settings.history_length < 1 || settings.history_length > kMaxHistoryLength)
    throw SettingError("fp8.amax_history_length", "the FP8 amax history must keep between 1 and " +
                                                      std::to_string(kMaxHistoryLength) + " steps, got " +
                                                      std::to_string(settings.history_length));
  if (settings.margin < -kMaxMargin || settings.margin > kMaxMargin)
    throw SettingError("fp8.margin", "the FP8 scaling margin must be between " + std::to_string(-kMaxMargin) + " and " +
                                         std::to_string(kMaxMargin) + " powers of two, got " +
                                         std::to_string(settings.margin));
}

DelayedScaling::DelayedScaling(Fp8Format format, const DelayedScalingSettings& settings)
    : format_(format), settings_(settings) {
  check_delayed_scaling_settings(settings);
  history_.assign(static_cast<size_t>(settings.history_length), 0.0f);
}

void DelayedScaling::record_amax(float amax) {
  AMPWB_CHECK(!(amax < 0), "an amax is a largest magnitude, never negative: got " << amax);
  history_.front() = std::fmax(history_.front(), amax);  // fmax passes over a NaN
}

float DelayedScaling::update() {
  float amax = history_.front();
  if (settings_.rule == AmaxRule::Max)
    for (float past : history_) amax = std::fmax(amax, past);
  // Roll: the past steps move one place toward the front (the oldest, at [1], drops out), this step's goes last.
  const float this_step = history_.front();
  if (history_.size() > 1) {
    std::rotate(history_.begin() + 1, history_.begin() + 2, history_.end());
    history_.back() = this_step;
  }
  history_.front() = 0.0f;
  if (std::isfinite(amax) && amax > 0.0f) {
    const float scaled_max = std::ldexp(fp8_max(format_), -settings_.margin);  // exact: a power of two
    scale_ = scaled_max / amax;
    if (std::isinf(scale_)) scale_ = std::numeric_limits<float>::max();
    scale_inverse_ = 1.0f / scale_;
  }
  return amax;
}

void DelayedScaling::restore(const DelayedScalingState& state) {
  AMPWB_CHECK(state.amax_history.size() == history_.size(), "the saved FP8 amax history holds "
                                                                << state.amax_history.size() << " steps, the setting "
                                                                << history_.size());
  AMPWB_CHECK(std::isfinite(state.scale) && state.scale > 0.0f,
              "the saved FP8 scale must be finite and positive, got " << state.scale);
  history_ = state.amax_history;
  scale_ = state.scale;
  scale_inverse_ = 1.0f / scale_;
}

std::vector<float> device_state(const DelayedScalingState& state, float scale_used) {
  AMPWB_CHECK(!state.amax_history.empty() && state.amax_history.size() < (size_t{1} << 24),
              "an FP8 amax history of " << state.amax_history.size() << " steps");
  std::vector<float> out(static_cast<size_t>(kFp8StateHistory));
  out[kFp8StateScaleInverse] = 1.0f / state.scale;
  out[kFp8StateScale] = state.scale;
  out[kFp8StateScaleUsed] = scale_used;
  out[kFp8StateOldest] = 0;  // the ring starts at the oldest past step, as DelayedScaling's [1] is
  out.insert(out.end(), state.amax_history.begin(), state.amax_history.end());
  return out;
}

DelayedScalingState from_device_state(const float* state, int64_t count, float* scale_used) {
  AMPWB_CHECK(count > kFp8StateHistory, "an FP8 scaling state of " << count << " values");
  const auto past = static_cast<size_t>(count - kFp8StateHistory - 1);
  const float* ring = state + kFp8StateHistory + 1;
  DelayedScalingState out;
  out.scale = state[kFp8StateScale];
  out.amax_history.push_back(state[kFp8StateHistory]);
  const auto oldest = static_cast<size_t>(state[kFp8StateOldest]);
  for (size_t i = 0; i < past; ++i) out.amax_history.push_back(ring[(oldest + i) % past]);
  if (scale_used) *scale_used = state[kFp8StateScaleUsed];
  return out;
}

void update_device_state(float* state, int64_t count, float amax, AmaxRule rule, float scaled_max) {
  AMPWB_CHECK(count > kFp8StateHistory, "an FP8 scaling state of " << count << " values");
  const auto past = static_cast<size_t>(count - kFp8StateHistory - 1);
  float* ring = state + kFp8StateHistory + 1;
  const float this_step = std::fmax(state[kFp8StateHistory], amax);  // fmax passes over a NaN
  float chosen = this_step;
  if (rule == AmaxRule::Max)
    for (size_t i = 0; i < past; ++i) chosen = std::fmax(chosen, ring[i]);
  if (past > 0) {  // this step's amax takes the oldest's place, and the next oldest becomes the oldest
    const auto oldest = static_cast<size_t>(state[kFp8StateOldest]);
    ring[oldest] = this_step;
    state[kFp8StateOldest] = static_cast<float>((oldest + 1) % past);
  }
  state[kFp8StateHistory] = 0.0f;
  state[kFp8StateScaleUsed] = state[kFp8StateScale];
  if (std::isfinite(chosen) && chosen > 0.0f) {
    float scale = scaled_max / chosen;
    if (std::isinf(scale)) scale = std::numeric_limits<float>::max();
    state[kFp8StateScale] = scale;
    state[kFp8StateScaleInverse] = 1.0f / scale;
  }
}

}  // namespace ampwb
