// A backend that captures work as a GPU graph does (Backend::capture), for tests without a GPU. While it records,
// every op is kept with its arguments instead of running: tensors by handle (the same storage, as a graph keeps its
// addresses), numbers by value (as a graph keeps its kernels' arguments); replay() runs the record again. What a
// graph cannot hold is refused as the CUDA backend refuses it: reads and copies to the host, uploads, host waits.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "forwarding_backend.h"

namespace ampwb::testing {

class RecordingBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  int captures = 0;
  int64_t replays = 0;
  bool refuse_updates = false;  // a capture fails at the optimizer, after the forward and backward were recorded

  std::unique_ptr<CapturedWork> capture(const std::function<void()>& queue, std::string& why_not) override {
    auto ops = std::make_shared<std::vector<std::function<void()>>>();
    recording_ = ops.get();
    try {
      queue();
    } catch (const Error& e) {
      recording_ = nullptr;
      why_not = e.what();
      return nullptr;
    }
    recording_ = nullptr;
    ++captures;
    return std::make_unique<Replay>(std::move(ops), replays);
  }

  void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) override {
    run([=, this]() mutable { inner().conv2d_forward(x, w, y, p); });
  }
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p) override {
    run([=, this]() mutable { inner().conv2d_backward_data(dy, w, dx, p); });
  }
  void conv2d_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) override {
    run([=, this]() mutable { inner().conv2d_backward_weights(x, dy, dw, p); });
  }
  void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                                  Tensor& var, Tensor& running_mean, Tensor& running_var, float momentum,
                                  float eps) override {
    run([=, this]() mutable {
      inner().batchnorm_forward_training(x, gamma, beta, y, mean, var, running_mean, running_var, momentum, eps);
    });
  }
  void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                   const Tensor& running_mean, const Tensor& running_var, float eps) override {
    run([=, this]() mutable {
      inner().batchnorm_forward_inference(x, gamma, beta, y, running_mean, running_var, eps);
    });
  }
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                          Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) override {
    run([=, this]() mutable { inner().batchnorm_backward(x, dy, gamma, mean, var, dx, dgamma, dbeta, eps); });
  }
  void batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                       Tensor& mean, Tensor& var, Tensor& running_mean, Tensor& running_var,
                                       float momentum, float eps) override {
    run([=, this]() mutable {
      inner().batchnorm_relu_forward_training(x, gamma, beta, y, mean, var, running_mean, running_var, momentum, eps);
    });
  }
  void batchnorm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,
                               const Tensor& beta, const Tensor& mean, const Tensor& var, Tensor& dx, Tensor& dgamma,
                               Tensor& dbeta, float eps) override {
    run([=, this]() mutable {
      inner().batchnorm_relu_backward(x, y, dy, gamma, beta, mean, var, dx, dgamma, dbeta, eps);
    });
  }
  void batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const Tensor& residual, Tensor& y, Tensor& mean, Tensor& var,
                                           Tensor& running_mean, Tensor& running_var, float momentum,
                                           float eps) override {
    run([=, this]() mutable {
      inner().batchnorm_add_relu_forward_training(x, gamma, beta, residual, y, mean, var, running_mean, running_var,
                                                  momentum, eps);
    });
  }
  void relu_forward(const Tensor& x, Tensor& y) override {
    run([=, this]() mutable { inner().relu_forward(x, y); });
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    run([=, this]() mutable { inner().relu_backward(y, dy, dx); });
  }
  void relu_backward_of_sum(const Tensor& y, const Tensor& dy_a, const Tensor& dy_b, Tensor& dx) override {
    run([=, this]() mutable { inner().relu_backward_of_sum(y, dy_a, dy_b, dx); });
  }
  // The workspace is the op's output: a graph writes it where the capture allocated it, so the recording allocates
  // it now (running the op once on whatever x holds) and each replay copies the op's record into it.
  void maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) override {
    if (!recording_) return inner().maxpool_forward(x, y, workspace, p);
    Tensor scratch_y = Tensor::empty(y.shape(), y.dtype(), y.layout(), y.device());
    inner().maxpool_forward(x, scratch_y, workspace, p);
    run([=, this]() mutable {
      Tensor fresh;
      inner().maxpool_forward(x, y, fresh, p);
      inner().convert(fresh, workspace);
    });
  }
  void maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) override {
    run([=, this]() mutable { inner().maxpool_backward(dy, workspace, dx, p); });
  }
  void global_avgpool_forward(const Tensor& x, Tensor& y) override {
    run([=, this]() mutable { inner().global_avgpool_forward(x, y); });
  }
  void global_avgpool_backward(const Tensor& dy, Tensor& dx) override {
    run([=, this]() mutable { inner().global_avgpool_backward(dy, dx); });
  }
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) override {
    run([=, this]() mutable { inner().linear_forward(x, w, b, y); });
  }
  void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                       Tensor& db) override {
    run([=, this]() mutable { inner().linear_backward(dy, x, w, dx, dw, db); });
  }
  void add(const Tensor& a, const Tensor& b, Tensor& y) override {
    run([=, this]() mutable { inner().add(a, b, y); });
  }
  void add_relu(const Tensor& a, const Tensor& b, Tensor& y) override {
    run([=, this]() mutable { inner().add_relu(a, b, y); });
  }
  void convert(const Tensor& src, Tensor& dst) override {
    if (src.device() != device() || dst.device() != device()) refuse("a copy between the host and the device");
    run([=, this]() mutable { inner().convert(src, dst); });
  }
  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing, GradScale grad_scale,
                             Tensor& dlogits) override {
    run([=, this]() mutable { inner().softmax_cross_entropy(logits, labels, smoothing, grad_scale, dlogits); });
  }
  void sgd_update(const std::vector<ParamUpdate>& params, const SgdParams& p) override {
    if (refuse_updates) refuse("an update (refused by the test)");
    run([=, this]() mutable { inner().sgd_update(params, p); });
  }
  void adam_update(const std::vector<ParamUpdate>& params, const AdamParams& p) override {
    if (refuse_updates) refuse("an update (refused by the test)");
    run([=, this]() mutable { inner().adam_update(params, p); });
  }
  void scale_and_check(const std::vector<Tensor*>& tensors, float factor) override {
    run([=, this]() mutable { inner().scale_and_check(tensors, factor); });
  }
  void unscale_and_check(const std::vector<Tensor*>& grads, Tensor& state) override {
    run([=, this]() mutable { inner().unscale_and_check(grads, state); });
  }
  void update_loss_scale(Tensor& state, const LossScaleGrowth& growth) override {
    run([=, this]() mutable { inner().update_loss_scale(state, growth); });
  }
  StepScalars read_scalars() override { return refuse("read_scalars"), inner().read_scalars(); }
  void post_scalars(const Tensor* state) override { refuse("post_scalars"), inner().post_scalars(state); }
  PostedScalars collect_scalars() override { return refuse("collect_scalars"), inner().collect_scalars(); }
  Tensor upload(const Tensor& host) override { return refuse("an upload"), inner().upload(host); }
  void synchronize() override { refuse("a wait for the device"), inner().synchronize(); }

 private:
  class Replay final : public CapturedWork {
   public:
    Replay(std::shared_ptr<std::vector<std::function<void()>>> ops, int64_t& replays)
        : ops_(std::move(ops)), replays_(replays) {}
    void replay() override {
      for (auto& op : *ops_) op();
      ++replays_;
    }

   private:
    std::shared_ptr<std::vector<std::function<void()>>> ops_;
    int64_t& replays_;
  };

  void run(std::function<void()> op) {
    if (recording_)
      recording_->push_back(std::move(op));
    else
      op();
  }
  void refuse(const char* what) const {
    if (recording_) throw Error(std::string("a captured step cannot hold ") + what);
  }

  std::vector<std::function<void()>>* recording_ = nullptr;
};

}  // namespace ampwb::testing
