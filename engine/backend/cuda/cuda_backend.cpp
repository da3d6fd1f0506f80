// The CUDA backend's construction (device checks, streams, cuDNN and cuBLASLt handles), its description and
// capabilities, and the host<->device copies: convert() through pinned staging buffers, upload() on the copy stream.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_device.h"

namespace ampwb {

using cuda_detail::dims_of;
using cuda_detail::ktype;

namespace {

// Whether two tensors of one logical shape store their elements in the same order.
bool same_order(const Tensor& a, const Tensor& b) {
  if (a.rank() != 4 || b.rank() != 4 || a.layout() == b.layout()) return true;
  return a.c() == 1 || (a.h() == 1 && a.w() == 1);
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

}  // namespace

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
  // Settings for experiments on a lent GPU, from the environment. AMPWB_CUDNN_BENCHMARK=0 lets cuDNN's heuristics
  // choose (under compute-sanitizer, timing every algorithm of every shape would take longer than a lent GPU's call);
  // AMPWB_CUDNN_WORKSPACE_MIB sets the convolution workspace limit, timed choices' too; AMPWB_CUDNN_EXACT_FP32=0|1
  // allows or forbids FFT and Winograd algorithms in strict FP32; AMPWB_CUDNN_PLANS=1 prints the chosen algorithms at
  // exit; AMPWB_CUDA_FP32_NCHW=1 runs strict FP32 convolutions in NCHW (Impl::conv_layout); AMPWB_CUDA_FUSED_ENDS=0
  // runs a residual block's end as separate ops (batch norm, add + ReLU; add, relu_backward), and
  // AMPWB_CUDA_FP8_FUSED_SCALES=0 amp-fp8's scale-inverses in a pass of their own after the convolution, and
  // AMPWB_CUDA_FP8_PASSES=fp8 its passes on FP8 tensor cores wherever cuDNN has an engine (not the faster), for A/B
  // runs; AMPWB_CUDNN_GRAPH_API=0 runs the convolutions on the legacy API only, =1 on the graph API wherever it takes
  // them (untimed against the legacy API), =auto (or unset) on the faster of both per shape where the build has
  // cudnn-frontend; AMPWB_CUDNN_RUNTIME_COMPILED=0 leaves out the graph API's engines that NVRTC compiles.
  const auto setting = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v && *v ? std::optional<std::string>(v) : std::nullopt;
  };
  cuda::ConvPolicy conv;
  // Deterministic runs let cuDNN's heuristics choose: timing picks among near-equal algorithms by the clock, which
  // can choose another one, rounding otherwise, in the next process (PyTorch's reproducibility notes: benchmark off).
  conv.benchmark =
      options.benchmark_algorithms && !options.deterministic && setting("AMPWB_CUDNN_BENCHMARK").value_or("1") != "0";
  conv.workspace_limit = options.conv_workspace_limit;
  if (const auto mib = setting("AMPWB_CUDNN_WORKSPACE_MIB")) {
    AMPWB_CHECK(!mib->empty() && mib->size() <= 7 && mib->find_first_not_of("0123456789") == std::string::npos,
                "AMPWB_CUDNN_WORKSPACE_MIB must be a whole number of MiB, got '" << *mib << "'");
    conv.workspace_limit = conv.large_workspace_limit = std::stoull(*mib) << 20;  // for timed choices too
  }
  conv.exact_fp32 = options.exact_fp32_convolutions;
  if (const auto exact = setting("AMPWB_CUDNN_EXACT_FP32")) conv.exact_fp32 = *exact != "0";
  conv.deterministic = options.deterministic;
  conv.runtime_compiled = setting("AMPWB_CUDNN_RUNTIME_COMPILED").value_or("1") != "0";
  const std::string graph_api = setting("AMPWB_CUDNN_GRAPH_API").value_or("auto");
  AMPWB_CHECK(graph_api == "0" || graph_api == "1" || graph_api == "auto",
              "AMPWB_CUDNN_GRAPH_API must be 0 (the legacy API), 1 (the graph API) or auto (the faster), got '"
                  << graph_api << "'");
  conv.api = graph_api == "1"                                       ? cuda::ConvApi::Graph
             : graph_api == "0" || !cuda::GraphApiConvs::compiled() ? cuda::ConvApi::Legacy
                                                                    : cuda::ConvApi::Fastest;
  m.print_plans = setting("AMPWB_CUDNN_PLANS").value_or("0") != "0";
  m.fp32_conv_nchw = setting("AMPWB_CUDA_FP32_NCHW").value_or("0") != "0";
  m.fused_block_ends = setting("AMPWB_CUDA_FUSED_ENDS").value_or("1") != "0";
  m.fp8_fused_scales = setting("AMPWB_CUDA_FP8_FUSED_SCALES").value_or("1") != "0";
  const std::string fp8_passes = setting("AMPWB_CUDA_FP8_PASSES").value_or("fastest");
  AMPWB_CHECK(fp8_passes == "fp8" || fp8_passes == "fastest",
              "AMPWB_CUDA_FP8_PASSES must be fp8 (FP8 tensor cores where cuDNN has an engine) or fastest, got '"
                  << fp8_passes << "'");
  m.fp8_fastest_passes = fp8_passes == "fastest";
  m.conv = std::make_unique<cuda::ConvRunner>(m.cudnn, conv);
  m.matmul = std::make_unique<cuda::MatmulRunner>(m.cublas);
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m.host_results), sizeof(Impl::Results), cudaHostAllocDefault));
  m.device_results = m.bytes(sizeof(Impl::Results));
  CUDA_CHECK(cudaMemsetAsync(m.device_results.data(), 0, sizeof(Impl::Results), m.stream));
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m.posted), 2 * sizeof(Impl::Posted), cudaHostAllocDefault));
  for (cudaEvent_t& e : m.posted_done) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

CudaBackend::~CudaBackend() {
  if (impl_) {
    if (impl_->print_plans) std::fprintf(stderr, "cuDNN convolution plans:\n%s", conv_plans().c_str());
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
      << (m.options.allow_tf32 ? "on" : "off") << (m.options.deterministic ? "; deterministic convolutions" : "")
      << ")";
  return out.str();
}

size_t CudaBackend::free_memory_bytes() const {
  cuda::DeviceScope scope(impl_->device.index);
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) free_bytes = 0;  // unknown: the check is skipped
  cudaGetLastError();
  return free_bytes;
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
  // FP8 tensor cores: Ada (8.9), Hopper (9.0) and later. cuDNN has FP8 convolutions on its graph API alone.
  const bool fp8_cores = m.props.major * 10 + m.props.minor >= 89;
  if (!fp8_cores)
    caps.fp8 = {false, false,
                "FP8 tensor cores need compute capability 8.9 (Ada) or 9.0 (Hopper); this GPU is " + caps.isa +
                    ": the CPU emulates amp-fp8 exactly",
                0, ""};
  else if (!cuda::GraphApiConvs::compiled())
    caps.fp8 = {false, false,
                "FP8 convolutions need cuDNN's graph API, and this build has no cudnn-frontend: "
                "scripts/install-deps.sh fetches its headers, then rebuild",
                0, ""};
  else
    caps.fp8 = {true, true,
                "native on FP8 tensor cores (cuDNN's graph API, cuBLASLt; E4M3 and E5M2 inputs, FP32 accumulation); "
                "a shape without an FP8 engine multiplies its FP8 values, exactly, in FP16 or FP32",
                0, ""};
  return caps;
}

void CudaBackend::set_allow_tf32(bool allow) { impl_->options.allow_tf32 = allow; }
bool CudaBackend::allow_tf32() const { return impl_->options.allow_tf32; }

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
  m.refuse_while_capturing("an upload (upload before the capture)");
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

std::vector<Tensor> CudaBackend::download(const std::vector<Tensor>& tensors) {
  Impl& m = *impl_;
  cuda::DeviceScope scope(m.device.index);
  constexpr size_t kAlign = 16;
  std::vector<size_t> offsets(tensors.size());
  size_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    offsets[i] = total;
    if (tensors[i].device() == m.device) total += (tensors[i].nbytes() + kAlign - 1) / kAlign * kAlign;
  }
  std::vector<Tensor> host(tensors.size());
  char* staged = nullptr;
  if (total > 0) {
    m.refuse_while_capturing("a copy to the host");
    staged = static_cast<char*>(m.downloads.acquire(total));
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      if (t.device() != m.device || t.nbytes() == 0) continue;
      m.ready({&t});
      CUDA_CHECK(cudaMemcpyAsync(staged + offsets[i], t.data(), t.nbytes(), cudaMemcpyDeviceToHost, m.stream));
    }
    m.downloads.recorded(m.stream);
    CUDA_CHECK(cudaStreamSynchronize(m.stream));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.device() != m.device) {
      host[i] = on_host(*this, t);  // the host's, or another device's
      continue;
    }
    host[i] = Tensor::empty(t.shape(), t.dtype(), t.layout());
    if (t.nbytes() > 0) std::memcpy(host[i].data(), staged + offsets[i], t.nbytes());
  }
  return host;
}

void CudaBackend::synchronize() {
  cuda::DeviceScope scope(impl_->device.index);
  impl_->refuse_while_capturing("a wait for the device");
  CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
}

MemoryStats CudaBackend::memory_stats() const { return cuda_allocator(impl_->device.index).stats(); }

void* CudaBackend::compute_stream() const { return impl_->stream; }
size_t CudaBackend::conv_plans_cached() const { return impl_->conv->plans_cached(); }
std::string CudaBackend::conv_plans() const {
  std::string out = impl_->conv->describe_plans();
  for (const auto& [key, choice] : impl_->fp8_choices) {
    out += key + ": amp-fp8's pass " +
           (choice.way == Impl::Fp8Way::Fp8 ? "on FP8 tensor cores" : "on its values widened to FP16");
    out += choice.timing.empty() ? "\n" : " (" + choice.timing + ")\n";
  }
  return out;
}
std::string CudaBackend::matmul_plans() const { return impl_->matmul->describe(); }

}  // namespace ampwb
