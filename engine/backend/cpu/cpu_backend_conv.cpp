// CPU convolutions and inner products (linear layers) through cached oneDNN primitives, with weights reordered to
// and from the primitive's layout, and the FP32 emulation where oneDNN has no primitive for the dtype.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_backend_impl.h"
#include "backend/cpu/direct_weight_gradient.h"
#include "backend/cpu/stem_convolution.h"
#include "backend/cpu/winograd.h"

namespace ampwb {

using cpu_detail::any_desc;
using cpu_detail::ask_onednn;
using cpu_detail::conv_out;
using cpu_detail::direct_weight_gradient;
using cpu_detail::make_key;
using cpu_detail::plain_desc;
using cpu_detail::require_native_bf16;
using cpu_detail::stem_forward;
using cpu_detail::winograd_backward_data;
using cpu_detail::winograd_backward_weights;
using cpu_detail::winograd_fits;
using cpu_detail::winograd_forward;

// ---- Convolution --------------------------------------------------------------------------------------------

namespace {
// FP32 tensors take Winograd before oneDNN is asked; 16-bit ones only where the engine emulates them (a native BF16
// primitive stays oneDNN's).
bool all_fp32(const Tensor& a, const Tensor& b, const Tensor& c) {
  return a.dtype() == DType::F32 && b.dtype() == DType::F32 && c.dtype() == DType::F32;
}

// On AVX-512 auto leaves FP32's 3x3 convolutions to oneDNN, where Winograd won some passes and lost others
// (--conv-algorithm measured; docs/benchmarks.md, "AVX2" and "AVX512-BF16"). For an emulated 16-bit type its
// transforms also fold the widening of the inputs and the rounding of the output, and it ran the three passes
// 1.2-1.5x faster with 128 channels or more over 14x14 outputs or more (ResNet-18's second and third stages at 224
// px; docs/benchmarks.md, "AVX-512").
// in, out: the pass's.
bool emulated_winograd_pays(const Tensor& in, const Tensor& out) {
  return std::min(in.c(), out.c()) >= 128 && out.h() * out.w() >= 196;
}

// x (N,C,H,W) NHWC -> (N,C,P,Q): the pixels at multiples of `stride`, those a 1x1 convolution reads.
Tensor sample_pixels(const Tensor& x, int stride, int64_t P, int64_t Q) {
  Tensor sampled = Tensor::empty({x.n(), x.c(), P, Q}, x.dtype(), Layout::NHWC);
  const size_t pixel_bytes = static_cast<size_t>(x.c()) * dtype_size(x.dtype());
  const auto* in = static_cast<const char*>(x.data());
  auto* out = static_cast<char*>(sampled.data());
  for (int64_t n = 0; n < x.n(); ++n)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q)
        std::memcpy(out + ((n * P + p) * Q + q) * pixel_bytes,
                    in + ((n * x.h() + p * stride) * x.w() + q * stride) * pixel_bytes, pixel_bytes);
  return sampled;
}

// Where oneDNN 2.6 falls back to its GEMM convolution for an FP32 weight gradient (on AVX2: a 3x3 kernel over 2x2
// images, as in ResNet-18's last stage at 64 px or the golden test's ResNet-20 at 8 px), it runs one GEMM per image
// whose inner dimension is the image's pixel count (4 there): 3.4x the time of the forward convolution of the same
// shape on Zen 1. One GEMM over the whole batch (inner dimension N*P*Q) computes the same gradient at the speed of
// the forward pass (docs/benchmarks.md, "AVX2"), while its patches stay under this size.
constexpr int64_t kMaxPatchBytes = int64_t{64} << 20;

bool use_batched_weight_gradient(const std::string& implementation, const Tensor& x, const Tensor& dy,
                                 const Tensor& dw) {
  const int64_t patch_bytes = dy.n() * dy.h() * dy.w() * dw.c() * dw.h() * dw.w() * int64_t{sizeof(float)};
  return implementation.find("gemm") != std::string::npos && x.dtype() == DType::F32 && x.layout() == Layout::NHWC &&
         dy.layout() == Layout::NHWC && patch_bytes <= kMaxPatchBytes;
}

// dw (K, C*R*S) = dy^T (K, N*P*Q) x patches (N*P*Q, C*R*S), the patches ordered as a row of dw (im2col), so the
// GEMM writes dw in its own layout. (oneDNN's sgemm as before, not gemm_conv_backward_weights's matmul, which may
// sum in another order: FP32 weight gradients keep their bits.)
void conv_backward_weights_batched(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p, int threads) {
  AMPWB_CHECK(x.layout() == Layout::NHWC && dy.layout() == Layout::NHWC && x.dtype() == DType::F32,
              "the batched weight gradient takes FP32 NHWC tensors, not " << x.describe() << " and " << dy.describe());
  const int64_t C = x.c(), K = dw.n(), R = dw.h(), S = dw.w(), P = dy.h(), Q = dy.w();
  const int64_t rows = dy.n() * P * Q, columns = C * R * S;
  const Tensor patches = cpu_detail::im2col(x, R, S, dw.layout() == Layout::NCHW, p, P, Q, threads);
  const float* patch = patches.data_as<float>();
  const auto status = dnnl::sgemm('T', 'N', K, columns, rows, 1.0f, dy.data_as<float>(), K, patch, columns, 0.0f,
                                  dw.data_as<float>(), columns);
  AMPWB_CHECK(status == dnnl::status::success, "oneDNN's sgemm failed for the weight gradient of " << x.describe());
}
}  // namespace

void CpuBackend::run_weights_pass(const Cached* c, const Fp32Primitive& fp32_primitive, const Tensor& in,
                                  const Tensor& w, Tensor& out, int in_arg, int out_arg) {
  Tensor reordered;
  if (c) {
    const memory wm = impl_->primitive_weights(*c, w, reordered);
    return impl_->run(*c, {{in_arg, impl_->wrap(in)}, {DNNL_ARG_WEIGHTS, wm}, {out_arg, impl_->wrap(out)}});
  }
  const Tensor in32 = widen(in);
  Tensor out32 = wide_output(out), w32 = wide_output(w);  // w32: used only where the reorder cannot widen w
  const Cached* c32 = fp32_primitive(in32, w32, out32);
  AMPWB_CHECK(c32, "oneDNN has no FP32 convolution for " << in32.describe() << " and " << w32.describe());
  const memory wm = impl_->emulated_primitive_weights(*c32, w, w32, reordered);
  impl_->run(*c32, {{in_arg, impl_->wrap(in32)}, {DNNL_ARG_WEIGHTS, wm}, {out_arg, impl_->wrap(out32)}});
  narrow(out32, out);
}

void CpuBackend::with_conv_algorithm(const std::string& key, bool emulation_pays, const std::function<void()>& winograd,
                                     const std::function<void()>& direct) {
  if (!measure_winograd_)
    return winograd_ || (winograd_where_emulation_pays_ && emulation_pays) ? winograd() : direct();
  if (auto it = winograd_chosen_.find(key); it != winograd_chosen_.end()) return it->second ? winograd() : direct();
  // Each timed on its second run (the first makes the primitive and warms the caches); the output ends as the
  // chosen algorithm writes it.
  auto seconds = [](const std::function<void()>& run) {
    run();
    const auto start = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double direct_seconds = seconds(direct), winograd_seconds = seconds(winograd);
  const bool chosen = winograd_seconds * kWinogradMargin <= direct_seconds;
  winograd_chosen_.emplace(key, chosen);
  if (!chosen) direct();
}

void CpuBackend::conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) {
  AMPWB_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4 && w.c() == x.c() && y.c() == w.n() && y.n() == x.n() &&
                  y.h() == conv_out(x.h(), w.h(), p.stride, p.padding) &&
                  y.w() == conv_out(x.w(), w.w(), p.stride, p.padding),
              "conv2d_forward shapes: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  auto primitive = [&](const Tensor& x_, const Tensor& w_, const Tensor& y_, bool ask = true) {
    return impl_->find(make_key("conv_fwd", x_, w_, y_, p.stride, p.padding), ask, [&] {
      auto pd = impl_->conv_forward_pd(x_, w_, y_, p);
      require_native_bf16(pd, x_);
      Cached c(dnnl::convolution_forward(pd), pd.scratchpad_desc());
      impl_->set_weight_reorders(c, pd.weights_desc(), w_);
      return c;
    });
  };
  if (stem_forward_chosen(x, w, y)) return stem_forward(x, w, y, p, threads_);
  if (gemm_conv_chosen(x, w, y, ConvPass::Forward, p)) return gemm_conv_forward(x, w, y, p);
  const bool ask = ask_onednn(impl_->emulate_bf16, x, w, y);
  auto direct = [&] { run_weights_pass(primitive(x, w, y, ask), primitive, x, w, y, DNNL_ARG_SRC, DNNL_ARG_DST); };
  // Winograd for FP32 and for emulated 16-bit types (no primitive: FP32 compute on the 16-bit values, the result
  // rounded to 16 bits, Winograd's conversions folded); a native BF16 primitive stays oneDNN's.
  if (winograd_fits(x, w, y, p) && (all_fp32(x, w, y) || !ask))
    return with_conv_algorithm(
        make_key("winograd_fwd", x, w, y, p.stride, p.padding), !all_fp32(x, w, y) && emulated_winograd_pays(x, y),
        [&] { winograd_forward(x, w, y, threads_); }, direct);
  direct();
}

void CpuBackend::conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p) {
  AMPWB_CHECK(
      dx.rank() == 4 && w.c() == dx.c() && dy.c() == w.n() && dy.h() == conv_out(dx.h(), w.h(), p.stride, p.padding),
      "conv2d_backward_data shapes: dy " << dy.describe() << " w " << w.describe() << " dx " << dx.describe());
  auto primitive = [&](const Tensor& dy_, const Tensor& w_, const Tensor& dx_, bool ask = true) {
    return impl_->find(make_key("conv_bwd_data", dy_, w_, dx_, p.stride, p.padding), ask, [&] {
      const memory::dims stride{p.stride, p.stride}, pad{p.padding, p.padding};
      auto hint = impl_->conv_forward_pd(dx_, w_, dy_, p);
      auto d = dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, plain_desc(dx_), any_desc(w_),
                                                     plain_desc(dy_), stride, pad, pad);
      auto pd = dnnl::convolution_backward_data::primitive_desc(d, impl_->attr(), impl_->engine, hint);
      require_native_bf16(pd, dx_);
      Cached c(dnnl::convolution_backward_data(pd), pd.scratchpad_desc());
      impl_->set_weight_reorders(c, pd.weights_desc(), w_);
      return c;
    });
  };
  if (gemm_conv_chosen(dx, w, dy, ConvPass::BackwardData, p)) return gemm_conv_backward_data(dy, w, dx, p);
  const bool ask = ask_onednn(impl_->emulate_bf16, dy, w, dx);
  auto direct = [&] {
    run_weights_pass(primitive(dy, w, dx, ask), primitive, dy, w, dx, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC);
  };
  if (winograd_fits(dy, w, dx, p) && (all_fp32(dy, w, dx) || !ask))  // as in conv2d_forward
    return with_conv_algorithm(
        make_key("winograd_bwd_data", dy, w, dx, p.stride, p.padding),
        !all_fp32(dy, w, dx) && emulated_winograd_pays(dy, dx), [&] { winograd_backward_data(dy, w, dx, threads_); },
        direct);
  direct();
}

void CpuBackend::conv2d_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) {
  AMPWB_CHECK(
      x.rank() == 4 && dw.rank() == 4 && dw.c() == x.c() && dy.c() == dw.n() && dy.n() == x.n(),
      "conv2d_backward_weights shapes: x " << x.describe() << " dy " << dy.describe() << " dw " << dw.describe());
  backward_weights_any_algorithm(x, dy, dw, p);
  // A 16-bit x's gradient asked for in FP32 (the interface's wide gradient): every path above summed in FP32 and
  // wrote the sums; rounded here to x's type, as narrowing and widening again would, in one pass.
  if (dw.dtype() == DType::F32 && is_16bit(x.dtype())) {
    Impl::ConversionTimer timer(*impl_);
    round_through_16bit(x.dtype(), dw.data_as<float>(), dw.numel(), threads_);
  }
}

void CpuBackend::backward_weights_any_algorithm(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) {
  if (direct_weight_gradient_chosen(x, dy, dw, p)) return direct_weight_gradient(x, dy, dw, p, threads_);
  if (gemm_conv_chosen(x, dw, dy, ConvPass::BackwardWeights, p)) return gemm_conv_backward_weights(x, dy, dw, p);
  auto direct = [&] { backward_weights_direct(x, dy, dw, p); };
  if (winograd_fits(x, dw, dy, p) && (all_fp32(x, dy, dw) || !ask_onednn(impl_->emulate_bf16, x, dy, dw)))
    return with_conv_algorithm(
        make_key("winograd_bwd_weights", x, dy, dw, p.stride, p.padding),
        !all_fp32(x, dy, dw) && emulated_winograd_pays(x, dy), [&] { winograd_backward_weights(x, dy, dw, threads_); },
        direct);
  direct();
}

void CpuBackend::backward_weights_direct(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) {
  // oneDNN 2.6.3's jit_1x1:avx2 gets the weight gradient of a strided 1x1 NHWC convolution wrong when a channel
  // count is not a multiple of 8 (test_ops under ONEDNN_MAX_CPU_ISA=AVX2 found it). The same gradient is that of
  // a stride-1 convolution over the input's sampled pixels, which every implementation gets right.
  if (dw.h() == 1 && dw.w() == 1 && p.stride > 1 && p.padding == 0 && x.layout() == Layout::NHWC &&
      (x.c() % 8 || dw.n() % 8))
    return backward_weights_direct(sample_pixels(x, p.stride, dy.h(), dy.w()), dy, dw, {1, 0});
  const auto key = make_key("conv_bwd_weights", x, dy, dw, p.stride, p.padding);
  const Cached* c = impl_->find(key, ask_onednn(impl_->emulate_bf16, x, dy, dw), [&] {
    const memory::dims stride{p.stride, p.stride}, pad{p.padding, p.padding};
    auto hint = impl_->conv_forward_pd(x, dw, dy, p);
    auto d = dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, plain_desc(x), any_desc(dw),
                                                      plain_desc(dy), stride, pad, pad);
    auto pd = dnnl::convolution_backward_weights::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    require_native_bf16(pd, x);
    if (use_batched_weight_gradient(pd.impl_info_str(), x, dy, dw))
      throw dnnl::error(dnnl_unimplemented, "the batched GEMM below is faster");
    Cached c(dnnl::convolution_backward_weights(pd), pd.scratchpad_desc());
    impl_->set_weight_reorders(c, pd.diff_weights_desc(), dw);
    return c;
  });
  if (!c && x.dtype() == DType::F32) return conv_backward_weights_batched(x, dy, dw, p, threads_);
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor dw32 = wide_output(dw);
    backward_weights_direct(widen(x), widen(dy), dw32, p);
    return narrow(dw32, dw);
  }
  Tensor holder;
  memory dwm = impl_->wrap(c->user_weights, dw.data());
  if (c->to_user_weights) {
    holder = Tensor::empty({static_cast<int64_t>(c->weights.get_size())}, DType::U8);
    dwm = impl_->wrap(c->weights, holder.data());
  }
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)}, {DNNL_ARG_DIFF_DST, impl_->wrap(dy)}, {DNNL_ARG_DIFF_WEIGHTS, dwm}});
  if (c->to_user_weights) impl_->reorder(c->to_user_weights, dwm, impl_->wrap(c->user_weights, dw.data()));
}
// ---- Inner product --------------------------------------------------------------------------------------------

namespace {
dnnl::inner_product_forward::primitive_desc linear_forward_pd(const dnnl::engine& engine,
                                                              const dnnl::primitive_attr& attr, const Tensor& x,
                                                              const Tensor& w, const Tensor& b, const Tensor& y) {
  auto d = dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, plain_desc(x), plain_desc(w),
                                             plain_desc(b), plain_desc(y));
  return dnnl::inner_product_forward::primitive_desc(d, attr, engine);
}
}  // namespace

void CpuBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  AMPWB_CHECK(x.rank() == 2 && w.rank() == 2 && y.rank() == 2 && w.dim(1) == x.dim(1) && y.dim(0) == x.dim(0) &&
                  y.dim(1) == w.dim(0) && b.numel() == w.dim(0),
              "linear_forward shapes: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  const Cached* c = impl_->find(make_key("linear_fwd", x, w, b, y), ask_onednn(impl_->emulate_bf16, x, w, b, y), [&] {
    auto pd = linear_forward_pd(impl_->engine, impl_->attr(), x, w, b, y);
    return Cached(dnnl::inner_product_forward(pd), pd.scratchpad_desc());
  });
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor y32 = wide_output(y);
    linear_forward(widen(x), widen(w), widen(b), y32);
    return narrow(y32, y);
  }
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)},
                  {DNNL_ARG_WEIGHTS, impl_->wrap(w)},
                  {DNNL_ARG_BIAS, impl_->wrap(b)},
                  {DNNL_ARG_DST, impl_->wrap(y)}});
}

void CpuBackend::linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                                 Tensor& db) {
  const bool ask = ask_onednn(impl_->emulate_bf16, dy, x, w, dx, dw, db);
  const Cached* data = !dx.defined() ? nullptr : impl_->find(make_key("linear_bwd_data", dy, w, dx), ask, [&] {
    Tensor bias_like = Tensor::empty({w.dim(0)}, w.dtype());
    auto hint = linear_forward_pd(impl_->engine, impl_->attr(), dx, w, bias_like, dy);
    auto d = dnnl::inner_product_backward_data::desc(plain_desc(dx), plain_desc(w), plain_desc(dy));
    auto pd = dnnl::inner_product_backward_data::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    return Cached(dnnl::inner_product_backward_data(pd), pd.scratchpad_desc());
  });
  const Cached* weights = impl_->find(make_key("linear_bwd_weights", x, dy, dw, db), ask, [&] {
    auto hint = linear_forward_pd(impl_->engine, impl_->attr(), x, dw, db, dy);
    auto d = dnnl::inner_product_backward_weights::desc(plain_desc(x), plain_desc(dw), plain_desc(db), plain_desc(dy));
    auto pd = dnnl::inner_product_backward_weights::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    return Cached(dnnl::inner_product_backward_weights(pd), pd.scratchpad_desc());
  });
  if (!weights || (dx.defined() && !data)) {  // emulated, as in linear_forward
    Tensor dx32 = wide_output(dx), dw32 = wide_output(dw), db32 = wide_output(db);
    linear_backward(widen(dy), widen(x), widen(w), dx32, dw32, db32);
    narrow(dx32, dx);
    narrow(dw32, dw);
    return narrow(db32, db);
  }
  if (data) {
    impl_->run(*data, {{DNNL_ARG_DIFF_DST, impl_->wrap(dy)},
                       {DNNL_ARG_WEIGHTS, impl_->wrap(w)},
                       {DNNL_ARG_DIFF_SRC, impl_->wrap(dx)}});
  }
  impl_->run(*weights, {{DNNL_ARG_SRC, impl_->wrap(x)},
                        {DNNL_ARG_DIFF_DST, impl_->wrap(dy)},
                        {DNNL_ARG_DIFF_WEIGHTS, impl_->wrap(dw)},
                        {DNNL_ARG_DIFF_BIAS, impl_->wrap(db)}});
}
}  // namespace ampwb
