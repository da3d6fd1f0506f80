// CPU batch normalization (training and inference forward, backward, and both with the ReLU after it fused in):
// the forward through cached oneDNN primitives where they run the type, the chunked passes of batchnorm_chunked.h
// otherwise and for every backward, and the running statistics kept as PyTorch keeps them.
#include <algorithm>
#include <initializer_list>

#include "backend/cpu/batchnorm_chunked.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_backend_impl.h"

namespace ampwb {

using cpu_detail::ask_onednn;
using cpu_detail::check_same;
using cpu_detail::make_key;
using cpu_detail::plain_desc;

namespace {
const auto kScaleShift = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
// With relu, oneDNN's fused-ReLU batch norm: the ReLU applied to the FP32 result before it is stored. Its mask (a
// workspace, a bit per element) is dropped at once: the backward reads the mask from y.
dnnl::normalization_flags bn_flags(bool relu) {
  return relu ? kScaleShift | dnnl::normalization_flags::fuse_norm_relu : kScaleShift;
}

dnnl::batch_normalization_forward::primitive_desc bn_forward_pd(const dnnl::engine& engine,
                                                                const dnnl::primitive_attr& attr, const Tensor& x,
                                                                float eps, bool relu) {
  auto d =
      dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, plain_desc(x), eps, bn_flags(relu));
  return dnnl::batch_normalization_forward::primitive_desc(d, attr, engine);
}

// Running statistics as PyTorch keeps them: the variance unbiased (count / (count - 1)).
void update_running_stats(const Tensor& x, const Tensor& batch_mean, const Tensor& batch_var, Tensor& running_mean,
                          Tensor& running_var, float momentum) {
  const double count = static_cast<double>(x.n() * x.h() * x.w());
  const float unbias = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
  float* rm = running_mean.data_as<float>();
  float* rv = running_var.data_as<float>();
  const float* mean = batch_mean.data_as<float>();
  const float* var = batch_var.data_as<float>();
  for (int64_t ch = 0; ch < x.c(); ++ch) {
    rm[ch] = (1 - momentum) * rm[ch] + momentum * mean[ch];
    rv[ch] = (1 - momentum) * rv[ch] + momentum * var[ch] * unbias;
  }
}

void check_bn(const Tensor& x, const Tensor& y, std::initializer_list<const Tensor*> per_channel) {
  AMPWB_CHECK(x.rank() == 4, "batch norm expects (N,C,H,W), got " << x.describe());
  check_same(x, y, "batch norm input and output");
  for (const Tensor* t : per_channel)
    AMPWB_CHECK(t->dtype() == DType::F32 && t->numel() == x.c(),
                "batch norm per-channel tensor " << t->describe() << " for " << x.c() << " channels");
}
}  // namespace

void CpuBackend::batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                            Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean,
                                            Tensor& running_var, float momentum, float eps) {
  batchnorm_training(x, gamma, beta, y, batch_mean, batch_var, running_mean, running_var, momentum, eps, false);
}

void CpuBackend::batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                                 Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean,
                                                 Tensor& running_var, float momentum, float eps) {
  batchnorm_training(x, gamma, beta, y, batch_mean, batch_var, running_mean, running_var, momentum, eps, true);
}

void CpuBackend::batchnorm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                    Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean, Tensor& running_var,
                                    float momentum, float eps, bool relu) {
  check_bn(x, y, {&gamma, &beta, &batch_mean, &batch_var, &running_mean, &running_var});
  const Cached* c = impl_->find(
      make_key(relu ? "bn_relu_fwd_train" : "bn_fwd_train", x, eps), ask_onednn(impl_->emulate_bf16, x), [&] {
        auto pd = bn_forward_pd(impl_->engine, impl_->attr(), x, eps, relu);
        return Cached(dnnl::batch_normalization_forward(pd), pd.scratchpad_desc(), pd.workspace_desc());
      });
  if (!c) {  // emulated: FP32 arithmetic on the 16-bit values, the result rounded to 16 bits (and its ReLU taken)
    batchnorm_chunked_forward_training(x, gamma, beta, y, batch_mean, batch_var, eps, relu, threads_);
    return update_running_stats(x, batch_mean, batch_var, running_mean, running_var, momentum);
  }
  Args args{{DNNL_ARG_SRC, impl_->wrap(x)},           {DNNL_ARG_DST, impl_->wrap(y)},
            {DNNL_ARG_SCALE, impl_->wrap(gamma)},     {DNNL_ARG_SHIFT, impl_->wrap(beta)},
            {DNNL_ARG_MEAN, impl_->wrap(batch_mean)}, {DNNL_ARG_VARIANCE, impl_->wrap(batch_var)}};
  Tensor relu_mask;  // oneDNN writes it; nothing reads it
  if (relu) {
    relu_mask = Tensor::empty({static_cast<int64_t>(c->workspace.get_size())}, DType::U8);
    args.emplace(DNNL_ARG_WORKSPACE, impl_->wrap(c->workspace, relu_mask.data()));
  }
  impl_->run(*c, args);
  update_running_stats(x, batch_mean, batch_var, running_mean, running_var, momentum);
}

void CpuBackend::batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                             const Tensor& running_mean, const Tensor& running_var, float eps) {
  check_bn(x, y, {&gamma, &beta, &running_mean, &running_var});
  const Cached* c = impl_->find(make_key("bn_fwd_infer", x, eps), ask_onednn(impl_->emulate_bf16, x), [&] {
    auto d = dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, plain_desc(x), eps,
                                                     kScaleShift | dnnl::normalization_flags::use_global_stats);
    auto pd = dnnl::batch_normalization_forward::primitive_desc(d, impl_->attr(), impl_->engine);
    return Cached(dnnl::batch_normalization_forward(pd), pd.scratchpad_desc());
  });
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor y32 = wide_output(y);
    batchnorm_forward_inference(widen(x), gamma, beta, y32, running_mean, running_var, eps);
    return narrow(y32, y);
  }
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)},
                  {DNNL_ARG_DST, impl_->wrap(y)},
                  {DNNL_ARG_SCALE, impl_->wrap(gamma)},
                  {DNNL_ARG_SHIFT, impl_->wrap(beta)},
                  {DNNL_ARG_MEAN, impl_->wrap(running_mean)},
                  {DNNL_ARG_VARIANCE, impl_->wrap(running_var)}});
}

// Every type's backward is the chunked one: with the ReLU, its mask read from y, so the forward keeps no workspace
// (oneDNN's would be a bit per element held from the forward to the backward), and the fused op gives the bits of
// relu_backward followed by batchnorm_backward.
void CpuBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& batch_mean,
                                    const Tensor& batch_var, Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) {
  check_bn(x, dy, {&gamma, &batch_mean, &batch_var, &dgamma, &dbeta});
  if (!is_wide_gradient(dx, x)) check_same(x, dx, "batch norm input and its gradient");
  batchnorm_chunked_backward(x, Tensor(), dy, gamma, batch_mean, batch_var, dx, dgamma, dbeta, eps, threads_);
}

// The mask from y: oneDNN's fused forward rounds by its own arithmetic, which the chunked passes cannot replay.
void CpuBackend::batchnorm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,
                                         const Tensor& /*beta*/, const Tensor& batch_mean, const Tensor& batch_var,
                                         Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) {
  check_bn(x, dy, {&gamma, &batch_mean, &batch_var, &dgamma, &dbeta});
  check_same(x, y, "batch norm input and its output");
  if (!is_wide_gradient(dx, x)) check_same(x, dx, "batch norm input and its gradient");
  batchnorm_chunked_backward(x, y, dy, gamma, batch_mean, batch_var, dx, dgamma, dbeta, eps, threads_);
}
}  // namespace ampwb
