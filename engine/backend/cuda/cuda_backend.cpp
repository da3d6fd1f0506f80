// The CUDA backend: argument checks, layouts and channel padding, host<->device copies, streams and the calls into
// cuDNN (cuda_conv.cpp), cuBLASLt (cuda_matmul.cpp) and the own kernels (cuda_kernels.cu, cuda_batchnorm.cu).
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_library_check.h"

namespace ampwb {

using cuda::Dims4;
using cuda::KType;

namespace {

KType ktype(DType t) {
  switch (t) {
    case DType::F32:
      return KType::F32;
    case DType::F16:
      return KType::F16;
    case DType::BF16:
      return KType::BF16;
    case DType::I32:
      return KType::I32;
    case DType::U8:
      return KType::U8;
  }
  throw Error("unknown dtype");
}

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDNN_DATA_FLOAT;
    case DType::F16:
      return CUDNN_DATA_HALF;
    case DType::BF16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw Error(std::string("cuDNN convolutions take FP32, FP16 or BF16, not ") + dtype_name(t));
  }
}

cudaDataType_t blas_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
    default:
      throw Error(std::string("cuBLASLt matrix products take FP32, FP16 or BF16, not ") + dtype_name(t));
  }
}

// A tensor as the kernels see it: 4-D with its layout, other ranks as a flat row.
Dims4 dims_of(const Tensor& t) {
  if (t.rank() == 4) return {t.n(), t.c(), t.h(), t.w(), t.layout() == Layout::NHWC};
  return {t.numel(), 1, 1, 1, false};
}

// Whether two tensors of one logical shape store their elements in the same order.
bool same_order(const Tensor& a, const Tensor& b) {
  if (a.rank() != 4 || b.rank() != 4 || a.layout() == b.layout()) return true;
  return a.c() == 1 || (a.h() == 1 && a.w() == 1);
}

bool is16(DType t) { return t == DType::F16 || t == DType::BF16; }

int64_t conv_out(int64_t in, int64_t kernel, int stride, int padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

void check_same(const Tensor& a, const Tensor& b, const char* what) {
  AMPWB_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.layout() == b.layout(),
              what << ": " << a.describe() << " and " << b.describe() << " differ");
}

void check_floating(const Tensor& t, const char* what) {
  AMPWB_CHECK(is_floating(t.dtype()), what << ": expected an FP32, FP16 or BF16 tensor, got " << t.describe());
}

int to_int(int64_t v, const char* what) {
  AMPWB_CHECK(v >= 0 && v <= 0x7fffffff, what << " " << v << " exceeds cuDNN's 32-bit dimensions");
  return static_cast<int>(v);
}

std::string gib(size_t bytes) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return out.str();
}

std::string version3(long v) {  // 91900 -> "9.19.0", 130100 -> "13.1.0"
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

// Two pinned host buffers used in turn, each with the event of the copy that last read it: writing into one waits
// only for the copy two transfers back. Grown to the largest transfer seen.
class PinnedRing {
 public:
  PinnedRing() = default;
  PinnedRing(const PinnedRing&) = delete;
  PinnedRing& operator=(const PinnedRing&) = delete;
  ~PinnedRing() {
    for (Slot& s : slots_) {
      if (s.done) {
        cudaEventSynchronize(s.done);
        cudaEventDestroy(s.done);
      }
      if (s.host) cudaFreeHost(s.host);
    }
  }
  // A buffer of at least `bytes` that no queued copy still reads. Then: queue the copy, call recorded(stream).
  void* acquire(size_t bytes) {
    Slot& s = slots_[next_];
    if (!s.done) CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventSynchronize(s.done));
    if (s.capacity < bytes) {
      if (s.host) CUDA_CHECK(cudaFreeHost(s.host));
      s.host = nullptr;
      s.capacity = 0;
      const size_t capacity = std::max(bytes, size_t{1} << 20);
      CUDA_CHECK(cudaHostAlloc(&s.host, capacity, cudaHostAllocDefault));
      s.capacity = capacity;
    }
    return s.host;
  }
  void recorded(cudaStream_t stream) {
    CUDA_CHECK(cudaEventRecord(slots_[next_].done, stream));
    next_ = 1 - next_;
  }

 private:
  struct Slot {
    void* host = nullptr;
    size_t capacity = 0;
    cudaEvent_t done = nullptr;
  };
  std::array<Slot, 2> slots_;
  int next_ = 0;
};

}  // namespace

struct CudaBackend::Impl {
  CudaBackendOptions options;
  Device device;
  cudaDeviceProp props{};
  cudaStream_t stream = nullptr;       // every op
  cudaStream_t copy_stream = nullptr;  // upload
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t cublas = nullptr;
  std::unique_ptr<cuda::ConvRunner> conv;
  std::unique_ptr<cuda::MatmulRunner> matmul;
  Tensor matmul_workspace;  // U8, MatmulRunner::kWorkspaceBytes
  PinnedRing to_device, uploads;
  // Small results read back by the host: a pinned mirror and the device original.
  struct Results {
    cuda::LossResult loss;
    cuda::ScaleResult scale;
  };
  Results* host_results = nullptr;
  Tensor device_results;  // U8, sizeof(Results)
  int64_t classes = 0;    // of the last softmax_cross_entropy
  struct Pending {
    Tensor tensor;  // kept alive until its copy is done
    cudaEvent_t done = nullptr;
  };
  std::vector<Pending> pending;     // upload copies not yet waited for
  std::unique_ptr<CpuBackend> cpu;  // host-to-host conversions

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);
    if (copy_stream) cudaStreamSynchronize(copy_stream);
    for (Pending& p : pending) cudaEventDestroy(p.done);
    pending.clear();
    conv.reset();
    matmul.reset();
    if (cublas) cublasLtDestroy(cublas);
    if (cudnn) cudnnDestroy(cudnn);
    if (host_results) cudaFreeHost(host_results);
    if (copy_stream) cudaStreamDestroy(copy_stream);
    if (stream) cudaStreamDestroy(stream);
  }

  Tensor empty(Shape shape, DType dtype, Layout layout = Layout::NCHW) const {
    return Tensor::empty(std::move(shape), dtype, layout, device);
  }
  Tensor bytes(size_t n) const { return empty({static_cast<int64_t>(n)}, DType::U8); }

  void check_device(const Tensor& t, const char* what) const {
    AMPWB_CHECK(t.defined(), what << " is undefined");
    AMPWB_CHECK(t.device() == device, what << " " << t.describe() << " is not on " << device.str()
                                           << ": the CUDA backend computes on its device's tensors (copy them with "
                                              "convert() or upload())");
  }

  // The first op to read an upload tensor waits for its copy; copies already done are forgotten.
  void ready(std::initializer_list<const Tensor*> inputs) {
    for (size_t i = 0; i < pending.size();) {
      bool used = false;
      for (const Tensor* t : inputs) used = used || (t->defined() && t->same_storage(pending[i].tensor));
      bool done = false;
      if (used) {
        CUDA_CHECK(cudaStreamWaitEvent(stream, pending[i].done, 0));
        done = true;
      } else {
        const cudaError_t status = cudaEventQuery(pending[i].done);
        if (status == cudaErrorNotReady)
          cudaGetLastError();  // not an error: still copying
        else
          CUDA_CHECK(status);
        done = status == cudaSuccess;
      }
      if (done) {
        cudaEventDestroy(pending[i].done);
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }

  // Scratch device memory for cuDNN, alive until the holders go out of scope (after the work is queued).
  cuda::ScratchFn scratch(std::vector<Tensor>& holders) const {
    return [this, &holders](size_t n) {
      holders.push_back(bytes(n));
      return holders.back().data();
    };
  }

  // t in `layout`: itself, or a reordered device copy.
  Tensor in_layout(const Tensor& t, Layout layout) {
    if (t.layout() == layout || t.rank() != 4) return t;
    Tensor out = empty(t.shape(), t.dtype(), layout);
    cuda::convert(t.data(), ktype(t.dtype()), dims_of(t), out.data(), ktype(out.dtype()), dims_of(out), stream);
    return out;
  }

  // The channel count c is padded to in an NHWC 16-bit convolution (input channels C or output channels K): c when
  // it needs no padding.
  int64_t padded_channels(const Tensor& x, int64_t c) const {
    const int64_t to = options.pad_input_channels;
    if (to <= 1 || x.layout() != Layout::NHWC || !is16(x.dtype()) || c % to == 0) return c;
    return (c + to - 1) / to * to;
  }
  // An NHWC tensor (N,C,H,W) -> (N,padded,H,W) with zero channels appended (also for KRSC weights).
  Tensor pad(const Tensor& t, int64_t padded) {
    Tensor out = empty({t.n(), padded, t.h(), t.w()}, t.dtype(), Layout::NHWC);
    cuda::pad_channels(t.data(), t.n() * t.h() * t.w(), t.c(), out.data(), padded, dtype_size(t.dtype()), stream);
    return out;
  }
  // NHWC (KRSC) weights (K,C,R,S) -> (k,c,R,S) with zero filters and channels appended; w itself when nothing to pad.
  Tensor pad_weights(const Tensor& w, int64_t k, int64_t c) {
    if (k == w.n() && c == w.c()) return w;
    Tensor out = empty({k, c, w.h(), w.w()}, w.dtype(), Layout::NHWC);
    if (k > w.n()) CUDA_CHECK(cudaMemsetAsync(out.data(), 0, out.nbytes(), stream));  // the extra filters
    cuda::pad_channels(w.data(), w.n() * w.h() * w.w(), w.c(), out.data(), c, dtype_size(w.dtype()), stream);
    return out;
  }
  // The first out.c() channels of the first out.n() H W rows of an NHWC tensor, into out (NHWC, same dtype):
  // undoes pad() and, for weights, pad_weights() (the extra filters are the last rows).
  void slice(const Tensor& padded, Tensor& out) {
    cuda::slice_channels(padded.data(), out.n() * out.h() * out.w(), padded.c(), out.data(), out.c(),
                         dtype_size(out.dtype()), stream);
  }

  cuda::ConvMath conv_math(DType t) const {
    if (t != DType::F32) return cuda::ConvMath::TensorOp;
    return options.allow_tf32 ? cuda::ConvMath::Tf32 : cuda::ConvMath::Fp32;
  }

  cuda::ConvShape conv_shape(const Tensor& x, const Tensor& w, const Tensor& y, ConvParams p) const {
    cuda::ConvShape s;
    s.n = to_int(x.n(), "batch");
    s.c = to_int(x.c(), "channels");
    s.h = to_int(x.h(), "height");
    s.w = to_int(x.w(), "width");
    s.k = to_int(w.n(), "output channels");
    s.r = to_int(w.h(), "kernel height");
    s.s = to_int(w.w(), "kernel width");
    s.p = to_int(y.h(), "output height");
    s.q = to_int(y.w(), "output width");
    s.stride = p.stride;
    s.padding = p.padding;
    s.dtype = cudnn_type(x.dtype());
    s.nhwc = x.layout() == Layout::NHWC;
    s.math = conv_math(x.dtype());
    return s;
  }

  cublasComputeType_t blas_compute(DType t) const {
    return t == DType::F32 && options.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  }

  void run_matmul(const cuda::MatmulShape& s, const void* a, const void* b, void* d, float beta) {
    if (!matmul_workspace.defined()) matmul_workspace = bytes(cuda::MatmulRunner::kWorkspaceBytes);
    matmul->run(s, a, b, d, beta, matmul_workspace.data(), matmul_workspace.nbytes(), stream);
  }

  // Host bytes to device memory on `on`, through a pinned buffer: returns once the bytes are staged.
  void host_to_device(const void* host, void* dev, size_t n, PinnedRing& ring, cudaStream_t on) {
    if (n == 0) return;
    void* staged = ring.acquire(n);
    std::memcpy(staged, host, n);
    CUDA_CHECK(cudaMemcpyAsync(dev, staged, n, cudaMemcpyHostToDevice, on));
    ring.recorded(on);
  }

  void device_to_host(const void* dev, void* host, size_t n) {
    if (n == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  Results& read_results() {
    CUDA_CHECK(cudaMemcpyAsync(host_results, device_results.data(), sizeof(Results), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return *host_results;
  }
  cuda::LossResult* device_loss() { return &static_cast<Results*>(device_results.data())->loss; }
  cuda::ScaleResult* device_scale() { return &static_cast<Results*>(device_results.data())->scale; }
};

// Every op: this backend's device current on the calling thread, and the op's inputs ready.
#define CUDA_OP_ENTRY(...)                              \
  cuda::DeviceScope device_scope_(impl_->device.index); \
  impl_->ready({__VA_ARGS__})

CudaBackend::CudaBackend(const CudaBackendOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = options;
  const int count = cuda_device_count();
  AMPWB_CHECK(count > 0, "no usable CUDA GPU on this machine (no GPU, or no driver)");
  AMPWB_CHECK(options.device_index >= 0 && options.device_index < count,
              "cuda:" << options.device_index << ": no such CUDA device (" << count << " found)");
  m.device = Device::cuda(options.device_index);
  cuda::DeviceScope scope(options.device_index);
  CUDA_CHECK(cudaGetDeviceProperties(&m.props, options.device_index));
  AMPWB_CHECK(m.props.major >= kMinComputeCapabilityMajor,
              "cuda:" << options.device_index << " (" << m.props.name << ") has compute capability " << m.props.major
                      << "." << m.props.minor
                      << "; this build's kernels are for sm_80 and newer (CMAKE_CUDA_ARCHITECTURES 80;90)");
  CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&m.copy_stream, cudaStreamNonBlocking));
  CUDNN_CHECK(cudnnCreate(&m.cudnn));
  CUDNN_CHECK(cudnnSetStream(m.cudnn, m.stream));
  CUBLAS_CHECK(cublasLtCreate(&m.cublas));
  m.conv = std::make_unique<cuda::ConvRunner>(m.cudnn, options.conv_workspace_limit, options.benchmark_algorithms,
                                              options.exact_fp32_convolutions);
  m.matmul = std::make_unique<cuda::MatmulRunner>(m.cublas);
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m.host_results), sizeof(Impl::Results), cudaHostAllocDefault));
  m.device_results = m.bytes(sizeof(Impl::Results));
  CUDA_CHECK(cudaMemsetAsync(m.device_results.data(), 0, sizeof(Impl::Results), m.stream));
}

CudaBackend::~CudaBackend() {
  if (impl_) {
    const int previous = [] {
      int d = 0;
      return cudaGetDevice(&d) == cudaSuccess ? d : -1;
    }();
    cudaSetDevice(impl_->device.index);
    impl_.reset();
    if (previous >= 0) cudaSetDevice(previous);
    cudaGetLastError();
  }
}

Device CudaBackend::device() const { return impl_->device; }

std::string CudaBackend::description() const {
  const Impl& m = *impl_;
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) cudaGetLastError();
  std::ostringstream out;
  out << m.device.str() << " (" << m.props.name << ", " << gib(m.props.totalGlobalMem) << ", sm_" << m.props.major
      << m.props.minor << ", " << m.props.multiProcessorCount << " SMs; CUDA " << cuda_runtime_version() << ", driver "
      << driver / 1000 << "." << (driver % 1000) / 10 << ", cuDNN " << version3(static_cast<long>(cudnnGetVersion()))
      << ", cuBLASLt " << version3(static_cast<long>(cublasLtGetVersion())) << "; TF32 "
      << (m.options.allow_tf32 ? "on" : "off") << ")";
  return out.str();
}

bool CudaBackend::supports(Op op, DType dtype) const {
  switch (op) {
    case Op::Convert:
      return true;
    case Op::SoftmaxCrossEntropy:
    case Op::SgdUpdate:
    case Op::AdamUpdate:
    case Op::ScaleCheck:
      return dtype == DType::F32;
    default:
      return is_floating(dtype);  // BF16 needs sm_80, which the constructor requires
  }
}

Capabilities CudaBackend::capabilities() const {
  const Impl& m = *impl_;
  Capabilities caps;
  caps.device = m.device;
  caps.device_name = m.props.name;
  caps.isa = "sm_" + std::to_string(m.props.major) + std::to_string(m.props.minor);
  caps.memory_bytes = m.props.totalGlobalMem;
  const bool ampere = m.props.major >= 8;  // the constructor requires it; kept explicit for the reasons below
  caps.fp16 = {true, true, "native on tensor cores (cuDNN, cuBLASLt; FP32 accumulation)", 0, ""};
  caps.bf16 = {ampere, ampere,
               ampere ? "native on tensor cores (cuDNN, cuBLASLt; FP32 accumulation)"
                      : "BF16 tensor cores need compute capability 8.0 (Ampere) or later; this GPU is " + caps.isa,
               0, ""};
  caps.tf32 = {ampere, ampere,
               ampere ? "TF32 tensor-core math for FP32 convolutions and matrix products"
                      : "TF32 needs compute capability 8.0 (Ampere) or later; this GPU is " + caps.isa,
               0, ""};
  return caps;
}

void CudaBackend::set_allow_tf32(bool allow) { impl_->options.allow_tf32 = allow; }
bool CudaBackend::allow_tf32() const { return impl_->options.allow_tf32; }

// ---- Convolution ------------------------------------------------------------------------------------------------

void CudaBackend::conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) {
  CUDA_OP_ENTRY(&x, &w);
  Impl& m = *impl_;
  m.check_device(x, "conv2d_forward x");
  m.check_device(w, "conv2d_forward w");
  m.check_device(y, "conv2d_forward y");
  AMPWB_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4 && w.c() == x.c() && y.c() == w.n() && y.n() == x.n() &&
                  y.h() == conv_out(x.h(), w.h(), p.stride, p.padding) &&
                  y.w() == conv_out(x.w(), w.w(), p.stride, p.padding),
              "conv2d_forward shapes: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  AMPWB_CHECK(w.dtype() == x.dtype() && y.dtype() == x.dtype(),
              "conv2d_forward dtypes differ: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  check_floating(x, "conv2d_forward");
  // 16-bit NHWC channel counts off a multiple of pad_input_channels run zero-padded (see the header).
  const int64_t C = m.padded_channels(x, x.c()), K = m.padded_channels(x, w.n());
  const Tensor xin = C == x.c() ? x : m.pad(x, C);
  const Tensor win = m.pad_weights(m.in_layout(w, x.layout()), K, C);
  Tensor out = y.layout() == x.layout() ? y : m.empty(y.shape(), y.dtype(), x.layout());
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
  AMPWB_CHECK(dx.rank() == 4 && dy.rank() == 4 && w.rank() == 4 && w.c() == dx.c() && dy.c() == w.n() &&
                  dy.n() == dx.n() && dy.h() == conv_out(dx.h(), w.h(), p.stride, p.padding) &&
                  dy.w() == conv_out(dx.w(), w.w(), p.stride, p.padding),
              "conv2d_backward_data shapes: dy " << dy.describe() << " w " << w.describe() << " dx " << dx.describe());
  AMPWB_CHECK(w.dtype() == dy.dtype() && dx.dtype() == dy.dtype(), "conv2d_backward_data dtypes differ: dy "
                                                                       << dy.describe() << " w " << w.describe()
                                                                       << " dx " << dx.describe());
  check_floating(dy, "conv2d_backward_data");
  const Layout layout = dy.layout();
  const int64_t C = m.padded_channels(dy, dx.c()), K = m.padded_channels(dy, dy.c());
  const Tensor dyin = K == dy.c() ? dy : m.pad(dy, K);
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
  AMPWB_CHECK(
      x.rank() == 4 && dy.rank() == 4 && dw.rank() == 4 && dw.c() == x.c() && dy.c() == dw.n() && dy.n() == x.n() &&
          dy.h() == conv_out(x.h(), dw.h(), p.stride, p.padding) &&
          dy.w() == conv_out(x.w(), dw.w(), p.stride, p.padding),
      "conv2d_backward_weights shapes: x " << x.describe() << " dy " << dy.describe() << " dw " << dw.describe());
  AMPWB_CHECK(dy.dtype() == x.dtype(),
              "conv2d_backward_weights dtypes differ: x " << x.describe() << " dy " << dy.describe());
  check_floating(x, "conv2d_backward_weights");
  check_floating(dw, "conv2d_backward_weights dw");
  const Layout layout = x.layout();
  const int64_t C = m.padded_channels(x, x.c()), K = m.padded_channels(x, dy.c());
  const Tensor xin = C == x.c() ? x : m.pad(x, C);
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
  CUDA_OP_ENTRY(&x, &gamma, &beta, &running_mean, &running_var);
  Impl& m = *impl_;
  m.check_device(x, "batch norm x");
  m.check_device(y, "batch norm y");
  check_bn(x, y, {&gamma, &beta, &batch_mean, &batch_var, &running_mean, &running_var});
  const Dims4 d = dims_of(x);
  const int row_blocks = cuda::batchnorm_row_blocks(d, m.props.multiProcessorCount);
  Tensor scratch = m.empty({cuda::batchnorm_scratch_floats(d, row_blocks)}, DType::F32);
  cuda::batchnorm_forward_training(x.data(), y.data(), ktype(x.dtype()), d, gamma.data_as<float>(),
                                   beta.data_as<float>(), batch_mean.data_as<float>(), batch_var.data_as<float>(),
                                   running_mean.data_as<float>(), running_var.data_as<float>(), momentum, eps,
                                   scratch.data_as<float>(), row_blocks, m.stream);
}

void CudaBackend::batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                              const Tensor& running_mean, const Tensor& running_var, float eps) {
  CUDA_OP_ENTRY(&x, &gamma, &beta, &running_mean, &running_var);
  Impl& m = *impl_;
  m.check_device(x, "batch norm x");
  m.check_device(y, "batch norm y");
  check_bn(x, y, {&gamma, &beta, &running_mean, &running_var});
  Tensor scale = m.empty({x.c()}, DType::F32);
  cuda::batchnorm_forward_inference(x.data(), y.data(), ktype(x.dtype()), dims_of(x), gamma.data_as<float>(),
                                    beta.data_as<float>(), running_mean.data_as<float>(), running_var.data_as<float>(),
                                    eps, scale.data_as<float>(), m.stream);
}

void CudaBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& batch_mean,
                                     const Tensor& batch_var, Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) {
  CUDA_OP_ENTRY(&x, &dy, &gamma, &batch_mean, &batch_var);
  Impl& m = *impl_;
  m.check_device(x, "batch norm x");
  m.check_device(dy, "batch norm dy");
  m.check_device(dx, "batch norm dx");
  check_bn(x, dy, {&gamma, &batch_mean, &batch_var, &dgamma, &dbeta});
  check_same(x, dx, "batch norm input and its gradient");
  const Dims4 d = dims_of(x);
  const int row_blocks = cuda::batchnorm_row_blocks(d, m.props.multiProcessorCount);
  Tensor scratch = m.empty({cuda::batchnorm_scratch_floats(d, row_blocks)}, DType::F32);
  cuda::batchnorm_backward(x.data(), dy.data(), dx.data(), ktype(x.dtype()), d, gamma.data_as<float>(),
                           batch_mean.data_as<float>(), batch_var.data_as<float>(), dgamma.data_as<float>(),
                           dbeta.data_as<float>(), eps, scratch.data_as<float>(), row_blocks, m.stream);
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

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  CUDA_OP_ENTRY(&a, &b);
  impl_->check_device(a, "add a");
  impl_->check_device(b, "add b");
  impl_->check_device(y, "add y");
  AMPWB_CHECK(a.shape() == b.shape() && a.shape() == y.shape() && a.dtype() == b.dtype() && a.dtype() == y.dtype(),
              "add operands and output differ: " << a.describe() << " + " << b.describe() << " -> " << y.describe());
  check_floating(a, "add");
  cuda::add(a.data(), dims_of(a), b.data(), dims_of(b), y.data(), dims_of(y), ktype(a.dtype()), impl_->stream);
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
  workspace = m.empty({y.numel()}, DType::U8);
  cuda::maxpool_forward(x.data(), dims_of(x), y.data(), dims_of(y), workspace.data_as<uint8_t>(), ktype(x.dtype()),
                        p.kernel, p.stride, p.padding, m.stream);
}

void CudaBackend::maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) {
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
  s.ab_type = blas_type(x.dtype());
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
  AMPWB_CHECK(x.dtype() == dy.dtype() && w.dtype() == dy.dtype(),
              "linear_backward dtypes differ: dy " << dy.describe() << " x " << x.describe() << " w " << w.describe());
  check_floating(dy, "linear");
  check_floating(dw, "linear dw");
  check_floating(db, "linear db");
  const int64_t N = x.dim(0), I = x.dim(1), O = w.dim(0);
  const DType t = dy.dtype();
  // cuBLASLt writes the input dtype, or FP32 from 16-bit inputs; anything else goes through a temporary.
  auto writable = [&](Tensor& out) {
    return out.dtype() == t || (is16(t) && out.dtype() == DType::F32) ? out : m.empty(out.shape(), t);
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
    s.ab_type = blas_type(t);
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
  s.ab_type = blas_type(t);
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

// ---- Conversion -----------------------------------------------------------------------------------------------

void CudaBackend::convert(const Tensor& src, Tensor& dst) {
  AMPWB_CHECK(src.shape() == dst.shape(), "convert: shapes differ: " << src.describe() << " -> " << dst.describe());
  Impl& m = *impl_;
  if (src.device().is_cpu() && dst.device().is_cpu()) {
    if (!m.cpu) m.cpu = std::make_unique<CpuBackend>();
    return m.cpu->convert(src, dst);
  }
  AMPWB_CHECK(
      (src.device().is_cpu() || src.device() == m.device) && (dst.device().is_cpu() || dst.device() == m.device),
      "convert " << src.describe() << " -> " << dst.describe() << ": this backend runs on " << m.device.str());
  CUDA_OP_ENTRY(&src);
  const bool exact = src.dtype() == dst.dtype() && same_order(src, dst);
  if (src.device().is_cpu()) {  // host to device
    if (exact) return m.host_to_device(src.data(), dst.data(), src.nbytes(), m.to_device, m.stream);
    Tensor staged = m.empty(src.shape(), src.dtype(), src.layout());  // convert on the GPU, not the CPU
    m.host_to_device(src.data(), staged.data(), src.nbytes(), m.to_device, m.stream);
    return cuda::convert(staged.data(), ktype(src.dtype()), dims_of(src), dst.data(), ktype(dst.dtype()), dims_of(dst),
                         m.stream);
  }
  if (dst.device().is_cpu()) {  // device to host: waits for the stream
    if (exact) return m.device_to_host(src.data(), dst.data(), src.nbytes());
    Tensor converted = m.empty(dst.shape(), dst.dtype(), dst.layout());
    cuda::convert(src.data(), ktype(src.dtype()), dims_of(src), converted.data(), ktype(dst.dtype()), dims_of(dst),
                  m.stream);
    return m.device_to_host(converted.data(), dst.data(), dst.nbytes());
  }
  if (src.same_storage(dst) && exact) return;
  cuda::convert(src.data(), ktype(src.dtype()), dims_of(src), dst.data(), ktype(dst.dtype()), dims_of(dst), m.stream);
}

Tensor CudaBackend::upload(const Tensor& host) {
  Impl& m = *impl_;
  AMPWB_CHECK(host.device().is_cpu(), "upload of " << host.describe() << ": expected a host tensor");
  cuda::DeviceScope scope(m.device.index);
  Tensor dev = m.empty(host.shape(), host.dtype(), host.layout());
  if (host.nbytes() == 0) return dev;
  // The block may have been freed by a tensor whose last use is still queued on the compute stream: the copy
  // starts after everything queued so far (and overlaps what is queued next).
  cudaEvent_t queued = nullptr, done = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming));
  try {
    CUDA_CHECK(cudaEventRecord(queued, m.stream));
    CUDA_CHECK(cudaStreamWaitEvent(m.copy_stream, queued, 0));
    m.host_to_device(host.data(), dev.data(), host.nbytes(), m.uploads, m.copy_stream);
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(done, m.copy_stream));
  } catch (...) {
    cudaEventDestroy(queued);
    if (done) cudaEventDestroy(done);
    throw;
  }
  cudaEventDestroy(queued);
  m.pending.push_back({dev, done});
  return dev;
}

void CudaBackend::synchronize() {
  cuda::DeviceScope scope(impl_->device.index);
  CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
}

MemoryStats CudaBackend::memory_stats() const { return cuda_allocator(impl_->device.index).stats(); }
size_t CudaBackend::conv_plans_cached() const { return impl_->conv->plans_cached(); }
std::string CudaBackend::conv_plans() const { return impl_->conv->describe_plans(); }

// ---- Loss and optimizers ------------------------------------------------------------------------------------------

void CudaBackend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                        float grad_scale, Tensor& dlogits) {
  CUDA_OP_ENTRY(&logits, &labels);
  Impl& m = *impl_;
  m.check_device(logits, "softmax_cross_entropy logits");
  m.check_device(labels, "softmax_cross_entropy labels");
  m.check_device(dlogits, "softmax_cross_entropy dlogits");
  AMPWB_CHECK(logits.rank() == 2 && logits.dtype() == DType::F32 && labels.dtype() == DType::I32 &&
                  labels.numel() == logits.dim(0),
              "softmax_cross_entropy: logits " << logits.describe() << " labels " << labels.describe());
  check_same(logits, dlogits, "logits and their gradient");
  const int64_t N = logits.dim(0), K = logits.dim(1);
  AMPWB_CHECK(N > 0 && K > 0, "softmax_cross_entropy of an empty batch: " << logits.describe());
  Tensor row_loss = m.bytes(static_cast<size_t>(N) * sizeof(double));  // one double per row
  cuda::softmax_cross_entropy(logits.data_as<float>(), labels.data_as<int32_t>(), N, K, label_smoothing, grad_scale,
                              dlogits.data_as<float>(), static_cast<double*>(row_loss.data()), m.device_loss(),
                              m.stream);
  m.classes = K;  // for read_scalars()' message on a bad label
}

void CudaBackend::sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdParams& p) {
  CUDA_OP_ENTRY(&param, &grad);
  Impl& m = *impl_;
  m.check_device(param, "SGD parameter");
  m.check_device(grad, "SGD gradient");
  check_same(param, grad, "SGD parameter and gradient");
  AMPWB_CHECK(param.dtype() == DType::F32, "SGD updates FP32 master weights, got " << param.describe());
  float* buffer = nullptr;
  if (p.momentum != 0.0f) {
    m.check_device(momentum_buffer, "SGD momentum buffer");
    check_same(param, momentum_buffer, "SGD parameter and momentum buffer");
    buffer = momentum_buffer.data_as<float>();
  }
  cuda::sgd_update(param.data_as<float>(), grad.data_as<float>(), buffer, param.numel(), p.lr, p.momentum,
                   p.weight_decay, p.nesterov, p.first_step, m.stream);
}

void CudaBackend::adam_update(Tensor& param, const Tensor& grad, Tensor& mt, Tensor& vt, const AdamParams& p) {
  CUDA_OP_ENTRY(&param, &grad, &mt, &vt);
  Impl& m = *impl_;
  m.check_device(param, "Adam parameter");
  m.check_device(grad, "Adam gradient");
  m.check_device(mt, "Adam first moment");
  m.check_device(vt, "Adam second moment");
  check_same(param, grad, "Adam parameter and gradient");
  check_same(param, mt, "Adam parameter and first moment");
  check_same(param, vt, "Adam parameter and second moment");
  AMPWB_CHECK(param.dtype() == DType::F32, "Adam updates FP32 master weights, got " << param.describe());
  // The bias corrections in double on the host, as the CPU backend.
  const double t = static_cast<double>(p.step);
  const float step_size = static_cast<float>(p.lr / (1.0 - std::pow(p.beta1, t)));
  const float bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(p.beta2, t)));
  const float decay = p.decoupled_weight_decay ? 1.0f - p.lr * p.weight_decay : 1.0f;
  const float l2 = p.decoupled_weight_decay ? 0.0f : p.weight_decay;
  cuda::adam_update(param.data_as<float>(), grad.data_as<float>(), mt.data_as<float>(), vt.data_as<float>(),
                    param.numel(), p.beta1, p.beta2, p.eps, step_size, bias2_sqrt, decay, l2, m.stream);
}

void CudaBackend::scale_and_check(const std::vector<Tensor*>& tensors, float factor) {
  cuda::DeviceScope device_scope(impl_->device.index);
  Impl& m = *impl_;
  std::vector<cuda::ScaleSegment> segments;
  int64_t chunks = 0;
  for (Tensor* t : tensors) {
    AMPWB_CHECK(t && t->defined(), "scale_and_check of an undefined tensor");
    m.ready({t});
    m.check_device(*t, "scale_and_check tensor");
    AMPWB_CHECK(t->dtype() == DType::F32, "scale_and_check expects FP32 tensors, got " << t->describe());
    if (t->numel() == 0) continue;
    segments.push_back({t->data_as<float>(), t->numel(), chunks});
    chunks += (t->numel() + cuda::kScaleChunk - 1) / cuda::kScaleChunk;
  }
  CUDA_CHECK(cudaMemsetAsync(m.device_scale(), 0, sizeof(cuda::ScaleResult), m.stream));
  if (segments.empty()) return;
  const size_t segment_bytes = segments.size() * sizeof(cuda::ScaleSegment);
  Tensor device_segments = m.bytes(segment_bytes);
  m.host_to_device(segments.data(), device_segments.data(), segment_bytes, m.to_device, m.stream);
  const int blocks = static_cast<int>(std::min<int64_t>({chunks, int64_t{4} * m.props.multiProcessorCount, 1024}));
  Tensor partials = m.bytes(static_cast<size_t>(blocks) * sizeof(double));
  cuda::scale_and_check(static_cast<const cuda::ScaleSegment*>(device_segments.data()),
                        static_cast<int>(segments.size()), chunks, factor, static_cast<double*>(partials.data()),
                        blocks, m.device_scale(), m.stream);
}

StepScalars CudaBackend::read_scalars() {
  cuda::DeviceScope device_scope(impl_->device.index);
  Impl& m = *impl_;
  const Impl::Results& r = m.read_results();
  AMPWB_CHECK(!r.loss.bad_label, "label " << r.loss.label << " outside [0, " << m.classes << ")");
  return {r.loss.loss, r.loss.correct, r.scale.nonfinite != 0, r.scale.sum_of_squares};
}

}  // namespace ampwb
