// The CPU backend: convolution, batch norm, max pooling, inner product and conversions through oneDNN 2.6
// primitives cached by shape, dtype and layout; the memory-bound elementwise ops as OpenMP loops.
// FP32 runs natively. oneDNN 2.6 implements no FP16 compute on the CPU, so FP16 is emulated: FP16 tensors are
// widened to FP32, the FP32 primitive runs (FP32 accumulation, as tensor cores do), and results are rounded to
// FP16 with its range: overflow to inf, magnitudes under 2^-24 to zero, subnormals kept. BF16 runs through oneDNN's
// BF16 primitives where the CPU computes BF16 natively and faster than FP32 (AMX; AVX512-BF16 whose multiply-adds
// outpace FP32's, as on Zen 5: see CpuBf16); where oneDNN answers that a BF16 primitive is unimplemented (below
// AVX-512), offers a convolution only through its own, slower emulation (plain AVX-512), or the cores' BF16 rate is
// under their FP32 one (Intel's AVX512-BF16 without AMX), it is emulated the same way as FP16, rounding to BF16.
// oneDNN is asked once per primitive and the answer cached.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/make_backend.h"

namespace ampwb {

struct Cached;  // a oneDNN primitive with its descriptors (cpu_backend_impl.h)

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options = {});
  ~CpuBackend() override;

  Device device() const override { return Device::cpu(); }
  std::string description() const override;
  Capabilities capabilities() const override;

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
                               const Tensor& beta, const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx,
                               Tensor& dgamma, Tensor& dbeta, float eps) override;
  void relu_forward(const Tensor& x, Tensor& y) override;
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) override;
  void maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) override;
  void global_avgpool_forward(const Tensor& x, Tensor& y) override;
  void global_avgpool_backward(const Tensor& dy, Tensor& dx) override;
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) override;
  void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& db) override;
  void add(const Tensor& a, const Tensor& b, Tensor& y) override;
  void add_relu(const Tensor& a, const Tensor& b, Tensor& y) override;
  void relu_backward_of_sum(const Tensor& y, const Tensor& dy_a, const Tensor& dy_b, Tensor& dx) override;
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
  StepScalars read_scalars() override { return scalars_; }
  void post_scalars(const Tensor* loss_scale_state) override;
  PostedScalars collect_scalars() override;
  double conversion_seconds() const override;

  // The instruction set oneDNN dispatches to, e.g. "avx512_core_bf16" or "avx512_core_amx".
  std::string isa() const;
  // oneDNN's implementation of a ResNet-sized BF16 convolution here, e.g. "brgconv:avx512_core_amx"; empty when
  // the engine emulates BF16 (oneDNN has none that runs natively, or it would be slower, or emulation was asked).
  std::string bf16_implementation() const;

 private:
  // FP16 emulation helpers: an FP32 copy of an FP16 tensor (others pass through), an FP32 tensor to compute an
  // FP16 result into, and the rounding of that result into the FP16 tensor.
  Tensor widen(const Tensor& t);
  static Tensor wide_output(const Tensor& t);
  void narrow(const Tensor& wide, Tensor& out);

  // A convolution pass that reads the weights (forward: x to y; backward data: dy to dx) on primitive c; where c is
  // null (a 16-bit type computed in FP32 here), on the FP32 primitive fp32_primitive(in32, w32, out32) finds, with
  // `in` widened, w widened into that primitive's layout, and the result rounded into `out`.
  using Fp32Primitive = std::function<const Cached*(const Tensor&, const Tensor&, const Tensor&)>;
  void run_weights_pass(const Cached* c, const Fp32Primitive& fp32_primitive, const Tensor& in, const Tensor& w,
                        Tensor& out, int in_arg, int out_arg);

  // Batch norm's training forward, with the ReLU fused in when relu is set.
  void batchnorm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& batch_mean,
                          Tensor& batch_var, Tensor& running_mean, Tensor& running_var, float momentum, float eps,
                          bool relu);

  struct Impl;  // oneDNN engine, stream and primitive caches
  std::unique_ptr<Impl> impl_;
  int threads_ = 1;
  // FP32 3x3 convolutions by Winograd F(2x2,3x3) where it applies (BackendOptions::conv_algorithm), or (measured) by
  // the faster of it and the direct algorithm, timed on each pass and shape's first call and kept by key.
  bool winograd_ = false;
  bool measure_winograd_ = false;
  // auto on AVX-512: Winograd for an emulated 16-bit type's convolutions where it pays (emulated_winograd_pays).
  bool winograd_where_emulation_pays_ = false;
  std::map<std::string, bool> winograd_chosen_;
  // The weight gradient by the products, Winograd or the direct path below, unrounded where dw is FP32.
  void backward_weights_any_algorithm(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p);
  // The weight gradient by oneDNN (or its batched GEMM, or the emulation around either): never Winograd.
  void backward_weights_direct(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p);
  // Runs a pass that Winograd can compute: by winograd() or direct(), as above; emulation_pays: the pass is an
  // emulated 16-bit type's where winograd_where_emulation_pays_ takes Winograd.
  void with_conv_algorithm(const std::string& key, bool emulation_pays, const std::function<void()>& winograd,
                           const std::function<void()>& direct);

  // Convolutions as one matrix product each, im2col and oneDNN's matmul (cpu_backend_gemm_conv.cpp): always
  // (ConvAlgorithm::Gemm), on AVX-512 over images of a few pixels where oneDNN's convolutions are slower (Auto,
  // Measured; native BF16 only on AMX), or never.
  enum class GemmConv { Never, SmallImages, Always };
  GemmConv gemm_conv_ = GemmConv::Never;
  bool amx_ = false;  // oneDNN runs AMX here
  enum class ConvPass { Forward, BackwardData, BackwardWeights };
  // Whether this pass of the convolution x -> y (weights w) runs as a product.
  bool gemm_conv_chosen(const Tensor& x, const Tensor& w, const Tensor& y, ConvPass pass, ConvParams p) const;
  bool gemm_conv_emulated(const Tensor& t) const;
  // FP32, and native BF16 without AMX: the weight gradient of a stride-1 3x3 convolution over small images by the
  // engine's own kernel (backend/cpu/direct_weight_gradient.h), in the modes that take products over small images.
  bool direct_weight_gradient_chosen(const Tensor& x, const Tensor& dy, const Tensor& dw, ConvParams p) const;
  // Native BF16 without AMX: the forward pass of a convolution over images of few channels (a network's stem) by the
  // engine's own kernel (backend/cpu/stem_convolution.h), in the same modes.
  bool stem_forward_chosen(const Tensor& x, const Tensor& w, const Tensor& y) const;
  void gemm_conv_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p);
  void gemm_conv_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p);
  void gemm_conv_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p);

  StepScalars scalars_;               // what read_scalars() returns: host memory here, so no copy
  std::deque<PostedScalars> posted_;  // post_scalars() not yet collected
};

}  // namespace ampwb
