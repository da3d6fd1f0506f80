// CPU elementwise ops (ReLU, add, add + ReLU in one pass) as OpenMP loops over FP32, FP16 and BF16 storage, and
// pooling: max pooling through oneDNN, global average pooling as an OpenMP loop.
#include <algorithm>
#include <bit>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_backend_impl.h"
#include "core/convert16.h"
#include "core/half.h"
#include "core/simd.h"

namespace ampwb {

using cpu_detail::ask_onednn;
using cpu_detail::check_same;
using cpu_detail::conv_out;
using cpu_detail::make_key;
using cpu_detail::plain_desc;

// ---- Elementwise --------------------------------------------------------------------------------------------

namespace {
// FP16 and BF16 share the sign in bit 15: positive means sign clear and magnitude non-zero, so ReLU and its
// gradient need no conversion (and stay exact) in 16-bit storage.
inline bool positive16(uint16_t bits) { return !(bits & 0x8000u) && (bits & 0x7fffu); }

// What happens to a sum before it is stored: nothing, its ReLU (add_relu), or the gradient mask of a ReLU whose
// output was `mask`, a tensor of the sum's type (relu_backward_of_sum).
struct AfterSum {
  bool relu = false;
  const void* mask = nullptr;
};

// BF16 a + b a piece at a time, each element widened and its sum rounded in registers (as bf16_to_f32 and
// f32_to_bf16 do), then the ReLU or the mask as in add_16bit. Compiled for AVX-512 and AVX2 below (flatten).
template <bool kRelu, bool kMask>
inline void add_bf16_piece(const uint16_t* a, const uint16_t* b, uint16_t* out, const uint16_t* mask, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    uint16_t sum = float_to_bfloat16_bits(bfloat16_bits_to_float(a[i]) + bfloat16_bits_to_float(b[i]));
    if constexpr (kRelu) sum = positive16(sum) ? sum : 0;
    if constexpr (kMask) sum &= positive16(mask[i]) ? 0xffffu : 0u;
    out[i] = sum;
  }
}
template <bool kRelu, bool kMask>
[[gnu::target("avx512f,avx512bw,avx512vl"), gnu::flatten]] void add_bf16_avx512(const uint16_t* a, const uint16_t* b,
                                                                                uint16_t* out, const uint16_t* mask,
                                                                                int64_t n) {
  add_bf16_piece<kRelu, kMask>(a, b, out, mask, n);
}
template <bool kRelu, bool kMask>
[[gnu::target("avx2"), gnu::flatten]] void add_bf16_avx2(const uint16_t* a, const uint16_t* b, uint16_t* out,
                                                         const uint16_t* mask, int64_t n) {
  add_bf16_piece<kRelu, kMask>(a, b, out, mask, n);
}
template <bool kRelu, bool kMask>
void add_bf16(const uint16_t* a, const uint16_t* b, uint16_t* out, const uint16_t* mask, int64_t n, int threads) {
  constexpr int64_t kPiece = 4096;
  const SimdLevel level = simd_level();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t start = 0; start < n; start += kPiece) {
    const int64_t count = std::min(kPiece, n - start);
    const uint16_t* piece_mask = kMask ? mask + start : nullptr;
    if (level == SimdLevel::Avx512)
      add_bf16_avx512<kRelu, kMask>(a + start, b + start, out + start, piece_mask, count);
    else if (level == SimdLevel::Avx2)
      add_bf16_avx2<kRelu, kMask>(a + start, b + start, out + start, piece_mask, count);
    else
      add_bf16_piece<kRelu, kMask>(a + start, b + start, out + start, piece_mask, count);
  }
}

// a + b for 16-bit floats: added in FP32 and rounded back (FP16 widened into small FP32 buffers a chunk at a time,
// BF16 in registers); the ReLU or the mask then act on the rounded 16-bit result, as relu_forward or relu_backward
// after add would.
void add_16bit(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n, DType dtype, AfterSum after,
               int threads) {
  const auto* mask = static_cast<const uint16_t*>(after.mask);
  if (dtype == DType::BF16) {
    if (after.relu) return add_bf16<true, false>(a, b, out, nullptr, n, threads);
    if (mask) return add_bf16<false, true>(a, b, out, mask, n, threads);
    return add_bf16<false, false>(a, b, out, nullptr, n, threads);
  }
  constexpr int64_t kChunk = 1024;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t count = std::min(kChunk, n - start);
    float wide_a[kChunk], wide_b[kChunk];
    widen_16bit(dtype, a + start, wide_a, count);
    widen_16bit(dtype, b + start, wide_b, count);
    for (int64_t i = 0; i < count; ++i) wide_a[i] += wide_b[i];
    uint16_t* sum = out + start;
    round_to_16bit(dtype, wide_a, sum, count);
    if (after.relu)
      for (int64_t i = 0; i < count; ++i) sum[i] = positive16(sum[i]) ? sum[i] : 0;
    if (mask)  // a select of constants: GCC keeps a branch per element for `positive16(m) ? sum : 0`
      for (int64_t i = 0; i < count; ++i) sum[i] &= positive16(mask[start + i]) ? 0xffffu : 0u;
  }
}
}  // namespace

void CpuBackend::relu_forward(const Tensor& x, Tensor& y) {
  check_same(x, y, "relu input and output");
  const int64_t n = x.numel();
  if (dtype_size(x.dtype()) == 2) {
    const uint16_t* in = x.data_as<uint16_t>();
    uint16_t* out = y.data_as<uint16_t>();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = positive16(in[i]) ? in[i] : 0;
    return;
  }
  AMPWB_CHECK(x.dtype() == DType::F32, "relu of " << x.describe());
  const float* in = x.data_as<float>();
  float* out = y.data_as<float>();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void CpuBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  check_same(y, dy, "relu output and its gradient");
  check_same(y, dx, "relu output and the input gradient");
  const int64_t n = y.numel();
  if (dtype_size(y.dtype()) == 2) {
    const uint16_t* out = y.data_as<uint16_t>();
    const uint16_t* grad_out = dy.data_as<uint16_t>();
    uint16_t* grad_in = dx.data_as<uint16_t>();
    // Both loads unconditional: a load under the condition keeps the compiler from vectorising (a branch per element).
#pragma omp parallel for simd num_threads(threads_) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t grad = grad_out[i];
      grad_in[i] = positive16(out[i]) ? grad : 0;
    }
    return;
  }
  AMPWB_CHECK(y.dtype() == DType::F32, "relu of " << y.describe());
  const float* out = y.data_as<float>();
  const float* grad_out = dy.data_as<float>();
  float* grad_in = dx.data_as<float>();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float grad = grad_out[i];
    grad_in[i] = out[i] > 0.0f ? grad : 0.0f;
  }
}

namespace {
// a + b, then `after`: one pass over tensors of one dtype and layout.
void add_then(const Tensor& a, const Tensor& b, Tensor& y, AfterSum after, int threads) {
  check_same(a, b, "add operands");
  check_same(a, y, "add operand and output");
  const int64_t n = a.numel();
  if (dtype_size(a.dtype()) == 2)
    return add_16bit(a.data_as<uint16_t>(), b.data_as<uint16_t>(), y.data_as<uint16_t>(), n, a.dtype(), after, threads);
  AMPWB_CHECK(a.dtype() == DType::F32, "add of " << a.describe());
  const float* pa = a.data_as<float>();
  const float* pb = b.data_as<float>();
  const auto* mask = static_cast<const float*>(after.mask);
  float* out = y.data_as<float>();
  if (after.relu) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float sum = pa[i] + pb[i];
      out[i] = sum > 0.0f ? sum : 0.0f;  // relu_forward's comparison: NaN and -0 become +0
    }
  } else if (mask) {
    // relu_backward's `mask > 0 ? sum : +0` as a select of bits: written as the ternary, GCC 12 keeps a branch per
    // element (14x slower on random masks, measured).
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t keep = mask[i] > 0.0f ? 0xffffffffu : 0u;
      out[i] = std::bit_cast<float>(std::bit_cast<uint32_t>(pa[i] + pb[i]) & keep);
    }
  } else {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = pa[i] + pb[i];
  }
}

bool same_layouts(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (t->layout() != (*tensors.begin())->layout()) return false;
  return true;
}
}  // namespace

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  if (!same_layouts({&a, &b, &y})) {  // the interface allows it: reorder to y's layout
    auto in_layout_of_y = [&](const Tensor& t) {
      if (t.layout() == y.layout()) return t;
      Tensor reordered = Tensor::empty(t.shape(), t.dtype(), y.layout());
      convert(t, reordered);
      return reordered;
    };
    return add(in_layout_of_y(a), in_layout_of_y(b), y);
  }
  add_then(a, b, y, {}, threads_);
}

void CpuBackend::add_relu(const Tensor& a, const Tensor& b, Tensor& y) {
  if (!same_layouts({&a, &b, &y})) return Backend::add_relu(a, b, y);  // add reorders
  add_then(a, b, y, {.relu = true}, threads_);
}

void CpuBackend::relu_backward_of_sum(const Tensor& y, const Tensor& dy_a, const Tensor& dy_b, Tensor& dx) {
  if (!same_layouts({&y, &dy_a, &dy_b, &dx})) return Backend::relu_backward_of_sum(y, dy_a, dy_b, dx);
  check_same(y, dx, "relu output and the input gradient");
  add_then(dy_a, dy_b, dx, {.mask = y.data()}, threads_);
}

// ---- Pooling ------------------------------------------------------------------------------------------------

namespace {
dnnl::pooling_forward::primitive_desc maxpool_forward_pd(const dnnl::engine& engine, const dnnl::primitive_attr& attr,
                                                         const Tensor& x, const Tensor& y, PoolParams p) {
  const memory::dims stride{p.stride, p.stride}, kernel{p.kernel, p.kernel}, pad{p.padding, p.padding};
  auto d = dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max, plain_desc(x),
                                       plain_desc(y), stride, kernel, pad, pad);
  return dnnl::pooling_forward::primitive_desc(d, attr, engine);
}
}  // namespace

const Cached* CpuBackend::Impl::find_maxpool_forward(const Tensor& x, const Tensor& y, PoolParams p) {
  return find(make_key("maxpool_fwd", x, y, p.kernel, p.stride, p.padding), ask_onednn(emulate_bf16, x), [&] {
    auto pd = maxpool_forward_pd(engine, attr(), x, y, p);
    return Cached(dnnl::pooling_forward(pd), pd.scratchpad_desc(), pd.workspace_desc());
  });
}

void CpuBackend::maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) {
  AMPWB_CHECK(x.rank() == 4 && y.rank() == 4 && y.c() == x.c() && y.n() == x.n() && y.layout() == x.layout() &&
                  y.h() == conv_out(x.h(), p.kernel, p.stride, p.padding) &&
                  y.w() == conv_out(x.w(), p.kernel, p.stride, p.padding),
              "maxpool_forward shapes: x " << x.describe() << " y " << y.describe());
  const Cached* c = impl_->find_maxpool_forward(x, y, p);
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor y32 = wide_output(y);
    maxpool_forward(widen(x), y32, workspace, p);
    return narrow(y32, y);
  }
  // oneDNN's argmax record is in y's storage order: the workspace's layout says which, for the backward pass.
  workspace = Tensor::empty({static_cast<int64_t>(c->workspace.get_size())}, DType::U8, y.layout());
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)},
                  {DNNL_ARG_DST, impl_->wrap(y)},
                  {DNNL_ARG_WORKSPACE, impl_->wrap(c->workspace, workspace.data())}});
}

void CpuBackend::maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) {
  if (maxpool_backward_in_forward_layout(dy, workspace, dx, p)) return;
  // Emulated exactly where the forward pass was: the workspace comes from the primitive that ran there.
  if (!impl_->find_maxpool_forward(dx, dy, p)) {
    Tensor dx32 = wide_output(dx);
    maxpool_backward(widen(dy), workspace, dx32, p);
    return narrow(dx32, dx);
  }
  const Cached& c = impl_->get(make_key("maxpool_bwd", dy, dx, p.kernel, p.stride, p.padding), [&] {
    const memory::dims stride{p.stride, p.stride}, kernel{p.kernel, p.kernel}, pad{p.padding, p.padding};
    auto hint = maxpool_forward_pd(impl_->engine, impl_->attr(), dx, dy, p);
    auto d = dnnl::pooling_backward::desc(dnnl::algorithm::pooling_max, plain_desc(dx), plain_desc(dy), stride, kernel,
                                          pad, pad);
    auto pd = dnnl::pooling_backward::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    return Cached(dnnl::pooling_backward(pd), pd.scratchpad_desc(), hint.workspace_desc());
  });
  AMPWB_CHECK(workspace.nbytes() == c.workspace.get_size(), "maxpool_backward: workspace from another shape");
  impl_->run(c, {{DNNL_ARG_DIFF_DST, impl_->wrap(dy)},
                 {DNNL_ARG_DIFF_SRC, impl_->wrap(dx)},
                 {DNNL_ARG_WORKSPACE, impl_->wrap(c.workspace, workspace.data())}});
}

// Global average pooling sums each image in FP64, in the same order for every type; 16-bit images are widened
// first by the bulk converters (an image at a time: a scalar conversion per element cost 10x the FP32 pooling).
void CpuBackend::global_avgpool_forward(const Tensor& x, Tensor& y) {
  AMPWB_CHECK(x.rank() == 4 && y.rank() == 2 && y.dim(0) == x.n() && y.dim(1) == x.c() && y.dtype() == x.dtype(),
              "global_avgpool_forward shapes: x " << x.describe() << " y " << y.describe());
  AMPWB_CHECK(is_floating(x.dtype()), "global_avgpool_forward of " << x.describe());
  const int64_t N = x.n(), C = x.c(), HW = x.h() * x.w();
  const bool nhwc = x.layout() == Layout::NHWC, wide = x.dtype() == DType::F32;
#pragma omp parallel num_threads(threads_)
  {
    std::vector<float> image(wide ? 0 : HW * C);  // (C,H,W) or (H,W,C) of one image, as stored
    std::vector<double> sum(C);
    std::vector<float> mean(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* in = wide ? x.data_as<float>() + n * HW * C : image.data();
      if (!wide) widen_16bit(x.dtype(), x.data_as<uint16_t>() + n * HW * C, image.data(), HW * C);
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t s = 0; s < HW; ++s)
        for (int64_t ch = 0; ch < C; ++ch) sum[ch] += in[nhwc ? s * C + ch : ch * HW + s];
      for (int64_t ch = 0; ch < C; ++ch) mean[ch] = static_cast<float>(sum[ch] / HW);
      if (wide)
        std::copy(mean.begin(), mean.end(), y.data_as<float>() + n * C);
      else
        round_to_16bit(x.dtype(), mean.data(), y.data_as<uint16_t>() + n * C, C);
    }
  }
}

void CpuBackend::global_avgpool_backward(const Tensor& dy, Tensor& dx) {
  AMPWB_CHECK(
      dx.rank() == 4 && dy.rank() == 2 && dy.dim(0) == dx.n() && dy.dim(1) == dx.c() && dy.dtype() == dx.dtype(),
      "global_avgpool_backward shapes: dy " << dy.describe() << " dx " << dx.describe());
  AMPWB_CHECK(is_floating(dx.dtype()), "global_avgpool_backward of " << dx.describe());
  const int64_t N = dx.n(), C = dx.c(), HW = dx.h() * dx.w();
  const bool nhwc = dx.layout() == Layout::NHWC;
  const float inv = 1.0f / static_cast<float>(HW);
  const size_t element = dtype_size(dx.dtype());
  // Every pixel of channel ch gets dy[n][ch] / HW: computed and rounded once per image and channel, then copied.
#pragma omp parallel num_threads(threads_)
  {
    std::vector<float> grad(C);
    std::vector<uint16_t> rounded(element == 2 ? C : 0);  // grad in dx's 16-bit type
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      if (element == 4) {
        for (int64_t ch = 0; ch < C; ++ch) grad[ch] = dy.data_as<float>()[n * C + ch] * inv;
      } else {
        widen_16bit(dy.dtype(), dy.data_as<uint16_t>() + n * C, grad.data(), C);
        for (float& g : grad) g *= inv;
        round_to_16bit(dy.dtype(), grad.data(), rounded.data(), C);
      }
      char* image = static_cast<char*>(dx.data()) + n * HW * C * element;
      if (nhwc) {
        const void* pixel = element == 4 ? static_cast<const void*>(grad.data()) : rounded.data();
        for (int64_t s = 0; s < HW; ++s) std::memcpy(image + s * C * element, pixel, C * element);
      } else if (element == 4) {
        for (int64_t ch = 0; ch < C; ++ch) std::fill_n(reinterpret_cast<float*>(image) + ch * HW, HW, grad[ch]);
      } else {
        for (int64_t ch = 0; ch < C; ++ch) std::fill_n(reinterpret_cast<uint16_t*>(image) + ch * HW, HW, rounded[ch]);
      }
    }
  }
}
}  // namespace ampwb
