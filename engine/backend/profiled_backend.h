// A Backend that times every op of another by class: where a training step's time goes (`ampwb bench --profile`,
// the time breakdown a run records). On the CPU, where ops return when done, each op is timed by the host's clock
// (well under a microsecond per op). On a device whose ops return before they run (a GPU), each op is bracketed by
// two marks on the device's own clock (Backend::mark: CUDA events), so a profiled step runs as fast as any other
// and times() reads the marks afterwards. Disabled, it forwards without timing.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace ampwb {

enum class TimeClass : uint8_t {
  ConvForward,
  ConvBackwardData,
  ConvBackwardWeights,
  BatchNorm,  // with what is fused into it: the ReLU after it, a residual block's add + ReLU (batchnorm_*relu_*)
  Relu,
  Add,  // residual adds, with the block's ReLU when fused into them (add_relu, relu_backward_of_sum)
  Pooling,
  Linear,
  Loss,
  Optimizer,   // with the gradients' check where it runs inside the update (SgdParams::check_gradients)
  ScaleCheck,  // unscale, inf/NaN check and clipping, where they run on their own
  Convert,     // casts, layout changes, device copies, also those made inside other ops (Backend::conversion_seconds)
  HostWait,    // read_scalars, collect_scalars: the step waiting for its device's numbers
  Count
};
const char* time_class_name(TimeClass c);  // "conv_forward", "batch_norm", ...

struct OpTimes {
  std::array<double, static_cast<size_t>(TimeClass::Count)> seconds{};
  std::array<int64_t, static_cast<size_t>(TimeClass::Count)> calls{};
  double total_seconds() const;
};

class ProfiledBackend final : public Backend {
 public:
  explicit ProfiledBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  Backend& inner() { return *inner_; }
  // The times so far: on a device, read from the marks of the ops timed since (waiting only for the last of them).
  const OpTimes& times();
  void reset();
  // Time by device marks (the default off the CPU) or by the host's clock around each op, waiting for the device
  // after it (the default on the CPU, where that wait is nothing).
  void set_device_timing(bool on) { device_timing_ = on; }
  bool device_timing() const { return device_timing_; }
  void set_enabled(bool enabled) { enabled_ = enabled; }
  // Times the host waited for the device to finish all the work queued (read_scalars, synchronize, a copy to the
  // host, collecting the newest posting), counted whether or not timing is enabled. Collecting an older posting
  // is not one: the work queued after it keeps the device busy.
  int64_t host_waits() const { return host_waits_; }
  bool enabled() const { return enabled_; }

  Device device() const override { return inner_->device(); }
  std::string description() const override { return inner_->description(); }
  bool supports(Op op, DType dtype) const override { return inner_->supports(op, dtype); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  size_t free_memory_bytes() const override { return inner_->free_memory_bytes(); }
  void synchronize() override { ++host_waits_, inner_->synchronize(); }
  double conversion_seconds() const override { return inner_->conversion_seconds(); }
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& queue, std::string& why_not) override {
    if (!enabled_) return inner_->capture(queue, why_not);
    why_not = "a profile times each op of every step";
    return nullptr;
  }
  int64_t mark() override { return inner_->mark(); }
  double seconds_between(int64_t from, int64_t to) override { return inner_->seconds_between(from, to); }
  void clear_marks() override { inner_->clear_marks(); }

  // Each op of backend_ops.def, timed in its class (profiled_backend.cpp).
#define AMPWB_OP(name, time_class, params, args) void name params override;
#include "backend/backend_ops.def"
  void convert(const Tensor& src, Tensor& dst) override;
  StepScalars read_scalars() override;
  Tensor upload(const Tensor& host) override;
  std::vector<Tensor> download(const std::vector<Tensor>& tensors) override;  // one host wait, where any comes back
  void post_scalars(const Tensor* loss_scale_state) override;
  PostedScalars collect_scalars() override;

 private:
  // Runs f on the wrapped backend, waits for its device, and adds the time to class c (when enabled), less the
  // conversions made inside it, which go to Convert.
  template <class F>
  void timed(TimeClass c, F&& f) {
    if (!enabled_) return f();
    ++times_.calls[static_cast<size_t>(c)];
    if (device_timing_) {  // read in times()
      const int64_t from = inner_->mark();
      f();
      marked_.push_back({c, from, inner_->mark()});
      return;
    }
    const double converted_before = inner_->conversion_seconds();
    const auto start = std::chrono::steady_clock::now();
    f();
    inner_->synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double converting = inner_->conversion_seconds() - converted_before;
    times_.seconds[static_cast<size_t>(c)] += seconds - converting;
    times_.seconds[static_cast<size_t>(TimeClass::Convert)] += converting;
  }
  struct Marked {
    TimeClass c;
    int64_t from, to;
  };

  std::unique_ptr<Backend> inner_;
  OpTimes times_;
  bool enabled_ = true;
  int64_t host_waits_ = 0;
  bool device_timing_ = !inner_->device().is_cpu();
  std::vector<Marked> marked_;  // ops timed by device marks, not yet read
  int64_t posted_ = 0;          // postings not yet collected
};

}  // namespace ampwb
