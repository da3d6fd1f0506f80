// FP8 tensors' casts with their delayed scaling, kept where the backend computes.
#include "amp/fp8_scaling.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace ampwb {

namespace {
Tensor host_floats(const std::vector<float>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::F32);
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}
}  // namespace

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
  if (const std::optional<Fp8ScalingUpdate> update = take_update())  // a recorded cast, no step ended since
    backend.update_fp8_scalings({*update});
  Tensor q = Tensor::empty(x.shape(), storage_, x.layout(), x.device());
  Tensor none;
  if (record && !stats_.defined())
    stats_ = Tensor::empty({kFp8CastStatsBytes}, DType::U8, Layout::NCHW, backend.device());
  backend.scaled_cast(x, q, {Fp8Factor::scale_of(state_), true, format_}, record ? stats_ : none);
  if (record) {
    pending_ = true;
    current_ = false;
  }
  return q;
}

std::optional<Fp8ScalingUpdate> Fp8TensorScaling::take_update() {
  if (!pending_) return std::nullopt;
  pending_ = false;
  current_ = false;
  return Fp8ScalingUpdate{&state_, &stats_, std::ldexp(fp8_max(format_), -settings_.margin), settings_.rule};
}

std::vector<Tensor> Fp8TensorScaling::fetch_tensors() const {
  std::vector<Tensor> out{state_};
  if (stats_.defined()) out.push_back(stats_);
  return out;
}

void Fp8TensorScaling::fetched(const std::vector<Tensor>& host) {
  AMPWB_CHECK(!host.empty() && host[0].device().is_cpu() && host[0].dtype() == DType::F32 &&
                  host[0].numel() == state_.numel() && host.size() == (stats_.defined() ? 2u : 1u),
              "an FP8 scaling's fetch takes its state and statistics on the host");
  float scale_used = 1.0f;
  host_.restore(from_device_state(host[0].data_as<float>(), host[0].numel(), &scale_used));
  if (pending_) scale_used = host_.scale();  // the cast's update has not come yet: its scale is still the state's
  last_ = {scale_used, 0.0f, 0, 0, 0};
  if (host.size() == 2) {
    Fp8CastStats stats;
    std::memcpy(&stats, host[1].data(), sizeof stats);
    last_ = {scale_used, stats.amax, stats.count, stats.saturated, stats.underflowed};
  }
  current_ = true;
}

void Fp8TensorScaling::fetch(Backend& backend) { fetched(backend.download(fetch_tensors())); }

void Fp8TensorScaling::check_current() const {
  AMPWB_CHECK(current_, "an FP8 scaling is read on the host before it is fetched (Fp8TensorScaling::fetch)");
}

const Fp8CastReport& Fp8TensorScaling::last() const {
  check_current();
  return last_;
}

const DelayedScaling& Fp8TensorScaling::scaling() const {
  check_current();
  AMPWB_CHECK(!pending_, "an FP8 scaling is read on the host while its recorded cast's update waits (take_update)");
  return host_;
}

void Fp8TensorScaling::restore(Backend& backend, const DelayedScalingState& state) {
  host_.restore(state);  // checks the history's length and the scale
  const Tensor values = host_floats(device_state(state, state.scale));
  if (!state_.defined()) state_ = Tensor::empty(values.shape(), DType::F32, Layout::NCHW, backend.device());
  backend.convert(values, state_);
  stats_ = Tensor();  // a recorded cast's statistics are not the restored state's
  pending_ = false;
  last_ = {state.scale, 0.0f, 0, 0, 0};
  current_ = true;
}

void Fp8LayerScaling::fetch(Backend& backend) {
  std::vector<Tensor> all;
  std::vector<size_t> counts;
  for (Fp8TensorScaling* t : tensors()) {
    const std::vector<Tensor> mine = t->fetch_tensors();
    counts.push_back(mine.size());
    all.insert(all.end(), mine.begin(), mine.end());
  }
  const std::vector<Tensor> host = backend.download(all);
  size_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    tensors()[i]->fetched(
        {host.begin() + static_cast<std::ptrdiff_t>(at), host.begin() + static_cast<std::ptrdiff_t>(at + counts[i])});
    at += counts[i];
  }
}

}  // namespace ampwb
