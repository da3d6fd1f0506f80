// A Backend that times every op of another by class: where a training step's time goes (`ampwb bench --profile`,
// the time breakdown a run records). The wrapped backend waits for its device after each op (synchronize()), so
// on a GPU the step runs serialised: a profile of where time goes, not the step's best speed. On the CPU ops are
// synchronous anyway and the timer costs well under a microsecond per op. Disabled, it forwards without timing or
// waiting: a trainer on a GPU times only a sample of its steps.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace ampwb {

enum class TimeClass : uint8_t {
  ConvForward,
  ConvBackwardData,
  ConvBackwardWeights,
  BatchNorm,  // with the ReLU after it when fused into it (batchnorm_relu_*)
  Relu,
  Add,  // residual adds, with the block's ReLU when fused into them (add_relu)
  Pooling,
  Linear,
  Loss,
  Optimizer,
  ScaleCheck,  // unscale, inf/NaN check and clipping
  Convert,     // casts, layout changes, device copies, also those made inside other ops (Backend::conversion_seconds)
  HostWait,    // read_scalars: the step waiting for its device's numbers
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
  const OpTimes& times() const { return times_; }
  void reset() { times_ = {}; }
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

  Device device() const override { return inner_->device(); }
  std::string description() const override { return inner_->description(); }
  bool supports(Op op, DType dtype) const override { return inner_->supports(op, dtype); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void synchronize() override { inner_->synchronize(); }
  double conversion_seconds() const override { return inner_->conversion_seconds(); }

  void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) override;
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p) override;
  void conv2d_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) override;
  void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                  Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean, Tensor& running_var,
                                  float momentum, float eps) override;
  void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                   const Tensor& running_mean, const Tensor& running_var, float eps) override;
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& batch_mean,
                          const Tensor& batch_var, Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) override;
  void batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                       Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean, Tensor& running_var,
                                       float momentum, float eps) override;
  void batchnorm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,
                               const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx, Tensor& dgamma,
                               Tensor& dbeta, float eps) override;
  void relu_forward(const Tensor& x, Tensor& y) override;
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) override;
  void maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) override;
  void global_avgpool_forward(const Tensor& x, Tensor& y) override;
  void global_avgpool_backward(const Tensor& dy, Tensor& dx) override;
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) override;
  void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& db) override;
  void add(const Tensor& a, const Tensor& b, Tensor& y) override;
  void add_relu(const Tensor& a, const Tensor& b, Tensor& y) override;  // timed as add
  void convert(const Tensor& src, Tensor& dst) override;
  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing, float grad_scale,
                             Tensor& dlogits) override;
  void sgd_update(Tensor& param, Tensor& param_copy, const Tensor& grad, Tensor& momentum_buffer,
                  const SgdParams& p) override;
  void adam_update(Tensor& param, Tensor& param_copy, const Tensor& grad, Tensor& m, Tensor& v,
                   const AdamParams& p) override;
  void scale_and_check(const std::vector<Tensor*>& tensors, float factor) override;
  void unscale_and_check(const std::vector<Tensor*>& grads, Tensor& state) override;
  void update_loss_scale(Tensor& state, const LossScaleGrowth& growth) override;
  StepScalars read_scalars() override;
  Tensor upload(const Tensor& host) override;

 private:
  // Runs f on the wrapped backend, waits for its device, and adds the time to class c (when enabled), less the
  // conversions made inside it, which go to Convert.
  template <class F>
  void timed(TimeClass c, F&& f) {
    if (!enabled_) return f();
    const double converted_before = inner_->conversion_seconds();
    const auto start = std::chrono::steady_clock::now();
    f();
    inner_->synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double converting = inner_->conversion_seconds() - converted_before;
    times_.seconds[static_cast<size_t>(c)] += seconds - converting;
    times_.seconds[static_cast<size_t>(TimeClass::Convert)] += converting;
    ++times_.calls[static_cast<size_t>(c)];
  }

  std::unique_ptr<Backend> inner_;
  OpTimes times_;
  bool enabled_ = true;
};

}  // namespace ampwb
