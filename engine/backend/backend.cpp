// Op names, what every backend supports, and the fused variants' default compositions (backend_ops.def).
#include "backend/backend.h"

#include <array>
#include <chrono>

namespace ampwb {

namespace {
constexpr std::array kOpNames = {"conv2d",
                                 "batchnorm",
                                 "relu",
                                 "maxpool",
                                 "global_avgpool",
                                 "linear",
                                 "add",
                                 "add_relu",
                                 "convert",
                                 "scaled_cast",
                                 "softmax_cross_entropy",
                                 "sgd_update",
                                 "adam_update",
                                 "scale_and_check",
                                 "loss_scale_update"};
static_assert(kOpNames.size() == static_cast<size_t>(Op::Count), "one name per op");
}  // namespace

const char* op_name(Op op) { return kOpNames.at(static_cast<size_t>(op)); }

namespace {
float state_value(const Tensor* state, int64_t slot) {
  AMPWB_CHECK(state->dtype() == DType::F32 && state->numel() > kFp8StateHistory && state->device().is_cpu(),
              "an FP8 scaling state is F32 on the host, over " << kFp8StateHistory << " values: " << state->describe());
  return state->data_as<float>()[slot];
}
}  // namespace

Fp8Factor Fp8Factor::scale_of(const Tensor& state) {
  Fp8Factor f;
  f.scale = &state;
  return f;
}

Fp8Factor Fp8Factor::inverses_of(const Tensor& a, const Tensor* b) {
  Fp8Factor f;
  f.inverses[0] = &a;
  f.inverses[1] = b;
  return f;
}

float Fp8Factor::on_host() const {
  float f = value;
  for (const Tensor* state : inverses)
    if (state) f *= state_value(state, kFp8StateScaleInverse);
  if (scale) f *= state_value(scale, kFp8StateScale);
  return reciprocal ? 1.0f / f : f;
}

Tensor on_device(Backend& backend, const Tensor& t) {
  if (!t.defined() || t.device() == backend.device()) return t;
  Tensor moved = Tensor::empty(t.shape(), t.dtype(), t.layout(), backend.device());
  backend.convert(t, moved);
  return moved;
}

bool Backend::supports(Op op, DType dtype) const {
  switch (op) {
    case Op::Convert:
      return true;
    case Op::SoftmaxCrossEntropy:
    case Op::SgdUpdate:
    case Op::AdamUpdate:
    case Op::ScaleCheck:
    case Op::LossScaleUpdate:
      return dtype == DType::F32;
    default:
      return is_floating(dtype);  // the CPU emulates FP16 and BF16 where it lacks them; CUDA requires sm_80
  }
}

Tensor Backend::upload(const Tensor& host) { return on_device(*this, host); }

std::vector<Tensor> Backend::download(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  for (const Tensor& t : tensors) host.push_back(on_host(*this, t));
  return host;
}

int64_t Backend::mark() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Backend::seconds_between(int64_t from, int64_t to) { return static_cast<double>(to - from) * 1e-9; }

bool Backend::maxpool_backward_in_forward_layout(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) {
  const Layout forward = workspace.layout();
  if (dy.layout() == forward && dx.layout() == forward) return false;
  auto in_forward_layout = [&](const Tensor& t) {
    return t.layout() == forward ? t : Tensor::empty(t.shape(), t.dtype(), forward, t.device());
  };
  Tensor dy_forward = in_forward_layout(dy), dx_forward = in_forward_layout(dx);
  if (dy.layout() != forward) convert(dy, dy_forward);
  maxpool_backward(dy_forward, workspace, dx_forward, p);
  if (dx.layout() != forward) convert(dx_forward, dx);
  return true;
}

std::unique_ptr<CapturedWork> Backend::capture(const std::function<void()>& /*queue*/, std::string& why_not) {
  why_not = "the " + device().str() + " backend runs each op when it is called: it has nothing to capture";
  return nullptr;
}

// ---- The fused variants' default compositions (backend_ops.def): each rounded as the ops it runs ----------

namespace {
// out, or where it is not FP32 an FP32 tensor of its shape and layout for the result before it is rounded to it.
Tensor fp32_result(const Tensor& out) {
  return out.dtype() == DType::F32 ? out : Tensor::empty(out.shape(), DType::F32, out.layout(), out.device());
}
}  // namespace

void Backend::conv2d_forward_scaled(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p, Fp8Factor factor) {
  Tensor y32 = fp32_result(y), none;
  conv2d_forward(x, w, y32, p);
  scaled_cast(y32, y, {factor}, none);
}

void Backend::conv2d_backward_data_scaled(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p,
                                          Fp8Factor factor) {
  Tensor dx32 = fp32_result(dx), none;
  conv2d_backward_data(dy, w, dx32, p);
  scaled_cast(dx32, dx, {factor}, none);
}

void Backend::add_relu(const Tensor& a, const Tensor& b, Tensor& y) {
  add(a, b, y);
  relu_forward(y, y);  // in place: elementwise
}

void Backend::batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                              Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean,
                                              Tensor& running_var, float momentum, float eps) {
  batchnorm_forward_training(x, gamma, beta, y, batch_mean, batch_var, running_mean, running_var, momentum, eps);
  relu_forward(y, y);  // in place: elementwise
}

void Backend::batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                  const Tensor& residual, Tensor& y, Tensor& batch_mean,
                                                  Tensor& batch_var, Tensor& running_mean, Tensor& running_var,
                                                  float momentum, float eps) {
  batchnorm_forward_training(x, gamma, beta, y, batch_mean, batch_var, running_mean, running_var, momentum, eps);
  add_relu(y, residual, y);  // in place: elementwise
}

void Backend::relu_backward_of_sum(const Tensor& y, const Tensor& dy_a, const Tensor& dy_b, Tensor& dx) {
  add(dy_a, dy_b, dx);
  relu_backward(y, dx, dx);  // in place: elementwise
}

void Backend::batchnorm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,
                                      const Tensor& /*beta*/, const Tensor& batch_mean, const Tensor& batch_var,
                                      Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) {
  Tensor masked = Tensor::empty(dy.shape(), dy.dtype(), dy.layout(), dy.device());
  relu_backward(y, dy, masked);
  batchnorm_backward(x, masked, gamma, batch_mean, batch_var, dx, dgamma, dbeta, eps);
}

Tensor on_host(Backend& backend, const Tensor& t) {
  if (!t.defined() || t.device() == Device::cpu()) return t;
  Tensor moved = Tensor::empty(t.shape(), t.dtype(), t.layout(), Device::cpu());
  backend.convert(t, moved);
  return moved;
}

}  // namespace ampwb
