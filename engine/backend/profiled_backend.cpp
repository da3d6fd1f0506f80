// The timing decorator: every op forwarded to the wrapped backend inside a timer of its class.
#include "backend/profiled_backend.h"

#include <algorithm>

namespace ampwb {

namespace {
constexpr std::array kTimeClassNames = {
    "conv_forward", "conv_backward_data", "conv_backward_weights", "batch_norm", "relu",     "add", "pooling", "linear",
    "loss",         "optimizer",          "scale_check",           "convert",    "host_wait"};
static_assert(kTimeClassNames.size() == static_cast<size_t>(TimeClass::Count), "one name per time class");
}  // namespace

const char* time_class_name(TimeClass c) { return kTimeClassNames.at(static_cast<size_t>(c)); }

double OpTimes::total_seconds() const {
  double total = 0;
  for (double s : seconds) total += s;
  return total;
}

#define AMPWB_OP(name, time_class, params, args)              \
  void ProfiledBackend::name params {                         \
    timed(TimeClass::time_class, [&] { inner_->name args; }); \
  }
#include "backend/backend_ops.def"

void ProfiledBackend::convert(const Tensor& src, Tensor& dst) {
  if (src.device() != dst.device() && dst.device() == Device::cpu()) ++host_waits_;  // a copy to the host
  timed(TimeClass::Convert, [&] { inner_->convert(src, dst); });
}
StepScalars ProfiledBackend::read_scalars() {
  ++host_waits_;
  StepScalars s;
  timed(TimeClass::HostWait, [&] { s = inner_->read_scalars(); });
  return s;
}
Tensor ProfiledBackend::upload(const Tensor& host) {
  Tensor t;
  timed(TimeClass::Convert, [&] { t = inner_->upload(host); });
  return t;
}

std::vector<Tensor> ProfiledBackend::download(const std::vector<Tensor>& tensors) {
  const bool copies =
      std::any_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return t.device() != Device::cpu(); });
  if (copies) ++host_waits_;
  std::vector<Tensor> host;
  timed(TimeClass::HostWait, [&] { host = inner_->download(tensors); });
  return host;
}

const OpTimes& ProfiledBackend::times() {
  for (const Marked& m : marked_) times_.seconds[static_cast<size_t>(m.c)] += inner_->seconds_between(m.from, m.to);
  if (!marked_.empty()) inner_->clear_marks();
  marked_.clear();
  return times_;
}

void ProfiledBackend::reset() {
  times_ = {};
  if (!marked_.empty()) inner_->clear_marks();
  marked_.clear();
}

void ProfiledBackend::post_scalars(const Tensor* loss_scale_state) {
  timed(TimeClass::Convert, [&] { inner_->post_scalars(loss_scale_state); });
  ++posted_;
}
PostedScalars ProfiledBackend::collect_scalars() {
  if (posted_ <= 1) ++host_waits_;  // the newest: nothing queued behind it
  posted_ = std::max<int64_t>(0, posted_ - 1);
  PostedScalars p;
  timed(TimeClass::HostWait, [&] { p = inner_->collect_scalars(); });
  return p;
}

}  // namespace ampwb
