// The precision policy: which dtype each op computes and stores in, for each precision mode. One table, in one
// place (kAutocastTable), printed for the user by describe().
//
// Modes (PyTorch / Apex names in brackets):
//   fp32       everything FP32
//   tf32       FP32 storage, TF32 tensor-core math (CUDA only)
//   amp-fp16   autocast to FP16, FP32 master weights, dynamic loss scaling   [torch.autocast + GradScaler, O1]
//   amp-bf16   autocast to BF16, FP32 master weights, no loss scaling        [torch.autocast(bfloat16)]
//   fp16-o2    FP16 model and activations, batch norm FP32, FP32 master weights, dynamic loss scaling [O2]
//   fp16-pure  FP16 everywhere (batch-norm parameters and statistics too), no master weights           [O3]
#pragma once

#include <array>
#include <string>

#include "amp/precision.h"
#include "core/dtype.h"

namespace ampwb {

enum class OpClass { Conv, Linear, BatchNorm, Relu, MaxPool, GlobalAvgPool, Add, Loss, Count };

enum class CastRule {
  LowPrecision,  // inputs cast to the low-precision type; FP32 accumulation inside
  Fp32,          // inputs cast to FP32
  FollowInput,   // runs in its input's type (batch norm: FP32 scale, shift and statistics whatever the input)
  Widest         // runs in the widest of its inputs' types
};

struct PolicyRow {
  OpClass op;
  const char* name;
  CastRule autocast;
  const char* why;
};

// PyTorch's autocast lists, restricted to the ops of a ResNet.
inline constexpr std::array<PolicyRow, static_cast<size_t>(OpClass::Count)> kAutocastTable = {{
    {OpClass::Conv, "conv2d", CastRule::LowPrecision, "matrix products: tensor-core material"},
    {OpClass::Linear, "linear", CastRule::LowPrecision, "matrix products: tensor-core material"},
    {OpClass::BatchNorm, "batch_norm", CastRule::FollowInput,
     "not on the lists: low-precision activations, FP32 scale/shift and statistics"},
    {OpClass::Relu, "relu", CastRule::FollowInput, "elementwise, exact in any type"},
    {OpClass::MaxPool, "max_pool2d", CastRule::FollowInput, "a selection, exact in any type"},
    {OpClass::GlobalAvgPool, "adaptive_avg_pool2d", CastRule::FollowInput, "a mean over at most 49 values"},
    {OpClass::Add, "add (residual)", CastRule::Widest, "elementwise: promotes to the widest input"},
    {OpClass::Loss, "cross_entropy", CastRule::Fp32, "reductions, exp and log need FP32 range and precision"},
}};
static_assert(kAutocastTable.size() == static_cast<size_t>(OpClass::Count), "one row per op class");

class PrecisionPolicy {
 public:
  PrecisionPolicy();  // fp32
  explicit PrecisionPolicy(const PrecisionConfig& config);

  PrecisionMode mode() const { return config_.mode; }
  const PrecisionConfig& config() const { return config_; }
  DType low() const { return low_; }  // F32, F16 or BF16
  bool is_fp32() const { return low_ == DType::F32; }
  // Conv and linear weights are updated in FP32 and copied to low() every step (master weights), or, without
  // master weights, updated and stored in low() directly.
  bool master_weights() const { return config_.master_weights; }
  // fp16-pure also stores batch-norm parameters and running statistics in FP16.
  bool everything_low() const { return mode_info(config_.mode).everything_low; }

  // amp-fp8: convolutions and linear layers take E4M3 inputs and weights and E5M2 output gradients, each scaled by
  // its own delayed scaling (amp/fp8_scaling.h); compute_dtype() gives the BF16 they hand on.
  bool fp8() const { return mode_info(config_.mode).format == NumberFormat::Fp8; }
  // Whether a layer computes in FP8: every convolution and linear layer in amp-fp8 but, unless the setting says
  // otherwise, the network's first and last (network_edge).
  bool fp8_layer(bool network_edge) const { return fp8() && (!network_edge || config_.fp8.first_and_last); }

  // The dtype an op computes and stores its output in, given its (widest) input dtype.
  DType compute_dtype(OpClass op, DType input) const;

  // The table and the mode's knobs as text for the user.
  std::string describe() const;

 private:
  PrecisionConfig config_;
  DType low_ = DType::F32;
};

}  // namespace ampwb
