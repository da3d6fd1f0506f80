// The CUDA backend's batch norm, elementwise ops (ReLU, add) and pooling (max, global average): argument checks,
// then a launch of the own kernels (cuda_batchnorm.cu, cuda_kernels.cu) on the compute stream.
#include <initializer_list>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"

namespace ampwb {

using cuda::Dims4;
using cuda_detail::check_floating;
using cuda_detail::check_same;
using cuda_detail::conv_out;
using cuda_detail::dims_of;
using cuda_detail::ktype;

// ---- Batch normalization ----------------------------------------------------------------------------------------

namespace {
void check_bn(const Tensor& x, const Tensor& y, std::initializer_list<const Tensor*> per_channel) {
  AMPWB_CHECK(x.rank() == 4, "batch norm expects (N,C,H,W), got " << x.describe());
  check_same(x, y, "batch norm input and output");
  check_floating(x, "batch norm");
  for (const Tensor* t : per_channel)
    AMPWB_CHECK(t->defined() && t->dtype() == DType::F32 && t->numel() == x.c() && t->device() == x.device(),
                "batch norm per-channel tensor " << (t->defined() ? t->describe() : std::string("(undefined)"))
                                                 << " for " << x.c() << " channels on " << x.device().str());
}
}  // namespace

void CudaBackend::batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                             Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean,
                                             Tensor& running_var, float momentum, float eps) {
  batchnorm_training(x, nullptr, gamma, beta, y, batch_mean, batch_var, running_mean, running_var, momentum, eps,
                     false);
}

void CudaBackend::batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                                  Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean,
                                                  Tensor& running_var, float momentum, float eps) {
  batchnorm_training(x, nullptr, gamma, beta, y, batch_mean, batch_var, running_mean, running_var, momentum, eps, true);
}

void CudaBackend::batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                      const Tensor& residual, Tensor& y, Tensor& batch_mean,
                                                      Tensor& batch_var, Tensor& running_mean, Tensor& running_var,
                                                      float momentum, float eps) {
  if (residual.layout() != x.layout() || !impl_->fused_block_ends)  // the two ops (add reorders)
    return Backend::batchnorm_add_relu_forward_training(x, gamma, beta, residual, y, batch_mean, batch_var,
                                                        running_mean, running_var, momentum, eps);
  batchnorm_training(x, &residual, gamma, beta, y, batch_mean, batch_var, running_mean, running_var, momentum, eps,
                     true);
}

void CudaBackend::batchnorm_training(const Tensor& x, const Tensor* residual, const Tensor& gamma, const Tensor& beta,
                                     Tensor& y, Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean,
                                     Tensor& running_var, float momentum, float eps, bool relu) {
  CUDA_OP_ENTRY(&x, residual ? residual : &x, &gamma, &beta, &running_mean, &running_var);
  Impl& m = *impl_;
  m.check_device(x, "batch norm x");
  m.check_device(y, "batch norm y");
  check_bn(x, y, {&gamma, &beta, &batch_mean, &batch_var, &running_mean, &running_var});
  if (residual) {
    m.check_device(*residual, "batch norm residual");
    check_same(x, *residual, "batch norm input and the residual");
  }
  const Dims4 d = dims_of(x);
  const int row_blocks = cuda::batchnorm_row_blocks(d, ktype(x.dtype()), m.props.multiProcessorCount);
  Tensor scratch = m.empty({cuda::batchnorm_scratch_floats(d, row_blocks)}, DType::F32);
  cuda::batchnorm_forward_training(
      x.data(), residual ? residual->data() : nullptr, y.data(), ktype(x.dtype()), d, gamma.data_as<float>(),
      beta.data_as<float>(), batch_mean.data_as<float>(), batch_var.data_as<float>(), running_mean.data_as<float>(),
      running_var.data_as<float>(), momentum, eps, relu, scratch.data_as<float>(), row_blocks, m.stream);
}

void CudaBackend::batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                              const Tensor& running_mean, const Tensor& running_var, float eps) {
  CUDA_OP_ENTRY(&x, &gamma, &beta, &running_mean, &running_var);
  Impl& m = *impl_;
  m.check_device(x, "batch norm x");
  m.check_device(y, "batch norm y");
  check_bn(x, y, {&gamma, &beta, &running_mean, &running_var});
  Tensor scale = m.empty({x.c()}, DType::F32);
  const int row_blocks = cuda::batchnorm_row_blocks(dims_of(x), ktype(x.dtype()), m.props.multiProcessorCount);
  cuda::batchnorm_forward_inference(x.data(), y.data(), ktype(x.dtype()), dims_of(x), gamma.data_as<float>(),
                                    beta.data_as<float>(), running_mean.data_as<float>(), running_var.data_as<float>(),
                                    eps, scale.data_as<float>(), row_blocks, m.stream);
}

void CudaBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& batch_mean,
                                     const Tensor& batch_var, Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) {
  batchnorm_backward(x, dy, gamma, nullptr, batch_mean, batch_var, dx, dgamma, dbeta, eps);
}

// The mask recomputed from x (the kernels replay the forward's rounding): y is not read.
void CudaBackend::batchnorm_relu_backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, const Tensor& gamma,
                                          const Tensor& beta, const Tensor& batch_mean, const Tensor& batch_var,
                                          Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) {
  batchnorm_backward(x, dy, gamma, &beta, batch_mean, batch_var, dx, dgamma, dbeta, eps);
}

void CudaBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor* relu_beta,
                                     const Tensor& batch_mean, const Tensor& batch_var, Tensor& dx, Tensor& dgamma,
                                     Tensor& dbeta, float eps) {
  CUDA_OP_ENTRY(&x, &dy, &gamma, &batch_mean, &batch_var, relu_beta ? relu_beta : &gamma);
  Impl& m = *impl_;
  m.check_device(x, "batch norm x");
  m.check_device(dy, "batch norm dy");
  m.check_device(dx, "batch norm dx");
  check_bn(x, dy, {&gamma, &batch_mean, &batch_var, &dgamma, &dbeta});
  check_same(x, dx, "batch norm input and its gradient");
  if (relu_beta) check_bn(x, dy, {relu_beta});
  const Dims4 d = dims_of(x);
  const int row_blocks = cuda::batchnorm_row_blocks(d, ktype(x.dtype()), m.props.multiProcessorCount);
  Tensor scratch = m.empty({cuda::batchnorm_scratch_floats(d, row_blocks)}, DType::F32);
  cuda::batchnorm_backward(x.data(), dy.data(), dx.data(), ktype(x.dtype()), d, gamma.data_as<float>(),
                           relu_beta ? relu_beta->data_as<float>() : nullptr, batch_mean.data_as<float>(),
                           batch_var.data_as<float>(), dgamma.data_as<float>(), dbeta.data_as<float>(), eps,
                           scratch.data_as<float>(), row_blocks, m.stream);
}

// ---- Elementwise ------------------------------------------------------------------------------------------------

void CudaBackend::relu_forward(const Tensor& x, Tensor& y) {
  CUDA_OP_ENTRY(&x);
  impl_->check_device(x, "relu x");
  impl_->check_device(y, "relu y");
  check_same(x, y, "relu input and output");
  check_floating(x, "relu");
  cuda::relu_forward(x.data(), y.data(), ktype(x.dtype()), x.numel(), impl_->stream);
}

void CudaBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  CUDA_OP_ENTRY(&y, &dy);
  impl_->check_device(y, "relu y");
  impl_->check_device(dy, "relu dy");
  impl_->check_device(dx, "relu dx");
  check_same(y, dy, "relu output and its gradient");
  check_same(y, dx, "relu output and the input gradient");
  check_floating(y, "relu");
  cuda::relu_backward(y.data(), dy.data(), dx.data(), ktype(y.dtype()), y.numel(), impl_->stream);
}

void CudaBackend::relu_backward_of_sum(const Tensor& y, const Tensor& dy_a, const Tensor& dy_b, Tensor& dx) {
  if (dy_a.layout() != y.layout() || dy_b.layout() != y.layout() || !impl_->fused_block_ends)  // add reorders
    return Backend::relu_backward_of_sum(y, dy_a, dy_b, dx);
  CUDA_OP_ENTRY(&y, &dy_a, &dy_b);
  for (const Tensor* t : {&y, &dy_a, &dy_b, static_cast<const Tensor*>(&dx)})
    impl_->check_device(*t, "relu_backward_of_sum");
  check_same(y, dy_a, "relu output and a gradient");
  check_same(y, dy_b, "relu output and a gradient");
  check_same(y, dx, "relu output and the input gradient");
  check_floating(y, "relu");
  cuda::relu_backward_of_sum(y.data(), dy_a.data(), dy_b.data(), dx.data(), ktype(y.dtype()), y.numel(), impl_->stream);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& y) { add(a, b, y, false); }

void CudaBackend::add_relu(const Tensor& a, const Tensor& b, Tensor& y) { add(a, b, y, true); }

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& y, bool relu) {
  CUDA_OP_ENTRY(&a, &b);
  impl_->check_device(a, "add a");
  impl_->check_device(b, "add b");
  impl_->check_device(y, "add y");
  AMPWB_CHECK(a.shape() == b.shape() && a.shape() == y.shape() && a.dtype() == b.dtype() && a.dtype() == y.dtype(),
              "add operands and output differ: " << a.describe() << " + " << b.describe() << " -> " << y.describe());
  check_floating(a, "add");
  cuda::add(a.data(), dims_of(a), b.data(), dims_of(b), y.data(), dims_of(y), ktype(a.dtype()), relu, impl_->stream);
}

// ---- FP8's scaled cast ------------------------------------------------------------------------------------------

static_assert(sizeof(cuda::Fp8StatsDevice) == sizeof(Fp8CastStats) && kFp8CastStatsBytes == 32,
              "the device's FP8 statistics are laid out as Fp8CastStats");
static_assert(cuda::kFp8StateSlots[0] == kFp8StateScaleInverse && cuda::kFp8StateSlots[1] == kFp8StateScale &&
                  cuda::kFp8StateSlots[2] == kFp8StateScaleUsed && cuda::kFp8StateSlots[3] == kFp8StateOldest &&
                  cuda::kFp8StateSlots[4] == kFp8StateHistory,
              "the kernels lay out FP8 scaling states as core/delayed_scaling.h");

namespace {
const float* state_slot(const Tensor* state, int64_t slot, const Device& device) {
  if (!state) return nullptr;
  AMPWB_CHECK(state->dtype() == DType::F32 && state->numel() > kFp8StateHistory && state->device() == device,
              "an FP8 scaling state is F32 on " << device.str() << ", over " << kFp8StateHistory
                                                << " values: " << state->describe());
  return state->data_as<float>() + slot;
}
}  // namespace

cuda::FactorDevice CudaBackend::factor_on_device(const Fp8Factor& f) const {
  const Device& d = impl_->device;
  return {f.value, state_slot(f.inverses[0], kFp8StateScaleInverse, d),
          state_slot(f.inverses[1], kFp8StateScaleInverse, d), state_slot(f.scale, kFp8StateScale, d), f.reciprocal};
}

void CudaBackend::scaled_cast(const Tensor& x, Tensor& y, ScaledCast cast, Tensor& stats) {
  CUDA_OP_ENTRY(&x);
  impl_->check_device(x, "scaled_cast x");
  impl_->check_device(y, "scaled_cast y");
  check_floating(x, "scaled_cast");
  // FP8 storage takes the format's own values only: a cast to it rounds to that format.
  const DType fp8_storage = cast.format == Fp8Format::E4M3 ? DType::F8E4M3 : DType::F8E5M2;
  if (!(cast.to_fp8 && y.dtype() == fp8_storage)) check_floating(y, "scaled_cast");
  AMPWB_CHECK(x.shape() == y.shape() && (x.layout() == y.layout() || x.rank() != 4),
              "scaled_cast takes one shape and layout: " << x.describe() << " -> " << y.describe());
  cuda::Fp8StatsDevice* device_stats = nullptr;
  if (stats.defined()) {
    impl_->check_device(stats, "scaled_cast stats");
    AMPWB_CHECK(stats.dtype() == DType::U8 && stats.numel() == kFp8CastStatsBytes,
                "FP8 cast statistics are " << kFp8CastStatsBytes << " bytes (U8), not " << stats.describe());
    device_stats = static_cast<cuda::Fp8StatsDevice*>(stats.data());
  }
  const int format = !cast.to_fp8 ? -1 : cast.format == Fp8Format::E4M3 ? 0 : 1;
  cuda::scaled_cast(x.data(), ktype(x.dtype()), y.data(), ktype(y.dtype()), x.numel(), factor_on_device(cast.scale),
                    format, device_stats, impl_->stream);
}

void CudaBackend::update_fp8_scalings(const std::vector<Fp8ScalingUpdate>& scalings) {
  CUDA_OP_ENTRY();
  std::vector<cuda::Fp8ScalingDevice> on_device;
  for (const Fp8ScalingUpdate& u : scalings) {
    AMPWB_CHECK(u.state && u.stats, "update_fp8_scalings takes a state and its cast's statistics");
    impl_->check_device(*u.state, "an FP8 scaling state");
    impl_->check_device(*u.stats, "an FP8 cast's statistics");
    AMPWB_CHECK(u.state->dtype() == DType::F32 && u.state->numel() > kFp8StateHistory &&
                    u.stats->dtype() == DType::U8 && u.stats->numel() == kFp8CastStatsBytes,
                "update_fp8_scalings: a state " << u.state->describe() << ", statistics " << u.stats->describe());
    on_device.push_back({u.state->data_as<float>(), static_cast<const cuda::Fp8StatsDevice*>(u.stats->data()),
                         u.state->numel(), u.scaled_max, u.rule == AmaxRule::Max ? 1 : 0});
  }
  cuda::update_fp8_scalings(on_device.data(), static_cast<int>(on_device.size()), impl_->stream);
}

// ---- Pooling ----------------------------------------------------------------------------------------------------

void CudaBackend::maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) {
  CUDA_OP_ENTRY(&x);
  Impl& m = *impl_;
  m.check_device(x, "maxpool x");
  m.check_device(y, "maxpool y");
  AMPWB_CHECK(x.rank() == 4 && y.rank() == 4 && y.c() == x.c() && y.n() == x.n() && y.dtype() == x.dtype() &&
                  y.h() == conv_out(x.h(), p.kernel, p.stride, p.padding) &&
                  y.w() == conv_out(x.w(), p.kernel, p.stride, p.padding),
              "maxpool_forward shapes: x " << x.describe() << " y " << y.describe());
  AMPWB_CHECK(p.kernel >= 1 && p.kernel * p.kernel <= 255 && p.stride >= 1 && p.padding >= 0 && p.padding < p.kernel,
              "maxpool: kernel " << p.kernel << " stride " << p.stride << " padding " << p.padding
                                 << " (the one-byte argmax needs kernel^2 <= 255, and padding < kernel)");
  check_floating(x, "maxpool");
  workspace = m.empty({y.numel()}, DType::U8, y.layout());  // the argmax in y's storage order: its layout says which
  cuda::maxpool_forward(x.data(), dims_of(x), y.data(), dims_of(y), workspace.data_as<uint8_t>(), ktype(x.dtype()),
                        p.kernel, p.stride, p.padding, m.stream);
}

void CudaBackend::maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) {
  if (maxpool_backward_in_forward_layout(dy, workspace, dx, p)) return;
  CUDA_OP_ENTRY(&dy, &workspace);
  Impl& m = *impl_;
  m.check_device(dy, "maxpool dy");
  m.check_device(dx, "maxpool dx");
  m.check_device(workspace, "maxpool workspace");
  AMPWB_CHECK(dx.rank() == 4 && dy.rank() == 4 && dy.c() == dx.c() && dy.n() == dx.n() && dy.dtype() == dx.dtype() &&
                  dy.h() == conv_out(dx.h(), p.kernel, p.stride, p.padding) &&
                  dy.w() == conv_out(dx.w(), p.kernel, p.stride, p.padding),
              "maxpool_backward shapes: dy " << dy.describe() << " dx " << dx.describe());
  AMPWB_CHECK(workspace.dtype() == DType::U8 && workspace.numel() == dy.numel(),
              "maxpool_backward: workspace from another shape or backend: " << workspace.describe());
  check_floating(dy, "maxpool");
  cuda::maxpool_backward(dy.data(), dims_of(dy), workspace.data_as<uint8_t>(), dx.data(), dims_of(dx),
                         ktype(dy.dtype()), p.kernel, p.stride, p.padding, m.stream);
}

void CudaBackend::global_avgpool_forward(const Tensor& x, Tensor& y) {
  CUDA_OP_ENTRY(&x);
  impl_->check_device(x, "global_avgpool x");
  impl_->check_device(y, "global_avgpool y");
  AMPWB_CHECK(x.rank() == 4 && y.rank() == 2 && y.dim(0) == x.n() && y.dim(1) == x.c() && y.dtype() == x.dtype(),
              "global_avgpool_forward shapes: x " << x.describe() << " y " << y.describe());
  check_floating(x, "global_avgpool");
  cuda::global_avgpool_forward(x.data(), dims_of(x), y.data(), ktype(x.dtype()), impl_->stream);
}

void CudaBackend::global_avgpool_backward(const Tensor& dy, Tensor& dx) {
  CUDA_OP_ENTRY(&dy);
  impl_->check_device(dy, "global_avgpool dy");
  impl_->check_device(dx, "global_avgpool dx");
  AMPWB_CHECK(
      dx.rank() == 4 && dy.rank() == 2 && dy.dim(0) == dx.n() && dy.dim(1) == dx.c() && dy.dtype() == dx.dtype(),
      "global_avgpool_backward shapes: dy " << dy.describe() << " dx " << dx.describe());
  check_floating(dy, "global_avgpool");
  cuda::global_avgpool_backward(dy.data(), dx.data(), dims_of(dx), ktype(dx.dtype()), impl_->stream);
}
}  // namespace ampwb
