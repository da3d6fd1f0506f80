// FP8 tensors' casts with their delayed scaling, kept where the backend computes.
#include "amp/fp8_scaling.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace ampwb {

Fp8TensorScaling::Fp8TensorScaling(Backend& backend, Fp8Format format, const DelayedScalingSettings& settings,
                                   bool fp8_storage)
    : format_(format),
      settings_(settings),
      storage_(!fp8_storage                ? DType::F32
               : format == Fp8Format::E4M3 ? DType::F8E4M3
                                           : DType::F8E5M2),
      host_(format, settings) {
  restore(backend, host_.state());
}

Tensor Fp8TensorScaling::cast(Backend& backend, const Tensor& x, bool record) {
  if (record)
    if (const std::optional<Fp8ScalingUpdate> update = take_update())  // no step ended since the last recorded cast
      backend.update_fp8_scalings({*update});
  Tensor q = Tensor::empty(x.shape(), storage_, x.layout(), x.device());
  Tensor none;
  if (record && !stats_.defined())
    stats_ = Tensor::empty({kFp8CastStatsBytes}, DType::U8, Layout::NCHW, backend.device());
  backend.scaled_cast(x, q, {Fp8Factor::scale_of(state_), true, format_}, record ? stats_ : none);
  if (record) pending_ = cast_recorded_ = true;
  return q;
}

std::optional<Fp8ScalingUpdate> Fp8TensorScaling::take_update() {
  if (!pending_) return std::nullopt;
  pending_ = false;
  return Fp8ScalingUpdate{&state_, &stats_, std::ldexp(fp8_max(format_), -settings_.margin), settings_.rule};
}

std::vector<Tensor> Fp8TensorScaling::fetch_tensors() const {
  std::vector<Tensor> out{state_};
  if (cast_recorded_) out.push_back(stats_);
  return out;
}

void Fp8TensorScaling::fetched(const Tensor* host_state, const Tensor* host_stats) {
  AMPWB_CHECK(
      host_state->device().is_cpu() && host_state->dtype() == DType::F32 && host_state->numel() == state_.numel(),
      "an FP8 scaling's state on the host is " << host_state->describe());
  float scale_used = 1.0f;
  host_.restore(from_device_state(host_state->data_as<float>(), host_state->numel(), &scale_used));
  if (pending_) scale_used = host_.scale();  // the cast's update has not come yet: its scale is still the state's
  last_ = {scale_used, 0.0f, 0, 0, 0};
  if (host_stats) {
    Fp8CastStats stats;
    std::memcpy(&stats, host_stats->data(), sizeof stats);
    last_ = {scale_used, stats.amax, stats.count, stats.saturated, stats.underflowed};
  }
}

void Fp8TensorScaling::fetch_all(Backend& backend, const std::vector<Fp8TensorScaling*>& scalings) {
  std::vector<Tensor> all;
  for (const Fp8TensorScaling* t : scalings) {
    const std::vector<Tensor> mine = t->fetch_tensors();
    all.insert(all.end(), mine.begin(), mine.end());
  }
  const std::vector<Tensor> host = backend.download(all);
  size_t at = 0;
  for (Fp8TensorScaling* t : scalings) {
    const Tensor* stats = t->cast_recorded_ ? &host.at(at + 1) : nullptr;
    t->fetched(&host.at(at), stats);
    at += stats ? 2 : 1;
  }
}

const DelayedScaling& Fp8TensorScaling::scaling() const {
  AMPWB_CHECK(!pending_, "an FP8 scaling is read on the host while its recorded cast's update waits (take_update)");
  return host_;
}

void Fp8TensorScaling::restore(Backend& backend, const DelayedScalingState& state) {
  host_.restore(state);  // checks the history's length and the scale
  const std::vector<float> floats = device_state(state, state.scale);
  const Tensor values = tensor_from_floats(floats, {static_cast<int64_t>(floats.size())});
  if (!state_.defined()) state_ = Tensor::empty(values.shape(), DType::F32, Layout::NCHW, backend.device());
  backend.convert(values, state_);  // in place: captured steps read it where it is
  pending_ = cast_recorded_ = false;
  last_ = {state.scale, 0.0f, 0, 0, 0};
}

}  // namespace ampwb
