// Convolutions as one matrix product each: the input's kernel windows copied into rows (im2col), then oneDNN's
// matmul, which runs on AMX tiles through its brgemm kernels. Over images of a few pixels oneDNN 2.6's BF16
// convolutions on AMX run at 20-400 GFLOP/s, its backward ones (jit:avx512_core_amx_bf16) slowest, where the
// matmul of the same product runs at 600-1000 (build/bench/ampwb_conv_as_gemm; docs/benchmarks.md, "AMX").
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_backend_impl.h"
#include "backend/cpu/direct_weight_gradient.h"
#include "backend/cpu/stem_convolution.h"

namespace ampwb {

using cpu_detail::make_key;

namespace cpu_detail {

// x (N,C,H,W) NHWC -> patches (N*P*Q, C*R*S): row (n, p, q) holds the input values output pixel (p, q)'s kernel
// window covers, 0 in the padding, ordered as a row of the weights (OIHW: c, r, s; OHWI: r, s, c). Each row first
// points at its R*S input pixels (the padding at zeros), then is written front to back: OIHW's order interleaves
// the pixels' channels, and writing it tap by tap at a stride of R*S elements ran 2-3x slower (3x3 kernels over
// ResNet-18's 2x2 and 4x4 images). kTaps: R*S where known when compiled (0: read from R and S).
template <class Element, int kTaps>
static void im2col_elements(const Tensor& x, Tensor& patches, int64_t R, int64_t S, bool oihw, ConvParams p, int64_t P,
                            int64_t Q, int threads) {
  const int64_t H = x.h(), W = x.w(), C = x.c(), rows = x.n() * P * Q, taps = kTaps ? kTaps : R * S;
  const auto* in = static_cast<const Element*>(x.data());
  auto* patch = static_cast<Element*>(patches.data());
  const std::vector<Element> zeros(static_cast<size_t>(C), Element{0});
#pragma omp parallel num_threads(threads)
  {
    std::vector<const Element*> pixels(static_cast<size_t>(taps));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t n = row / (P * Q), out_h = row / Q % P, out_w = row % Q;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t h = out_h * p.stride - p.padding + r, w = out_w * p.stride - p.padding + s;
          const bool inside = h >= 0 && h < H && w >= 0 && w < W;
          pixels[r * S + s] = inside ? in + ((n * H + h) * W + w) * C : zeros.data();  // NHWC: C values side by side
        }
      Element* out = patch + row * C * taps;
      if (oihw) {
        for (int64_t c = 0; c < C; ++c)
          for (int64_t t = 0; t < taps; ++t) out[c * taps + t] = pixels[t][c];
      } else {
        for (int64_t t = 0; t < taps; ++t) std::copy(pixels[t], pixels[t] + C, out + t * C);
      }
    }
  }
}

// Returns x itself where its pixels are the rows (a 1x1 kernel of stride 1 without padding).
Tensor im2col(const Tensor& x, int64_t R, int64_t S, bool oihw, ConvParams p, int64_t P, int64_t Q, int threads) {
  AMPWB_CHECK(x.rank() == 4 && x.layout() == Layout::NHWC, "im2col takes an NHWC tensor, not " << x.describe());
  if (R == 1 && S == 1 && p.stride == 1 && p.padding == 0) return x;  // NHWC pixels are the rows already
  Tensor patches = Tensor::empty({x.n() * P * Q, x.c() * R * S}, x.dtype());
  const bool wide = dtype_size(x.dtype()) == 4;
  if (R * S == 9)  // 3x3: ResNet's convolutions, the taps' loop unrolled
    wide ? im2col_elements<uint32_t, 9>(x, patches, R, S, oihw, p, P, Q, threads)
         : im2col_elements<uint16_t, 9>(x, patches, R, S, oihw, p, P, Q, threads);
  else
    wide ? im2col_elements<uint32_t, 0>(x, patches, R, S, oihw, p, P, Q, threads)
         : im2col_elements<uint16_t, 0>(x, patches, R, S, oihw, p, P, Q, threads);
  return patches;
}

// The inverse gather: dx32 (N,C,H,W) NHWC FP32 = the sum, over the kernel windows that cover each input pixel, of
// the rows of dpatches (N*P*Q, C*R*S) FP32 that im2col would have copied it into.
static void col2im(const Tensor& dpatches, Tensor& dx32, int64_t R, int64_t S, bool oihw, ConvParams p, int64_t P,
                   int64_t Q, int threads) {
  const int64_t H = dx32.h(), W = dx32.w(), C = dx32.c(), columns = C * R * S;
  const int64_t channel_stride = oihw ? R * S : 1, tap_stride = oihw ? 1 : C;
  const float* patch = dpatches.data_as<float>();
  float* out = dx32.data_as<float>();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t pixel = 0; pixel < dx32.n() * H * W; ++pixel) {
    const int64_t n = pixel / (H * W), h = pixel / W % H, w = pixel % W;
    float* sum = out + pixel * C;
    std::fill(sum, sum + C, 0.0f);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t ph = h + p.padding - r;  // = out_h * stride where this pixel is tap r of row out_h
      if (ph < 0 || ph % p.stride || ph / p.stride >= P) continue;
      for (int64_t s = 0; s < S; ++s) {
        const int64_t qw = w + p.padding - s;
        if (qw < 0 || qw % p.stride || qw / p.stride >= Q) continue;
        const float* tap = patch + ((n * P + ph / p.stride) * Q + qw / p.stride) * columns + (r * S + s) * tap_stride;
        for (int64_t c = 0; c < C; ++c) sum[c] += tap[c * channel_stride];
      }
    }
  }
}

}  // namespace cpu_detail

using cpu_detail::col2im;
using cpu_detail::im2col;

namespace {
// A matrix as oneDNN's matmul reads it: rows x columns of `type`, row-major, or transposed (the row-major
// columns x rows matrix of the same memory).
dnnl::memory::desc matrix(int64_t rows, int64_t columns, DType type, bool transposed = false) {
  return {{rows, columns}, cpu_detail::dnnl_type(type), transposed ? memory::dims{1, rows} : memory::dims{columns, 1}};
}

constexpr int64_t kGemmConvMaxPixels = 16;  // per image, of a convolution's output: 4x4
// Native BF16 on AMX, where the products were faster (bench/conv_passes.cpp; docs/benchmarks.md, "AMX"):
// - strided convolutions (a stage's entry and its downsampling): the weight gradient up to 14x14 outputs, the other
//   passes up to 7x7 (the forward one of kernels larger than 1x1);
// - stride 1: the weight gradient up to 8x8 outputs, while its patches (a transient) stay under 8 MiB, as in
//   ResNet-18's third stage at 64 px and its last at 224 px batch 16, not ResNet-20's last at batch 128, whose peak
//   memory they would raise by 9%. (Its other passes there won as products alone, but not in a training step.)
constexpr int64_t kGemmConvMaxPixelsStridedWeightGradient = 196, kGemmConvMaxPixelsStrided = 49;
constexpr int64_t kGemmConvMaxPixelsWeightGradient = 64, kGemmConvMaxPatchElements = int64_t{4} << 20;
// The direct weight gradient below: output pixels per image, channels, its scratch in 16-bit values.
constexpr int64_t kDirectMaxPixelsBf16 = 64, kDirectMaxPixelsFewChannelsBf16 = 256, kDirectFewChannels = 64;
constexpr int64_t kDirectMaxScratchValues = int64_t{1} << 20;

}  // namespace

bool CpuBackend::gemm_conv_chosen(const Tensor& x, const Tensor& w, const Tensor& y, ConvPass pass,
                                  ConvParams p) const {
  // One dtype, but that an emulated dtype's gradients may be FP32 holding its values: the output gradient (y's side
  // of a backward pass), which Conv2d widens once for both backward passes, and the weight gradient (w's side).
  auto dtype_fits = [&](const Tensor& t) {
    return t.dtype() == x.dtype() || (gemm_conv_emulated(x) && t.dtype() == DType::F32);
  };
  if (x.layout() != Layout::NHWC || y.layout() != Layout::NHWC || !dtype_fits(w) || !dtype_fits(y)) return false;
  if (gemm_conv_ == GemmConv::Always) return true;
  if (gemm_conv_ != GemmConv::SmallImages) return false;
  // Outputs of 4x4 pixels or fewer (ResNet-18's last two stages at 64 px), where oneDNN's convolutions ran slower
  // than the product alone (bench/conv_as_gemm.cpp) and reorder the largest weights three times a step. Over larger
  // outputs the copies around the product cost what it saves (docs/benchmarks.md, "AMX" and "AVX-512"), but for
  // native BF16's strided convolutions.
  // - Native BF16: on AMX every pass (oneDNN's 1.3-30x slower), and some passes over larger outputs as above
  //   (oneDNN's backward ones, jit:avx512_core_amx_bf16, up to 5x slower). On AVX512-BF16 without AMX the weight
  //   gradient likewise (jit_bf16:avx512_core_bf16 up to 4x slower than the product) and the forward pass over
  //   4x4 outputs or fewer, whose weights' reorder into oneDNN's layout cost more than its convolution saved (a tie
  //   over 4x4 on a Zen 4, 1.7% of a 64 px step gained on a Zen 5); not backward data, where oneDNN's convolution
  //   won on a Zen 4 and tied on a Zen 5.
  // - FP32, and FP16 and BF16 emulated in FP32: the forward and the weight gradient, and the input's gradient
  //   only where strided (oneDNN's stride-1 backward data was faster than the product and its col2im).
  const int64_t pixels = y.h() * y.w();
  if (x.dtype() == DType::BF16 && !gemm_conv_emulated(x)) {
    if (!amx_)
      return pass == ConvPass::BackwardWeights
                 ? pixels <= kGemmConvMaxPixels || (p.stride > 1 && pixels <= kGemmConvMaxPixelsStridedWeightGradient)
                 : pass == ConvPass::Forward && pixels <= kGemmConvMaxPixels;
    if (pixels <= kGemmConvMaxPixels) return true;
    if (p.stride == 1)  // the patches: images x pixels rows, channels x kernel pixels columns
      return pass == ConvPass::BackwardWeights && pixels <= kGemmConvMaxPixelsWeightGradient &&
             y.n() * pixels * w.c() * w.h() * w.w() <= kGemmConvMaxPatchElements;
    if (pass == ConvPass::BackwardWeights) return pixels <= kGemmConvMaxPixelsStridedWeightGradient;
    return pixels <= kGemmConvMaxPixelsStrided && (pass == ConvPass::BackwardData || w.h() * w.w() > 1);
  }
  if (pixels > kGemmConvMaxPixels) return false;
  return pass != ConvPass::BackwardData || p.stride > 1;
}

// y (N*P*Q, K) = patches (N*P*Q, C*R*S) x w^T (C*R*S, K).
void CpuBackend::gemm_conv_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) {
  const int64_t rows = y.n() * y.h() * y.w(), columns = w.c() * w.h() * w.w(), K = w.n();
  const auto patches_md = matrix(rows, columns, x.dtype()), w_md = matrix(columns, K, w.dtype(), true),
             y_md = matrix(rows, K, y.dtype());
  const Cached* c = impl_->matmul(make_key("gemm_conv_fwd", x, w, y, p.stride, p.padding), patches_md, w_md, y_md,
                                  !gemm_conv_emulated(x));
  if (!c) {  // emulated: FP32 products of the 16-bit values, rounded to 16 bits
    Tensor y32 = wide_output(y);
    gemm_conv_forward(widen(x), widen(w), y32, p);
    return narrow(y32, y);
  }
  const Tensor patches = im2col(x, w.h(), w.w(), w.layout() == Layout::NCHW, p, y.h(), y.w(), threads_);
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(patches_md, patches.data())},
                  {DNNL_ARG_WEIGHTS, impl_->wrap(w_md, w.data())},
                  {DNNL_ARG_DST, impl_->wrap(y_md, y.data())}});
}

// dpatches (N*P*Q, C*R*S) = dy (N*P*Q, K) x w (K, C*R*S), in FP32; dx = col2im(dpatches).
void CpuBackend::gemm_conv_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p) {
  const int64_t rows = dy.n() * dy.h() * dy.w(), columns = w.c() * w.h() * w.w(), K = w.n();
  // A 1x1 convolution of stride 1 without padding: the patches are dx itself, written by the product.
  const bool plain = w.h() == 1 && w.w() == 1 && p.stride == 1 && p.padding == 0;
  const auto dy_md = matrix(rows, K, dy.dtype()), w_md = matrix(K, columns, w.dtype()),
             dpatches_md = matrix(rows, columns, plain ? dx.dtype() : DType::F32);
  const Cached* c = impl_->matmul(make_key("gemm_conv_bwd_data", dy, w, dx, p.stride, p.padding), dy_md, w_md,
                                  dpatches_md, !gemm_conv_emulated(w));
  if (!c) {  // emulated, as in gemm_conv_forward
    Tensor dx32 = wide_output(dx);
    gemm_conv_backward_data(widen(dy), widen(w), dx32, p);
    return narrow(dx32, dx);
  }
  const Tensor dpatches = plain ? dx : Tensor::empty({rows, columns}, DType::F32);
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(dy_md, dy.data())},
                  {DNNL_ARG_WEIGHTS, impl_->wrap(w_md, w.data())},
                  {DNNL_ARG_DST, impl_->wrap(dpatches_md, dpatches.data())}});
  if (plain) return;
  Tensor dx32 = wide_output(dx);
  col2im(dpatches, dx32, w.h(), w.w(), w.layout() == Layout::NCHW, p, dy.h(), dy.w(), threads_);
  narrow(dx32, dx);
}

// dw (K, C*R*S) = dy^T (K, N*P*Q) x patches (N*P*Q, C*R*S).
void CpuBackend::gemm_conv_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) {
  const int64_t rows = dy.n() * dy.h() * dy.w(), columns = dw.c() * dw.h() * dw.w(), K = dw.n();
  const auto dy_md = matrix(K, rows, dy.dtype(), true), patches_md = matrix(rows, columns, x.dtype()),
             dw_md = matrix(K, columns, dw.dtype());
  const Cached* c = impl_->matmul(make_key("gemm_conv_bwd_weights", x, dy, dw, p.stride, p.padding), dy_md, patches_md,
                                  dw_md, !gemm_conv_emulated(x));
  if (!c) {  // emulated, as in gemm_conv_forward
    Tensor dw32 = wide_output(dw);
    gemm_conv_backward_weights(widen(x), widen(dy), dw32, p);
    return narrow(dw32, dw);
  }
  const Tensor patches = im2col(x, dw.h(), dw.w(), dw.layout() == Layout::NCHW, p, dy.h(), dy.w(), threads_);
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(dy_md, dy.data())},
                  {DNNL_ARG_WEIGHTS, impl_->wrap(patches_md, patches.data())},
                  {DNNL_ARG_DST, impl_->wrap(dw_md, dw.data())}});
}

// Stride-1 3x3 weight gradients by the direct kernel (direct_weight_gradient.h) where it was faster, alone, on a
// Zen 5 (bench/direct_weight_gradient.cpp; docs/benchmarks.md, "AVX512-BF16"):
// - FP32 over 4x4 outputs or fewer: 1.3-1.5x the product's speed; over 8x8 or more oneDNN's convolution is faster.
// - Native BF16 without AMX over 8x8 outputs or fewer, and over 16x16 or fewer with 64 channels or fewer in and out
//   (ResNet-18's first stage at 64 px, ResNet-20's last two): 1.1-1.6x against the product or oneDNN's convolution,
//   whichever the rules above took. Over 14x14 with 256 channels and over 32x32 or more oneDNN's was faster.
//   Its scratch (BF16's image pairs) kept under 1 Mi values: at exactly 1 Mi (the pairs of a whole batch of
//   ResNet-20's last stage at batch 128) it raised ResNet-20's peak memory by 0.9 MiB.
bool CpuBackend::direct_weight_gradient_chosen(const Tensor& x, const Tensor& dy, const Tensor& dw,
                                               ConvParams p) const {
  if (gemm_conv_ != GemmConv::SmallImages || p.stride != 1 || p.padding != 1) return false;
  const int64_t pixels = dy.h() * dy.w();
  const bool fp32 = x.dtype() == DType::F32 && pixels <= kGemmConvMaxPixels;
  const bool bf16 = x.dtype() == DType::BF16 && !amx_ && !gemm_conv_emulated(x) &&
                    (pixels <= kDirectMaxPixelsBf16 || (pixels <= kDirectMaxPixelsFewChannelsBf16 &&
                                                        x.c() <= kDirectFewChannels && dy.c() <= kDirectFewChannels)) &&
                    cpu_detail::direct_weight_gradient_scratch_values(x, dy) < kDirectMaxScratchValues;
  return (fp32 || bf16) && cpu_detail::direct_weight_gradient_fits(x, dy, dw);
}

// Native BF16 without AMX: the forward pass over images of 4 channels or fewer (ResNet-18's 7x7 stem, ResNet-20's 3x3
// one) by the stem kernel, which pairs values along a kernel row where oneDNN pairs channels (padding 3 to 4): 1.3x
// oneDNN's speed alone on a Zen 5 (bench/stem_convolution.cpp; docs/benchmarks.md, "AVX512-BF16").
bool CpuBackend::stem_forward_chosen(const Tensor& x, const Tensor& w, const Tensor& y) const {
  return gemm_conv_ == GemmConv::SmallImages && x.dtype() == DType::BF16 && !amx_ && !gemm_conv_emulated(x) &&
         cpu_detail::stem_forward_fits(x, w, y);
}

// The 16-bit types the engine emulates (FP16; BF16 where emulated) compute in FP32 on the widened values.
bool CpuBackend::gemm_conv_emulated(const Tensor& t) const {
  return t.dtype() == DType::F16 || (t.dtype() == DType::BF16 && impl_->emulate_bf16);
}

}  // namespace ampwb
