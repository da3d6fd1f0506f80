// BatchNorm2d forward and backward.
#include "nn/batchnorm2d.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace ampwb {
namespace {
Tensor filled(Backend& backend, int channels, float value) {
  Tensor t = Tensor::empty({channels}, DType::F32);
  std::fill_n(t.data_as<float>(), channels, value);
  return on_device(backend, t);
}

// A per-channel FP32 tensor's values, read on the host.
std::vector<float> host_values(Backend& backend, const Tensor& t) {
  const Tensor host = on_host(backend, t);
  const float* values = host.data_as<float>();
  return {values, values + host.numel()};
}

// `values` written into the per-channel FP32 tensor t, wherever it lives.
void set_values(Backend& backend, Tensor& t, const std::vector<float>& values) {
  if (t.device().is_cpu()) {
    std::copy(values.begin(), values.end(), t.data_as<float>());
    return;
  }
  Tensor host = Tensor::empty({t.numel()}, DType::F32);
  std::copy(values.begin(), values.end(), host.data_as<float>());
  backend.convert(host, t);
}

Tensor per_channel(Backend& backend, const std::vector<float>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::F32);
  std::copy(values.begin(), values.end(), t.data_as<float>());
  return on_device(backend, t);
}
}  // namespace

BatchNorm2d::BatchNorm2d(Backend& backend, const std::string& name, int channels, bool relu, float momentum, float eps)
    : Layer(backend), relu_(relu), momentum_(momentum), eps_(eps) {
  gamma_ = {name + ".weight", filled(backend, channels, 1.0f), filled(backend, channels, 0.0f)};
  beta_ = {name + ".bias", filled(backend, channels, 0.0f), filled(backend, channels, 0.0f)};
  running_mean_ = {name + ".running_mean", filled(backend, channels, 0.0f)};
  running_var_ = {name + ".running_var", filled(backend, channels, 1.0f)};
}

Tensor BatchNorm2d::forward(const Tensor& x, Mode mode) {
  Tensor y = empty_like(x);
  if (mode == Mode::Eval) {
    backend_.batchnorm_forward_inference(x, gamma_.value, beta_.value, y, running_mean_.value, running_var_.value,
                                         eps_);
    if (relu_) backend_.relu_forward(y, y);  // in place: elementwise
    return y;
  }
  if (rank_sum_) return forward_synchronised(x);
  start_training_forward(x);
  // A probed step records batch norm's own output, so there the ReLU runs as a second op (the same bits).
  fused_ = relu_ && !probe_;
  if (fused_)
    backend_.batchnorm_relu_forward_training(x, gamma_.value, beta_.value, y, batch_mean_, batch_var_,
                                             running_mean_.value, running_var_.value, momentum_, eps_);
  else
    backend_.batchnorm_forward_training(x, gamma_.value, beta_.value, y, batch_mean_, batch_var_, running_mean_.value,
                                        running_var_.value, momentum_, eps_);
  // Statistics, scale and shift are FP32 (gamma's dtype) whatever the activations' dtype.
  probe_forward("batch_norm", gamma_, x.c(), x.c(), gamma_.value.dtype(), y);
  if (relu_ && !fused_) {
    Tensor batch_norm_output = y;  // the probe may hold it: not overwritten
    y = empty_like(x);
    backend_.relu_forward(batch_norm_output, y);
  }
  if (relu_) output_ = y;
  return y;
}

void BatchNorm2d::start_training_forward(const Tensor& x) {
  batch_mean_ = Tensor::empty({x.c()}, DType::F32, Layout::NCHW, x.device());
  batch_var_ = Tensor::empty({x.c()}, DType::F32, Layout::NCHW, x.device());
  input_ = x;
}

bool BatchNorm2d::fuses_residual_end(const Tensor& x, const Tensor& residual, Mode mode) const {
  return mode == Mode::Train && !relu_ && !probe_ && !rank_sum_ && residual.shape() == x.shape() &&
         residual.dtype() == x.dtype() && residual.layout() == x.layout() && residual.device() == x.device();
}

Tensor BatchNorm2d::forward_add_relu(const Tensor& x, const Tensor& residual) {
  AMPWB_CHECK(fuses_residual_end(x, residual, Mode::Train),
              "batch norm + residual add + ReLU in one op needs a batch norm without its own ReLU, no probe, no "
              "synchronisation, and x and the residual alike: "
                  << x.describe() << " and " << residual.describe());
  start_training_forward(x);
  fused_ = false;
  Tensor y = empty_like(x);
  backend_.batchnorm_add_relu_forward_training(x, gamma_.value, beta_.value, residual, y, batch_mean_, batch_var_,
                                               running_mean_.value, running_var_.value, momentum_, eps_);
  return y;
}

Tensor BatchNorm2d::backward(const Tensor& output_grad) {
  // The ReLU's cast, where the gradient arrives in another type, is not batch norm's (as when it was a layer).
  Tensor dy = relu_ ? cast(backend_, output_grad, input_.dtype()) : cast_counted(output_grad, input_.dtype());
  const bool wide = input_grad_wide_ && !probe_ && emulates(input_.dtype());
  // Synchronised, backward_synchronised makes dx in the input's type.
  Tensor dx = rank_sum_ ? Tensor()
              : wide    ? Tensor::empty(input_.shape(), DType::F32, input_.layout(), input_.device())
                        : empty_like(input_);
  if (fused_) {
    backend_.batchnorm_relu_backward(input_, output_, dy, gamma_.value, beta_.value, batch_mean_, batch_var_, dx,
                                     gamma_.grad, beta_.grad, eps_);
  } else {
    if (relu_) {
      Tensor masked = empty_like(dy);
      backend_.relu_backward(output_, dy, masked);
      dy = masked;
    }
    if (rank_sum_)
      dx = backward_synchronised(dy);
    else
      backend_.batchnorm_backward(input_, dy, gamma_.value, batch_mean_, batch_var_, dx, gamma_.grad, beta_.grad, eps_);
  }
  input_ = output_ = Tensor();
  probe_backward(gamma_.value.dtype(), dy, gamma_.grad);  // on a probed step, dy as batch norm computes with it
  return dx;
}

// Synchronised forward: this rank's statistics from the training op, merged over the ranks, then the batch
// normalised with the merged ones by the inference op (which normalises with statistics it is given). The merge sums
// each channel's count, count * mean and count * (variance + mean^2) over the ranks in FP64, one all-reduce: the
// communicator has no all-gather for PyTorch's Welford merge of the ranks' (mean, variance, count), and in FP64 the
// subtraction of the squared mean loses about 2^-52 * mean^2 / variance, far below FP32's own rounding.
Tensor BatchNorm2d::forward_synchronised(const Tensor& x) {
  start_training_forward(x);
  fused_ = false;
  const int64_t channels = x.c();
  Tensor y = empty_like(x);
  {  // its output and running statistics are this rank's alone: dropped
    Tensor rank_running_mean = filled(backend_, static_cast<int>(channels), 0.0f);
    Tensor rank_running_var = filled(backend_, static_cast<int>(channels), 1.0f);
    backend_.batchnorm_forward_training(x, gamma_.value, beta_.value, y, batch_mean_, batch_var_, rank_running_mean,
                                        rank_running_var, momentum_, eps_);
  }
  std::vector<float> mean = host_values(backend_, batch_mean_), var = host_values(backend_, batch_var_);
  const double count = static_cast<double>(x.n() * x.h() * x.w());
  std::vector<double> sums(2 * channels + 1);
  for (int64_t c = 0; c < channels; ++c) {
    sums[c] = count * mean[c];
    sums[channels + c] = count * (static_cast<double>(var[c]) + static_cast<double>(mean[c]) * mean[c]);
  }
  sums[2 * channels] = count;
  rank_sum_(sums.data(), sums.size());
  global_count_ = sums[2 * channels];
  for (int64_t c = 0; c < channels; ++c) {
    const double global_mean = sums[c] / global_count_;
    mean[c] = static_cast<float>(global_mean);
    var[c] = static_cast<float>(std::max(0.0, sums[channels + c] / global_count_ - global_mean * global_mean));
  }
  set_values(backend_, batch_mean_, mean);
  set_values(backend_, batch_var_, var);

  // The running statistics as the backends update them (the variance unbiased), from the global batch's.
  std::vector<float> running_mean = host_values(backend_, running_mean_.value);
  std::vector<float> running_var = host_values(backend_, running_var_.value);
  const float unbias = global_count_ > 1 ? static_cast<float>(global_count_ / (global_count_ - 1)) : 1.0f;
  for (int64_t c = 0; c < channels; ++c) {
    running_mean[c] = (1 - momentum_) * running_mean[c] + momentum_ * mean[c];
    running_var[c] = (1 - momentum_) * running_var[c] + momentum_ * var[c] * unbias;
  }
  set_values(backend_, running_mean_.value, running_mean);
  set_values(backend_, running_var_.value, running_var);

  backend_.batchnorm_forward_inference(x, gamma_.value, beta_.value, y, batch_mean_, batch_var_, eps_);
  probe_forward("batch_norm", gamma_, channels, channels, gamma_.value.dtype(), y);
  if (relu_) {
    Tensor batch_norm_output = y;  // the probe may hold it: not overwritten
    y = empty_like(x);
    backend_.relu_forward(batch_norm_output, y);
    output_ = y;
  }
  return y;
}

// Synchronised backward. The backward op, given the global statistics, takes the means of dy and dy * x_hat over
// this rank's batch; the global batch's differ from them by a per-channel shift + scale * x_hat, which the inference
// op computes (it is batch norm with gamma = scale, beta = shift) and which is added to dx. In FP32 throughout, dx
// rounded once to the input's type at the end, as the fused backward rounds it.
Tensor BatchNorm2d::backward_synchronised(const Tensor& dy) {
  const Tensor x = cast(backend_, input_, DType::F32), dy32 = cast(backend_, dy, DType::F32);
  Tensor rank_dx = empty_like(x);
  backend_.batchnorm_backward(x, dy32, gamma_.value, batch_mean_, batch_var_, rank_dx, gamma_.grad, beta_.grad, eps_);
  const std::vector<float> sum_dy = host_values(backend_, beta_.grad),
                           sum_dy_x_hat = host_values(backend_, gamma_.grad);
  const int64_t channels = x.c();
  std::vector<double> sums(2 * channels);
  std::copy(sum_dy.begin(), sum_dy.end(), sums.begin());
  std::copy(sum_dy_x_hat.begin(), sum_dy_x_hat.end(), sums.begin() + channels);
  rank_sum_(sums.data(), sums.size());

  const double count = static_cast<double>(x.n() * x.h() * x.w());
  const std::vector<float> gamma = host_values(backend_, gamma_.value), var = host_values(backend_, batch_var_);
  std::vector<float> shift(channels), scale(channels);
  for (int64_t c = 0; c < channels; ++c) {
    const double coefficient = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps_);
    shift[c] = static_cast<float>(coefficient * (sum_dy[c] / count - sums[c] / global_count_));
    scale[c] = static_cast<float>(coefficient * (sum_dy_x_hat[c] / count - sums[channels + c] / global_count_));
  }
  Tensor correction = empty_like(x);
  backend_.batchnorm_forward_inference(x, per_channel(backend_, scale), per_channel(backend_, shift), correction,
                                       batch_mean_, batch_var_, eps_);
  Tensor dx = empty_like(x);
  backend_.add(rank_dx, correction, dx);
  return cast(backend_, dx, input_.dtype());
}

void BatchNorm2d::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&gamma_);
  out.push_back(&beta_);
}

void BatchNorm2d::collect_buffers(std::vector<Buffer*>& out) {
  out.push_back(&running_mean_);
  out.push_back(&running_var_);
}

void synchronise_batch_norm(Layer& model, const BatchNorm2d::RankSum& rank_sum) {
  model.visit([&rank_sum](Layer& layer) {
    if (auto* batch_norm = dynamic_cast<BatchNorm2d*>(&layer)) batch_norm->set_rank_sum(rank_sum);
  });
}

}  // namespace ampwb
