// The CUDA backend's FP8 convolutions and matrix products (amp-fp8): E4M3 and E5M2 operands, as the layers' scaled
// casts left them, multiplied on FP8 tensor cores with FP32 accumulation into FP32 results; the layers apply the
// scale-inverses after (Fp8TensorScaling). Convolutions run on cuDNN's graph API in NHWC, matrix products on
// cuBLASLt in its one FP8 form (A transposed, B not: both operands K-major). A convolution pass may also run on the
// same FP8 values widened to FP16, which holds every E4M3 and E5M2 value, on 16-bit tensor cores into FP32: where
// cuDNN has no FP8 engine for it (none for strided backward-data passes), and where that ran faster on the pass's
// first call (fp8_pass). Where cuDNN has no engine for either, and for a product without an FP8 algorithm, the values
// are widened to FP32. Each way the products are exact and summed in FP32.
#include <cuda_runtime_api.h>

#include <iomanip>
#include <sstream>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"

namespace ampwb {

using cuda_detail::check_conv_shapes;
using cuda_detail::ktype;

namespace {

cudaDataType_t fp8_blas_type(DType t) { return t == DType::F8E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

// out: the output's dtype, which must be FP32 (the products' sums) unless the scale-inverses are applied on the way.
void check_fp8_operands(const Tensor& a, const Tensor& b, DType out, const char* op, bool scaled = false) {
  AMPWB_CHECK(is_fp8(a.dtype()) && is_fp8(b.dtype()) && (scaled ? is_floating(out) : out == DType::F32),
              op << " on FP8 takes two FP8 inputs and an FP32 output" << (scaled ? " (or FP16, BF16 scaled)" : "")
                 << ": " << a.describe() << ", " << b.describe() << " -> " << dtype_name(out));
  // Hopper and Ada multiply E4M3 by E4M3 or by E5M2, never E5M2 by E5M2 (Transformer Engine's formats never ask).
  AMPWB_CHECK(a.dtype() == DType::F8E4M3 || b.dtype() == DType::F8E4M3,
              op << ": FP8 tensor cores take no E5M2 by E5M2 product: " << a.describe() << ", " << b.describe());
}

}  // namespace

void CudaBackend::fp8_convolution(cuda::ConvPass pass, const Tensor& a, const Tensor& b, Tensor& out, ConvParams p) {
  Impl& m = *impl_;
  check_fp8_operands(a, b, out.dtype(), "a convolution");
  const Tensor a_nhwc = m.in_layout(a, Layout::NHWC), b_nhwc = m.in_layout(b, Layout::NHWC);
  Tensor result = out.layout() == Layout::NHWC ? out : m.empty(out.shape(), DType::F32, Layout::NHWC);
  // The convolution's x, w and y, whichever of the pass's tensors hold them.
  const bool forward = pass == cuda::ConvPass::Forward, data = pass == cuda::ConvPass::BackwardData;
  const Tensor& x = data ? result : a_nhwc;
  const Tensor& w = forward || data ? b_nhwc : result;
  const Tensor& y = forward ? result : data ? a_nhwc : b_nhwc;
  cuda::ConvShape s = m.conv_shape(x, w, y, p);
  s.mixed = true;
  s.a_type = cuda_detail::cudnn_type(a.dtype());
  s.b_type = cuda_detail::cudnn_type(b.dtype());
  s.dtype = CUDNN_DATA_FLOAT;
  s.math = cuda::ConvMath::TensorOp;
  if (fp8_pass(pass, s, a_nhwc, b_nhwc, result.data(), nullptr)) {
    if (!result.same_storage(out)) convert(result, out);
    return;
  }
  // No engine for it (conv_plans() says why): the same values in FP32.
  Tensor a32 = m.empty(a.shape(), DType::F32, a.layout()), b32 = m.empty(b.shape(), DType::F32, b.layout());
  convert(a, a32);
  convert(b, b32);
  if (forward)
    conv2d_forward(a32, b32, out, p);
  else if (data)
    conv2d_backward_data(a32, b32, out, p);
  else
    conv2d_backward_weights(a32, b32, out, p);
}

bool CudaBackend::fp8_convolution_scaled(cuda::ConvPass pass, const Tensor& a, const Tensor& b, Tensor& out,
                                         ConvParams p, const Fp8Factor& factor) {
  Impl& m = *impl_;
  if (!is_floating(out.dtype()) || out.layout() != Layout::NHWC) return false;
  const Tensor a_nhwc = m.in_layout(a, Layout::NHWC), b_nhwc = m.in_layout(b, Layout::NHWC);
  const bool forward = pass == cuda::ConvPass::Forward;
  cuda::ConvShape s = forward ? m.conv_shape(a_nhwc, b_nhwc, out, p) : m.conv_shape(out, b_nhwc, a_nhwc, p);
  s.mixed = s.scaled = true;
  s.a_type = cuda_detail::cudnn_type(a.dtype());
  s.b_type = cuda_detail::cudnn_type(b.dtype());
  s.dtype = cuda_detail::cudnn_type(out.dtype());
  s.math = cuda::ConvMath::TensorOp;
  // The epilogue reads one scalar: the factor's product written where it can, as the pass runs.
  Tensor factor_value = m.empty({1}, DType::F32);
  cuda::write_factor(factor_on_device(factor), factor_value.data_as<float>(), m.stream);
  return fp8_pass(pass, s, a_nhwc, b_nhwc, out.data(), factor_value.data_as<float>());
}

// On an H200 with cuDNN 9.19, every FP8 engine cuDNN had for ResNet-50's passes ran slower than the 16-bit engines of
// the same pass (docs/benchmarks.md): the way is timed per pass and shape rather than assumed.
bool CudaBackend::fp8_pass(cuda::ConvPass pass, const cuda::ConvShape& s, const Tensor& a, const Tensor& b, void* out,
                           const float* factor) {
  using Way = Impl::Fp8Way;
  Impl& m = *impl_;
  std::vector<Tensor> holders;
  cuda::ConvShape wide = s;
  wide.a_type = wide.b_type = CUDNN_DATA_HALF;
  const auto on_fp8 = [&] { return m.conv->mixed(pass, s, a.data(), b.data(), out, m.scratch(holders), factor); };
  const auto widened = [&](const Tensor& a16, const Tensor& b16) {
    return m.conv->mixed(pass, wide, a16.data(), b16.data(), out, m.scratch(holders), factor);
  };
  const std::string key = s.key(cuda::pass_key(pass));
  if (const auto known = m.fp8_choices.find(key); known != m.fp8_choices.end())
    return known->second.way == Way::Fp8 ? on_fp8() : widened(widened_to_fp16(a), widened_to_fp16(b));
  // Kept once a way has run: a call that throws, or that finds neither (unaligned tensors), decides nothing.
  Impl::Fp8Choice choice;
  if (!m.fp8_fastest_passes || !m.conv->timed_choices() || m.conv->capturing()) {
    // Untimed (cuDNN's heuristics choose, or FP8 is asked for): FP8 wherever cuDNN has an engine for it.
    if (on_fp8())
      choice.way = Way::Fp8;
    else if (widened(widened_to_fp16(a), widened_to_fp16(b)))
      choice.way = Way::Widened;
  } else {
    // Both timed, the widening as cuDNN times the engines (warm, the mean of a few); the FP8 pass runs last, so
    // that this call's result is its where it has an engine.
    constexpr int kWidenRuns = 3;
    Tensor a16 = widened_to_fp16(a), b16 = widened_to_fp16(b);
    const float widen_ms = m.timed_on_stream([&] {
      for (int run = 0; run < kWidenRuns; ++run) {
        convert(a, a16);
        convert(b, b16);
      }
    }) / kWidenRuns;
    const bool wide_ran = widened(a16, b16);
    a16 = b16 = Tensor();
    const bool fp8_ran = on_fp8();
    const float wide_ms = wide_ran ? m.conv->mixed_ms(pass, wide) : -1.0f;
    const float fp8_ms = fp8_ran ? m.conv->mixed_ms(pass, s) : -1.0f;
    const bool wider_faster = wide_ms >= 0 && fp8_ms >= 0 && wide_ms + widen_ms < fp8_ms;
    choice.way = fp8_ran && !wider_faster ? Way::Fp8 : wide_ran ? Way::Widened : Way::Neither;
    if (fp8_ms >= 0 && wide_ms >= 0) {
      std::ostringstream text;
      text << std::fixed << std::setprecision(3) << "FP8 " << fp8_ms << " ms, widened " << wide_ms << " ms + "
           << widen_ms << " ms to widen";
      choice.timing = text.str();
    }
  }
  if (choice.way == Way::Neither) return false;
  m.fp8_choices[key] = choice;
  return true;
}

Tensor CudaBackend::widened_to_fp16(const Tensor& fp8) {
  Tensor t = impl_->empty(fp8.shape(), DType::F16, fp8.layout());
  convert(fp8, t);
  return t;
}

// The fused forms where their operands are FP8 and the graph has an engine; else the ops they compose.
void CudaBackend::conv2d_forward_scaled(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p, Fp8Factor factor) {
  if (is_fp8(x.dtype()) && impl_->fp8_fused_scales) {
    CUDA_OP_ENTRY(&x, &w);
    for (const Tensor* t : {&x, &w, static_cast<const Tensor*>(&y)}) impl_->check_device(*t, "conv2d_forward_scaled");
    check_conv_shapes(x, w, y, p, "conv2d_forward_scaled");
    check_fp8_operands(x, w, y.dtype(), "a convolution", true);
    if (fp8_convolution_scaled(cuda::ConvPass::Forward, x, w, y, p, factor)) return;
  }
  Backend::conv2d_forward_scaled(x, w, y, p, factor);
}

void CudaBackend::conv2d_backward_data_scaled(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p,
                                              Fp8Factor factor) {
  if (is_fp8(dy.dtype()) && impl_->fp8_fused_scales) {
    CUDA_OP_ENTRY(&dy, &w);
    for (const Tensor* t : {&dy, &w, static_cast<const Tensor*>(&dx)})
      impl_->check_device(*t, "conv2d_backward_data_scaled");
    check_conv_shapes(dx, w, dy, p, "conv2d_backward_data_scaled (x: dx, y: dy)");
    check_fp8_operands(dy, w, dx.dtype(), "a convolution", true);
    if (fp8_convolution_scaled(cuda::ConvPass::BackwardData, dy, w, dx, p, factor)) return;
  }
  Backend::conv2d_backward_data_scaled(dy, w, dx, p, factor);
}

// Row-major products seen column-major by cuBLASLt, each in its FP8 form (A transposed, stored k x m; B stored
// k x n): y^T (O x N) = w^T x^T reads w (O,I) and x (N,I) as they are; dx^T (I x N) reads w transposed (I,O) and dy
// (N,O); dw^T (I x O) reads x transposed (I,N) and dy transposed (O,N).

void CudaBackend::fp8_linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  Impl& m = *impl_;
  check_fp8_operands(x, w, y.dtype(), "a linear layer");
  AMPWB_CHECK(b.dtype() == DType::F32, "an FP8 linear layer's bias is FP32, not " << b.describe());
  const int64_t N = x.dim(0), I = x.dim(1), O = w.dim(0);
  cuda::MatmulShape s;
  s.trans_a = true;
  s.m = O, s.n = N, s.k = I;
  s.lda = I, s.ldb = I, s.ldd = O;
  s.a_type = fp8_blas_type(w.dtype()), s.b_type = fp8_blas_type(x.dtype());
  if (N > 0 && I > 0 && O > 0 && m.matmul->has_algorithm(s, cuda::MatmulRunner::kWorkspaceBytes)) {
    cuda::broadcast_rows(b.data(), ktype(b.dtype()), y.data(), ktype(y.dtype()), N, O, m.stream);
    m.run_matmul(s, w.data(), x.data(), y.data(), 1.0f);  // onto the broadcast bias
    return;
  }
  Tensor x32 = m.empty(x.shape(), DType::F32), w32 = m.empty(w.shape(), DType::F32);
  convert(x, x32);
  convert(w, w32);
  linear_forward(x32, w32, b, y);
}

void CudaBackend::fp8_linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                                      Tensor& db) {
  Impl& m = *impl_;
  check_fp8_operands(dy, x, dw.dtype(), "a linear layer's gradient");
  check_fp8_operands(dy, w, dw.dtype(), "a linear layer's gradient");
  AMPWB_CHECK(db.dtype() == DType::F32 && (!dx.defined() || dx.dtype() == DType::F32),
              "an FP8 linear layer's gradients are FP32: dx " << dx.describe() << ", db " << db.describe());
  const int64_t N = x.dim(0), I = x.dim(1), O = w.dim(0);
  cuda::MatmulShape data;  // dx^T (I x N) = (w^T) dy^T
  data.trans_a = true;
  data.m = I, data.n = N, data.k = O;
  data.lda = O, data.ldb = O, data.ldd = I;
  data.a_type = fp8_blas_type(w.dtype()), data.b_type = fp8_blas_type(dy.dtype());
  cuda::MatmulShape weights;  // dw^T (I x O) = x^T dy
  weights.trans_a = true;
  weights.m = I, weights.n = O, weights.k = N;
  weights.lda = N, weights.ldb = N, weights.ldd = I;
  weights.a_type = fp8_blas_type(x.dtype()), weights.b_type = fp8_blas_type(dy.dtype());
  const size_t space = cuda::MatmulRunner::kWorkspaceBytes;
  const bool on_fp8 = N > 0 && I > 0 && O > 0 && m.matmul->has_algorithm(weights, space) &&
                      (!dx.defined() || m.matmul->has_algorithm(data, space));
  if (!on_fp8) {
    Tensor dy32 = m.empty(dy.shape(), DType::F32), x32 = m.empty(x.shape(), DType::F32),
           w32 = m.empty(w.shape(), DType::F32);
    convert(dy, dy32);
    convert(x, x32);
    convert(w, w32);
    return linear_backward(dy32, x32, w32, dx, dw, db);
  }
  // A (rows, cols) row-major matrix as (cols, rows) row-major: its bytes read as NCHW (1, rows, cols, 1) and
  // written as NHWC, which stores that shape transposed.
  auto transposed = [&m](const Tensor& t) {
    const int64_t rows = t.dim(0), cols = t.dim(1);
    Tensor out = m.empty({cols, rows}, t.dtype());
    cuda::convert(t.data(), ktype(t.dtype()), {1, rows, cols, 1, false}, out.data(), ktype(t.dtype()),
                  {1, rows, cols, 1, true}, m.stream);
    return out;
  };
  if (dx.defined()) m.run_matmul(data, transposed(w).data(), dy.data(), dx.data(), 0.0f);
  m.run_matmul(weights, transposed(x).data(), transposed(dy).data(), dw.data(), 0.0f);
  cuda::column_sum(dy.data(), ktype(dy.dtype()), N, O, db.data(), ktype(db.dtype()), m.stream);
}

}  // namespace ampwb
