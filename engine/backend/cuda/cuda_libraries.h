// The CUDA backend's use of cuDNN (convolutions) and cuBLASLt (matrix products): plans chosen once per shape and
// cached under an explicit key, workspaces bounded and sized before execution. Internal to engine/backend/cuda;
// host code only (compiled by the host compiler).
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ampwb::cuda {

// Device scratch memory for one call: returns a pointer valid until the call's work is queued (the backend hands
// out caching-allocator blocks, which stream order makes safe to reuse afterwards). May throw ampwb::Error (out of
// memory).
using ScratchFn = std::function<void*(size_t bytes)>;

// "12.0 MiB" and "0.120 ms", for the plans' descriptions and refusals.
std::string mib(size_t bytes);
std::string ms_text(float ms);

// ---- cuDNN convolutions -----------------------------------------------------------------------------------------

enum class ConvMath {
  Fp32,     // strict FP32: CUDNN_FMA_MATH, no TF32
  Tf32,     // FP32 data on TF32 tensor cores: CUDNN_DEFAULT_MATH (cuDNN allows TF32 there on sm_80+)
  TensorOp  // FP16 / BF16 data with FP32 accumulation: CUDNN_TENSOR_OP_MATH
};

// One convolution: x (N,C,H,W), w (K,C,R,S), y (N,K,P,Q), all of one dtype, w in x's layout (NHWC: KRSC).
struct ConvShape {
  int n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, p = 0, q = 0;
  int stride = 1, padding = 0;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  bool nhwc = false;
  ConvMath math = ConvMath::Fp32;
  // A pass of amp-fp8 (ConvRunner::mixed runs it): its two inputs in these types (forward x, w; backward data dy, w;
  // backward filter x, dy), its output in dtype (FP32). The types are CUDNN_DATA_FP8_E4M3 or _E5M2, or
  // CUDNN_DATA_HALF for FP8 values widened to FP16, which holds every E4M3 and E5M2 value exactly.
  bool mixed = false;
  cudnnDataType_t a_type = CUDNN_DATA_FLOAT, b_type = CUDNN_DATA_FLOAT;
  bool fp8_inputs() const { return a_type == CUDNN_DATA_FP8_E4M3 || a_type == CUDNN_DATA_FP8_E5M2; }
  // A mixed pass whose result is multiplied by a factor in device memory given with each run, in FP32 in the graph's
  // epilogue, before it is rounded to dtype (FP32, FP16 or BF16).
  bool scaled = false;
  std::string key(const char* op) const;  // "fwd n256 c64 h56 ... f16 nhwc tensor-op"
};

enum class ConvPass { Forward, BackwardData, BackwardFilter };
const char* pass_key(ConvPass pass);  // "fwd", "bwd-data", "bwd-filter": how plans name the pass

// Which cuDNN API runs a pass: the legacy one only; the graph API, the legacy one where it refuses a shape; or both
// timed on each pass and shape's first call, the faster kept (without timing, the graph API where it takes it).
enum class ConvApi { Legacy, Graph, Fastest };

// How convolutions are chosen: PyTorch's policy with torch.backends.cudnn.benchmark by default (every engine the
// math mode allows, FFT, Winograd, non-deterministic and runtime-compiled ones included, the fastest timed).
struct ConvPolicy {
  size_t workspace_limit = size_t{256} << 20;  // bounds the workspace of what cuDNN's heuristics choose
  // A timed choice may take a workspace up to large_workspace_limit, where that runs large_workspace_speedup times
  // faster than the fastest within workspace_limit (choose_timed): cuDNN's strided backward-data passes in NHWC FP32
  // need the gradient upsampled in their workspace, 0.4-1.5 GiB on ResNet-50 at batch 256, or run 50x slower.
  size_t large_workspace_limit = size_t{4} << 30;
  float large_workspace_speedup = 1.25f;
  bool benchmark = true;       // time the candidates once per shape (cudnnFind, like cudnn.benchmark), else heuristics
  bool exact_fp32 = false;     // strict FP32 on GEMM-based algorithms only (no FFT or Winograd)
  bool deterministic = false;  // deterministic algorithms and engines only (torch.backends.cudnn.deterministic)
  bool runtime_compiled = true;  // the graph API's engines that NVRTC compiles on first use, seconds each
  ConvApi api = ConvApi::Fastest;
};

// A candidate algorithm or engine as its timing measured it.
struct TimedCandidate {
  float ms = 0;          // per run
  size_t workspace = 0;  // bytes
};
// The index of the candidate to keep: the fastest within policy.workspace_limit, or a faster one within
// policy.large_workspace_limit where it runs policy.large_workspace_speedup times faster than that (or nothing fits
// the smaller limit); -1 where none fits either. Bigger workspaces raise the step's peak memory, so they must pay.
int choose_timed(const std::vector<TimedCandidate>& candidates, const ConvPolicy& policy);

// Convolutions on cuDNN's graph API through cudnn-frontend, where the build has its headers (compiled()): one graph
// per pass and shape, its engine chosen like the legacy algorithms (timed, or cuDNN's heuristics), the same math
// rules. A pass the graph API refuses for a shape, or that the legacy API runs faster (decline()), is left to the
// legacy API, and the reason kept (describe()).
class GraphApiConvs {
 public:
  static bool compiled();  // false: the constructor throws
  GraphApiConvs(cudnnHandle_t handle, const ConvPolicy& policy);
  ~GraphApiConvs();
  GraphApiConvs(const GraphApiConvs&) = delete;
  GraphApiConvs& operator=(const GraphApiConvs&) = delete;

  // One pass: inputs a, b (forward: x, w; backward data: dy, w; backward filter: x, dy) and its output. False where
  // the graph API has no plan for it: the caller runs the legacy API. While capturing, a shape not yet planned throws.
  // scale: a scaled shape's factor, one FP32 value in device memory.
  bool run(ConvPass pass, const ConvShape& shape, const void* a, const void* b, void* out, const ScratchFn& scratch,
           bool capturing, const float* scale = nullptr);
  // The chosen engine's time per run and workspace, as its timing measured it; ms negative where nothing was timed.
  TimedCandidate timed(ConvPass pass, const ConvShape& shape) const;
  // The pass and shape go to the legacy API from now on, for this reason.
  void decline(ConvPass pass, const ConvShape& shape, const std::string& reason);
  // The graph of one pass checked by the frontend on the host (no GPU needed): "" or why it is invalid. With
  // `epilogue`, the form a mixed pass takes where the graph of one node finds no engine.
  static std::string validate(ConvPass pass, const ConvShape& shape, bool epilogue = false);
  // "fwd ...: graph API, engine NAME, 12.0 MiB workspace, 0.120 ms" or "...: legacy API (REASON)", one per line.
  std::string describe() const;
  size_t plans_run() const;  // the passes and shapes the graph API runs

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ConvRunner {
 public:
  // Algorithms and engines are chosen once per shape under the policy: timed (the legacy API's cudnnFind*Ex, the
  // graph API's candidates) or by cuDNN's heuristics. ConvApi::Graph and Fastest need compiled() graph API.
  ConvRunner(cudnnHandle_t handle, const ConvPolicy& policy);
  ~ConvRunner();
  ConvRunner(const ConvRunner&) = delete;
  ConvRunner& operator=(const ConvRunner&) = delete;

  void forward(const ConvShape& shape, const void* x, const void* w, void* y, const ScratchFn& scratch);
  void backward_data(const ConvShape& shape, const void* dy, const void* w, void* dx, const ScratchFn& scratch);
  void backward_filter(const ConvShape& shape, const void* x, const void* dy, void* dw, const ScratchFn& scratch);
  // A mixed pass (shape.mixed, NHWC) on cuDNN's graph API, which alone has FP8 convolutions and outputs in another
  // type than the inputs': false where the build has no cudnn-frontend or cuDNN offers no engine for it
  // (describe_plans() says why); the caller then computes it another way.
  bool mixed(ConvPass pass, const ConvShape& shape, const void* a, const void* b, void* out, const ScratchFn& scratch,
             const float* scale = nullptr);
  // The chosen engine's time per run of a mixed pass run before, where its engines were timed; else -1.
  float mixed_ms(ConvPass pass, const ConvShape& shape) const;

  // The passes and shapes planned, on either API.
  size_t plans_cached() const;
  // While a step is captured: a shape whose algorithm is not chosen yet is refused (a search cannot be recorded).
  void set_capturing(bool capturing) { capturing_ = capturing; }
  bool capturing() const { return capturing_; }
  bool timed_choices() const { return policy_.benchmark; }  // each shape's engines timed, not the heuristics'
  // "fwd ...: algo 1 (tensor-op), 12.0 MiB workspace" for each cached plan, one per line (for verbose reports).
  std::string describe_plans() const;

 private:
  struct Plan;
  Plan& plan(const std::string& key, const ConvShape& shape);
  // The workspace for a Find: the limit, or less when the GPU cannot spare it; size receives what was allocated.
  void* find_workspace(const ScratchFn& scratch, size_t& size) const;
  // A pass's cuDNN calls, for prepare().
  template <class MaxCount, class Find, class Heuristics, class WorkspaceOf>
  struct SearchCalls;
  // The workspace for this call of a plan, its algorithm chosen first if this is its first call (cuda_conv.cpp).
  template <class Perf, class Calls>
  void* prepare(Plan& p, const std::string& key, ConvMath math, const ScratchFn& scratch, const Calls& calls);
  // One pass on the API the policy picks for its shape (the legacy one through calls and execute(workspace)).
  template <class Perf, class Calls, class Execute>
  void run(ConvPass pass, Plan& p, const std::string& key, const ConvShape& s, const void* a, const void* b, void* out,
           const ScratchFn& scratch, const Calls& calls, const Execute& execute);

  cudnnHandle_t handle_;
  ConvPolicy policy_;
  bool capturing_ = false;
  std::unordered_map<std::string, std::unique_ptr<Plan>> plans_;
  std::unique_ptr<GraphApiConvs> graph_api_;
  std::unique_ptr<GraphApiConvs> mixed_graph_api_;  // made by the first mixed pass
};

// ---- cuBLASLt matrix products -------------------------------------------------------------------------------------

// D = alpha op(A) op(B) + beta C with C = D, column-major as cuBLASLt sees it: op(A) (m x k), op(B) (k x n),
// D (m x n). A is stored (trans_a ? k x m : m x k) with leading dimension lda, likewise B.
struct MatmulShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0;
  cudaDataType_t a_type = CUDA_R_32F, b_type = CUDA_R_32F, d_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // or CUBLAS_COMPUTE_32F_FAST_TF32
  std::string key() const;
};

class MatmulRunner {
 public:
  explicit MatmulRunner(cublasLtHandle_t handle);
  ~MatmulRunner();
  MatmulRunner(const MatmulRunner&) = delete;
  MatmulRunner& operator=(const MatmulRunner&) = delete;

  // beta 0 overwrites D; beta 1 accumulates onto it (the bias broadcast into D beforehand).
  void run(const MatmulShape& shape, const void* a, const void* b, void* d, float beta, void* workspace,
           size_t workspace_bytes, cudaStream_t stream);
  // Whether cuBLASLt has an algorithm for the shape (its plan made and cached where it has): FP8 products exist
  // for some shapes only (A transposed, dimensions in multiples of 16).
  bool has_algorithm(const MatmulShape& shape, size_t workspace_bytes);
  size_t plans_cached() const { return plans_.size(); }
  std::string describe() const;  // one line per shape: "KEY: cuBLASLt" or "KEY: no algorithm"

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // NVIDIA's suggestion for Hopper

 private:
  struct Plan;
  Plan* plan(const MatmulShape& shape, size_t workspace_bytes);  // null where cuBLASLt has no algorithm
  cublasLtHandle_t handle_;
  std::unordered_map<std::string, std::unique_ptr<Plan>> plans_;  // null plans: no algorithm
};

}  // namespace ampwb::cuda
