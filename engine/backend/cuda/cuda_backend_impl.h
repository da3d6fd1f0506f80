// The inside of the CUDA backend, shared by the cuda_backend*.cpp files: dtype and shape helpers, the pinned staging
// buffers (PinnedRing), CudaBackend::Impl (streams, library handles, device results) and CUDA_OP_ENTRY.
// Internal to engine/backend/cuda; host code only.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_library_check.h"

namespace ampwb {

// Helpers for the cuda_backend*.cpp files (each names the ones it uses).
namespace cuda_detail {

using cuda::Dims4;
using cuda::KType;

inline KType ktype(DType t) {
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
    case DType::F8E4M3:
      return KType::F8E4M3;
    case DType::F8E5M2:
      return KType::F8E5M2;
  }
  throw Error("unknown dtype");
}

inline cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDNN_DATA_FLOAT;
    case DType::F16:
      return CUDNN_DATA_HALF;
    case DType::BF16:
      return CUDNN_DATA_BFLOAT16;
    case DType::F8E4M3:  // the graph API's FP8 convolutions (ConvRunner::fp8) only
      return CUDNN_DATA_FP8_E4M3;
    case DType::F8E5M2:
      return CUDNN_DATA_FP8_E5M2;
    default:
      throw Error(std::string("cuDNN convolutions take FP32, FP16, BF16 or FP8, not ") + dtype_name(t));
  }
}

// A tensor as the kernels see it: 4-D with its layout, other ranks as a flat row.
inline Dims4 dims_of(const Tensor& t) {
  if (t.rank() == 4) return {t.n(), t.c(), t.h(), t.w(), t.layout() == Layout::NHWC};
  return {t.numel(), 1, 1, 1, false};
}

inline int64_t conv_out(int64_t in, int64_t kernel, int stride, int padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

// A convolution's x (N,C,H,W), w (K,C,R,S) and y (N,K,P,Q), whichever pass names them (dx, dw, dy), agree.
inline void check_conv_shapes(const Tensor& x, const Tensor& w, const Tensor& y, ConvParams p, const char* op) {
  AMPWB_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4 && w.c() == x.c() && y.c() == w.n() && y.n() == x.n() &&
                  y.h() == conv_out(x.h(), w.h(), p.stride, p.padding) &&
                  y.w() == conv_out(x.w(), w.w(), p.stride, p.padding),
              op << " shapes: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
}

inline void check_same(const Tensor& a, const Tensor& b, const char* what) {
  AMPWB_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.layout() == b.layout(),
              what << ": " << a.describe() << " and " << b.describe() << " differ");
}

inline void check_floating(const Tensor& t, const char* what) {
  AMPWB_CHECK(is_floating(t.dtype()), what << ": expected an FP32, FP16 or BF16 tensor, got " << t.describe());
}

inline int to_int(int64_t v, const char* what) {
  AMPWB_CHECK(v >= 0 && v <= 0x7fffffff, what << " " << v << " exceeds cuDNN's 32-bit dimensions");
  return static_cast<int>(v);
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

}  // namespace cuda_detail

// An allocator pool for captured steps, released when the last graph holding it is gone (cuda_graph.cpp).
struct CapturePool {
  CapturePool(Allocator& allocator, int id) : allocator(allocator), id(id) {}
  ~CapturePool() { allocator.release_pool(id); }
  CapturePool(const CapturePool&) = delete;
  CapturePool& operator=(const CapturePool&) = delete;
  Allocator& allocator;
  const int id;
};

struct CudaBackend::Impl {
  CudaBackendOptions options;
  Device device;
  cudaDeviceProp props{};
  cudaStream_t stream = nullptr;       // every op
  cudaStream_t copy_stream = nullptr;  // upload
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t cublas = nullptr;
  std::unique_ptr<cuda::ConvRunner> conv;
  bool print_plans = false;      // AMPWB_CUDNN_PLANS=1: the chosen algorithms on stderr when the backend closes
  bool fp32_conv_nchw = false;   // AMPWB_CUDA_FP32_NCHW=1: see conv_layout()
  bool fused_block_ends = true;  // AMPWB_CUDA_FUSED_ENDS=0: batchnorm_add_relu_*, relu_backward_of_sum as two ops
  bool fp8_fused_scales = true;  // AMPWB_CUDA_FP8_FUSED_SCALES=0: conv2d_*_scaled as the ops they compose
  // How each of amp-fp8's convolution passes runs (CudaBackend::fp8_pass), by its plan key, chosen on its first call;
  // AMPWB_CUDA_FP8_PASSES=fp8 keeps every pass on FP8 tensor cores where cuDNN has an engine, untimed.
  enum class Fp8Way { Neither, Fp8, Widened };
  struct Fp8Choice {
    Fp8Way way = Fp8Way::Neither;
    std::string timing;  // "FP8 0.259 ms, widened 0.120 ms + 0.050 ms to widen", where both were timed
  };
  std::unordered_map<std::string, Fp8Choice> fp8_choices;
  bool fp8_fastest_passes = true;
  std::unique_ptr<cuda::MatmulRunner> matmul;
  Tensor matmul_workspace;  // U8, MatmulRunner::kWorkspaceBytes
  cuda_detail::PinnedRing to_device, uploads, downloads;
  // Small results read back by the host: a pinned mirror and the device original.
  struct Results {
    cuda::LossResult loss;
    cuda::ScaleResult scale;
  };
  Results* host_results = nullptr;
  Tensor device_results;  // U8, sizeof(Results)
  // post_scalars(): two pinned slots used in turn, each with the event of the copies into it.
  struct Posted {
    Results results;
    cuda::LossScaleDevice loss_scale;
  };
  Posted* posted = nullptr;  // 2 slots
  std::array<cudaEvent_t, 2> posted_done{};
  std::array<bool, 2> posted_has_loss_scale{};
  int posted_first = 0, posted_count = 0;
  // mark(): timing events, reused after clear_marks().
  std::vector<cudaEvent_t> marks;
  size_t marks_used = 0;
  int64_t classes = 0;  // of the last softmax_cross_entropy
  struct Pending {
    Tensor tensor;  // kept alive until its copy is done
    cudaEvent_t done = nullptr;
  };
  std::vector<Pending> pending;      // upload copies not yet waited for
  std::unique_ptr<CpuBackend> cpu;   // host-to-host conversions
  bool capturing = false;            // capture() is recording the compute stream
  int capture_pool = 0;              // the allocator's pool it fills
  // The pool every captured step's memory comes from (cuda_graph.cpp), while a graph lives that uses it.
  std::weak_ptr<CapturePool> captures_pool;
  std::vector<Tensor> capture_kept;  // device memory the graph reads but the host wrote (bytes_beside_capture)
  // The tables of segments the multi-tensor kernels read: scale_and_check's gradients and the optimizers'
  // parameters. Each is kept while the same tensors come (every step's): no upload per step, and none inside a
  // captured step, which makes its own (beside its pool, kept alive by the graph).
  template <class Segment>
  struct SegmentTable {
    std::vector<Segment> host;
    Tensor device;
  };
  SegmentTable<cuda::ScaleSegment> scale_table;
  SegmentTable<cuda::UpdateSegment> update_table;

  // The grid of a multi-tensor kernel over `chunks` chunks.
  int multi_tensor_blocks(int64_t chunks) const {
    return static_cast<int>(std::min<int64_t>({chunks, int64_t{4} * props.multiProcessorCount, 1024}));
  }
  // The table on the device, uploaded where it differs from the last one (same: Segment equality).
  template <class Segment>
  const Segment* device_table(SegmentTable<Segment>& table, std::vector<Segment> segments,
                              bool (*same)(const Segment&, const Segment&)) {
    if (!table.device.defined() ||
        !std::equal(segments.begin(), segments.end(), table.host.begin(), table.host.end(), same)) {
      const size_t n = segments.size() * sizeof(Segment);
      table.device = capturing ? bytes_beside_capture(n) : bytes(n);
      if (capturing) {  // copied now, on the other stream, so that the graph holds no copy from the host
        host_to_device(segments.data(), table.device.data(), n, to_device, copy_stream);
        CUDA_CHECK(cudaStreamSynchronize(copy_stream));
      } else {
        host_to_device(segments.data(), table.device.data(), n, to_device, stream);
      }
      table.host = std::move(segments);
    }
    return static_cast<const Segment*>(table.device.data());
  }

  // Device memory that the host writes while a step is captured, for the graph to read: outside the capture's pool,
  // whose blocks the graph's own ops may write (a block freed by one captured op is another's scratch), and kept
  // alive by the graph.
  Tensor bytes_beside_capture(size_t n) {
    Allocator& allocator = allocator_for(device);
    allocator.end_pool();
    Tensor t = bytes(n);
    allocator.begin_pool(capture_pool);
    capture_kept.push_back(t);
    return t;
  }

  // What a captured step cannot hold: the op that tried says what it did.
  void refuse_while_capturing(const char* what) const {
    if (capturing) throw Error(std::string("a captured step cannot hold ") + what);
  }

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
    if (posted) cudaFreeHost(posted);
    for (cudaEvent_t e : posted_done)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : marks) cudaEventDestroy(e);
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
        refuse_while_capturing("a read of an upload still copying (upload it before the capture)");
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

  // The milliseconds of the work fn queues on the stream (waits for it: not while capturing).
  template <class Fn>
  float timed_on_stream(const Fn& fn) {
    refuse_while_capturing("a timing, which waits for the device");
    cuda::StreamTimer timer(stream);
    timer.start();
    fn();
    return timer.stop();
  }

  // t in `layout`: itself, or a reordered device copy.
  Tensor in_layout(const Tensor& t, Layout layout) {
    if (t.layout() == layout || t.rank() != 4) return t;
    Tensor out = empty(t.shape(), t.dtype(), layout);
    cuda::convert(t.data(), cuda_detail::ktype(t.dtype()), cuda_detail::dims_of(t), out.data(),
                  cuda_detail::ktype(out.dtype()), cuda_detail::dims_of(out), stream);
    return out;
  }

  // The channel count c is padded to in an NHWC 16-bit convolution (input channels C or output channels K): c when
  // it needs no padding.
  int64_t padded_channels(const Tensor& x, int64_t c) const {
    const int64_t to = options.pad_input_channels;
    if (to <= 1 || x.layout() != Layout::NHWC || !is_16bit(x.dtype()) || c % to == 0) return c;
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

  // The layout a convolution runs in: its activations' own, except strict FP32 in NCHW where fp32_conv_nchw asks.
  // An experiment (AMPWB_CUDA_FP32_NCHW=1): in NHWC, cuDNN's legacy API offers only implicit-GEMM algorithms for
  // FP32, 9x slower than PyTorch's (docs/benchmarks.md); NCHW has its classic kernels, at the price of transposes.
  Layout conv_layout(const Tensor& activations) const {
    return fp32_conv_nchw && activations.dtype() == DType::F32 && !options.allow_tf32 ? Layout::NCHW
                                                                                      : activations.layout();
  }

  cuda::ConvMath conv_math(DType t) const {
    if (t != DType::F32) return cuda::ConvMath::TensorOp;
    return options.allow_tf32 ? cuda::ConvMath::Tf32 : cuda::ConvMath::Fp32;
  }

  cuda::ConvShape conv_shape(const Tensor& x, const Tensor& w, const Tensor& y, ConvParams p) const {
    cuda::ConvShape s;
    s.n = cuda_detail::to_int(x.n(), "batch");
    s.c = cuda_detail::to_int(x.c(), "channels");
    s.h = cuda_detail::to_int(x.h(), "height");
    s.w = cuda_detail::to_int(x.w(), "width");
    s.k = cuda_detail::to_int(w.n(), "output channels");
    s.r = cuda_detail::to_int(w.h(), "kernel height");
    s.s = cuda_detail::to_int(w.w(), "kernel width");
    s.p = cuda_detail::to_int(y.h(), "output height");
    s.q = cuda_detail::to_int(y.w(), "output width");
    s.stride = p.stride;
    s.padding = p.padding;
    s.dtype = cuda_detail::cudnn_type(x.dtype());
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
  void host_to_device(const void* host, void* dev, size_t n, cuda_detail::PinnedRing& ring, cudaStream_t on) {
    if (n == 0) return;
    if (on == stream) refuse_while_capturing("a copy from the host");
    void* staged = ring.acquire(n);
    std::memcpy(staged, host, n);
    CUDA_CHECK(cudaMemcpyAsync(dev, staged, n, cudaMemcpyHostToDevice, on));
    ring.recorded(on);
  }

  void device_to_host(const void* dev, void* host, size_t n) {
    if (n == 0) return;
    refuse_while_capturing("a copy to the host");
    CUDA_CHECK(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  Results& read_results() {
    refuse_while_capturing("a read of the step's results (read_scalars)");
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

}  // namespace ampwb
