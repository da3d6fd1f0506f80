// The CUDA backend: the Backend interface on one NVIDIA GPU, with the CPU backend's argument conventions and
// results (engine/backend/cpu is the semantic reference, engine/reference the oracle).
//
//   convolutions      cuDNN 9: its graph API (cudnn-frontend) and its legacy C API, both timed on each pass and
//                     shape's first call and the faster kept, with PyTorch's engine policy (cuda_libraries.h,
//                     ConvPolicy); workspace at most CudaBackendOptions::conv_workspace_limit, or more where that
//                     makes a timed pass much faster (choose_timed)
//   linear            cuBLASLt: FP32 (FP32 compute, or TF32 with allow_tf32), FP16/BF16 with FP32 accumulation
//   FP8 (amp-fp8)     E4M3/E5M2 operands into FP32 on FP8 tensor cores (compute capability 8.9 and later):
//                     convolutions on cuDNN's graph API, matrix products on cuBLASLt; a shape either has no
//                     engine for runs on the FP8 values widened to FP32 (the same products, the same FP32 sums)
//   batch norm        own kernels: FP32 statistics, scale and shift for FP32, FP16 and BF16 activations
//   everything else   own kernels (cuda_kernels.h): ReLU, max pool with a one-byte argmax workspace, global
//                     average pool, add, casts and layout changes, softmax cross-entropy, SGD and Adam over FP32
//                     master weights, and the fused unscale + inf/NaN check + sum of squares in one launch
//
// Layout: NHWC is the GPU's layout (tensor cores); NCHW works too (slower). Convolution weights in another layout
// than the activations are reordered per call: create them NHWC (preferred_layout()) to avoid that.
// Channel padding: an NHWC FP16/BF16 convolution whose input or output channel count is not a multiple of
// pad_input_channels (in a ResNet only the 3-channel image of the first convolution) runs on zero-padded copies of
// its tensors (input channels, filters), transparently: callers see C and K channels, cuDNN sees tensor-core-friendly
// counts. The loader keeps producing 3-channel images.
//
// Streams: every op queues on one compute stream and returns without waiting, except read_scalars() (the loss, the
// top-1 count and the gradients' check, in one small copy: a training step's one wait) and device-to-host
// convert(), which wait for the stream. upload() copies host batches on a second stream so the copy overlaps the
// previous step's compute.
//
// Errors: every CUDA, cuDNN and cuBLAS status is checked (CUDA_CHECK, CUDNN_CHECK, CUBLAS_CHECK), and running out
// of GPU memory raises ampwb::Error saying so, with a hint to use a smaller batch.
//
// This header includes no CUDA headers: code built without CUDA never sees it, code built with it can include it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace ampwb {
namespace cuda {
struct LossScaleDevice;
struct UpdateSegment;
enum class ConvPass;
struct ConvShape;
struct FactorDevice;
}  // namespace cuda

struct CudaBackendOptions {
  int device_index = 0;
  bool allow_tf32 = false;  // the tf32 mode: FP32 convolutions and matrix products on TF32 tensor cores
  size_t conv_workspace_limit = size_t{256} << 20;  // timed choices may pass it where that pays (cuda::ConvPolicy)
  // Time cuDNN's algorithms once per shape, else its heuristics choose (AMPWB_CUDNN_BENCHMARK=0 also turns it off).
  bool benchmark_algorithms = true;
  int pad_input_channels = 8;  // channel multiple for 16-bit NHWC convolutions; 0: never pad (see above)
  // fp32 mode: GEMM-based convolution algorithms only, no FFT or Winograd (which PyTorch's FP32 takes).
  bool exact_fp32_convolutions = false;
  // Deterministic cuDNN algorithms and engines only (torch.backends.cudnn.deterministic), chosen by cuDNN's
  // heuristics rather than timed: a run repeats bit for bit on the same GPU, driver and libraries.
  bool deterministic = false;
};

class CudaBackend final : public Backend {
 public:
  // Throws ampwb::Error when the device is not usable (no driver, no such GPU, library failure).
  explicit CudaBackend(const CudaBackendOptions& options = {});
  ~CudaBackend() override;

  Device device() const override;
  // e.g. "cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB, sm_90, 132 SMs; CUDA 13.0, driver 13.0, cuDNN 9.19.0,
  // cuBLASLt 130100; TF32 off)"
  std::string description() const override;
  Capabilities capabilities() const override;
  size_t free_memory_bytes() const override;  // cudaMemGetInfo's free bytes on this device

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
  void relu_forward(const Tensor& x, Tensor& y) override;
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
  // workspace: U8 (numel of y), the argmax window position of every output element.
  void maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) override;
  void maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) override;
  void global_avgpool_forward(const Tensor& x, Tensor& y) override;
  void global_avgpool_backward(const Tensor& dy, Tensor& dx) override;
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) override;
  void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& db) override;
  void add(const Tensor& a, const Tensor& b, Tensor& y) override;
  // The fused forms in one pass each (the ReLU applied where the result is written, its mask read where the gradient
  // is), bit for bit the separate ops.
  void add_relu(const Tensor& a, const Tensor& b, Tensor& y) override;
  void batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                       Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean, Tensor& running_var,
                                       float momentum, float eps) override;
  void batchnorm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,
                               const Tensor& beta, const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx,
                               Tensor& dgamma, Tensor& dbeta, float eps) override;
  void batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const Tensor& residual, Tensor& y, Tensor& batch_mean, Tensor& batch_var,
                                           Tensor& running_mean, Tensor& running_var, float momentum,
                                           float eps) override;
  void relu_backward_of_sum(const Tensor& y, const Tensor& dy_a, const Tensor& dy_b, Tensor& dx) override;
  // On FP8 operands: the factor applied and the result rounded to its dtype in the convolution's epilogue
  // (cuda_backend_fp8.cpp), where cuDNN has an engine for that graph.
  void conv2d_forward_scaled(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p, Fp8Factor factor) override;
  void conv2d_backward_data_scaled(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p,
                                   Fp8Factor factor) override;
  // The step as a CUDA graph (cuda_graph.cpp): captured on the compute stream from queue(), its memory a private
  // pool of the allocator's. Refused (null, and why) where queue() copies from or to the host, reads an upload
  // still in flight, or runs a convolution whose algorithm cuDNN has not chosen yet.
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& queue, std::string& why_not) override;
  // Any dtype and layout; host to device, device to host, on the device, and host to host (through the CPU
  // backend). Host-to-device copies go through pinned staging buffers and do not wait for the GPU.
  void convert(const Tensor& src, Tensor& dst) override;
  void scaled_cast(const Tensor& x, Tensor& y, ScaledCast cast, Tensor& stats) override;
  void update_fp8_scalings(const std::vector<Fp8ScalingUpdate>& scalings) override;
  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing, GradScale grad_scale,
                             Tensor& dlogits) override;
  void sgd_update(const std::vector<ParamUpdate>& params, const SgdParams& p) override;
  void adam_update(const std::vector<ParamUpdate>& params, const AdamParams& p) override;
  void scale_and_check(const std::vector<Tensor*>& tensors, float factor) override;
  void unscale_and_check(const std::vector<Tensor*>& grads, Tensor& state) override;
  void update_loss_scale(Tensor& state, const LossScaleGrowth& growth) override;
  StepScalars read_scalars() override;
  // CUDA events on the op stream.
  int64_t mark() override;
  double seconds_between(int64_t from, int64_t to) override;
  void clear_marks() override;
  // Copies into one of two pinned slots on the op stream, each with its event; collecting waits for that event.
  void post_scalars(const Tensor* loss_scale_state) override;
  PostedScalars collect_scalars() override;
  // A device copy of a host tensor, copied on the copy stream after the work queued so far, so that it overlaps
  // the work queued next; the first op that reads it waits for the copy (nothing else does). The host tensor may
  // be reused as soon as this returns. Call it for batch i+1 before queuing step i.
  Tensor upload(const Tensor& host) override;
  // This device's tensors copied into one pinned buffer on the compute stream, then one wait for them all.
  std::vector<Tensor> download(const std::vector<Tensor>& tensors) override;

  // ---- Beyond the Backend interface -----------------------------------------------------------------------------
  Layout preferred_layout() const { return Layout::NHWC; }
  void set_allow_tf32(bool allow);  // the tf32 precision mode; at once (plans are cached per math mode)
  bool allow_tf32() const;
  void synchronize() override;       // waits until the queued work is done (for timing)
  MemoryStats memory_stats() const;  // of this device's caching allocator
  // The compute stream every op queues on, as a cudaStream_t: collectives that must follow the ops (NCCL's) queue on
  // it.
  void* compute_stream() const;
  size_t conv_plans_cached() const;
  std::string conv_plans() const;    // the chosen cuDNN algorithms, one line per shape
  std::string matmul_plans() const;  // the cuBLASLt products planned, one line per shape

 private:
  struct Impl;
  void check_before_update(const std::vector<ParamUpdate>& params);  // SgdParams::check_gradients
  // scale_and_check, or with a loss-scale state: its 1 / scale as the factor, its found_inf set from the check.
  void scale_and_check(const std::vector<Tensor*>& tensors, float factor, cuda::LossScaleDevice* loss_scale);
  // The optimizers' segments, checked: states, how many of each update's state1, state2 the optimizer reads.
  std::vector<cuda::UpdateSegment> update_segments(const std::vector<ParamUpdate>& params, int states,
                                                   const char* optimizer, int64_t& chunks);
  void add(const Tensor& a, const Tensor& b, Tensor& y, bool relu);
  // residual: null, or what a residual block's end adds before its ReLU.
  void batchnorm_training(const Tensor& x, const Tensor* residual, const Tensor& gamma, const Tensor& beta, Tensor& y,
                          Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean, Tensor& running_var,
                          float momentum, float eps, bool relu);
  // relu_beta: null, or the beta of a batch norm + ReLU, whose mask dy goes through (recomputed from x).
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor* relu_beta,
                          const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                          float eps);
  // amp-fp8's convolutions and matrix products on FP8 operands (F8E4M3, F8E5M2) into FP32 (cuda_backend_fp8.cpp).
  // pass: forward (a x, b w), backward data (a dy, b w) or backward filter (a x, b dy).
  void fp8_convolution(cuda::ConvPass pass, const Tensor& a, const Tensor& b, Tensor& out, ConvParams p);
  // The pass's result times factor into out, of any floating dtype, in one cuDNN graph (its epilogue): false where
  // cuDNN has no engine for it.
  bool fp8_convolution_scaled(cuda::ConvPass pass, const Tensor& a, const Tensor& b, Tensor& out, ConvParams p,
                              const Fp8Factor& factor);
  // One such pass (s: its FP8 shape, a and b NHWC) into out, times factor where s.scaled: on FP8 tensor cores or on
  // the same values widened to FP16, whichever its first call timed faster; false where cuDNN has no engine either way.
  bool fp8_pass(cuda::ConvPass pass, const cuda::ConvShape& s, const Tensor& a, const Tensor& b, void* out,
                const float* factor);
  // An Fp8Factor's pointers into its states on this device.
  cuda::FactorDevice factor_on_device(const Fp8Factor& f) const;
  // FP8 values in FP16, which holds each exactly.
  Tensor widened_to_fp16(const Tensor& fp8);
  void fp8_linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
  void fp8_linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& db);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ampwb
