// BatchNorm2d: per-channel normalisation with batch statistics in training and running statistics in evaluation.
// The statistics, scale and shift are FP32 whatever the activations' dtype. With relu, the ReLU after it (a
// conv-bn-relu's end) runs inside it: in training as one backend op each way (Backend::batchnorm_relu_*), which
// saves a pass over the activations and their gradients, with the bits of the two separate ops.
// Synchronised (set_rank_sum), training takes its statistics over every rank's batch, as PyTorch's SyncBatchNorm.
#pragma once

#include <cstddef>
#include <functional>

#include "nn/layer.h"

namespace ampwb {

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(Backend& backend, const std::string& name, int channels, bool relu = false, float momentum = 0.1f,
              float eps = 1e-5f);

  Tensor forward(const Tensor& x, Mode mode) override;
  Tensor backward(const Tensor& dy) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  void collect_buffers(std::vector<Buffer*>& out) override;

  Parameter& gamma() { return gamma_; }
  Parameter& beta() { return beta_; }
  Buffer& running_mean() { return running_mean_; }
  Buffer& running_var() { return running_var_; }
  // Its input comes from a convolution that takes its output gradient wide (Conv2d::set_output_grad_wide): where
  // the backend emulates the activations' 16-bit type, backward returns the input gradient in FP32 holding the
  // 16-bit gradient's values (Backend::batchnorm_backward), which that convolution would otherwise widen. Not on a
  // probed step: the probe records gradients in the type they are computed in.
  void set_input_grad_wide(bool wide) { input_grad_wide_ = wide; }

  // A residual block's end, relu(this batch norm of x + residual), as one backend op in training
  // (Backend::batchnorm_add_relu_forward_training): what an unfused end computes, without writing the batch norm's
  // output and reading it back. Where the types, layouts or shapes differ, in evaluation, or on a probed step (the
  // probe records batch norm's own output), fuses_residual_end is false and the end runs as separate ops.
  bool fuses_residual_end(const Tensor& x, const Tensor& residual, Mode mode) const;
  Tensor forward_add_relu(const Tensor& x, const Tensor& residual);  // backward: the batch norm's, as after forward

  // Sums `count` doubles in place over every rank of the run (a Communicator's all_reduce_sum); every rank calls it
  // in the same order.
  using RankSum = std::function<void(double* data, size_t count)>;
  // With a rank sum, training is synchronised batch norm: forward normalises with the mean and biased variance of
  // every rank's batch together and updates the running statistics from them (the same on every rank); backward
  // takes its sums of dy and dy * x_hat over the ranks, so that the input gradient, once the ranks' parameter
  // gradients are averaged, is one process's at the global batch. gamma's and beta's gradients stay this rank's
  // (the gradient average makes them the global batch's). Unset (default): this rank's batch alone, fused ops.
  void set_rank_sum(RankSum rank_sum) { rank_sum_ = std::move(rank_sum); }
  bool synchronised() const { return static_cast<bool>(rank_sum_); }

 private:
  Parameter gamma_, beta_;             // (C): scale 1 and shift 0 at start, as torchvision
  Buffer running_mean_, running_var_;  // (C): 0 and 1 at start; the variance unbiased, as PyTorch
  bool relu_;
  bool input_grad_wide_ = false;
  float momentum_, eps_;
  // Kept by forward for backward:
  Tensor input_;                   // (N,C,H,W)
  Tensor batch_mean_, batch_var_;  // (C), the biased batch variance
  Tensor output_;                  // (N,C,H,W) with relu: the gradient passes where the output is positive
  bool fused_ = false;             // the last training forward ran batch norm and ReLU as one op
  RankSum rank_sum_;               // set: synchronised over the ranks
  double global_count_ = 0;        // synchronised: the values per channel over every rank's batch

  void start_training_forward(const Tensor& x);  // the batch statistics' tensors; x kept
  Tensor forward_synchronised(const Tensor& x);
  Tensor backward_synchronised(const Tensor& dy);  // dy at batch norm's output (after any ReLU's mask)
};

// Every batch norm in `model` (itself included) synchronised over the ranks with rank_sum (BatchNorm2d::set_rank_sum).
void synchronise_batch_norm(Layer& model, const BatchNorm2d::RankSum& rank_sum);

}  // namespace ampwb
