// The CUDA backend's convolutions (cuDNN through cuda_conv.cpp, with layouts reordered and 16-bit NHWC channel
// counts zero-padded) and linear layers (cuBLASLt through cuda_matmul.cpp, plus the bias kernels).
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"

namespace ampwb {

using cuda_detail::check_conv_shapes;
using cuda_detail::check_floating;
using cuda_detail::ktype;

namespace {
cudaDataType_t blas_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F8E4M3:
      return CUDA_R_8F_E4M3;
    case DType::F8E5M2:
      return CUDA_R_8F_E5M2;
    default:
      throw Error(std::string("cuBLASLt matrix products take FP32, FP16, BF16 or FP8, not ") + dtype_name(t));
  }
}
}  // namespace

// ---- Convolution ------------------------------------------------------------------------------------------------

void CudaBackend::conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) {
  CUDA_OP_ENTRY(&x, &w);
  Impl& m = *impl_;
  m.check_device(x, "conv2d_forward x");
  m.check_device(w, "conv2d_forward w");
  m.check_device(y, "conv2d_forward y");
  check_conv_shapes(x, w, y, p, "conv2d_forward");
  if (is_fp8(x.dtype())) return fp8_convolution(cuda::ConvPass::Forward, x, w, y, p);
  AMPWB_CHECK(w.dtype() == x.dtype() && y.dtype() == x.dtype(),
              "conv2d_forward dtypes differ: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  check_floating(x, "conv2d_forward");
  // 16-bit NHWC channel counts off a multiple of pad_input_channels run zero-padded (see the header).
  const Layout layout = m.conv_layout(x);
  const int64_t C = m.padded_channels(x, x.c()), K = m.padded_channels(x, w.n());
  const Tensor xin = C == x.c() ? m.in_layout(x, layout) : m.pad(x, C);
  const Tensor win = m.pad_weights(m.in_layout(w, layout), K, C);
  Tensor out = y.layout() == layout ? y : m.empty(y.shape(), y.dtype(), layout);
  Tensor result = K == y.c() ? out : m.empty({y.n(), K, y.h(), y.w()}, y.dtype(), Layout::NHWC);
  std::vector<Tensor> holders;
  m.conv->forward(m.conv_shape(xin, win, result, p), xin.data(), win.data(), result.data(), m.scratch(holders));
  if (!result.same_storage(out)) m.slice(result, out);
  if (!out.same_storage(y)) convert(out, y);
}

void CudaBackend::conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p) {
  CUDA_OP_ENTRY(&dy, &w);
  Impl& m = *impl_;
  m.check_device(dy, "conv2d_backward_data dy");
  m.check_device(w, "conv2d_backward_data w");
  m.check_device(dx, "conv2d_backward_data dx");
  check_conv_shapes(dx, w, dy, p, "conv2d_backward_data (x: dx, y: dy)");
  if (is_fp8(dy.dtype())) return fp8_convolution(cuda::ConvPass::BackwardData, dy, w, dx, p);
  AMPWB_CHECK(w.dtype() == dy.dtype() && dx.dtype() == dy.dtype(), "conv2d_backward_data dtypes differ: dy "
                                                                       << dy.describe() << " w " << w.describe()
                                                                       << " dx " << dx.describe());
  check_floating(dy, "conv2d_backward_data");
  const Layout layout = m.conv_layout(dy);
  const int64_t C = m.padded_channels(dy, dx.c()), K = m.padded_channels(dy, dy.c());
  const Tensor dyin = K == dy.c() ? m.in_layout(dy, layout) : m.pad(dy, K);
  const Tensor win = m.pad_weights(m.in_layout(w, layout), K, C);
  Tensor out = dx.layout() == layout ? dx : m.empty(dx.shape(), dx.dtype(), layout);
  // What cuDNN writes: out, or a channel-padded version of it.
  Tensor result = C == dx.c() ? out : m.empty({dx.n(), C, dx.h(), dx.w()}, dx.dtype(), Layout::NHWC);
  std::vector<Tensor> holders;
  m.conv->backward_data(m.conv_shape(result, win, dyin, p), dyin.data(), win.data(), result.data(), m.scratch(holders));
  if (!result.same_storage(out)) m.slice(result, out);
  if (!out.same_storage(dx)) convert(out, dx);
}

void CudaBackend::conv2d_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) {
  CUDA_OP_ENTRY(&x, &dy);
  Impl& m = *impl_;
  m.check_device(x, "conv2d_backward_weights x");
  m.check_device(dy, "conv2d_backward_weights dy");
  m.check_device(dw, "conv2d_backward_weights dw");
  check_conv_shapes(x, dw, dy, p, "conv2d_backward_weights (w: dw, y: dy)");
  if (is_fp8(x.dtype())) return fp8_convolution(cuda::ConvPass::BackwardFilter, x, dy, dw, p);
  AMPWB_CHECK(dy.dtype() == x.dtype(),
              "conv2d_backward_weights dtypes differ: x " << x.describe() << " dy " << dy.describe());
  check_floating(x, "conv2d_backward_weights");
  check_floating(dw, "conv2d_backward_weights dw");
  const Layout layout = m.conv_layout(x);
  const int64_t C = m.padded_channels(x, x.c()), K = m.padded_channels(x, dy.c());
  const Tensor xin = C == x.c() ? m.in_layout(x, layout) : m.pad(x, C);
  Tensor dyin = m.in_layout(dy, layout);
  if (K != dy.c()) dyin = m.pad(dyin, K);
  // cuDNN writes dw in x's dtype and layout; another dw (an FP32 gradient of FP16 weights, say) is converted to.
  Tensor out = dw.layout() == layout && dw.dtype() == x.dtype() ? dw : m.empty(dw.shape(), x.dtype(), layout);
  Tensor result = C == dw.c() && K == dw.n() ? out : m.empty({K, C, dw.h(), dw.w()}, x.dtype(), Layout::NHWC);
  std::vector<Tensor> holders;
  m.conv->backward_filter(m.conv_shape(xin, result, dyin, p), xin.data(), dyin.data(), result.data(),
                          m.scratch(holders));
  if (!result.same_storage(out)) m.slice(result, out);
  if (!out.same_storage(dw)) convert(out, dw);
}
// ---- Linear -------------------------------------------------------------------------------------------------------
// Row-major (N,I) x (O,I)^T products seen column-major by cuBLASLt: y^T (O x N) = w (I x O)^T x^T (I x N).

void CudaBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  CUDA_OP_ENTRY(&x, &w, &b);
  Impl& m = *impl_;
  m.check_device(x, "linear x");
  m.check_device(w, "linear w");
  m.check_device(b, "linear b");
  m.check_device(y, "linear y");
  AMPWB_CHECK(x.rank() == 2 && w.rank() == 2 && y.rank() == 2 && w.dim(1) == x.dim(1) && y.dim(0) == x.dim(0) &&
                  y.dim(1) == w.dim(0) && b.numel() == w.dim(0),
              "linear_forward shapes: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  if (is_fp8(x.dtype())) return fp8_linear_forward(x, w, b, y);
  AMPWB_CHECK(w.dtype() == x.dtype() && y.dtype() == x.dtype(),
              "linear_forward dtypes differ: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  check_floating(x, "linear");
  check_floating(b, "linear bias");
  const int64_t N = x.dim(0), I = x.dim(1), O = w.dim(0);
  cuda::broadcast_rows(b.data(), ktype(b.dtype()), y.data(), ktype(y.dtype()), N, O, m.stream);
  if (I == 0) return;
  cuda::MatmulShape s;
  s.trans_a = true;   // A = w stored (I x O)
  s.trans_b = false;  // B = x stored (I x N)
  s.m = O;
  s.n = N;
  s.k = I;
  s.lda = I;
  s.ldb = I;
  s.ldd = O;
  s.a_type = s.b_type = blas_type(x.dtype());
  s.d_type = blas_type(y.dtype());
  s.compute = m.blas_compute(x.dtype());
  m.run_matmul(s, w.data(), x.data(), y.data(), 1.0f);  // onto the broadcast bias
}

void CudaBackend::linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                                  Tensor& db) {
  CUDA_OP_ENTRY(&dy, &x, &w);
  Impl& m = *impl_;
  m.check_device(dy, "linear dy");
  m.check_device(x, "linear x");
  m.check_device(w, "linear w");
  m.check_device(dw, "linear dw");
  m.check_device(db, "linear db");
  AMPWB_CHECK(x.rank() == 2 && w.rank() == 2 && dy.rank() == 2 && w.dim(1) == x.dim(1) && dy.dim(0) == x.dim(0) &&
                  dy.dim(1) == w.dim(0) && dw.shape() == w.shape() && db.numel() == w.dim(0),
              "linear_backward shapes: dy " << dy.describe() << " x " << x.describe() << " w " << w.describe() << " dw "
                                            << dw.describe() << " db " << db.describe());
  if (is_fp8(dy.dtype())) return fp8_linear_backward(dy, x, w, dx, dw, db);
  AMPWB_CHECK(x.dtype() == dy.dtype() && w.dtype() == dy.dtype(),
              "linear_backward dtypes differ: dy " << dy.describe() << " x " << x.describe() << " w " << w.describe());
  check_floating(dy, "linear");
  check_floating(dw, "linear dw");
  check_floating(db, "linear db");
  const int64_t N = x.dim(0), I = x.dim(1), O = w.dim(0);
  const DType t = dy.dtype();
  // cuBLASLt writes the input dtype, or FP32 from 16-bit inputs; anything else goes through a temporary.
  auto writable = [&](Tensor& out) {
    return out.dtype() == t || (is_16bit(t) && out.dtype() == DType::F32) ? out : m.empty(out.shape(), t);
  };
  if (dx.defined()) {
    m.check_device(dx, "linear dx");
    AMPWB_CHECK(dx.shape() == x.shape(), "linear_backward dx " << dx.describe() << " for x " << x.describe());
    check_floating(dx, "linear dx");
    Tensor out = writable(dx);
    cuda::MatmulShape s;  // dx^T (I x N) = w (I x O) dy^T (O x N)
    s.m = I;
    s.n = N;
    s.k = O;
    s.lda = I;
    s.ldb = O;
    s.ldd = I;
    s.a_type = s.b_type = blas_type(t);
    s.d_type = blas_type(out.dtype());
    s.compute = m.blas_compute(t);
    if (O == 0) {
      CUDA_CHECK(cudaMemsetAsync(out.data(), 0, out.nbytes(), m.stream));
    } else {
      m.run_matmul(s, w.data(), dy.data(), out.data(), 0.0f);
    }
    if (!out.same_storage(dx)) convert(out, dx);
  }
  Tensor dw_out = writable(dw);
  cuda::MatmulShape s;  // dw^T (I x O) = x^T (I x N) dy (N x O)
  s.trans_b = true;     // B = dy stored (O x N)
  s.m = I;
  s.n = O;
  s.k = N;
  s.lda = I;
  s.ldb = O;
  s.ldd = I;
  s.a_type = s.b_type = blas_type(t);
  s.d_type = blas_type(dw_out.dtype());
  s.compute = m.blas_compute(t);
  if (N == 0) {
    CUDA_CHECK(cudaMemsetAsync(dw_out.data(), 0, dw_out.nbytes(), m.stream));
  } else {
    m.run_matmul(s, x.data(), dy.data(), dw_out.data(), 0.0f);
  }
  if (!dw_out.same_storage(dw)) convert(dw_out, dw);
  cuda::column_sum(dy.data(), ktype(t), N, O, db.data(), ktype(db.dtype()), m.stream);
}
}  // namespace ampwb
