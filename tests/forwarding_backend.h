// A Backend that forwards every op to another: the base of the tests' decorators (fault injection), which override
// only the op they change.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace ampwb::testing {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  Backend& inner() { return *inner_; }

  Device device() const override { return inner_->device(); }
  std::string description() const override { return inner_->description(); }
  bool supports(Op op, DType dtype) const override { return inner_->supports(op, dtype); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void synchronize() override { inner_->synchronize(); }
  double conversion_seconds() const override { return inner_->conversion_seconds(); }
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& queue, std::string& why_not) override {
    return inner_->capture(queue, why_not);
  }
  int64_t mark() override { return inner_->mark(); }
  double seconds_between(int64_t from, int64_t to) override { return inner_->seconds_between(from, to); }
  void clear_marks() override { inner_->clear_marks(); }

  void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) override {
    inner_->conv2d_forward(x, w, y, p);
  }
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p) override {
    inner_->conv2d_backward_data(dy, w, dx, p);
  }
  void conv2d_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) override {
    inner_->conv2d_backward_weights(x, dy, dw, p);
  }
  void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                                  Tensor& var, Tensor& running_mean, Tensor& running_var, float momentum,
                                  float eps) override {
    inner_->batchnorm_forward_training(x, gamma, beta, y, mean, var, running_mean, running_var, momentum, eps);
  }
  void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                   const Tensor& running_mean, const Tensor& running_var, float eps) override {
    inner_->batchnorm_forward_inference(x, gamma, beta, y, running_mean, running_var, eps);
  }
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                          Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) override {
    inner_->batchnorm_backward(x, dy, gamma, mean, var, dx, dgamma, dbeta, eps);
  }
  void batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                       Tensor& mean, Tensor& var, Tensor& running_mean, Tensor& running_var,
                                       float momentum, float eps) override {
    inner_->batchnorm_relu_forward_training(x, gamma, beta, y, mean, var, running_mean, running_var, momentum, eps);
  }
  void batchnorm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,
                               const Tensor& beta, const Tensor& mean, const Tensor& var, Tensor& dx, Tensor& dgamma,
                               Tensor& dbeta, float eps) override {
    inner_->batchnorm_relu_backward(x, y, dy, gamma, beta, mean, var, dx, dgamma, dbeta, eps);
  }
  void batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const Tensor& residual, Tensor& y, Tensor& mean, Tensor& var,
                                           Tensor& running_mean, Tensor& running_var, float momentum,
                                           float eps) override {
    inner_->batchnorm_add_relu_forward_training(x, gamma, beta, residual, y, mean, var, running_mean, running_var,
                                                momentum, eps);
  }
  void relu_forward(const Tensor& x, Tensor& y) override { inner_->relu_forward(x, y); }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override { inner_->relu_backward(y, dy, dx); }
  void relu_backward_of_sum(const Tensor& y, const Tensor& dy_a, const Tensor& dy_b, Tensor& dx) override {
    inner_->relu_backward_of_sum(y, dy_a, dy_b, dx);
  }
  void maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) override {
    inner_->maxpool_forward(x, y, workspace, p);
  }
  void maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) override {
    inner_->maxpool_backward(dy, workspace, dx, p);
  }
  void global_avgpool_forward(const Tensor& x, Tensor& y) override { inner_->global_avgpool_forward(x, y); }
  void global_avgpool_backward(const Tensor& dy, Tensor& dx) override { inner_->global_avgpool_backward(dy, dx); }
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) override {
    inner_->linear_forward(x, w, b, y);
  }
  void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                       Tensor& db) override {
    inner_->linear_backward(dy, x, w, dx, dw, db);
  }
  void add(const Tensor& a, const Tensor& b, Tensor& y) override { inner_->add(a, b, y); }
  void add_relu(const Tensor& a, const Tensor& b, Tensor& y) override { inner_->add_relu(a, b, y); }
  void convert(const Tensor& src, Tensor& dst) override { inner_->convert(src, dst); }
  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing, GradScale grad_scale,
                             Tensor& dlogits) override {
    inner_->softmax_cross_entropy(logits, labels, smoothing, grad_scale, dlogits);
  }
  void sgd_update(const std::vector<ParamUpdate>& params, const SgdParams& p) override {
    inner_->sgd_update(params, p);
  }
  void adam_update(const std::vector<ParamUpdate>& params, const AdamParams& p) override {
    inner_->adam_update(params, p);
  }
  void scale_and_check(const std::vector<Tensor*>& tensors, float factor) override {
    inner_->scale_and_check(tensors, factor);
  }
  void unscale_and_check(const std::vector<Tensor*>& grads, Tensor& state) override {
    inner_->unscale_and_check(grads, state);
  }
  void update_loss_scale(Tensor& state, const LossScaleGrowth& growth) override {
    inner_->update_loss_scale(state, growth);
  }
  StepScalars read_scalars() override { return inner_->read_scalars(); }
  void post_scalars(const Tensor* loss_scale_state) override { inner_->post_scalars(loss_scale_state); }
  PostedScalars collect_scalars() override { return inner_->collect_scalars(); }
  Tensor upload(const Tensor& host) override { return inner_->upload(host); }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace ampwb::testing
