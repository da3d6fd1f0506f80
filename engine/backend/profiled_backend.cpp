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

void ProfiledBackend::conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) {
  timed(TimeClass::ConvForward, [&] { inner_->conv2d_forward(x, w, y, p); });
}
void ProfiledBackend::conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p) {
  timed(TimeClass::ConvBackwardData, [&] { inner_->conv2d_backward_data(dy, w, dx, p); });
}
void ProfiledBackend::conv2d_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) {
  timed(TimeClass::ConvBackwardWeights, [&] { inner_->conv2d_backward_weights(x, dy, dw, p); });
}
void ProfiledBackend::batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                                 Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean,
                                                 Tensor& running_var, float momentum, float eps) {
  timed(TimeClass::BatchNorm, [&] {
    inner_->batchnorm_forward_training(x, gamma, beta, y, batch_mean, batch_var, running_mean, running_var, momentum,
                                       eps);
  });
}
void ProfiledBackend::batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                                  const Tensor& running_mean, const Tensor& running_var, float eps) {
  timed(TimeClass::BatchNorm,
        [&] { inner_->batchnorm_forward_inference(x, gamma, beta, y, running_mean, running_var, eps); });
}
void ProfiledBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                         const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx, Tensor& dgamma,
                                         Tensor& dbeta, float eps) {
  timed(TimeClass::BatchNorm,
        [&] { inner_->batchnorm_backward(x, dy, gamma, batch_mean, batch_var, dx, dgamma, dbeta, eps); });
}
void ProfiledBackend::batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                      Tensor& y, Tensor& batch_mean, Tensor& batch_var,
                                                      Tensor& running_mean, Tensor& running_var, float momentum,
                                                      float eps) {
  timed(TimeClass::BatchNorm, [&] {
    inner_->batchnorm_relu_forward_training(x, gamma, beta, y, batch_mean, batch_var, running_mean, running_var,
                                            momentum, eps);
  });
}
void ProfiledBackend::batchnorm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,
                                              const Tensor& beta, const Tensor& batch_mean, const Tensor& batch_var,
                                              Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) {
  timed(TimeClass::BatchNorm,
        [&] { inner_->batchnorm_relu_backward(x, y, dy, gamma, beta, batch_mean, batch_var, dx, dgamma, dbeta, eps); });
}
void ProfiledBackend::batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                          const Tensor& residual, Tensor& y, Tensor& batch_mean,
                                                          Tensor& batch_var, Tensor& running_mean, Tensor& running_var,
                                                          float momentum, float eps) {
  timed(TimeClass::BatchNorm, [&] {
    inner_->batchnorm_add_relu_forward_training(x, gamma, beta, residual, y, batch_mean, batch_var, running_mean,
                                                running_var, momentum, eps);
  });
}
void ProfiledBackend::relu_forward(const Tensor& x, Tensor& y) {
  timed(TimeClass::Relu, [&] { inner_->relu_forward(x, y); });
}
void ProfiledBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  timed(TimeClass::Relu, [&] { inner_->relu_backward(y, dy, dx); });
}
void ProfiledBackend::relu_backward_of_sum(const Tensor& y, const Tensor& dy_a, const Tensor& dy_b, Tensor& dx) {
  timed(TimeClass::Add, [&] { inner_->relu_backward_of_sum(y, dy_a, dy_b, dx); });
}
void ProfiledBackend::maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) {
  timed(TimeClass::Pooling, [&] { inner_->maxpool_forward(x, y, workspace, p); });
}
void ProfiledBackend::maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) {
  timed(TimeClass::Pooling, [&] { inner_->maxpool_backward(dy, workspace, dx, p); });
}
void ProfiledBackend::global_avgpool_forward(const Tensor& x, Tensor& y) {
  timed(TimeClass::Pooling, [&] { inner_->global_avgpool_forward(x, y); });
}
void ProfiledBackend::global_avgpool_backward(const Tensor& dy, Tensor& dx) {
  timed(TimeClass::Pooling, [&] { inner_->global_avgpool_backward(dy, dx); });
}
void ProfiledBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  timed(TimeClass::Linear, [&] { inner_->linear_forward(x, w, b, y); });
}
void ProfiledBackend::linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                                      Tensor& db) {
  timed(TimeClass::Linear, [&] { inner_->linear_backward(dy, x, w, dx, dw, db); });
}
void ProfiledBackend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  timed(TimeClass::Add, [&] { inner_->add(a, b, y); });
}
void ProfiledBackend::add_relu(const Tensor& a, const Tensor& b, Tensor& y) {
  timed(TimeClass::Add, [&] { inner_->add_relu(a, b, y); });
}
void ProfiledBackend::convert(const Tensor& src, Tensor& dst) {
  if (src.device() != dst.device() && dst.device() == Device::cpu()) ++host_waits_;  // a copy to the host
  timed(TimeClass::Convert, [&] { inner_->convert(src, dst); });
}
void ProfiledBackend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                            GradScale grad_scale, Tensor& dlogits) {
  timed(TimeClass::Loss, [&] { inner_->softmax_cross_entropy(logits, labels, label_smoothing, grad_scale, dlogits); });
}
void ProfiledBackend::sgd_update(const std::vector<ParamUpdate>& params, const SgdParams& p) {
  timed(TimeClass::Optimizer, [&] { inner_->sgd_update(params, p); });
}
void ProfiledBackend::adam_update(const std::vector<ParamUpdate>& params, const AdamParams& p) {
  timed(TimeClass::Optimizer, [&] { inner_->adam_update(params, p); });
}
void ProfiledBackend::scale_and_check(const std::vector<Tensor*>& tensors, float factor) {
  timed(TimeClass::ScaleCheck, [&] { inner_->scale_and_check(tensors, factor); });
}
void ProfiledBackend::unscale_and_check(const std::vector<Tensor*>& grads, Tensor& state) {
  timed(TimeClass::ScaleCheck, [&] { inner_->unscale_and_check(grads, state); });
}
void ProfiledBackend::update_loss_scale(Tensor& state, const LossScaleGrowth& growth) {
  timed(TimeClass::ScaleCheck, [&] { inner_->update_loss_scale(state, growth); });
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
